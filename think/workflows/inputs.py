"""The durable contracts between workflows, activities and clients.

Every workflow, activity and update takes exactly one of these models and returns one. They
carry ids and small values only; message content lives in Postgres, so a turn's Temporal
history does not grow with the conversation. Treat them as a wire format: add optional fields
with defaults, never remove or retype one while workflows that use it may still be running.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ConversationRef(BaseModel):
    """Names one conversation; what every conversation-level input starts from."""

    tenant: str
    agent: str
    conversation_id: str
    conversation_uid: str


class QuietInput(BaseModel):
    turn_id: str
    seconds: float


class QuietResult(BaseModel):
    seconds: float


class ParentLink(BaseModel):
    """The turn (and its tool call) that delegated this one: told when this one ends."""

    workflow_id: str
    turn_id: str
    tool_call_id: str


class TurnInput(BaseModel):
    conversation: ConversationRef
    turn_id: str
    debounce_seconds: float = 0.0
    """A "debounce" submission: wait until the conversation has had no new submission for
    this long before the first step (what arrives meanwhile is merged into this turn)."""
    parent: ParentLink | None = None
    """A sub-agent's turn, started by an agent tool: the parent turn's workflow to signal
    (`child_turn_ended`) once this turn has ended."""
    notify_workflow: str | None = None
    """A turn admitted by `think.workflow.run_turn`: the `think.RunTurn` workflow to signal
    (`turn_ended`) once this turn has ended."""


class AfterTurnInput(TurnInput):
    """What `think.AfterTurn` does for a finished turn (a plain `TurnInput`: `respond` only)."""

    respond: bool = True
    """Run `on_chat_response`."""
    compact: bool = False
    """Compact the conversation if its history exceeds the session's `compact_after`."""


class ModelStepInput(BaseModel):
    turn_id: str
    step: int
    agent: str = ""
    """The turn's agent, so that the step can say whether it has webhooks (`webhooks`)
    without another read."""


class ToolRun(BaseModel):
    """How the workflow schedules one tool call: the tool's policy, as plain numbers."""

    timeout_seconds: float = 300.0
    """Start-to-close of the activity: every attempt and backoff of the tool fits in it."""
    heartbeat_seconds: float = 30.0
    approval_timeout_seconds: float | None = None
    local: bool = True
    """Run as a local activity, in the turn's workflow task (no heartbeat timeout of its own:
    a dead worker is noticed by the workflow task's timeout). A tool that declares a
    `heartbeat_timeout` runs as an activity of its own instead."""


class ToolCallRef(BaseModel):
    tool_call_id: str
    tool_name: str
    kind: Literal["server", "approval", "client", "agent"] = "server"
    """`approval`: a server tool that waits for a person first; `client`: a tool the client
    runs, whose result arrives by `submit_tool_result`; `agent`: an agent tool, whose call is
    a turn of a sub-agent that this turn waits for (`think.agent_tool`)."""
    approval_id: str | None = None
    preview: str = ""
    """The call's input, shortened, for the Temporal UI's current details."""
    run: ToolRun = Field(default_factory=ToolRun)


class ToolDecision(BaseModel):
    """A person's answer to an approval request: the `approve` Update and Signal payload."""

    approval_id: str = Field(min_length=1)
    approved: bool
    reason: str | None = None
    by: str = "update"
    """Where the decision came from (`http`, `update`, `signal`, `timeout`), for the record."""
    principal: str | None = None
    """Who decided, over HTTP: `key:<name>` for a named key (`THINK_API_KEYS` entry
    `key:tenant:name`), `tenant:<tenant>` for the tenant's own key. None from Temporal (an
    operator's Signal or Update). Recorded with the answer, and in the workflow's history."""


class ApprovalOutcome(BaseModel):
    """What the `approve` Update answers: the decision the turn recorded, and the call it
    applies to (the tool then runs, or the model is told it was denied)."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    approved: bool
    outcome: Literal["approved", "denied"]
    reason: str | None = None
    by: str = "update"


class ToolResultSubmission(BaseModel):
    """A client tool's result: the `submit_tool_result` Update and Signal payload. Without
    `error` the call succeeded with `output` (which may be null)."""

    tool_call_id: str = Field(min_length=1)
    output: Any = None
    error: str | None = None


class PendingCall(BaseModel):
    tool_call_id: str
    tool_name: str
    approval_id: str | None = None
    preview: str = ""


class TurnStatusView(BaseModel):
    """The `status` Query: what a paused turn waits for."""

    status: str
    step: int
    pending_approvals: list[PendingCall] = Field(default_factory=list)
    pending_client_tools: list[PendingCall] = Field(default_factory=list)


class ModelStepResult(BaseModel):
    ended: bool = False
    """The turn is over: this step answered without tools and stored the message, or the turn
    had already ended (a duplicate run)."""
    status: str = "running"
    max_steps: int = 10
    model: str = ""
    tool_calls: list[ToolCallRef] = Field(default_factory=list)
    """Calls to run now (calls whose input was malformed are already settled as errors)."""
    called_tools: bool = False
    """Whether the model asked for any tool, so that it must see the results in a next step."""
    finish_reason: str = "stop"
    input_tokens: int = 0
    output_tokens: int = 0
    respond: bool = False
    """The turn ended and the agent has an `on_chat_response` hook to run."""
    compact: bool = False
    """The turn ended and the agent's session compacts after turns (`compact_after`)."""
    webhooks: bool = False
    """The agent (or the deployment) has outbound webhooks: the workflow starts their
    deliveries when the turn ends or pauses for a person (`WEBHOOKS_START_ACTIVITY`). False
    for every other agent, whose turns add no history event for them."""


class StepToolCall(BaseModel):
    """One tool call of a turn's step: what every tool-call activity's input starts from."""

    turn_id: str
    step: int
    tool_call_id: str
    tool_name: str


class ToolCallInput(StepToolCall):
    decision: ToolDecision | None = None
    """For an approval-gated call: the decision (approved runs the tool, denied records it)."""
    client_result: ToolResultSubmission | None = None
    """For a client tool: the result to record; the tool does not run here."""
    inner_decisions: list[ToolDecision] = Field(default_factory=list)
    """For code mode's `execute`: the decisions on its program's calls so far (by approval
    id), each given to the call that waited for it when the program runs again."""


class ToolCallResult(BaseModel):
    ok: bool
    awaiting: ToolCallRef | None = None
    """Code mode: a call of the `execute` program waits for this approval; the workflow waits
    for the decision and runs the execute call again with it (`inner_decisions`)."""


class CommitInput(BaseModel):
    turn_id: str
    status: Literal["completed", "error", "aborted", "interrupted"]
    error: str | None = None
    finish_reason: str = "stop"
    agent: str = ""
    """As `ModelStepInput.agent`."""


class CommitResult(BaseModel):
    status: str
    respond: bool = False
    compact: bool = False
    webhooks: bool = False
    """As `ModelStepResult.webhooks`."""


class WebhooksStartInput(BaseModel):
    """Start the webhook deliveries of a turn's event: its end (`paused` empty), or its pause
    for a person (the calls it waits on)."""

    turn_id: str
    paused: list[ToolCallRef] = Field(default_factory=list)


class WebhooksStarted(BaseModel):
    started: int = 0
    """Deliveries started now (one already started for the same event and URL is not)."""


class WebhookDeliveryInput(BaseModel):
    """One event to one URL. `payload` is the event's body without its per-attempt fields
    (`sent_at`, `attempt`); no secret travels here, only where to find it."""

    url: str
    event_id: str
    event: str
    payload: dict[str, Any]
    secret_env: str | None = None
    """The variable holding the agent's secret (`Webhook.secret_env`); None: the
    deployment's `THINK_WEBHOOK_SECRET`."""
    retry_seconds: float = 2.0
    give_up_seconds: float = 86400.0
    timeout_seconds: float = 10.0


class WebhookDeliveryResult(BaseModel):
    status: Literal["delivered", "rejected", "gave_up"]
    http_status: int | None = None
    detail: str = ""


class AgentToolInput(StepToolCall):
    """One agent-tool call of a turn: start (or find) its child turn, or record its outcome."""

    child_turn_id: str | None = None
    """For `agent_tool_finish`: the child turn `agent_tool_start` answered."""
    decision: ToolDecision | None = None
    """For `agent_tool_start` of a call that asked for approval: the person's decision (a
    denial settles the call, and no child is started)."""


class AgentToolStarted(BaseModel):
    child_turn_id: str | None = None
    """None: the call settled at once (bad input, blocked by a hook, or recorded already)."""
    child_agent: str = ""
    child_conversation_id: str = ""


class AgentToolFinished(BaseModel):
    settled: bool
    """False: the child turn has not ended yet (a check that found it still running)."""


class ChildTurnEnded(BaseModel):
    """The `child_turn_ended` Signal a delegated turn sends its parent's workflow."""

    tool_call_id: str = Field(min_length=1)
    turn_id: str = Field(min_length=1)
    status: str = ""


class CancelChildrenInput(BaseModel):
    turn_id: str
    child_turn_ids: list[str]
    reason: str


class RunTurnInput(BaseModel):
    """`think.RunTurn`: a turn of `agent`'s conversation, for a user's own workflow
    (`think.workflow.run_turn`, which documents each field)."""

    agent: str
    conversation_id: str
    tenant: str = "default"
    input: Any
    """A string, a UIMessage's JSON or a list of them, as HTTP's body carries it."""
    idempotency_key: str
    """Given by the caller, or derived from the calling workflow's run and the call's number."""
    body: dict[str, Any] | None = None
    concurrency: str | None = None
    output_schema: dict[str, Any] | None = None
    """The JSON Schema of `output_type`: the answer is asked for, and checked, in it."""
    caller: str = ""
    """The calling workflow's id, for logs and the Temporal UI."""


class RunTurnAdmitted(BaseModel):
    turn_id: str
    """The stored id (what the other activities take)."""
    accepted: bool = True
    """False: the key named a turn admitted before (a retried or replayed call)."""


class RunTurnRef(BaseModel):
    """One turn `think.RunTurn` admitted: read how it stands, or cancel it. Not `turn_id`: these
    activities do not act for the turn (`think._current.BindTurns` binds those that do)."""

    stored_turn_id: str
    reason: str = ""


class RunTurnOutcome(BaseModel):
    """A turn as `think.RunTurn` answers it: `done` once it has ended."""

    turn_id: str
    """As clients name it (a submission id as it was given)."""
    stored_id: str
    """As stored: what `RunTurnRef` takes."""
    status: str
    done: bool = False
    message: dict[str, Any] | None = None
    text: str = ""
    output: Any = None
    error: str | None = None
    answered_by: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    accepted: bool = True


class TurnEnded(BaseModel):
    """The `turn_ended` Signal a turn sends the `think.RunTurn` workflow that admitted it."""

    turn_id: str = Field(min_length=1)
    status: str = ""


class ParkedActionInput(BaseModel):
    """A parked action's workflow: its ledger row, and how long it waits for a decision."""

    action_id: str
    approval_id: str
    tenant: str
    agent: str
    action: str
    wait_seconds: float
    run_timeout_seconds: float = 330.0


class ParkedActionRun(BaseModel):
    """The activity that settles a parked action: with the decision the workflow received
    (None: none came in time). The ledger's first recorded decision stands."""

    action_id: str
    decision: ToolDecision | None = None


class ParkedActionOutcome(BaseModel):
    """How a parked action ended: `settled` (it ran), `failed`, `rejected` (denied, or refused
    on authorization), `expired` (no decision came), `gone` (its ledger row was deleted)."""

    status: Literal["settled", "failed", "rejected", "expired", "gone"]
    error: str | None = None


class DeliveryInput(BaseModel):
    """A messenger delivery to carry out (`think.MessengerDelivery`): its row holds the rest."""

    delivery_id: str
