"""What the storage package hands out: pydantic records, never ORM rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from think._messages import MessageJSON, UIMessage, storable

TurnStatus = Literal[
    "pending",
    "running",
    "awaiting_approval",
    "awaiting_client_tool",
    "completed",
    "error",
    "aborted",
    "skipped",
    "interrupted",
]
MessageConcurrency = Literal[
    "queue", "latest", "drop", "merge", "debounce", "interrupt", "rollback", "steer"
]
"""How a submission treats overlapping ones: see `Think.message_concurrency`."""
ACTIVE_STATUSES: frozenset[str] = frozenset(
    {"pending", "running", "awaiting_approval", "awaiting_client_tool"}
)
TERMINAL_STATUSES: frozenset[str] = frozenset(
    {"completed", "error", "aborted", "skipped", "interrupted"}
)
PAUSED_STATUSES: frozenset[str] = frozenset({"awaiting_approval", "awaiting_client_tool"})
FIRST_STEP = "step-0"
"""The fence a turn's first model step claims (`turns.fences`)."""
STARTER = "starter"
"""The mark (in `turns.fences`) of the worker that starts an announced turn's workflow
(`Store.claim_start`): of the workers told of the turn, one starts it."""
AWAITS_WORKFLOW_SQL = (
    f"({{t}}.status = 'pending' OR ({{t}}.status = 'running' AND {{t}}.fences ->> '{FIRST_STEP}'"
    " IS NULL))"
)
"""`TurnRecord.awaits_workflow` in SQL, of the turns row `{t}`."""


class Conversation(BaseModel):
    uid: str
    tenant: str
    agent: str
    id: str
    created_at: datetime
    active_leaf_id: str | None
    metadata: dict[str, Any]


class ListedConversation(Conversation):
    """A conversation as a list shows it: with a title, the metadata's `title` or the start
    of its first user message (None before it has one)."""

    title: str | None = None


class Delegation(BaseModel):
    """The parent turn and tool call a delegated (sub-agent) turn answers: stored with the
    child's request, so the child's workflow can tell the parent's when it ends, and its
    model steps can show their progress in the parent's stream."""

    turn_id: str
    agent: str
    conversation_id: str
    tool_call_id: str
    tool_name: str
    depth: int = 1
    """How deep the delegation is: 1 for a top-level turn's child, 2 for its child's, ..."""


class TurnRequest(BaseModel):
    """The durable part of a submission: what the turn will append and run with."""

    messages: list[UIMessage]
    parent_id: str | None = None
    body: dict[str, Any] = Field(default_factory=dict)
    client_tools: list[dict[str, Any]] = Field(default_factory=list)
    regenerates: str | None = None
    """Set on a regenerate turn: the id of the assistant message it answers again. Such a turn
    appends no message of its own (`messages` is empty); its answer becomes a sibling of that
    message, under `parent_id`. Regenerates are never subject to `message_concurrency`."""
    concurrency: MessageConcurrency | None = None
    """How this submission treats the turns it overlaps (`Think.message_concurrency`, or the
    request's override), resolved at admission. None: exempt (regenerates, and turns admitted
    before the setting existed): queued, never skipped, merged or cancelled by another."""
    debounce_seconds: float | None = None
    """The quiet period of `concurrency="debounce"`."""
    continuation: bool = False
    """No new message: the turn continues the last assistant message (`continue_last_turn`);
    skipped when the last message is not the assistant's."""
    delegated_by: Delegation | None = None
    """Set on a turn an agent tool started: the parent turn and tool call it answers."""
    rollback_of: str | None = None
    """Set at admission on a "rollback" submission: the running turn it cancelled, whose start
    it branches from when it starts (only if that cancel stopped it)."""
    awaited: bool | None = None
    """True when the submitter waits for the whole answer (mode "wait") instead of reading it
    as it streams: a step's first words are then batched like the rest (one batch per
    `chunk_flush_interval`), not sent at once, so a step shorter than the interval is
    written whole with its end, one write fewer (`ChunkWriter`'s `first_content_at_once`).
    Anyone following the stream still gets every chunk. Not part of the idempotency
    fingerprint: a retry may stream where the first call waited."""
    output: dict[str, Any] | None = None
    """A JSON Schema the answer must match (structured output), given by the submission:
    `think.workflow.run_turn(output_type=...)`. The agent's `before_turn` may name another
    (`TurnConfig.output`), which wins."""
    submitted_by: str | None = None
    """The name of the API key that submitted the turn (`THINK_API_KEYS` entry
    `key:tenant:name`); None for a tenant's own key, no keys, or the Python API. Actions'
    authorization reads it (`ActionContext.key_name`). Not part of the idempotency
    fingerprint."""
    channel: str = "web"
    """Where the submission came from: "web" (HTTP, the Python API) or a messenger's name
    (`TelegramMessenger(name=...)`). Picks the agent's `Channel` policy
    (`Think.configure_channels`) and the messenger's delivery."""
    messenger_context: dict[str, Any] | None = None
    """A messenger turn's origin (`think.MessengerContext` as JSON: thread, author,
    capabilities), read by `get_messenger_context()` in hooks and tools."""
    priority: int | None = None
    """The turn's Temporal priority key, 1 (first) to 5 (last), taken from its agent's
    `Think.priority` at admission; None: Temporal's default (3). Carried by the turn's
    workflow start (`think.turns.turn_priority`). Not part of the idempotency fingerprint: a
    retry is the same turn whatever the agent's priority became meanwhile."""
    notify_workflow: str | None = None
    """The workflow to signal (`turn_ended`) when this turn ends: the `think.RunTurn` workflow
    that admitted it for a user's own workflow code. Not part of the idempotency fingerprint."""

    @field_validator("body", "client_tools")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        # What a hook reads from the body is what is stored (`think._messages.storable`);
        # HTTP refuses such a body, Python's doors (a schedule, agent code) replace.
        return storable(value)


class SteeringMessage(BaseModel):
    """A user's message sent to a running turn: it joins the answer at the turn's next step
    boundary as a `steering-message` part (the AI SDK's), with these parts (text and files)."""

    id: str
    parts: list[dict[str, Any]]


class TurnRecord(BaseModel):
    id: str
    conversation_uid: str
    conversation_id: str
    tenant: str
    agent: str
    idempotency_key: str | None
    request_hash: str
    request: TurnRequest
    status: TurnStatus
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    message_id: str
    parent_id: str | None
    message: MessageJSON | None
    error: str | None
    steps_done: int
    usage: dict[str, Any]
    config: dict[str, Any] | None = None
    output: Any = None
    conversation_config: dict[str, Any] = Field(default_factory=dict)
    """The conversation's dynamic configuration (`Think.get_config`), read with the turn."""
    answered_by: str | None = None
    """For a submission merged into another (`merge`, `debounce`): the turn that appended its
    messages and answered them. It ends `skipped` itself."""
    task_queue: str | None = None
    """The task queue it was admitted for; None for a regenerate and for turns recorded
    before the column (any worker's sweeper may start those)."""
    messages_revision: int = 0
    """The conversation's: bumped when a stored message changes in place."""
    seq: int = 0
    """Acceptance order: the conversation's running turn is its active turn with the
    smallest `seq`."""
    conversation_has_mcp_servers: bool = True
    """Whether MCP servers were added to the conversation (`Think.add_mcp_server`), as the
    first step's read of the turn says (`Store.claim_queued_turn`, an index probe in the same
    statement); True where a read did not ask, so that nothing misses one."""
    fences: dict[str, int] = Field(default_factory=dict)
    """Attempts claimed per fence (`step-0`, `step-1`, ...): how many times each step began."""
    checkpoints: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per fence, where its model's answer can be picked up again (`set_checkpoint`)."""
    steering: list[SteeringMessage] = Field(default_factory=list)
    """The messages sent to the turn while it ran (`steer_turn`), in the order they came;
    one is delivered once the answer holds its `steering-message` part (`pending_steering`)."""
    version: str = ""
    """The row's version as read (Postgres's `xmin`): a write made with it
    (`append(..., version=)`) is refused with `TurnChanged` if anyone changed the row since,
    which lets a writer that would lock the turn only to read-modify-write it skip the lock."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def awaits_workflow(self) -> bool:
        """Accepted and with no step begun: `pending`, or started by its admission with its
        first step not yet claimed. Its workflow may never have been started (the sender
        died between the commit and Temporal), so whoever finds it so may start it."""
        if self.status == "pending":
            return True
        return self.status == "running" and FIRST_STEP not in self.fences


class QueueLock(BaseModel, frozen=True):
    """Held: the conversation's row lock, taken in the current transaction by
    `Store.lock_queue_turn`, with the active leaf as it read it. Whoever starts or ends a
    turn needs both, and passing them on saves taking the lock a second time."""

    active_leaf_id: str | None
    followers: bool = True
    """Whether other turns of the conversation are active (queued behind this one), as read
    under the lock: one that ends with none has nobody to hand the queue to, and a submission
    admitted after its commit finds the queue empty and starts itself."""


class Admission(BaseModel):
    """The outcome of submitting a turn: the record, and whether this request created it."""

    turn: TurnRecord
    accepted: bool
    interrupt: str | None = None
    """The running turn this submission cancels ("interrupt", "rollback"): the caller
    cancels it once the admission has committed."""
    runs_now: bool = False
    """The conversation was idle: this turn is its running turn, and its workflow is to be
    started now (otherwise the turn ahead of it starts it when it ends)."""
    announced: bool = False
    """Started by its admission and announced to the workers of its queue
    (`ANNOUNCE_CHANNEL`), one of which starts its workflow: the admission does not."""


@dataclass(frozen=True)
class StoredMessage:
    """A message as `Store.insert_messages` stored it: with its final id (one another turn had
    taken is replaced), under `parent_id`, and the size the row records (`byte_size`)."""

    message: UIMessage
    parent_id: str | None
    size: int


def chain_leaf(stored: Sequence[StoredMessage], parent_id: str | None) -> str | None:
    """The last message of a chain `Store.insert_messages` stored under `parent_id`: the
    chain's leaf, or `parent_id` when it stored none."""
    return stored[-1].message.id if stored else parent_id
