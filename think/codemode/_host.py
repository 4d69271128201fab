"""The host side of a code-mode run: start the program in its own interpreter, answer its
tool calls one at a time through `on_call`, and collect its result.

The program never runs in the worker's process: it runs in `think.sandbox` (a process tree in
fresh namespaces, no network, only its `/work`), killed when the run ends however it ends.
The calls it makes leave it as requests on the sandbox's channel; the host runs them
(through the normal tool path, in `think.engine`), so the sandbox holds no credentials.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from pydantic import BaseModel

from think import sandbox
from think.exceptions import ToolError
from think.sandbox import Limits, SandboxResult


class CallAnswer(BaseModel):
    """The host's answer to one call: its output, or an error the program gets raised."""

    output: Any = None
    error: str | None = None


class ProgramResult(BaseModel):
    """How a program ended: its result (the value of its last expression) and what it
    printed, or the error it ended with; `paused_at` when a call waits for a person."""

    result: Any = None
    stdout: str = ""
    error: str | None = None
    calls: int = 0
    paused_at: int | None = None

    def output(self) -> dict[str, Any]:
        """What the model reads as the `execute` call's output."""
        out: dict[str, Any] = {"result": self.result, "stdout": self.stdout, "calls": self.calls}
        if self.error is not None:
            out["error"] = self.error
        return out


class Paused(Exception):
    """Raised by `on_call`: the call `seq` waits for a person; the program stops here and runs
    again from the start once the decision is in."""

    def __init__(self, seq: int) -> None:
        super().__init__(f"inner call {seq} waits for approval")
        self.seq = seq


OnCall = Callable[[int, str, Any], Awaitable[CallAnswer]]


async def run_program(
    code: str,
    tools: dict[str, Any],
    on_call: OnCall,
    *,
    timeout_seconds: float,
    max_calls: int,
    limits: Limits | None = None,
) -> ProgramResult:
    """Run `code` with `tools` (name → {"description", "input_schema"}) in a sandbox
    (`think.sandbox.run`) to its end, answering each call with `on_call(seq, name, input)`.
    A call past `max_calls`, or a program that runs past `timeout_seconds` (or the sandbox's
    other limits), ends it with an error the model reads. `on_call` raising `Paused` ends the
    run there (the sandbox is killed) and answers `paused_at`."""
    limits = (limits or Limits()).model_copy(update={"wall_seconds": timeout_seconds})
    state = _Conversation(on_call, max_calls)
    program = json.dumps({"code": code, "tools": tools}).encode()
    running = asyncio.create_task(
        sandbox.run(
            _RUNTIME.read_text("utf-8"),
            files={"program.json": program},
            limits=limits,
            on_request=state.answer,
        )
    )
    state.running = running
    try:
        ran = await running
    except asyncio.CancelledError:
        if state.paused_at is None:
            raise  # cancelled from outside (the activity): not ours to swallow
        return ProgramResult(paused_at=state.paused_at, calls=state.calls)
    if state.done is not None:
        done = state.done
        return ProgramResult(
            result=done.get("result"),
            stdout=str(done.get("stdout", "")),
            error=done.get("error"),
            calls=state.calls,
        )
    if ran.killed == "timeout":
        why = f"the program ran longer than {timeout_seconds:g} s"
    elif ran.killed is not None:
        why = f"the sandbox ended the program ({ran.killed})"
    else:
        tail = ran.stderr.strip().splitlines()[-1:]
        why = f"the program ended without a result (exit {ran.exit_code})" + (
            f": {tail[0]}" if tail else ""
        )
    return ProgramResult(error=why, stdout=ran.stdout, calls=state.calls)


_RUNTIME = resources.files("think.codemode").joinpath("_runtime.py")


class _Conversation:
    """The host's end of one run: its calls, in order, and how it ended."""

    def __init__(self, on_call: OnCall, max_calls: int) -> None:
        self.on_call = on_call
        self.max_calls = max_calls
        self.calls = 0
        self.paused_at: int | None = None
        self.done: dict[str, Any] | None = None
        self.running: asyncio.Task[SandboxResult] | None = None
        self._lock = asyncio.Lock()

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("done"):
            self.done = request
            return {}
        # One at a time, in the program's order (its runtime sends them so; this keeps it so).
        async with self._lock:
            seq = int(request.get("seq", -1))
            self.calls += 1
            if self.calls > self.max_calls:
                return {"error": f"the program made more than {self.max_calls} tool calls"}
            try:
                answer = await self.on_call(seq, str(request.get("call")), request.get("input"))
            except Paused as paused:
                self.paused_at = paused.seq
                if self.running is not None:
                    self.running.cancel()  # kills the sandbox
                await asyncio.Event().wait()  # cancelled with it
                raise
            except ToolError as exc:
                return {"error": str(exc)}
        if answer.error is not None:
            return {"error": answer.error}
        return {"output": answer.output}
