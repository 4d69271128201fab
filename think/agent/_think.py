"""`Think`, the base class an agent subclasses.

An agent is configuration plus hooks: which model, which system prompt, which tools. The class
itself holds no conversation state; the worker instantiates it per activity and the turn's
state lives in Postgres and Temporal, so any worker can run any step of any turn.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from think._current import stash_value
from think._protocol import UIMessageChunk
from think.agent._channels import Channel
from think.agent._conversation_methods import ConversationMethods
from think.agent._gateway_context import GatewayContext
from think.agent._recovery import ChatRecovery, ChatRecoveryContext, ChatRecoveryOptions
from think.agent._tool_hooks import ToolCallContext, ToolCallDecision, ToolCallResultContext
from think.agent._turn_hooks import (
    ChatErrorContext,
    ChatResponseResult,
    StepConfig,
    StepContext,
    StepFinishContext,
    TurnConfig,
    TurnContext,
)
from think.codemode import execute_tool
from think.exceptions import UserError
from think.messengers import Messenger, deliver_notice
from think.models import (
    ChatErrorClass,
    Gateway,
    ModelClient,
    ModelSettings,
    interrupted_tool_error,
)
from think.sessions import (
    ContextBlock,
    ContextOverflow,
    MediaEviction,
    Session,
    check_step,
    checked_blocks,
    eviction_settings,
    set_context_tool,
)
from think.storage import CLEAR_HISTORY, ClearHistory, MessageConcurrency
from think.tools import (
    WORKSPACE_TOOLS,
    Action,
    ActionContext,
    FetchTools,
    McpServer,
    McpTool,
    Tool,
    exec_tool_for,
    mcp_tools_of,
    skill_script_tool,
)
from think.tools.skills import SkillSource, load_catalog, render_catalog, skill_tools
from think.webhooks import Webhook, checked_webhooks

SKILLS_BLOCK = "skills"
"""The label of the context block that lists the agent's skills."""

if TYPE_CHECKING:
    # Types only: think.schedules builds on the agent, not the other way round.
    from think.schedules import ScheduledTask, ScheduledTasksScope


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Think(ConversationMethods):
    """Subclass this, override `get_model`, and you have a durable chat agent.

    `name` is the agent's name in URLs (`/v1/agents/{name}/...`), by default the class name in
    snake_case. `max_steps` bounds the model calls of one turn (each tool round is one step).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    sub_agents: ClassVar[Sequence[type[Think]]] = ()
    """Agents this one reaches only through `self.sub_agent(...)`: hosted with it (as are the
    agents of its `agent_tool`s), without being listed in `THINK_AGENTS`."""
    max_delegation_depth: ClassVar[int] = 4
    """How deep a chain of agent-tool delegations may go below a top-level turn: a turn of
    this agent that is itself this deep gets a tool error instead of another child (an agent
    that can delegate to itself stops here)."""
    max_concurrent_agent_tools: ClassVar[int | None] = None
    """How many agent-tool calls of one model step (the calls that run at once in a turn)
    may start a child: the first this many, in the order the model made them; each call past
    them is a tool error naming this cap, and no child runs for it (Think's
    `maxConcurrentAgentTools`, which fails fast rather than queue). None: no cap."""
    max_steps: ClassVar[int] = 10
    priority: ClassVar[int | None] = None
    """This agent's turns' place on the shared task queue when workers are busy: 1 (first) to
    5 (last), Temporal's `priority_key`; None: the middle, 3. Within one priority, tenants
    share the workers fairly (each tenant is its turns' fairness key), so a tenant's backlog
    does not hold another tenant's turns behind it (docs/deploying.md, "Fairness between
    tenants"). Set it low for background agents (digests, batch work) and high for the ones
    people wait on. Taken when a turn is admitted: a change applies to turns admitted after
    it."""
    model_settings: ClassVar[ModelSettings] = ModelSettings()
    """How the model is called by default (`temperature`, `max_output_tokens`,
    `reasoning_effort`, ...): `TurnConfig` overrides them for a turn, `StepConfig` for a step.
    Empty: the provider's own defaults."""
    chat_stream_stall_timeout: ClassVar[float | None] = None
    """Seconds a model stream may go without a chunk (the first one included) before the step
    is abandoned and retried (through `chat_recovery`). None or 0 (the default: off) never
    abandons it, since a reasoning model may think for minutes before its first token; set it
    above the slowest first token you expect (`before_turn` may set it per turn)."""
    turn_budget_seconds: ClassVar[float | None] = None
    """Wall-clock budget of one turn, from its start: no new model step begins after it."""
    turn_budget_tokens: ClassVar[int | None] = None
    """Model tokens (input + output) one turn may use: no new model step begins after it."""
    turn_budget_cost: ClassVar[float | None] = None
    """US dollars one turn may spend on its model steps, at the prices its endpoint's model is
    priced at (docs/models.md): no new model step begins after it. A model without a known price
    cannot keep it, so a turn that has one is refused before it asks such a model."""
    chat_recovery: ClassVar[ChatRecovery] = ChatRecovery()
    """How often a failed model step is retried before the turn ends as `interrupted`."""
    send_reasoning: ClassVar[bool] = True
    """Stream the model's reasoning to clients; False keeps it in storage only."""
    message_concurrency: ClassVar[MessageConcurrency] = "queue"
    """What a submission does to the turns it overlaps: "queue" (all run, in order),
    "latest" (queued ones are skipped), "drop" (refused while a turn runs or waits), "merge"
    (queued ones are answered by one turn), "debounce" (as merge, after `debounce_seconds`
    with no new submission), "interrupt" (the running turn is cancelled, its partial kept),
    "rollback" (as interrupt, and the new turn branches from where that one started) or
    "steer" (the user's messages join the running turn at its next step boundary, as
    `steer_turn` sends them; the submission ends `skipped`, answered by that turn; in an idle
    conversation it runs as a turn of its own). A submission may override it
    (`concurrency`); regenerates are never subject to it."""
    debounce_seconds: ClassVar[float] = 0.75
    """The quiet period of "debounce"."""
    messenger_concurrency: ClassVar[float] = 0.6
    """Seconds of quiet that end a burst of messages in a messenger thread: the messages of a
    burst are answered by one turn (the "debounce" of `message_concurrency`, with this
    window). 0: each message is its own turn, queued."""
    clear_history: ClassVar[ClearHistory] = "keep"
    """What clearing a conversation (`POST …/clear`, `clear()`) does to its messages: "keep"
    (the default) leaves them in the tree off the active path, so the next turn starts a new
    root and the model reads none of them, while search and the tree routes still find them
    and nothing said is lost to a mistaken click; "delete" removes them and their summaries,
    for an agent whose users expect a cleared conversation to be forgotten. Either way its
    configuration, workspace, memory blocks, MCP servers and schedules stay."""
    truncation_step: ClassVar[int | float | None] = 8
    """Read-time truncation: older tool outputs over 500 characters and texts over 10,000 are
    cut for the model (never in storage), the 4 newest messages always whole, the cut-off
    moving once every this many messages so the cached prefix rarely changes. 1 cuts on every
    turn; None (or math.inf) never cuts."""
    hydration_byte_budget: ClassVar[int] = 32 * 1024 * 1024
    """The bytes of stored messages (`messages.byte_size`) a model step reads, newest first;
    older messages are left out of the model's context (never out of storage)."""
    include_mcp_tools: ClassVar[bool] = True
    """Give the model the tools of `get_mcp_servers()` and of the conversation's added
    servers (`add_mcp_server`), as `<server>_<tool>`; False leaves them out of every turn
    (and of `GET /v1/agents`), for an agent that exposes them another way: the worker still
    connects, and `mcp_tools()` still lists them."""
    wait_for_mcp_connections: ClassVar[bool] = False
    """A turn's first step waits (for at most each server's `connect_timeout_seconds`) for
    servers that are not connected yet, and for a fresh tool list. False (the default): a
    slow or down server does not delay the turn; the tools known from the last connection
    are offered (and fail as tool errors while it is down), a never-reached server's none."""
    approvers: ClassVar[frozenset[str] | None] = None
    """Names of the API keys (`THINK_API_KEYS` entries `key:tenant:name`) that may decide
    this agent's approval requests over HTTP; any other key is answered 403. None: any key
    of the conversation's tenant."""
    context_overflow: ClassVar[ContextOverflow | None] = None
    """Recovery from context-window overflow (`ContextOverflow(reactive=True, ...)`): compact
    and retry a step the provider refused as too long, or compact before a step that nears
    the window. Needs `configure_session` with `on_compaction` and a `classify_chat_error`."""

    fetch_tools: ClassVar[FetchTools | None] = None
    """Allowlisted, read-only HTTP tools (`fetch_url`, `fetch_<target>`): see
    docs/built-in-tools.md. None (the default): no fetch tools."""
    media_eviction: ClassVar[bool | MediaEviction] = True
    """Aged media leaves the model's context: an image in a message older than the newest
    `keep_recent_messages` (8) becomes a marker naming the workspace file that keeps its
    bytes (`read` brings it back). Read-time only: the stored message keeps the image.
    False keeps every image in the context; `MediaEviction(...)` tunes it."""
    workspace_tools: ClassVar[bool] = False
    """True gives the model the workspace tools (`read`, `ls`, `find`, `grep`, `write`,
    `edit`, `delete`) over the conversation's own workspace, kept in Postgres."""
    code_mode: ClassVar[bool] = False
    """True gives the model the tool `execute`: a Python program that calls the agent's tools
    as `await tools.<name>(...)`, each call a durable step (docs/code-execution.md)."""
    exec_tools: ClassVar[bool] = False
    """True (with `workspace_tools`) gives the model `exec` (Python or bash run in a sandbox
    over a copy of the workspace, its files saved back) and, with skills, `run_skill_script`:
    docs/code-execution.md. No network, but what `fetch_tools`' allowlist allows, through
    the worker (`think_host.fetch(url)` in the program)."""
    turn_retention_days: ClassVar[float | None] = None
    """Days this agent's ended turn records (with their streams and answers) are kept after
    they were submitted; their usage is kept for good (docs/operating.md, "Retention"). None:
    the deployment's `THINK_TURN_RETENTION_DAYS`; `math.inf`: forever, whatever it says."""
    conversation_retention_days: ClassVar[float | None] = None
    """Days one of this agent's conversations may stay idle (no turn, message or workspace
    write) before it is deleted with everything it owns. None: the deployment's
    `THINK_CONVERSATION_RETENTION_DAYS`; `math.inf`: forever, whatever it says."""

    webhooks: ClassVar[Sequence[Webhook]] = ()
    """URLs that receive a signed POST when one of this agent's turns completes, errors, or
    pauses for a person (`Webhook(url=..., events=[...], secret_env=...)`, docs/webhooks.md),
    beside the deployment's `THINK_WEBHOOK_URLS`. Delivered at least once, by workflows of
    their own: a receiver that is down delays no turn."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = _snake(cls.__name__)
        check_step(cls.truncation_step)
        stall = cls.chat_stream_stall_timeout
        if stall is not None and (
            isinstance(stall, bool) or not isinstance(stall, int | float) or not stall >= 0
        ):
            raise UserError(
                f"{cls.__name__}.chat_stream_stall_timeout={stall!r} must be a number of "
                "seconds, or None or 0 for no stall watchdog"
            )
        depth = cls.max_delegation_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise UserError(
                f"{cls.__name__}.max_delegation_depth={depth!r} must be a whole number of "
                "levels, 0 or more (0: its agent tools are refused)"
            )
        for field in ("turn_retention_days", "conversation_retention_days"):
            days = getattr(cls, field)
            if days is not None and (
                isinstance(days, bool) or not isinstance(days, int | float) or not days > 0
            ):
                raise UserError(
                    f"{cls.__name__}.{field}={days!r} must be a number of days above 0, "
                    "math.inf (keep forever) or None (the deployment's setting)"
                )
        checked_webhooks(cls.__name__, cls.webhooks)
        priority = cls.priority
        if priority is not None and (
            isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 5
        ):
            raise UserError(
                f"{cls.__name__}.priority={priority!r} must be a whole number from 1 (first) "
                "to 5 (last), or None for the middle (3)"
            )
        cap = cls.max_concurrent_agent_tools
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise UserError(
                f"{cls.__name__}.max_concurrent_agent_tools={cap!r} must be a whole number of "
                "calls, 1 or more, or None for no cap"
            )
        if cls.fetch_tools is not None and not isinstance(cls.fetch_tools, FetchTools):
            raise UserError(
                f"{cls.__name__}.fetch_tools={cls.fetch_tools!r} must be a FetchTools(...) or None"
            )
        if cls.exec_tools and not cls.workspace_tools:
            raise UserError(
                f"{cls.__name__}.exec_tools needs workspace_tools = True: `exec` runs over a "
                "copy of the workspace and saves its files there"
            )
        try:
            eviction_settings(cls.media_eviction)
        except TypeError as exc:
            raise UserError(f"{cls.__name__}.{exc}") from None
        cost = cls.turn_budget_cost
        if cost is not None and (
            isinstance(cost, bool) or not isinstance(cost, int | float) or not cost > 0
        ):
            raise UserError(
                f"{cls.__name__}.turn_budget_cost={cost!r} must be a positive amount of US "
                "dollars, or None"
            )
        if cls.clear_history not in CLEAR_HISTORY:
            raise UserError(
                f"{cls.__name__}.clear_history={cls.clear_history!r} must be 'keep' (the "
                "history stays, off the active path) or 'delete'"
            )
        budget = cls.hydration_byte_budget
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise UserError(
                f"{cls.__name__}.hydration_byte_budget={budget!r} must be a positive number "
                "of bytes"
            )

    def get_model(self) -> str | ModelClient | list[str | ModelClient]:
        """The model id (resolved through the configured endpoints) or a client; or a list of
        them, a fallback chain: the next is asked when one fails before it answers
        (docs/models.md, "Fallback chains")."""
        return "gpt-4o-mini"

    def get_gateway(
        self, model: str, ctx: GatewayContext
    ) -> Gateway | Awaitable[Gateway | None] | None:
        """How `model` (an id, as `get_model`, `before_turn` or `before_step` named it; each
        model of a fallback chain in turn) is reached for this step of `ctx`'s turn: the
        endpoint that serves it (a `THINK_MODEL_ENDPOINTS` name), headers, metadata and a
        timeout for its requests (`Gateway`). None (the default) keeps what the id says. Called
        on every model resolution, so it may route by tenant, by trigger or by load; it may be
        `async`. One that raises ends the turn in `error`."""
        return None

    def get_system_prompt(self) -> str:
        return "You are a helpful assistant."

    def configure_channels(self) -> Sequence[Channel]:
        """Per-channel policy (`Channel(name, instructions=, tools=, max_steps=)`) beside the
        implicit "web" channel of /v1's turns; a turn's channel is who it came from
        (docs/channels.md). Checked when the worker starts."""
        return []

    def get_tools(self) -> Sequence[Tool]:
        return []

    def get_actions(self) -> Sequence[Action]:
        """The agent's actions (`@action`): tools whose effects are kept in a ledger by their
        domain key, authorized by `authorize_action`, approved inline or parked
        (docs/actions.md). The model calls them like its tools; a tool of the same name wins."""
        return []

    def authorize_action(self, ctx: ActionContext) -> bool | str | Awaitable[bool | str]:
        """May this action run (or be put to a person) now? True, or False / a string saying
        why not (the model reads the refusal). Runs before an approval is asked and again
        right before the action runs, after its approval. The default allows an action that
        names no `permission` and refuses one that does: grant permissions here (say from
        `ctx.key_name`, `ctx.tenant` or `ctx.config`). An exception refuses it too."""
        if ctx.permission is None:
            return True
        return (
            f"action {ctx.action!r} needs the permission {ctx.permission!r}, and "
            f"{type(self).__name__}.authorize_action does not grant it"
        )

    def get_messengers(self) -> list[Messenger]:
        """The chat platforms this agent answers on (`TelegramMessenger(...)`, ...): each one's
        webhook is `POST /v1/messengers/{agent}/{messenger}/webhook` (docs/messengers.md)."""
        return []

    async def deliver_notice(
        self, conversation_id: str, text: str, *, record: bool = True, key: str | None = None
    ) -> str:
        """Post `text` into the chat thread of this agent's messenger conversation
        `conversation_id` (a scheduled task's result, say), recorded in its transcript when
        `record`; from a hook, tool or scheduled handler on a worker. Returns the delivery's
        id (docs/messengers.md)."""
        return await deliver_notice(self.name, conversation_id, text, record=record, key=key)

    def get_mcp_servers(self) -> Sequence[McpServer]:
        """The MCP servers whose tools join `get_tools()` in every turn (docs/mcp.md):
        `McpServer.stdio(...)`, `McpServer.http(...)`. Called in the activities that need
        them, on any worker; it may read `get_config()`."""
        return []

    async def mcp_tools(self, within: float | None = None) -> list[McpTool]:
        """The tools `get_mcp_servers()` offer now, connecting to each server first (for at
        most its `connect_timeout_seconds`, or `within` seconds when that is shorter); a
        server that cannot be reached offers none, or the tools it had when last reached.
        Outside any turn: `GET /v1/agents` lists them. A turn uses the list its first step
        recorded instead. An explicit call: `include_mcp_tools = False` (which keeps these
        tools from the model) does not change what it returns."""
        # Imported here: the SDK costs most of a second, paid only where MCP is used.
        from think.tools import pool

        servers = list(self.get_mcp_servers())
        found = await asyncio.gather(*(pool().tools(s, wait=True, within=within) for s in servers))
        return [
            made
            for server, infos in zip(servers, found, strict=True)
            for made in mcp_tools_of(server, infos or [])
        ]

    def configure_context(self) -> Sequence[ContextBlock]:
        """The blocks of the system prompt after `get_system_prompt()`'s instructions (which,
        when not overridden, are left out once there are blocks): `ContextBlock`s read from
        a provider, or memory the model writes with the built-in `set_context` tool. The
        prompt they make is frozen per conversation: see docs/hooks.md."""
        return []

    def get_skills(self) -> Sequence[SkillSource]:
        """Agent Skills sources, first wins: `skills.workspace()`, `skills.directory(path)`,
        `skills.manifest(...)`. With any, the model sees each skill's name and description
        in a `skills` context block and gets `activate_skill` and `read_skill_resource`.
        Called in every model step and skill tool call, so it may depend on `get_config()`."""
        return []

    def context_blocks(self) -> list[ContextBlock]:
        """`configure_context()`'s blocks, checked, then the `skills` block when
        `get_skills()` names sources (a "remind" block: a skill added or edited mid-
        conversation reaches the model without rewriting the cached prompt)."""
        blocks = checked_blocks(self.configure_context())
        if self.get_skills() and all(b.label != SKILLS_BLOCK for b in blocks):
            blocks.append(
                ContextBlock(
                    SKILLS_BLOCK,
                    "Agent Skills you can load with activate_skill",
                    provider=self._skills_catalog,
                    when_changed="remind",
                )
            )
        return blocks

    async def _skills_catalog(self) -> str:
        return render_catalog(await load_catalog(self.get_skills()))

    def configure_session(self, session: Session) -> Session:
        """Configure compaction: `session.on_compaction(fn).compact_after(tokens)` (and
        `.token_counter(fn)`), returning the session. Called once per agent class in each
        process, the first time a turn (or `compact()`) needs it."""
        return session

    def on_chat_recovery(
        self, ctx: ChatRecoveryContext
    ) -> (
        ChatRecoveryOptions
        | Mapping[str, bool]
        | Awaitable[ChatRecoveryOptions | Mapping[str, bool] | None]
        | None
    ):
        """Decide how a lost model step recovers (sync or async), for every `ctx.kind`: a
        model failure, a stall, or a crash (the attempt running the step never finished: its
        worker died, was evicted or redeployed). Return `ChatRecoveryOptions` or a dict such
        as `{"continue": False}` or `{"persist": False}`; `None` means the defaults: after a
        crash keep what the lost attempt streamed and continue from it in a new step, after a
        model failure or stall ask again from scratch, while `chat_recovery` allows. Runs in
        the model-step activity that replaces the lost one, before it asks the model. What it
        raises ends the turn `error` (through `on_chat_error`)."""
        return None

    def on_exhausted(self, ctx: ChatRecoveryContext) -> Awaitable[None] | None:
        """The recovery budget is spent (`chat_recovery.max_attempts` model failures of a
        step, or `max_no_progress` recoveries in a row that found the turn no further on):
        runs once (sync or async), just before the turn ends `interrupted` with
        `chat_recovery.terminal_message`. What it raises is logged, and the turn still ends."""
        return None

    async def stash(self, value: Any) -> None:
        """Keep `value` (anything JSON) for this turn's recovery: `on_chat_recovery` sees the
        latest value stashed as `ctx.data`, after a crash too (it is stored with the turn, in
        Postgres). Call it from a hook or tool while the turn runs, say with where a long job
        got to; each call replaces the last. Raises `UserError` outside a turn."""
        await stash_value(value)

    # -- scheduled tasks (docs/scheduled-tasks.md) ------------------------------------------

    def get_scheduled_tasks(self) -> Mapping[str, ScheduledTask]:
        """Recurring prompts and handlers by task id, each armed as a Temporal Schedule when
        a worker starts (agent scope) or when `reconcile_scheduled_tasks()` runs in a
        conversation (conversation scope). A declaration the worker cannot arm stops it."""
        return {}

    def get_scheduled_tasks_scope(self) -> ScheduledTasksScope:
        """`"agent"`: one set of tasks for the agent, armed at worker start. `"conversation"`:
        `get_scheduled_tasks()` is evaluated per conversation (with its `get_config()`), each
        conversation owning its own schedules, armed by `reconcile_scheduled_tasks()`."""
        return "agent"

    def get_default_timezone(self) -> str | None:
        """The IANA zone of wall-clock schedules that name none themselves."""
        return None

    # -- turn hooks (docs/hooks.md) ---------------------------------------------------------

    def before_turn(self, ctx: TurnContext) -> TurnConfig | Awaitable[TurnConfig | None] | None:
        """Inspect the assembled turn and override parts of it (sync or async). Runs once, in
        the turn's first model-step activity; what it returns is stored with the turn."""
        return None

    def before_step(self, ctx: StepContext) -> StepConfig | Awaitable[StepConfig | None] | None:
        """Override the model, tools, system prompt or messages of one step (sync or async).
        Runs in that step's activity, again if the step is retried."""
        return None

    def on_chunk(self, chunk: UIMessageChunk) -> None:
        """Observe each UI message chunk as it is produced (sync; keep it fast: it runs on the
        stream's hot path, in the model-step activity). The chunk is typed
        (`think.streaming.UIMessageChunk`): a `match` on its `type` narrows it to its fields."""

    def on_step_finish(self, ctx: StepFinishContext) -> Awaitable[None] | None:
        """Observe a finished step with its tool results (sync or async). Runs in the next
        step's activity, or where the turn ends."""
        return None

    def on_chat_response(self, result: ChatResponseResult) -> Awaitable[None] | None:
        """After the turn's message is stored and the conversation is free again (sync or
        async): it may start another turn. Runs in an activity of its own."""
        return None

    def classify_chat_error(
        self, error: BaseException | str, ctx: ChatErrorContext
    ) -> ChatErrorClass | None:
        """Sort a failed model request: `"context_overflow"`, `"rate_limit"`, `"transient"`,
        `"fatal"`, `"unknown"` or None (no opinion, the default). Only `"context_overflow"`
        acts today: it starts `context_overflow` recovery. Override it, or assign the bundled
        `classify_chat_error = default_context_overflow_classifier`. Runs in the failing
        step's activity, when `context_overflow` is set."""
        return None

    def on_chat_error(
        self, error: Exception, ctx: ChatErrorContext
    ) -> Exception | str | Awaitable[Exception | str | None] | None:
        """Map a turn's failure to what the client sees (`error` chunk, the turn's `error`).
        `error`'s message is already safe to show; the original exception, when it was not a
        model's refusal, is its `__cause__`. Return an exception or a string to show instead,
        or `None` to keep `error`. A partial answer is stored before this runs
        (`ctx.partial_message_persisted`)."""
        return None

    def before_tool_call(
        self, ctx: ToolCallContext
    ) -> ToolCallDecision | Awaitable[ToolCallDecision | None] | None:
        """Allow (optionally with changed input), block or substitute a server tool call
        (sync or async). Runs in the tool's activity, after the input is validated and, for a
        tool that needs approval, after a person approved it. `None` runs the call as is."""
        return None

    def after_tool_call(self, ctx: ToolCallResultContext) -> Awaitable[None] | None:
        """Observe a server tool call's outcome: executed, blocked, substituted or failed
        (sync or async). Runs in the tool's activity before the result is recorded; an
        exception here is logged and never changes the result."""
        return None

    def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any]:
        """Settle a tool call that never got a result (its turn was cancelled or crashed) before
        the transcript goes to the model, which would otherwise reject it. Return the part with
        a settled `state` (`output-error` with `errorText`, or `output-available` with
        `output`); the stored message is not changed."""
        return interrupted_tool_error(part)

    def tools_by_name(self) -> dict[str, Tool]:
        """The agent's tools, with `set_context` when it declares memory blocks (a tool of
        its own by that name wins)."""
        tools = {t.name: t for t in self.get_tools()}
        for declared in self.get_actions():
            if not isinstance(declared, Action):
                raise TypeError(f"get_actions returned {declared!r}, not an @action")
            tools.setdefault(declared.name, declared)
        memory = set_context_tool(checked_blocks(self.configure_context()))
        if memory is not None:
            tools.setdefault(memory.name, memory)
        for built_in in self.built_in_tools():
            tools.setdefault(built_in.name, built_in)  # a tool of the agent's own name wins
        return tools

    def built_in_tools(self) -> list[Tool]:
        """The tools the class attributes switch on: fetch, workspace, skills."""
        out: list[Tool] = []
        if self.fetch_tools is not None:
            out += self.fetch_tools.tools()
        if self.workspace_tools:
            out += WORKSPACE_TOOLS
        if self.code_mode:
            out.append(execute_tool())
        if self.get_skills():
            # Once per instance: a worker makes one per activity, and asks several times.
            cached: list[Tool] | None = self.__dict__.get("_skill_tools")
            if cached is None:
                cached = self.__dict__["_skill_tools"] = skill_tools(self.get_skills)
            out += cached
        if self.exec_tools and self.workspace_tools:
            executor: Tool | None = self.__dict__.get("_exec_tool")
            if executor is None:
                executor = self.__dict__["_exec_tool"] = exec_tool_for(self.fetch_tools)
            out.append(executor)
            if self.get_skills():
                script: Tool | None = self.__dict__.get("_skill_script_tool")
                if script is None:
                    script = self.__dict__["_skill_script_tool"] = skill_script_tool(
                        self.get_skills
                    )
                out.append(script)
        return out
