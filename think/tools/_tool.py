"""Tools: typed Python functions the model may call.

`@tool` turns a function into a `Tool`. The JSON Schema the model sees is derived from the
signature and the docstring through pydantic (see `think.tools._schema`), and the same pydantic
model validates the model's arguments before the function runs, so a tool body only ever
receives well-typed input. How a call is run (timeouts, retries, approval) is a `ToolPolicy`,
plain data that a workflow can read without importing the tool's code.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import math
import re
import typing
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeAlias, TypedDict, Unpack, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import to_jsonable_python

from think._current import current_conversation
from think._messages import storable
from think.exceptions import ToolError, UserError
from think.models import ToolSpec
from think.tools._schema import (
    arguments_model,
    describe_errors,
    json_schema,
    parse_docstring,
    type_hints,
)

if typing.TYPE_CHECKING:
    from think.turns import ConversationHandle


T = typing.TypeVar("T")


async def maybe_await(value: T | Awaitable[T]) -> T:
    """`value`, awaited first if it is awaitable: the one way the framework calls what a user
    may write sync or async (a hook, a policy, a provider, a callback), as a tool may be."""
    if inspect.isawaitable(value):
        return typing.cast(T, await value)
    return value


# What OpenAI (and most compatible servers) accept as a function name.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolCallIdentity(BaseModel):
    """Which call this is: the agent, conversation and turn it serves, and the model's id and
    name for it. What a tool sees (`ToolContext`) and what the tool-call hooks see
    (`ToolCallContext`) both start with it."""

    model_config = ConfigDict(frozen=True)

    agent: str
    conversation_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str


class ToolContext(ToolCallIdentity):
    """What a tool may know about the call it serves; declare a parameter `ctx: ToolContext`.

    `idempotency_key` is the same for every attempt of one tool call (it is built from the turn
    and the model's tool-call id), so a tool with a side effect it cannot make idempotent itself
    can hand it to the system it calls (a payment API, an outbox table) and be safe against the
    retry that follows a crash between its side effect and the recording of its result.
    `config` is the conversation's dynamic configuration, as the framework fills it in.
    """

    attempt: int = 1
    config: dict[str, Any] = Field(default_factory=dict)

    @property
    def idempotency_key(self) -> str:
        return f"{self.turn_id}:{self.tool_call_id}"

    async def conversation(self) -> ConversationHandle:
        """This turn's conversation, for the turn API: `submit_messages` (it runs after this
        turn) and `add_messages` work from a tool; a blocking call raises `UserError`."""
        return await current_conversation()


ApprovalPolicy: TypeAlias = Callable[[dict[str, Any], ToolContext], bool | Awaitable[bool]]
"""`(input, ctx) -> bool`, sync or async: does this particular call need a person's approval?"""

Seconds: TypeAlias = float | timedelta

DEFAULT_HEARTBEAT_SECONDS = 30.0


class ToolPolicy(BaseModel):
    """How one tool's calls are run: plain, serialisable data for the workflow.

    `timeout_seconds` bounds each attempt (start to close). `heartbeat_seconds` None means the
    framework heartbeats while the tool runs, with a heartbeat timeout of
    `DEFAULT_HEARTBEAT_SECONDS`; a number is that heartbeat timeout. `max_attempts` counts the
    attempts an exception from the tool gets before it becomes a tool error the model sees
    (a `ToolError` is never retried); between attempts the wait starts at
    `retry_initial_seconds` and grows by `retry_backoff` up to `retry_max_seconds`.
    `needs_approval` is True when a call may need a person's approval (always, or as a policy
    function decides per call); `approval_timeout_seconds` None waits for it indefinitely.
    """

    model_config = ConfigDict(frozen=True)

    timeout_seconds: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    heartbeat_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_attempts: int = Field(default=1, ge=1)
    retry_initial_seconds: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    retry_backoff: float = Field(default=2.0, ge=1, allow_inf_nan=False)
    retry_max_seconds: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    needs_approval: bool = False
    approval_timeout_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _check_retry_interval(self) -> ToolPolicy:
        if self.retry_max_seconds < self.retry_initial_seconds:
            raise ValueError("retry_max_seconds must not be below retry_initial_seconds")
        return self

    @property
    def heartbeat_timeout_seconds(self) -> float:
        """The heartbeat timeout to schedule the tool's activity with."""
        return self.heartbeat_seconds or DEFAULT_HEARTBEAT_SECONDS


class ToolOptions(TypedDict, total=False):
    """The keywords of `@tool(...)`, which hands them to `Tool` (whose signature holds their
    defaults): written once, so that the decorator and the class cannot drift apart."""

    name: str | None
    description: str | None
    needs_approval: bool | ApprovalPolicy
    approval_timeout: Seconds | None
    timeout: Seconds
    heartbeat_timeout: Seconds | None
    retries: int
    retry_backoff: float


class Tool:
    """A callable the model can invoke, with its schema and its policy."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: bool | ApprovalPolicy = False,
        approval_timeout: Seconds | None = None,
        timeout: Seconds = 300.0,
        heartbeat_timeout: Seconds | None = None,
        retries: int = 0,
        retry_backoff: float = 2.0,
    ) -> None:
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", type(fn).__name__))
        if not _TOOL_NAME.match(self.name):
            raise UserError(
                f"tool name {self.name!r} is not accepted by models: use 1 to 64 letters, "
                "digits, '_' or '-', e.g. @tool(name='get_weather')"
            )
        docstring = parse_docstring(inspect.getdoc(fn))
        self.description = (description or docstring.description).strip()
        self.needs_approval = needs_approval
        self.policy = _policy(
            self.name,
            needs_approval=needs_approval,
            approval_timeout=approval_timeout,
            timeout=timeout,
            heartbeat_timeout=heartbeat_timeout,
            retries=retries,
            retry_backoff=retry_backoff,
        )
        self.context_param = _context_param(fn, self.name)
        self.args_model = arguments_model(
            fn, self.name, skip=self.context_param, docs=docstring.params
        )
        self._schema = json_schema(self.args_model, self.name)  # fails at import, not in a turn

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name, description=self.description, parameters=copy.deepcopy(self._schema)
        )

    @property
    def may_need_approval(self) -> bool:
        """True when some call may need approval (`needs_approval` is True or a policy)."""
        return self.policy.needs_approval

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments; raise `ToolError` with a message the model can act on.

        Validation is lax, as the model's JSON is: `"3"` is accepted for an `int`.
        """
        try:
            parsed = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(describe_errors(self.name, exc)) from exc
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}

    async def approval_required(self, arguments: dict[str, Any], ctx: ToolContext) -> bool:
        """Whether this call needs a person's approval; `arguments` as `validate` returns them.

        A policy function's exception propagates: the caller must not run the tool unapproved.
        """
        policy = self.needs_approval
        if isinstance(policy, bool):
            return policy
        decision = await maybe_await(policy(dict(arguments), ctx))
        if not isinstance(decision, bool):
            raise UserError(
                f"the approval policy of tool {self.name!r} returned {decision!r}; "
                "it must return True or False"
            )
        return decision

    @property
    def streams(self) -> bool:
        """Whether the tool is an async generator: each value it yields is a preliminary
        output (streamed to clients as it comes), the last one its result."""
        return _is_async_generator(self.fn)

    async def __call__(self, context: ToolContext | None = None, /, **kwargs: Any) -> Any:
        """Run the tool to its result (a streaming tool's last yield; None if it yields
        nothing)."""
        if self.streams:
            result = None
            async for value in self.stream(context, **kwargs):
                result = value
            return result
        kwargs = self._with_context(context, kwargs)
        if _is_async(self.fn):
            return await self.fn(**kwargs)
        # A sync tool may block; keep the event loop (and the heartbeats) running meanwhile.
        return await asyncio.to_thread(self.fn, **kwargs)

    async def stream(
        self, context: ToolContext | None = None, /, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """A streaming tool's values as it yields them; any other tool's result, once."""
        if not self.streams:
            yield await self(context, **kwargs)
            return
        values = self.fn(**self._with_context(context, kwargs))
        try:
            async for value in values:
                yield value
        finally:
            await values.aclose()

    def _with_context(self, context: ToolContext | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.context_param is None:
            return kwargs
        if context is None:
            raise UserError(f"tool {self.name!r} needs a ToolContext to run")
        return {**kwargs, self.context_param: context}

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


def tool_output_json(value: Any) -> Any:
    """A tool's return value as JSON-able data: what is recorded and what the model reads.

    Pydantic models, dataclasses, enums, dates, sets, UUIDs and the like become their JSON
    form; NaN and infinities become null; bytes become text, or base64 when they are not UTF-8;
    anything else becomes its `str()`. NUL characters and lone surrogates, which Postgres
    cannot store, are replaced (`think._messages.storable`): the model reads what is stored.
    They are replaced in plain data before it is converted too, since pydantic's serializer
    refuses a lone surrogate (which would leave only the `str()` of the value).
    """
    value = storable(value)
    try:
        try:
            jsonable = to_jsonable_python(value, fallback=str, inf_nan_mode="null")
        except UnicodeDecodeError:
            jsonable = to_jsonable_python(
                value, fallback=str, inf_nan_mode="null", bytes_mode="base64"
            )
    except ValueError:  # a circular reference: the model still gets something to read
        jsonable = str(value)
    return storable(jsonable)


def _is_async_generator(fn: Callable[..., Any]) -> bool:
    return inspect.isasyncgenfunction(fn) or inspect.isasyncgenfunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object with an async __call__
    )


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object with an async __call__
    )


def _context_param(fn: Callable[..., Any], tool_name: str) -> str | None:
    """The name of the parameter annotated `ToolContext`, which the model never sees."""
    for name, hint in type_hints(fn, tool_name).items():
        candidates = (hint, *typing.get_args(hint))  # also `ToolContext | None`
        if any(isinstance(c, type) and issubclass(c, ToolContext) for c in candidates):
            return name  # `ToolContext`, or a subclass (an action's `ActionRunContext`)
    return None


def _policy(
    tool_name: str,
    *,
    needs_approval: bool | ApprovalPolicy,
    approval_timeout: Seconds | None,
    timeout: Seconds,
    heartbeat_timeout: Seconds | None,
    retries: int,
    retry_backoff: float,
) -> ToolPolicy:
    """The decorator's keywords, checked one by one so that an error names the keyword."""
    where = f"tool {tool_name!r}"
    if not isinstance(needs_approval, bool):
        if not callable(needs_approval):
            raise UserError(
                f"{where}: needs_approval={needs_approval!r} must be True, False or a function "
                "(input, ctx) -> bool"
            )
        _check_approval_policy(where, needs_approval)
    if approval_timeout is not None and needs_approval is False:
        raise UserError(
            f"{where}: approval_timeout={approval_timeout!r} has no effect without "
            "needs_approval; set needs_approval=True (or a policy function) or drop it"
        )
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UserError(
            f"{where}: retries={retries!r} must be a whole number of extra attempts, 0 or more "
            "(retries=2 runs the tool up to 3 times)"
        )
    backoff = _number(retry_backoff)
    if backoff is None or backoff < 1:
        raise UserError(
            f"{where}: retry_backoff={retry_backoff!r} must be a number of 1 or more "
            "(the factor by which the wait between attempts grows; 1 keeps it constant)"
        )
    return ToolPolicy(
        timeout_seconds=_seconds(where, "timeout", timeout),
        heartbeat_seconds=_optional_seconds(where, "heartbeat_timeout", heartbeat_timeout),
        max_attempts=retries + 1,
        retry_backoff=backoff,
        needs_approval=needs_approval is not False,
        approval_timeout_seconds=_optional_seconds(where, "approval_timeout", approval_timeout),
    )


def _check_approval_policy(where: str, policy: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(policy)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    try:
        signature.bind({}, None)
    except TypeError as exc:
        raise UserError(
            f"{where}: the approval policy {policy!r} must accept two arguments, "
            f"(input: dict[str, Any], ctx: ToolContext), and return a bool ({exc})"
        ) from None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _seconds(where: str, keyword: str, value: Seconds) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else _number(value)
    if seconds is None or seconds <= 0:
        raise UserError(
            f"{where}: {keyword}={value!r} must be a positive number of seconds or a "
            f"timedelta, e.g. @tool({keyword}=60)"
        )
    return seconds


def _optional_seconds(where: str, keyword: str, value: Seconds | None) -> float | None:
    return None if value is None else _seconds(where, keyword, value)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Declare a function as a tool: `@tool`, or `@tool(timeout=30, retries=2)`.

    The docstring is the description the model reads (Google, NumPy or Sphinx style; its
    parameter descriptions go into the schema); parameters and their annotations become the
    input schema. `timeout` bounds each attempt, `heartbeat_timeout` sets how soon a silent
    attempt counts as lost, `retries` is how many extra attempts an exception gets (never a
    `ToolError`), with waits growing by `retry_backoff`. `needs_approval` is True, False or a
    function `(input, ctx) -> bool` (sync or async) deciding per call; `approval_timeout` is how
    long to wait for the person. Durations are seconds or `timedelta`s.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, **options)

    return wrap(fn) if fn is not None else wrap
