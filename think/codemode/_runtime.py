"""The code-mode runtime: the script the sandboxed interpreter runs (`think.sandbox`, as the
run's `main.py`).

It stands alone (the standard library and the sandbox's `think_host` only: the sandbox holds
no Think), reads the program and the tools' schemas from `program.json` in its working
directory, and talks to the host over the sandbox's channel, one request per tool call:
`{"call": name, "input": {...}, "seq": n}`, answered `{"output": ...}` or `{"error": "..."}`;
at the end `{"done": true, "result": ..., "stdout": "..."}` or `{"done": true, "error": ...}`.

The program's top-level `await` works because it runs as the body of an async function; its
last expression (or a `return`) is its result. `tools.<name>(**input)` sends a request and
awaits the answer; an error answer raises `ToolCallError`, which the program may catch.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
from typing import Any

import think_host  # type: ignore[import-not-found]  # the sandbox's guest module


class ToolCallError(Exception):
    """A tool call the host refused or the tool failed: the message says why."""


class _Channel:
    def __init__(self) -> None:
        self._seq = 0
        self._lock = asyncio.Lock()

    def send(self, message: dict[str, Any]) -> None:
        think_host.request(message)

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        # One call on the wire at a time, numbered in the order the program made them: the
        # host replays by number, so the order must not depend on timing.
        async with self._lock:
            seq = self._seq
            self._seq += 1
            answer = await think_host.arequest({"call": name, "input": arguments, "seq": seq})
        if "error" in answer:
            raise ToolCallError(str(answer["error"]))
        return answer.get("output")


class _Tools:
    """`tools.<name>(**input)`: each attribute an async function calling that tool."""

    def __init__(self, channel: _Channel, schemas: dict[str, Any]) -> None:
        self._channel = channel
        self._schemas = schemas

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if args:
                if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
                    kwargs = dict(args[0])
                else:
                    raise TypeError(f"call tools.{name} with keyword arguments, e.g. x=1")
            return await self._channel.call(name, kwargs)

        call.__name__ = name
        return call

    def __dir__(self) -> list[str]:
        return sorted(self._schemas)


def _as_function(source: str) -> ast.Module:
    """`async def __program__(): <source>`, its last expression returned."""
    tree = ast.parse(source, "<program>", "exec")
    body = tree.body or [ast.Pass()]
    last = body[-1]
    if isinstance(last, ast.Expr):
        body[-1] = ast.copy_location(ast.Return(value=last.value), last)
    fn = ast.AsyncFunctionDef(
        name="__program__",
        args=ast.arguments(
            posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[], vararg=None
        ),
        body=body,
        decorator_list=[],
        returns=None,
    )
    module = ast.Module(body=[fn], type_ignores=[])
    return ast.fix_missing_locations(module)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def main() -> None:
    channel = _Channel()
    with open("program.json", encoding="utf-8") as f:
        spec = json.load(f)
    schemas: dict[str, Any] = spec["tools"]
    tools = _Tools(channel, schemas)

    def describe() -> list[dict[str, Any]]:
        """The tools the program may call: name, description and JSON schema of the input."""
        return [{"name": name, **schema} for name, schema in schemas.items()]

    captured = io.StringIO()
    namespace: dict[str, Any] = {
        "__name__": "__program__",
        "tools": tools,
        "describe": describe,
        "ToolCallError": ToolCallError,
        "asyncio": asyncio,
        "json": json,
    }
    try:
        code = compile(_as_function(spec["code"]), "<program>", "exec")
        exec(code, namespace)
        with contextlib.redirect_stdout(captured):
            result = asyncio.run(namespace["__program__"]())
    except SyntaxError as exc:
        channel.send({"done": True, "error": f"SyntaxError: {exc}", "stdout": ""})
        return
    except BaseException as exc:
        channel.send(
            {"done": True, "error": f"{type(exc).__name__}: {exc}", "stdout": captured.getvalue()}
        )
        return
    channel.send({"done": True, "result": _jsonable(result), "stdout": captured.getvalue()})


if __name__ == "__main__":
    main()
