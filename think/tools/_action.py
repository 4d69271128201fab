"""Actions: tools whose side effect is remembered by what it is, not by which call made it.

A `@tool` carries a per-call idempotency key: safe against the retry of one call, blind to the
same effect asked for twice (two turns, two conversations, "refund order 42" twice). An
`@action` adds a *domain key* computed from its input (`key=lambda order_id, amount:
f"refund:{order_id}"`); the worker keeps a ledger of keys per tenant and agent, so a settled
action is replayed from its record instead of run again, whoever asks. It also runs the agent's
`authorize_action` before it runs (and again after a person approved it), may wait for approval
in the turn (`approval="inline"`) or parked outside it (`approval="durable_pause"`), and keeps
its whole result while the model reads at most `max_output_chars` of it. docs/actions.md.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Literal, TypeAlias, TypedDict, Unpack, overload

from pydantic import BaseModel, ConfigDict, Field

from think.exceptions import UserError
from think.tools._tool import (
    ApprovalPolicy,
    Seconds,
    Tool,
    ToolContext,
    ToolOptions,
    tool_output_json,
)

ApprovalKind: TypeAlias = Literal["inline", "durable_pause"]
APPROVAL_KINDS: tuple[ApprovalKind, ...] = ("inline", "durable_pause")

DEFAULT_MAX_OUTPUT_CHARS = 20_000
DEFAULT_PARK_SECONDS = 7 * 24 * 3600.0
"""How long a parked action waits for its decision when `approval_timeout` is not given."""
MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024
"""A reply attachment travels in the answer's message (a data URL): keep it small."""

KeyFunction: TypeAlias = Callable[..., str]


class ActionContext(BaseModel):
    """What `Think.authorize_action` decides on: who asks for which effect, in which place.

    `stage` says when it runs: `"before_approval"` (before a person is asked, so nobody is
    asked to approve what would be refused), `"before_execute"` (right before it runs; for an
    approved action, after the approval, with `approved_by` set: a permission revoked in
    between refuses it). `key_name` is the name of the API key that submitted the turn
    (`THINK_API_KEYS` entry `key:tenant:name`), None for a tenant's own key or no keys.
    """

    model_config = ConfigDict(frozen=True)

    tenant: str
    agent: str
    conversation_id: str
    turn_id: str | None
    tool_call_id: str | None
    key_name: str | None
    action: str
    key: str
    input: dict[str, Any]
    permission: str | None
    stage: Literal["before_approval", "before_execute"]
    approved_by: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    """The conversation's dynamic configuration (`Think.get_config`)."""


class ActionRunContext(ToolContext):
    """What an action may know about its run; declare a parameter `ctx: ActionRunContext`
    (or `ctx: ToolContext`, which gets the same object).

    `idempotency_key` is the same for every run of one effect (derived from the tenant, the
    agent and the domain key), across retries, reclaims and turns: hand it to the system you
    call (a payment API's `Idempotency-Key`), and a run repeated after a crash between the
    effect and its record is answered from that system's memory instead of done twice.
    `reclaimed` is True when an earlier run of this key may have done the effect already (its
    worker died before recording the outcome): check before acting again if the system you
    call keeps no idempotency keys.
    """

    action_key: str
    ledger_key: str
    reclaimed: bool = False
    approved_by: str | None = None
    action_id: str

    @property
    def idempotency_key(self) -> str:
        return self.ledger_key


def ledger_key(tenant: str, agent: str, key: str) -> str:
    """The idempotency key every run of one effect hands to the outside system."""
    digest = hashlib.sha256(f"{tenant}\x00{agent}\x00{key}".encode()).hexdigest()
    return f"think-action-{digest[:40]}"


class ReplyAttachment(TypedDict):
    """A file an action attached to the assistant's reply (`attach_reply`)."""

    url: str
    mediaType: str
    filename: str | None


_attachments: contextvars.ContextVar[list[ReplyAttachment] | None] = contextvars.ContextVar(
    "think_reply_attachments", default=None
)


@contextmanager
def collecting_attachments() -> Iterator[list[ReplyAttachment]]:
    """Collect what `attach_reply` is given while an action runs (the runner's business)."""
    found: list[ReplyAttachment] = []
    token = _attachments.set(found)
    try:
        yield found
    finally:
        _attachments.reset(token)


def attach_reply(
    data: bytes | str | None = None,
    *,
    media_type: str,
    filename: str | None = None,
    url: str | None = None,
) -> None:
    """Attach a file to the assistant's reply, from inside an action: `data` (bytes, or text
    encoded as UTF-8) becomes a data URL, or give an `https://` `url`. It reaches the reply
    only if the action succeeds, and only once: a replayed action attaches nothing again.
    """
    found = _attachments.get()
    if found is None:
        raise UserError("attach_reply works only inside an @action while it runs")
    if (data is None) == (url is None):
        raise UserError("attach_reply takes either data or url, not both and not neither")
    if not media_type or "/" not in media_type:
        raise UserError(f"attach_reply: media_type={media_type!r} must be a MIME type")
    if url is not None:
        if not url.startswith("https://"):
            raise UserError(f"attach_reply: url={url!r} must be an https:// URL")
        found.append({"url": url, "mediaType": media_type, "filename": filename})
        return
    raw = data.encode() if isinstance(data, str) else data
    assert raw is not None
    if len(raw) > MAX_ATTACHMENT_BYTES:
        raise UserError(
            f"attach_reply: {len(raw)} bytes is more than {MAX_ATTACHMENT_BYTES} bytes; "
            "store a large file elsewhere and attach its https:// url"
        )
    encoded = base64.b64encode(raw).decode()
    found.append(
        {
            "url": f"data:{media_type};base64,{encoded}",
            "mediaType": media_type,
            "filename": filename,
        }
    )


def input_hash(arguments: dict[str, Any]) -> str:
    """The fingerprint of an action's input: what a replay must match exactly."""
    canonical = json.dumps(
        tool_output_json(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class ActionOptions(ToolOptions, total=False):
    """The keywords `@action(...)` adds to `@tool`'s."""

    key: KeyFunction
    approval: ApprovalKind
    permission: str | None
    max_output_chars: int
    follow_up: bool
    remember: Seconds | None


class Action(Tool):
    """A tool with a domain key, a ledger record, an authorization check and an approval kind.

    `key(**input) -> str` names the effect (two calls with the same key are one effect);
    `approval` is how a call that needs approval waits: `"inline"` pauses the turn as a tool's
    approval does, `"durable_pause"` parks the action and lets the turn (and the conversation)
    go on, until a decision runs it once or `approval_timeout` (default 7 days) expires it.
    `permission` is handed to `Think.authorize_action` (the default refuses an action that
    names one: grant it there). `max_output_chars` bounds what the model reads of a result
    (the ledger keeps it whole). `follow_up`: once a parked action is decided, a turn reports
    the outcome to the model at once (otherwise a notice waits for the next turn).
    `remember` is how long a settled key is replayed instead of run (None: always).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        key: KeyFunction,
        approval: ApprovalKind = "inline",
        permission: str | None = None,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        follow_up: bool = False,
        remember: Seconds | None = None,
        name: str | None = None,
        description: str | None = None,
        needs_approval: bool | ApprovalPolicy = False,
        approval_timeout: Seconds | None = None,
        timeout: Seconds = 300.0,
        heartbeat_timeout: Seconds | None = None,
        retries: int = 0,
        retry_backoff: float = 2.0,
    ) -> None:
        if approval_timeout is None and approval == "durable_pause" and needs_approval:
            approval_timeout = DEFAULT_PARK_SECONDS
        super().__init__(
            fn,
            name=name,
            description=description,
            needs_approval=needs_approval,
            approval_timeout=approval_timeout,
            timeout=timeout,
            heartbeat_timeout=heartbeat_timeout,
            retries=retries,
            retry_backoff=retry_backoff,
        )
        where = f"action {self.name!r}"
        if not callable(key):
            raise UserError(
                f"{where}: key={key!r} must be a function of the action's input returning a "
                "string, e.g. key=lambda order_id, amount: f'refund:{order_id}'"
            )
        _check_key_function(where, key, self)
        if approval not in APPROVAL_KINDS:
            raise UserError(f"{where}: approval={approval!r} must be 'inline' or 'durable_pause'")
        if approval == "durable_pause" and needs_approval is False:
            raise UserError(
                f"{where}: approval='durable_pause' parks a call until a person decides; "
                "set needs_approval=True (or a policy function) with it"
            )
        if permission is not None and (not isinstance(permission, str) or not permission):
            raise UserError(f"{where}: permission={permission!r} must be a non-empty string")
        if isinstance(max_output_chars, bool) or not isinstance(max_output_chars, int):
            raise UserError(f"{where}: max_output_chars={max_output_chars!r} must be an int")
        if max_output_chars < 100:
            raise UserError(f"{where}: max_output_chars={max_output_chars} must be at least 100")
        self.key_function = key
        self.approval: ApprovalKind = approval
        self.permission = permission
        self.max_output_chars = max_output_chars
        self.follow_up = follow_up
        self.remember_seconds = (
            None
            if remember is None
            else (remember.total_seconds() if isinstance(remember, timedelta) else float(remember))
        )
        if self.remember_seconds is not None and self.remember_seconds <= 0:
            raise UserError(f"{where}: remember={remember!r} must be a positive duration or None")

    def key_of(self, arguments: dict[str, Any]) -> str:
        """The domain key of a call with these (validated) arguments. Raises `UserError`
        naming the action when the key function fails or returns what is not a string."""
        try:
            key = self.key_function(**_key_arguments(self.key_function, arguments))
        except Exception as exc:
            raise UserError(
                f"the key function of action {self.name!r} raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(key, str) or not key or len(key) > 500:
            raise UserError(
                f"the key function of action {self.name!r} returned {key!r}; it must return a "
                "non-empty string of at most 500 characters"
            )
        return key

    @property
    def parks(self) -> bool:
        """Whether a call that needs approval is parked outside the turn."""
        return self.approval == "durable_pause"

    def model_view(self, result: Any) -> Any:
        """What the model reads of a result: the result, or its JSON cut at
        `max_output_chars` with a note saying so (the ledger keeps it whole)."""
        text = json.dumps(result, ensure_ascii=False, default=str)
        if len(text) <= self.max_output_chars:
            return result
        return (
            text[: self.max_output_chars]
            + f" … [truncated: {len(text)} characters in all; the whole result is kept in the "
            "action ledger]"
        )

    def __repr__(self) -> str:
        return f"Action({self.name!r})"


def _key_arguments(fn: Callable[..., Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments the key function declares (all of them if it takes **kwargs)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return dict(arguments)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(arguments)
    return {name: value for name, value in arguments.items() if name in params}


def _check_key_function(where: str, key: KeyFunction, action: Action) -> None:
    try:
        params = inspect.signature(key).parameters
    except (TypeError, ValueError):
        return
    known = set(action.args_model.model_fields)
    for name, param in params.items():
        if param.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            continue
        if name not in known and param.default is inspect.Parameter.empty:
            raise UserError(
                f"{where}: the key function takes {name!r}, which is not one of the action's "
                f"parameters ({', '.join(sorted(known)) or 'none'})"
            )


@overload
def action(fn: Callable[..., Any], /) -> Action: ...


@overload
def action(**options: Unpack[ActionOptions]) -> Callable[[Callable[..., Any]], Action]: ...


def action(
    fn: Callable[..., Any] | None = None, /, **options: Unpack[ActionOptions]
) -> Action | Callable[[Callable[..., Any]], Action]:
    """Declare a function as an action: `@action(key=lambda order_id: f"refund:{order_id}")`.

    Everything `@tool` takes, and `key` (required), `approval`, `permission`,
    `max_output_chars`, `follow_up` and `remember` (see `Action`). List actions in
    `Think.get_actions()`; the model calls them like any tool.
    """
    if fn is not None:
        raise UserError("@action needs a key: @action(key=lambda ...: '...')")
    if "key" not in options:
        raise UserError("@action needs a key: @action(key=lambda order_id: f'refund:{order_id}')")

    def wrap(f: Callable[..., Any]) -> Action:
        return Action(f, **options)

    return wrap
