"""Request and response bodies of the HTTP API (API.md), separate from storage records.

`TurnOut` is a selection of the turn view every door shares (`think.server.TurnView`): the
fields both show (`think.server.TurnFields`), the view's `PendingApproval` and
`PendingClientTool` as they are, and the URLs to follow the turn."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Strict,
    StrictBool,
    Tag,
    WithJsonSchema,
    field_validator,
)
from pydantic.json_schema import SkipJsonSchema

from think.server import (
    ID,
    MessageConcurrency,
    PendingApproval,
    PendingClientTool,
    TurnFields,
    UIMessage,
)

ID_PATTERN = f"^{ID.pattern}$"
EXTENSION: dict[str, Any] = {"x-think-extension": True}
"""The OpenAPI mark of what API.md's v1 contract does not list (an addition, as the contract
allows): an operation's `openapi_extra`, a field's `json_schema_extra`."""


MAX_DEPTH = 100  # of JSON nesting in a body field; pydantic cannot serialize past ~255


def _unstorable(value: Any) -> str | None:
    """Where `value` holds what Python's JSON parser accepts but we cannot store, if anywhere:
    NaN/Infinity, NUL characters and unpaired surrogates (`"\\ud800"`), which Postgres refuses,
    and nesting too deep to serialize. A loop, not recursion, for that last reason."""
    stack: list[tuple[str, int, Any]] = [("", 0, value)]
    while stack:
        where, depth, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return f"{where or 'the value'} contains a NUL character (\\u0000)"
            if not item.isascii():
                try:
                    item.encode()
                except UnicodeEncodeError:
                    return f"{where or 'the value'} contains an unpaired surrogate"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{where or 'the value'} is {item}, which JSON has no number for"
        elif isinstance(item, dict | list) and depth >= MAX_DEPTH:
            return f"the value is nested deeper than {MAX_DEPTH} levels"
        elif isinstance(item, dict):
            for key, child in item.items():
                stack.append((f"a key of {where or 'the object'}", depth, key))
                stack.append((f"{where}.{key}" if where else str(key), depth + 1, child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", depth + 1, child) for i, child in enumerate(item))
    return None


STORABLE = "^[^\\x00]*$"
"""Text Postgres can store: no NUL (`_unstorable` refuses it, and an unpaired surrogate, in
every field); a pattern, so the OpenAPI document says so too. A surrogate cannot be named
in pydantic's regex engine (nor portably in JSON Schema's): `STRINGS_NOTE` says it."""
INNER_SPACE = " \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
"""The whitespace Python's `str.strip` takes off that is not a control character, spelled
out for a character class: `\\s` is another set in each engine (Rust's leaves out `\\x1c`,
ECMA-262's adds `\\ufeff`). `\\uXXXX` escapes: ECMA-262, Rust and Python read them alike."""
SPACE = f"\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f{INNER_SPACE}"
"""All of what `str.strip` takes off, for a character class."""
NOT_BLANK = f"^[{SPACE}]*[^{SPACE}\\x00][^\\x00]*$"
"""Storable text with something besides whitespace (what `str.strip` would leave empty).
Linear: the leading run of whitespace and the first other character cannot overlap."""
StorableText = Annotated[str, Field(pattern=STORABLE)]

STORABLE_JSON_REF = "#/components/schemas/StorableJson"
STORABLE_OBJECT: dict[str, Any] = {
    "type": "object",
    "propertyNames": {"pattern": STORABLE},
    "additionalProperties": {"$ref": STORABLE_JSON_REF},
}
STORABLE_JSON: dict[str, Any] = {
    "description": "Any JSON value whose strings (keys too) Postgres can store: no NUL, "
    "no unpaired surrogate; nested at most 100 levels",
    "anyOf": [
        {"type": "string", "pattern": STORABLE},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": STORABLE_JSON_REF}},
        STORABLE_OBJECT,
    ],
}
"""What `_unstorable` lets through, as a schema (api/_openapi.py adds it to the document):
every field of a body that takes any JSON says so, rather than `{}` (anything)."""
StorableObject = Annotated[dict[str, Any], WithJsonSchema(STORABLE_OBJECT)]
StorableValue = Annotated[Any, WithJsonSchema({"allOf": [{"$ref": STORABLE_JSON_REF}]})]
"""Any JSON `_unstorable` lets through (`allOf`: pydantic resolves a bare `$ref` itself)."""

STRINGS_NOTE: dict[str, Any] = {
    "x-think-strings": "Every string of the body, keys included, is refused (422, naming the "
    "field) when it holds a NUL (\\u0000) or an unpaired surrogate (a \\ud800-\\udfff escape "
    "that is not half of a pair): Postgres cannot store either. The patterns say NUL; no "
    "pattern can say a lone surrogate the same way in every regex engine (JSON Schema's "
    "ECMA-262 reads a string as UTF-16, where an emoji is a pair of surrogates), so this note "
    "says it."
}
"""On every request body's schema: what `_unstorable` refuses beyond the patterns."""


def _workspace_path_pattern() -> str:
    """`think.storage.workspace_path` as a pattern, for the document: the same strings, as
    tests/api/test_fuzz.py checks. ASCII whitespace around the path is stripped; what is left holds
    no control character (C0, DEL, C1), no bidirectional control or line separator (they
    disguise a name in a listing) and no backslash, is `/workspace`, a path under it or a
    relative path (not starting with `/` or `~`), and has no `..` segment. Written for every
    engine that reads it: no lookaround (pydantic's Rust regex has none)."""
    inner_space = " "  # can be inside a path; the other stripped characters are controls
    space = "[ \\t\\n\\x0b\\x0c\\r]"
    bidi = "\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069\\u2028\\u2029"
    bad = f"\\x00-\\x1f\\x7f-\\x9f{bidi}\\\\/"  # controls, backslash, the separator
    char = f"[^{bad}]"  # of a segment
    not_dot = f"[^{bad}.]"
    not_space = f"[^{bad}{inner_space}]"
    not_dot_space = f"[^{bad}.{inner_space}]"
    # A segment that is not `..` (`.` and empty ones are dropped): in the middle of the path,
    middle = f"(?:{not_dot}{char}*|\\.(?:{not_dot}{char}*)?|\\.\\.{char}+)?"
    # last (not ending in whitespace, which the strip would take off),
    last = f"(?:{not_space}|{not_dot}{char}*{not_space}|\\.(?:{not_dot_space}|{char}+{not_space}))?"
    # first (not starting with whitespace, nor `~`), and both.
    not_home = f"[^{bad}.~{inner_space}]"
    first = f"(?:{not_home}{char}*|\\.(?:{not_dot}{char}*|\\.{char}+)?)"
    only = (
        f"(?:[^{bad}~{inner_space}]|{not_home}{char}*{not_space}"
        f"|\\.(?:{not_dot_space}|{char}+{not_space}))"
    )
    rest = f"(?:{middle}/)*{last}"
    core = f"(?:/workspace(?:/{rest})?|{first}/{rest}|{only})"
    return f"^{space}*{core}?{space}*$"


WORKSPACE_PATH = _workspace_path_pattern()
"""The workspace paths the gateway accepts (any, up to 1024 characters), as a pattern."""


def _a_date(value: Any) -> Any:
    """A time as ISO 8601 text: pydantic would also read a number (`0.5`) as seconds since
    1970, which no one means by `before=0.5`."""
    if isinstance(value, str) and not re.match(r"^\s*[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        raise ValueError("must be a date or a date and time in ISO 8601 (2026-01-31T12:00:00Z)")
    return value


IsoDateTime = Annotated[datetime, BeforeValidator(_a_date)]

WaitTimeout = Annotated[float, Strict()]
"""Seconds as a JSON number: `true` or `"5"` is a 422, not 1 or 5 seconds."""


class _Body(BaseModel):
    # pydantic's own regex engine, not Python's `re`: there `$` also matches before a final
    # newline, and `ID_PATTERN` would let `"c1\n"` through.
    model_config = ConfigDict(extra="forbid", json_schema_extra=STRINGS_NOTE)

    @field_validator("*", mode="before")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        # Refused here, with the field's name, rather than by Postgres in an INSERT (a 500) or
        # silently changed (pydantic writes NaN as null).
        if problem := _unstorable(value):
            raise ValueError(problem)
        return value


class CreateConversation(_Body):
    id: str | None = Field(default=None, pattern=ID_PATTERN)
    metadata: StorableObject = Field(default_factory=dict)


class ForkConversation(_Body):
    # The message to fork at (ids are the client's own strings: only a NUL is ruled out), and
    # the new conversation's id (a new one when left out).
    message_id: str = Field(min_length=1, pattern=r"^[^\x00]+$")
    id: str | None = Field(default=None, pattern=ID_PATTERN)
    metadata: StorableObject = Field(default_factory=dict)


class ConversationOut(BaseModel):
    # Read from the stored record's attributes (`think.storage.Conversation`). A comment, not
    # a docstring: a docstring would become the schema's description in the OpenAPI document.
    model_config = ConfigDict(from_attributes=True)

    id: str
    agent: str
    created_at: datetime
    active_leaf_id: str | None
    metadata: dict[str, Any]


class ListedConversationOut(ConversationOut):
    title: str | None = Field(
        default=None,
        description="The metadata's title, else the start of the first user message",
        json_schema_extra=EXTENSION,
    )


class ConversationsOut(BaseModel):
    conversations: list[ListedConversationOut]


class MessagesOut(BaseModel):
    messages: list[dict[str, Any]]


class AddMessagesBody(_Body):
    messages: list[UIMessage] = Field(min_length=1)
    parent_id: str | None = Field(
        default=None,
        min_length=1,
        pattern=STORABLE,
        description="Where the first message goes: the active leaf",
    )


class AddMessagesOut(BaseModel):
    messages: list[dict[str, Any]]
    active_leaf_id: str | None


class SiblingsOut(BaseModel):
    messages: list[dict[str, Any]]
    active_index: int | None = Field(
        description="Which of `messages` lies on the active path; null when none does"
    )


class SwitchBranchBody(_Body):
    leaf_id: str = Field(min_length=1, max_length=200, pattern=STORABLE)
    exact: StrictBool = Field(
        default=False,
        description="true: make `leaf_id` itself the active leaf, not the newest leaf below it",
    )


class RegenerateBody(_Body):
    message_id: str = Field(min_length=1, max_length=200, pattern=STORABLE)
    mode: Literal["submit", "wait", "stream"] = "submit"
    body: StorableObject = Field(default_factory=dict)
    wait_timeout: WaitTimeout | None = Field(default=None, gt=0, le=3600)


class SearchHitOut(BaseModel):
    message_id: str
    role: str
    snippet: str = Field(
        description="HTML: the message's text around the matches, escaped, with each match "
        "wrapped in <mark>…</mark>"
    )
    rank: float = Field(description="Relevance in [0, 1); hits come best first")


class SearchOut(BaseModel):
    hits: list[SearchHitOut]


class ClientTool(_Body):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: StorableText = ""
    input_schema: StorableObject = Field(default_factory=lambda: {"type": "object"})


def _input_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict | UIMessage):
        return "message"
    if isinstance(value, list):
        return "messages"
    return None


# Tagged by the JSON type, so a bad message is reported once, where it is wrong
# (`input.message.role`), not as a failure of each of the three forms in turn.
_INPUT_FORM = Discriminator(
    _input_kind,
    custom_error_type="input_type",
    custom_error_message="input must be a string, a UIMessage or a list of UIMessages",
)
_INPUT_TEXT = Annotated[str, Field(min_length=1, pattern=NOT_BLANK), Tag("text")]


class UserUIMessage(UIMessage):
    """A UIMessage whose role is the user's: what a steer carries, said in the schema so a
    client (and the fuzzer) knows before sending it."""

    role: Literal["user"]


TurnInput = Annotated[
    _INPUT_TEXT
    | Annotated[UIMessage, Tag("message")]
    | Annotated[list[UIMessage], Field(min_length=1), Tag("messages")],
    _INPUT_FORM,
]
SteeringInput = Annotated[
    _INPUT_TEXT
    | Annotated[UserUIMessage, Tag("message")]
    | Annotated[list[UserUIMessage], Field(min_length=1), Tag("messages")],
    _INPUT_FORM,
]


class _InputBody(_Body):
    """A body whose `input` is users' words: a string, a UIMessage or a list of them."""

    input: TurnInput

    @field_validator("input", mode="before")
    @classmethod
    def _input_not_empty(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("input must not be empty")
        if isinstance(value, list) and not value:
            raise ValueError("input must hold at least one message")
        return value

    def messages(self) -> list[UIMessage]:
        if isinstance(self.input, str):
            return [UIMessage.user_text(self.input)]
        if isinstance(self.input, UIMessage):
            return [self.input]
        return list(self.input)


class SubmitTurnBody(_InputBody):
    mode: Literal["submit", "wait", "stream"] = "submit"
    parent_id: str | None = Field(default=None, min_length=1, pattern=STORABLE)
    body: StorableObject = Field(default_factory=dict)
    client_tools: list[ClientTool] = Field(default_factory=list)
    wait_timeout: WaitTimeout | None = Field(default=None, gt=0, le=3600)
    concurrency: MessageConcurrency | None = Field(
        default=None,
        description="Overrides the agent's message_concurrency for this submission: what it "
        "does to the turns it overlaps (queue, latest, drop, merge, debounce, interrupt, "
        "rollback, steer)",
    )
    submission_id: str | None = Field(
        default=None,
        pattern=ID_PATTERN,
        description="The turn id, chosen by the client, and a name within its tenant (another "
        "tenant's ids are invisible and never conflict): a retry with the same id (and the same "
        "Idempotency-Key, if any) answers the existing turn; the id in another conversation of "
        "the tenant is a 409",
    )

    def input_json(self) -> Any:
        """The input as the body carried it, for the idempotency fingerprint
        (`think.server.turn_fingerprint`, the one `ThinkService` uses too)."""
        return self.model_dump(mode="json", include={"input"})["input"]


class SteerTurnBody(_InputBody):
    """Words for a running turn: each message joins its answer at the next step boundary."""

    input: SteeringInput  # type: ignore[assignment]


class CancelTurnBody(_Body):
    reason: str = Field(default="cancelled", min_length=1, max_length=1000, pattern=STORABLE)


class ApprovalBody(_Body):
    approved: StrictBool  # "yes" or 1 must not approve a call: only true and false do
    reason: str | None = Field(default=None, max_length=2000, pattern=STORABLE)


class ToolResultBody(_Body):
    """`{"output": …}` or `{"error": "…"}`: exactly one of them."""

    # Said in the schema too, so a client generated from it (and a fuzzer) knows that
    # `{}` and a body with both are refused (422) rather than merely undocumented.
    model_config = ConfigDict(
        json_schema_extra={
            **STRINGS_NOTE,
            "oneOf": [
                {"required": ["output"], "not": {"required": ["error"]}},
                {"required": ["error"], "not": {"required": ["output"]}},
            ],
        }
    )

    output: StorableValue = Field(default=None, description="The tool's result (any JSON value)")
    # The constraints on the `str` itself: on the union, pydantic leaves the pattern out of
    # the schema (and the fuzzer drew a NUL the server refuses).
    error: (
        Annotated[str, Field(min_length=1, max_length=100_000, pattern=STORABLE)]
        | SkipJsonSchema[None]
    ) = Field(
        default=None, description="Why the tool failed; the model sees it as the call's error"
    )

    @field_validator("error", mode="before")
    @classmethod
    def _error_is_text(cls, value: Any) -> Any:
        # Only absent means "no error": `{"error": null}` would otherwise count as giving
        # the error and submit a result with neither.
        if value is None:
            raise ValueError("error must be a string; leave it out to send an output")
        return value


class FieldError(BaseModel):
    field: str = Field(description="The field at fault, dotted (`client_tools.0.name`)")
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem document: the body of every 4xx and 5xx answer."""

    model_config = ConfigDict(extra="allow")

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = Field(
        default=None, description="For a request that named a field wrongly: which and why"
    )


class QueuedBehind(BaseModel):
    """The turn a waiting request's turn cannot start before: one paused for a person."""

    turn_id: str
    status: str = Field(description="awaiting_approval or awaiting_client_tool")
    status_url: str


class TurnOut(TurnFields):
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    pending_client_tools: list[PendingClientTool] = Field(default_factory=list)
    queued_behind: QueuedBehind | None = Field(
        default=None,
        description="Wait mode only: this turn is still pending because the turn ahead of it "
        "waits for a person (its approval or client tool result). The wait answered at once "
        "rather than for the whole wait_timeout; decide that turn, then follow stream_url.",
    )
    stream_url: str
    status_url: str
    workflow_id: str = Field(
        description="The turn's workflow in Temporal (an addition to API.md): what the Temporal "
        "UI and CLI name it by, for operators and the chat page's link.",
        json_schema_extra=EXTENSION,
    )


class TurnsOut(BaseModel):
    turns: list[TurnOut]


class DeletedTurnsOut(BaseModel):
    deleted: list[str] = Field(description="The ids of the turns deleted")


class AgentTool(BaseModel):
    name: str
    description: str
    needs_approval: bool


class AgentOut(BaseModel):
    name: str
    description: str
    model: str = Field(description="The model the agent asks for (its get_model())")
    served_by: str = Field(
        default="",
        description="Who really answers in this deployment: 'offline' (the built-in offline "
        "model, when no OPENAI_BASE_URL or OPENAI_API_KEY is set), 'openai:<model>' (the "
        "default endpoint) or '<endpoint>/<model>' (THINK_MODEL_ENDPOINTS)",
    )
    tools: list[AgentTool]


class AgentsOut(BaseModel):
    agents: list[AgentOut]


class ScheduleOut(BaseModel):
    """One scheduled task of an agent, as armed in Temporal."""

    task: str
    schedule: str = Field(description="The declaration, e.g. 'every weekday at 07:30'")
    timezone: str | None
    kind: Literal["prompt", "handler"]
    schedule_kind: str = Field(description="minutes, hours, daily, weekdays or weekly")
    conversation_id: str | None
    schedule_id: str = Field(description="The Temporal Schedule id")
    paused: bool
    next_runs: list[datetime]
    last_result: str | None = Field(
        description="The last occurrence's workflow status (completed, failed, running...)"
    )


class SchedulesOut(BaseModel):
    schedules: list[ScheduleOut]


class TriggeredOut(BaseModel):
    task: str
    schedule_id: str
    triggered: bool = True


class WorkspaceEntryOut(BaseModel):
    # Read from the stored entry's attributes (`think.storage.WorkspaceEntry`).
    model_config = ConfigDict(from_attributes=True)

    path: str
    size: int
    media_type: str
    updated_at: datetime


class WorkspaceListOut(BaseModel):
    files: list[WorkspaceEntryOut]


class ExportedMessageOut(BaseModel):
    # A node of the tree as stored: `parent_id` makes the tree (every branch, not a path).
    model_config = ConfigDict(from_attributes=True)

    id: str
    parent_id: str | None
    role: str
    parts: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    turn_id: str | None
    created_at: datetime


class ContextBlockOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    label: str
    content: str | None
    updated_at: datetime


class CompactionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    first_message_id: str
    last_message_id: str
    summary: str
    trigger: str
    tokens_before: int
    tokens_after: int
    created_at: datetime


class ConversationExportOut(BaseModel):
    conversation: ConversationOut
    config: dict[str, Any] = Field(description="The conversation's configuration")
    messages: list[ExportedMessageOut] = Field(
        description="Every message of every branch, in the order they were stored; "
        "`parent_id` makes the tree, `conversation.active_leaf_id` its active path"
    )
    turns: list[TurnOut] = Field(description="Every turn record kept, oldest first")
    workspace: list[WorkspaceEntryOut] = Field(
        description="The workspace's files, without their content (`GET …/workspace/{path}`)"
    )
    context_blocks: list[ContextBlockOut]
    compactions: list[CompactionOut]
    exported_at: datetime


class ErasureOut(BaseModel):
    tenant: str
    workflow_id: str = Field(
        description="The erasure's workflow in Temporal; a repeated request while it runs "
        "names the same one"
    )
    status: str = Field(description="`accepted`: it runs, and completes whatever fails")
