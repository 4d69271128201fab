"""Tools: typed Python functions the model may call.

`@tool` turns a function into a `Tool`. The JSON Schema the model sees is derived from the
signature through pydantic, and the same pydantic model validates the model's arguments before
the function runs, so a tool body only ever receives well-typed input.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from think.exceptions import ToolError, UserError
from think.models import ToolSpec


class ToolContext(BaseModel):
    """What a tool may know about the call it serves; declare a parameter `ctx: ToolContext`.

    `idempotency_key` is the same for every attempt of one tool call (it is built from the turn
    and the model's tool-call id), so a tool with a side effect it cannot make idempotent itself
    can hand it to the system it calls (a payment API, an outbox table) and be safe against the
    retry that follows a crash between its side effect and the recording of its result.
    """

    model_config = ConfigDict(frozen=True)

    agent: str
    conversation_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    attempt: int = 1

    @property
    def idempotency_key(self) -> str:
        return f"{self.turn_id}:{self.tool_call_id}"


class Tool:
    """A callable the model can invoke, with its schema and its policy."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.description = (description or inspect.getdoc(fn) or "").strip()
        self.needs_approval = needs_approval
        self.context_param = _context_param(fn)
        self.args_model = _args_model(fn, self.name, skip=self.context_param)

    @property
    def spec(self) -> ToolSpec:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, parameters=schema)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments; raise `ToolError` with a message the model can act on."""
        try:
            parsed = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for tool {self.name!r}: {problems}") from exc
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def __call__(self, context: ToolContext | None = None, /, **kwargs: Any) -> Any:
        if self.context_param is not None:
            if context is None:
                raise UserError(f"tool {self.name!r} needs a ToolContext to run")
            kwargs[self.context_param] = context
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(**kwargs)
        # A sync tool may block; keep the event loop (and the heartbeats) running meanwhile.
        return await asyncio.to_thread(self.fn, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def _context_param(fn: Callable[..., Any]) -> str | None:
    """The name of the parameter annotated `ToolContext`, which the model never sees."""
    import typing

    for name, hint in _type_hints(fn).items():
        if hint is ToolContext or ToolContext in typing.get_args(hint):  # also `ToolContext | None`
            return name
    return None


def _args_model(fn: Callable[..., Any], tool_name: str, *, skip: str | None) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    hints = _type_hints(fn)
    for param in inspect.signature(fn).parameters.values():
        if param.name == skip:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(
                f"tool {tool_name!r}: *args and **kwargs cannot be described to a model"
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    return create_model(
        f"{tool_name}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **fields,
    )


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise UserError(f"tool {fn.__name__!r}: cannot resolve a type annotation ({exc})") from exc


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, needs_approval: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a function as a tool: `@tool` or `@tool(needs_approval=True)`.

    The docstring is the description the model reads; parameters and their annotations become
    the input schema.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, needs_approval=needs_approval)

    return wrap(fn) if fn is not None else wrap
