"""Agents the test suite hosts. Their model is the scripted fake server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from temporalio import activity

from tests._fetch_fixtures import PUBLIC_IP, Sealed
from tests._fetch_fixtures import Resolver as FetchResolver
from think import (
    ChatErrorContext,
    ChatRecovery,
    ChatRecoveryContext,
    ChatRecoveryOptions,
    ChatResponseResult,
    ContextBlock,
    ContextOverflow,
    FetchTarget,
    FetchTools,
    Gateway,
    GatewayContext,
    McpServer,
    MediaEviction,
    ModelSettings,
    Proactive,
    ScheduledTask,
    Session,
    StepConfig,
    StepContext,
    StepFinishContext,
    Think,
    Tool,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResultContext,
    ToolContext,
    TurnConfig,
    TurnContext,
    UserError,
    agent_tool,
    create_compact_function,
    default_context_overflow_classifier,
    events,
    skills,
    tool,
)
from think.schedules import ScheduledTasksScope
from think.schedules._dsl import DAYS
from think.streaming import UIMessageChunk
from think.tools import search_history
from think.workflows.names import CHAT_RESPONSE_ACTIVITY, COMPACT_ACTIVITY


@tool
async def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "temp_c": 21}


@tool
def add(a: int, b: int = 0) -> int:
    """Add two integers."""
    return a + b


@tool
async def explode(reason: str) -> str:
    """A tool that always fails."""
    raise RuntimeError(f"boom: {reason}")


@tool
async def slow(seconds: float) -> str:
    """Take a while."""
    await asyncio.sleep(seconds)
    return "done"


@tool
def record(note: str, ctx: ToolContext) -> str:
    """Append a note to the file named by THINK_TEST_TOOL_LOG: a side effect tests can count."""
    path = os.environ.get("THINK_TEST_TOOL_LOG")
    if path:
        with Path(path).open("a") as log:
            log.write(f"{note} {ctx.idempotency_key}\n")
    return f"recorded {note}"


class Helper(Think):
    """The agent most tests talk to."""

    name = "helper"
    max_steps = 4

    def get_model(self) -> str:
        return "scripted-model"

    def get_system_prompt(self) -> str:
        return "You are a test agent."

    def get_tools(self) -> list[Tool]:
        return [get_weather, add, explode, record, slow]


@tool
async def countdown(start: int, ctx: ToolContext) -> AsyncIterator[str]:
    """Counts down from `start`, a yield a number (each a preliminary output), then lifts off.
    Logs each run under THINK_HOME, so a test can tell how often it ran."""
    path = Path(os.environ["THINK_HOME"]) / f"countdown-{ctx.turn_id}"
    with path.open("a") as runs:
        runs.write("run\n")
    for n in range(start, 0, -1):
        yield f"{n}..."
        await asyncio.sleep(float(os.environ.get("THINK_TEST_COUNTDOWN_PAUSE", "0.05")))
    yield "liftoff"


class Streamer(Helper):
    """A tool that streams: `countdown`, an async generator."""

    name = "streamer"

    def get_tools(self) -> list[Tool]:
        return [countdown]


class Tuned(Helper):
    """Call settings at every level: the agent's defaults, the turn's from the submission's
    `body["settings"]` (a `TurnConfig`), and the first step's when the turn's `seed` is 7
    (`before_step` sees the turn's settings, forces the tool `add` and changes a provider
    option)."""

    name = "tuned"
    model_settings = ModelSettings(
        temperature=0.3, max_output_tokens=500, provider_options={"top_k": 20, "min_p": 0.1}
    )

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        settings = ctx.body.get("settings")
        return TurnConfig(**settings) if settings is not None else None

    def before_step(self, ctx: StepContext) -> StepConfig | None:
        if ctx.step == 0 and ctx.settings.seed == 7:
            return StepConfig(tool_choice="add", provider_options={"min_p": 0.2})
        return None


class Staller(Helper):
    """The helper agent with a short stall timeout and a small recovery budget."""

    name = "staller"
    chat_stream_stall_timeout = 1.0
    chat_recovery = ChatRecovery(max_attempts=2, terminal_message="Interrupted, sorry.")


class Patient(Helper):
    """No stall watchdog (0), as for a reasoning model that thinks long before its first
    token; the recovery budget of one attempt would make any stall end the turn."""

    name = "patient"
    chat_stream_stall_timeout = 0
    chat_recovery = ChatRecovery(max_attempts=1, terminal_message="Stalled, sorry.")


class Watchful(Staller):
    """The staller's one-second watchdog, which `body.stall` replaces for one turn
    (`TurnConfig.chat_stream_stall_timeout`; 0 turns it off)."""

    name = "watchful"
    chat_recovery = ChatRecovery(max_attempts=1, terminal_message="Stalled, sorry.")

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        if ctx.body and "stall" in ctx.body:
            return TurnConfig(chat_stream_stall_timeout=ctx.body["stall"])
        return None


class Persister(Staller):
    """Keeps a failed attempt's partial answer and continues from it."""

    name = "persister"

    def on_chat_recovery(self, ctx: ChatRecoveryContext) -> ChatRecoveryOptions:
        return ChatRecoveryOptions(persist=True)


class GiveUp(Staller):
    """Ends the turn at the first failure."""

    name = "give_up"

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> ChatRecoveryOptions:
        return ChatRecoveryOptions.model_validate({"continue": False})


def _recovery_log(turn_id: str, hook: str, ctx: ChatRecoveryContext) -> None:
    """One JSON line per recovery hook call, under THINK_HOME, per turn: what the recovery
    tests read back (the hooks run in a worker process, the replacement one after a crash)."""
    path = Path(os.environ["THINK_HOME"]) / f"recovery-{turn_id}.jsonl"
    with path.open("a") as log:
        log.write(json.dumps({"hook": hook, **ctx.model_dump(mode="json")}) + "\n")


class Salvager(Helper):
    """Recovery driven by the submission's `body`: `stash` is stashed as the turn begins, and
    `on_chat_recovery` answers with what the stashed value's `answer` says (a dict such as
    `{"persist": False}`, None for the defaults, "raise" to fail); `stall` sets the stall
    watchdog for the turn. Both recovery hooks log what they were shown (`_recovery_log`). One
    recovery in a row may find the turn no further on; model failures may be four a step."""

    name = "salvager"
    chat_recovery = ChatRecovery(
        max_attempts=4, terminal_message="Interrupted, sorry.", max_no_progress=1
    )

    async def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        if "stash" in ctx.body:
            await self.stash(ctx.body["stash"])
        if "stall" in ctx.body:
            return TurnConfig(chat_stream_stall_timeout=ctx.body["stall"])
        return None

    async def on_chat_recovery(self, ctx: ChatRecoveryContext) -> dict[str, bool] | None:
        _recovery_log(ctx.turn_id, "on_chat_recovery", ctx)
        answer = ctx.data.get("answer") if isinstance(ctx.data, dict) else None
        if answer == "raise":
            raise RuntimeError("the recovery hook broke")
        return answer if isinstance(answer, dict) else None

    def on_exhausted(self, ctx: ChatRecoveryContext) -> None:
        _recovery_log(ctx.turn_id, "on_exhausted", ctx)


def recovery_calls(home: str, turn_id: str) -> list[dict[str, Any]]:
    """What `Salvager`'s recovery hooks logged for the turn, in order."""
    path = Path(home) / f"recovery-{turn_id}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


class Routed(Tuned):
    """Routes every model through `get_gateway` (async): to the `plain` endpoint, with a header
    naming the tenant, metadata saying the step and the trigger, and a timeout; a model id
    starting `nowhere` is sent to an endpoint that does not exist, `broken` makes it raise."""

    name = "routed"

    async def get_gateway(self, model: str, ctx: GatewayContext) -> Gateway | None:
        await asyncio.sleep(0)
        if model.startswith("broken"):
            raise RuntimeError("the routing table is down")
        if model.startswith("nowhere"):
            return Gateway(endpoint="nowhere")
        if model.startswith("direct"):
            return None
        return Gateway(
            endpoint="plain",
            headers={"x-route-tenant": ctx.tenant},
            metadata={"step": str(ctx.step), "trigger": ctx.trigger, "asked-for": model},
            timeout=30,
        )


class Budgeted(Helper):
    """Tiny budgets: a turn may not start a second model step."""

    name = "budgeted"
    turn_budget_tokens = 1


class Hurried(Helper):
    """A turn may run for half a second before it stops asking the model."""

    name = "hurried"
    turn_budget_seconds = 0.5


@tool(needs_approval=True)
async def delete_file(path: str) -> str:
    """Delete a file from the workspace."""
    return f"deleted {path}"


def _large(arguments: dict[str, object], ctx: ToolContext) -> bool:
    amount = arguments["amount"]
    return isinstance(amount, int) and amount > 100


@tool(needs_approval=_large)
async def transfer(amount: int) -> str:
    """Move money; amounts over 100 need a person's approval."""
    return f"moved {amount}"


@tool(needs_approval=True, approval_timeout=1.0)
async def launch(target: str) -> str:
    """Launch something; an unanswered request is denied after a second."""
    return f"launched {target}"


@tool(retries=2, retry_backoff=1.0)
async def flaky(key: str, ctx: ToolContext) -> str:
    """Fails on its first two attempts of each call, then succeeds."""
    path = Path(os.environ["THINK_HOME"]) / f"flaky-{ctx.turn_id}-{key}"
    tries = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(tries))
    if tries < 3:
        raise ConnectionError(f"try {tries} failed")
    return f"ok after {tries} tries"


@tool(timeout=0.5)
async def sluggish() -> str:
    """Always takes longer than its timeout."""
    await asyncio.sleep(5)
    return "never"


class Gatekeeper(Helper):
    """Tools that need a person's approval, and tools with execution policies."""

    name = "gatekeeper"

    def get_tools(self) -> list[Tool]:
        return [get_weather, slow, delete_file, transfer, launch, flaky, sluggish, add]


class Switchable(Gatekeeper):
    """Gatekeeper's tools, on the model and settings each submission names in
    `body["settings"]` (a `TurnConfig`): one agent for the same conversation on every API."""

    name = "switchable"

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        settings = ctx.body.get("settings")
        return TurnConfig(**settings) if settings is not None else None


class Guarded(Gatekeeper):
    """Gatekeeper's tools, whose approvals only the `ops-lead` key may decide."""

    name = "guarded"
    approvers = frozenset({"ops-lead"})


class Hooked(Helper):
    """Tool hooks: blocks `explode`, serves a cached weather, rewrites `add`, logs outcomes."""

    name = "hooked"

    def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | None:
        if ctx.tool_name == "explode" and ctx.input.get("reason") == "forbidden":
            return ToolCallDecision.block("explode is disabled here")
        if ctx.tool_name == "get_weather" and ctx.input.get("city") == "Cache":
            return ToolCallDecision.substitute({"city": "Cache", "temp_c": -1, "cached": True})
        if ctx.tool_name == "add":
            return ToolCallDecision.allow(input={**ctx.input, "b": 1000})
        return None

    async def after_tool_call(self, ctx: ToolCallResultContext) -> None:
        line = ctx.model_dump_json(
            include={
                "conversation_id",
                "tool_name",
                "outcome",
                "success",
                "output",
                "error",
                "duration_ms",
            }
        )
        with (Path(os.environ["THINK_HOME"]) / "tool-hooks.log").open("a") as log:
            log.write(line + "\n")


def _record_event(event: events.ThinkEvent) -> None:
    """Every event the worker emits, as JSON lines under THINK_HOME: what tests assert on.
    The benchmarks host these agents too, and turn it off (THINK_TEST_EVENTS_LOG=0): a file
    opened per event is the recorder's cost, not the product's."""
    home = os.environ.get("THINK_HOME")
    if home and os.environ.get("THINK_TEST_EVENTS_LOG") != "0":
        with (Path(home) / "events.log").open("a") as log:
            log.write(event.model_dump_json() + "\n")


events.subscribe(_record_event)


def _hook_log(kind: str, payload: dict[str, object]) -> None:
    """One JSON line per hook call under THINK_HOME: what the hook tests read back."""
    home = os.environ.get("THINK_HOME")
    if home:
        with (Path(home) / "turn-hooks.log").open("a") as log:
            log.write(json.dumps({"hook": kind, **payload}, default=str) + "\n")


class Hooks(Helper):
    """Every turn hook, driven by the submission's `body`."""

    name = "hooks"

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        _hook_log("before_turn", {"conversation_id": ctx.conversation_id, "ctx": ctx.model_dump()})
        body = ctx.body
        if not body:
            return None
        if body.get("explode"):
            raise RuntimeError("secret internal detail")
        return TurnConfig(
            system=f"{ctx.system} Speak like a {body['persona']}." if "persona" in body else None,
            active_tools=body.get("tools"),
            max_steps=body.get("max_steps"),
            chat_stream_stall_timeout=body.get("stall"),
            turn_budget_tokens=body.get("budget_tokens"),
            turn_budget_seconds=body.get("time_budget"),
            send_reasoning=body.get("send_reasoning"),
            tools=[shout] if body.get("shout") else None,
            output=Verdict if body.get("verdict") else body.get("schema"),
            model=body.get("model"),
        )

    def before_step(self, ctx: StepContext) -> StepConfig | None:
        _hook_log(
            "before_step",
            {
                "conversation_id": ctx.conversation_id,
                "step": ctx.step,
                "previous": [s.model_dump() for s in ctx.previous_steps],
            },
        )
        if ctx.step >= 1:
            return StepConfig(system="Now answer briefly.", active_tools=[])
        return None

    def on_chunk(self, chunk: UIMessageChunk) -> None:
        seen: list[UIMessageChunk] = self.__dict__.setdefault("chunks_seen", [])
        seen.append(chunk)
        if chunk["type"] == "finish-step":
            text = ""
            for c in seen:
                match c:
                    case {"type": "text-delta", "delta": str(delta)}:
                        text += delta
            _hook_log("on_chunk", {"conversation_id": text, "chunks": seen})

    async def on_step_finish(self, ctx: StepFinishContext) -> None:
        _hook_log("on_step_finish", ctx.model_dump())

    async def on_chat_response(self, result: ChatResponseResult) -> None:
        _hook_log("on_chat_response", result.model_dump())

    async def on_chat_error(self, error: Exception, ctx: ChatErrorContext) -> str | None:
        try:  # what the conversation holds as the hook runs: the partial answer is stored
            messages = await (await self.conversation()).messages()
            stored = [
                "".join(str(p.get("text", "")) for p in m.parts)
                for m in messages
                if m.role == "assistant"
            ]
        except Exception as exc:
            stored = [f"unreadable: {exc!r}"]
        _hook_log(
            "on_chat_error",
            {
                "conversation_id": ctx.conversation_id,
                "error": str(error),
                "ctx": ctx.model_dump(),
                "stored": stored,
            },
        )
        if ctx.stage == "model":
            return f"Sorry, the model refused ({ctx.classification})."
        return None


class Introspective(Helper):
    """`before_turn` finds its conversation through the turn API and says where it ran: the
    worker that starts a gateway's turn runs it beside the workflow's start, outside any
    activity (`think.engine.activities.EarlySteps`). With `{"needs_activity": true}` in the
    body it asks for its activity's info, which only the step's own activity has."""

    name = "introspective"

    async def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        from think import current_conversation

        conversation = await current_conversation()
        in_activity = activity.in_activity()
        _hook_log(
            "before_turn",
            {
                "conversation_id": ctx.conversation_id,
                "found": conversation.conversation_id,
                "in_activity": in_activity,
            },
        )
        if (ctx.body or {}).get("needs_activity"):
            attempt = activity.info().attempt  # raises outside an activity
            ids = {"conversation_id": ctx.conversation_id}
            _hook_log("before_turn_attempt", {**ids, "attempt": attempt})
        return None


class SelfCancelling(Helper):
    """Cancels its own turn from `before_step` of step 1: after the step has read its turn
    and before it streams, the narrowest moment a cancel can land in."""

    name = "self-cancelling"

    async def before_step(self, ctx: StepContext) -> StepConfig | None:
        if ctx.step == 1:
            await self.cancel_chat(ctx.turn_id, "changed my mind")
        return None


class Verdict(BaseModel):
    """A structured answer for `TurnConfig(output=Verdict)`."""

    severity: Literal["low", "high"]
    reason: str


class Judge(Helper):
    """Answers every message with a `Verdict`, a structured output: the MCP server's
    `structuredContent` (tests/protocols/test_mcp_server.py)."""

    name = "judge"

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        return TurnConfig(output=Verdict)


@tool
def shout(text: str) -> str:
    """Upper-case a text (a tool only `before_turn` adds)."""
    return text.upper()


class QuietReasoner(Helper):
    """Keeps reasoning off the stream, in storage only."""

    name = "quiet_reasoner"
    send_reasoning = False


# -- the turn API and message_concurrency (tests/turns/: test_concurrency.py, test_turn_api.py) ----


class Latest(Helper):
    """Only the newest of overlapping submissions runs."""

    name = "latest"
    message_concurrency = "latest"


class Debouncer(Helper):
    """Submissions within 1.5 s of each other are answered by one turn."""

    name = "debouncer"
    message_concurrency = "debounce"
    debounce_seconds = 1.5


@tool
async def follow_up(question: str, ctx: ToolContext) -> str:
    """Ask a follow-up question in a turn of its own, after this one."""
    conversation = await ctx.conversation()
    submission = await conversation.submit_messages(question, idempotency_key=ctx.idempotency_key)
    return f"queued {submission.turn_id}"


@tool
async def wait_inside(question: str, ctx: ToolContext) -> str:
    """Try to run a whole turn and wait for it, from inside this one."""
    from think import UserError

    conversation = await ctx.conversation()
    try:
        await conversation.save_messages(question)
    except UserError as exc:
        return f"refused: {exc}"
    return "ran"


@tool
async def wait_idle_inside(ctx: ToolContext) -> str:
    """Wait, from inside this turn, for its conversation to be idle."""
    from think import UserError

    conversation = await ctx.conversation()
    try:
        await conversation.wait_until_idle(wait_timeout=5)
    except UserError as exc:
        return f"refused: {exc}"
    return "idle"


@tool
async def remember(note: str) -> str:
    """Add a note to the conversation without a turn."""
    from think import UIMessage, current_conversation

    conversation = await current_conversation()
    written = await conversation.add_messages(
        UIMessage(id=f"note-{note}", role="user", parts=[{"type": "text", "text": note}])
    )
    return f"noted {written}"


class Delegator(Helper):
    """Tools that use the turn API on their own conversation; an answer saying CHAIN makes
    `on_chat_response` run (and wait for) another turn, through the agent's own methods."""

    name = "delegator"

    def get_tools(self) -> list[Tool]:
        return [follow_up, wait_inside, wait_idle_inside, remember, slow]

    async def on_chat_response(self, result: ChatResponseResult) -> None:
        parts = (result.message or {}).get("parts", [])
        if any("CHAIN" in str(p.get("text", "")) for p in parts):
            chained = await self.save_messages("chained question")
            _hook_log("chained", {"status": chained.status, "turn_id": chained.turn_id})


class _Clock:
    """A context provider whose content changes on every read."""

    def get(self) -> str:
        return f"now: {time.time_ns()}"


class Remembering(Helper):
    """Context blocks: a fixed one, memory the model writes, one that changes on every read,
    and "remind" news from the conversation's configuration."""

    name = "remembering"

    def get_system_prompt(self) -> str:
        return "You are a test agent with a memory."

    def configure_context(self) -> list[ContextBlock]:
        return [
            ContextBlock("soul", provider=lambda: "Be terse."),
            ContextBlock("memory", "Facts about the user", max_tokens=20),
            ContextBlock("clock", provider=_Clock()),
            ContextBlock("news", "Latest news", provider=self._news, when_changed="remind"),
        ]

    async def _news(self) -> str:
        config = self.get_config()
        if config.get("explode"):
            raise RuntimeError("the news provider failed")
        return str(config.get("news", ""))


@tool
def show_config(ctx: ToolContext) -> dict[str, object]:
    """The conversation's configuration, as the tool sees it."""
    return dict(ctx.config)


@tool
async def set_tier(tier: str, ctx: ToolContext) -> str:
    """Change the conversation's configuration from inside a turn."""
    conversation = await ctx.conversation()
    await conversation.configure({**ctx.config, "tier": tier})
    return f"tier {tier}"


class Configured(Helper):
    """Dynamic configuration: the model, a hook and tools read it."""

    name = "configured"

    def get_model(self) -> str:
        return str(self.get_config().get("model", "scripted-model"))

    def get_tools(self) -> list[Tool]:
        return [show_config, set_tier, search_history]

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        tier = self.get_config().get("tier")
        return TurnConfig(system=f"{ctx.system} Tier: {tier}.") if tier else None


class Forgetful(Helper):
    """A tiny hydration budget: only the newest messages reach the model."""

    name = "forgetful"
    hydration_byte_budget = 400


# -- compaction and context overflow (tests/turns/: test_compaction.py, test_overflow_recovery.py)


def _summarising(session: Session) -> Session:
    """Summaries by the agent's own model (the fake), keeping only the newest message."""
    return session.on_compaction(create_compact_function(keep_recent_tokens=0))


class Compactor(Helper):
    """Compacts after a turn that leaves over 120 tokens of history; logs each
    `configure_session` call with its process id. Its `get_gateway` sends summarising requests
    to the `priced` endpoint, saying in their metadata what it was asked; steps go as named."""

    name = "compactor"

    def configure_session(self, session: Session) -> Session:
        _hook_log("configure_session", {"agent": self.name, "pid": os.getpid()})
        return _summarising(session).compact_after(120)

    async def get_gateway(self, model: str, ctx: GatewayContext) -> Gateway | None:
        await asyncio.sleep(0)
        if ctx.purpose != "compaction":
            return None
        asked = {"for": ctx.purpose, "trigger": ctx.trigger, "step": str(ctx.step)}
        return Gateway(endpoint="priced", metadata={f"asked-{k}": v for k, v in asked.items()})


class Recoverer(Helper):
    """Reactive overflow recovery, with the bundled classifier assigned as the hook."""

    name = "recoverer"
    context_overflow = ContextOverflow(reactive=True, max_retries=1)
    classify_chat_error = default_context_overflow_classifier

    def configure_session(self, session: Session) -> Session:
        return _summarising(session)

    def on_chat_error(self, error: Exception, ctx: ChatErrorContext) -> None:
        _hook_log(
            "on_chat_error",
            {
                "conversation_id": ctx.conversation_id,
                "classification": ctx.classification,
                "error": str(error),
            },
        )


class Forethought(Recoverer):
    """Proactive compaction before a step whose previous one read over 500 tokens (once a
    turn), and reactive recovery through an overridden `classify_chat_error`."""

    name = "forethought"
    context_overflow = ContextOverflow(
        reactive=True, proactive=Proactive(max_input_tokens=1_000, headroom=0.5)
    )

    def classify_chat_error(
        self, error: BaseException | str, ctx: ChatErrorContext
    ) -> Literal["context_overflow"] | None:
        return default_context_overflow_classifier(error)


class Lookout(Recoverer):
    """Proactive compaction only: an overflow the provider still reports ends the turn."""

    name = "lookout"
    context_overflow = ContextOverflow(proactive=Proactive(max_input_tokens=1_000))


# -- overrides that raise (tests/turns/test_broken_overrides.py) -----------------------------------

OVERRIDE_SECRET = "s3cret-override-detail"
"""In every message the broken overrides raise: it must reach the worker's log, never a client."""


class Fragile(Helper):
    """Overrides that raise when the conversation's configuration names them
    (`{"break": "get_tools"}`; `"as": "UserError"` raises one of those instead of a
    RuntimeError; `"in": "think.tool_call"` only in that activity); `get_model` returns the
    configuration's `"model"` as it is, so a test can hand it what cannot be resolved."""

    name = "fragile"

    def _breaks(self, override: str) -> None:
        config = self.get_config()
        if config.get("break") != override:
            return
        if "in" in config and (
            not activity.in_activity() or activity.info().activity_type != config["in"]
        ):
            return
        kind = UserError if config.get("as") == "UserError" else RuntimeError
        raise kind(f"{override} broke: {OVERRIDE_SECRET}")

    def get_model(self) -> Any:
        self._breaks("get_model")
        return self.get_config().get("model", "scripted-model")

    def get_system_prompt(self) -> str:
        self._breaks("get_system_prompt")
        return "You are a fragile test agent."

    def get_tools(self) -> list[Tool]:
        self._breaks("get_tools")
        return super().get_tools()

    def get_mcp_servers(self) -> list[McpServer]:
        self._breaks("get_mcp_servers")
        return []

    def get_skills(self) -> list[skills.SkillSource]:
        self._breaks("get_skills")
        return []

    def repair_interrupted_tool_part(self, part: dict[str, Any]) -> dict[str, Any]:
        """The spec's example: an `ask_user` question left unanswered reads as the question."""
        self._breaks("repair_interrupted_tool_part")
        asked = part.get("input")
        if part.get("type") == "tool-ask_user" and isinstance(asked, dict) and asked.get("prompt"):
            return {"type": "text", "text": str(asked["prompt"])}
        return super().repair_interrupted_tool_part(part)


class Wrecked(Helper):
    """`get_model` and `get_tools` always raise, outside conversations too (the gateway
    calls them when it lists agents and checks client tool names)."""

    name = "wrecked"

    def get_model(self) -> str:
        raise RuntimeError(f"get_model broke: {OVERRIDE_SECRET}")

    def get_tools(self) -> list[Tool]:
        raise RuntimeError(f"get_tools broke: {OVERRIDE_SECRET}")


def _breaks_in(activity_type: str) -> None:
    """Raise, as a bug would, when the agent is made inside the activity `activity_type`."""
    if activity.in_activity() and activity.info().activity_type == activity_type:
        raise RuntimeError(f"broke in {activity_type}: {OVERRIDE_SECRET}")


class Unresponsive(Helper):
    """Has `on_chat_response`, but cannot be made in its activity
    (tests/durability/test_bounded_failures_more.py)."""

    name = "unresponsive"

    def __init__(self) -> None:
        super().__init__()
        _breaks_in(CHAT_RESPONSE_ACTIVITY)

    async def on_chat_response(self, result: ChatResponseResult) -> None:
        _hook_log("on_chat_response", result.model_dump())


class Uncompacted(Compactor):
    """Compacts after its turns, but cannot be made in the compaction activity."""

    name = "uncompacted"

    def __init__(self) -> None:
        super().__init__()
        _breaks_in(COMPACT_ACTIVITY)


class Researcher(Helper):
    """A sub-agent: hosted only because `Lead` delegates to it (not in THINK_AGENTS)."""

    name = "researcher"

    def get_system_prompt(self) -> str:
        return "You research and report findings."

    def get_tools(self) -> list[Tool]:
        return [get_weather]


class _Collect:
    """A `chat()` callback that keeps what it was told, for a tool to return."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_start(self, request_id: str) -> None:
        self.calls.append("start")

    def on_event(self, chunk: dict[str, Any]) -> None:
        if chunk["type"] in ("start", "finish", "reset-step", "error", "abort"):
            self.calls.append(chunk["type"])

    async def on_done(self) -> None:
        self.calls.append("done")

    def on_error(self, message: str) -> None:
        self.calls.append(f"error: {message}")

    def on_interrupted(self) -> None:
        self.calls.append("interrupted")


@tool
async def ask_by_hand(task: str) -> dict[str, Any]:
    """Ask the researcher directly, through the low-level sub-agent API (`chat`)."""
    child = Lead().sub_agent(Researcher, "by-hand")
    collected = _Collect()
    result = await child.chat(task, collected)
    handle = await child.conversation()
    return {
        "conversation_id": handle.conversation_id,
        "status": result.status,
        "calls": collected.calls,
        "text": "".join(
            str(p.get("text", "")) for p in (result.message.parts if result.message else [])
        ),
    }


class Lead(Helper):
    """Delegates to `Researcher`: one retained child per conversation (`research`), a fresh
    child per call (`research_fresh`), and by hand from a tool (`ask_by_hand`)."""

    name = "lead"

    def get_tools(self) -> list[Tool]:
        return [
            agent_tool(Researcher, name="research", description="Delegate a research task."),
            agent_tool(Researcher, name="research_fresh", fresh=True, timeout=20),
            agent_tool(Researcher, name="research_quick", timeout=1),
            ask_by_hand,
            slow,
        ]


class Recursive(Helper):
    """Delegates to itself; the chain stops at `max_delegation_depth`."""

    name = "recursive"
    max_delegation_depth = 2

    def get_tools(self) -> list[Tool]:
        return [agent_tool(Recursive, name="deeper")]


NOTES_SERVER = str(Path(__file__).with_name("mcp_notes_server.py"))


def notes_server() -> McpServer:
    """The stdio MCP server of tests/mcp_notes_server.py; its `erase` needs approval."""
    return McpServer.stdio(
        "notes",
        command=sys.executable,
        args=[NOTES_SERVER],
        needs_approval=("erase",),
        connect_timeout_seconds=30,
        timeout_seconds=20,
    )


class McpUser(Helper):
    """Tools from MCP servers: `notes` over stdio, and `calc` over streamable HTTP when the
    conversation's configuration names its url (`{"calc_url": ...}`, with `calc_timeout` and
    `calc_retries`). Waits for connections, so what a test starts is there in its first turn.
    `before_tool_call` keeps passwords out of notes; a body's `only_tools` is the turn's
    `active_tools`."""

    name = "mcp_user"
    wait_for_mcp_connections = True

    def get_tools(self) -> list[Tool]:
        return [add]

    def get_mcp_servers(self) -> list[McpServer]:
        servers = [notes_server()]
        config = self.get_config()
        if config.get("calc_url"):
            servers.append(
                McpServer.http(
                    "calc",
                    url=config["calc_url"],
                    timeout_seconds=config.get("calc_timeout", 10),
                    connect_timeout_seconds=5,
                    retries=config.get("calc_retries", 0),
                    retry_backoff=1,
                )
            )
        return servers

    def before_turn(self, ctx: TurnContext) -> TurnConfig | None:
        only = ctx.body.get("only_tools")
        return TurnConfig(active_tools=only) if only is not None else None

    def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | None:
        if ctx.tool_name == "notes_remember" and "password" in str(ctx.input.get("text")):
            return ToolCallDecision.block("no passwords in notes")
        return None


class McpImpatient(Helper):
    """An MCP server that never answers, and the default `wait_for_mcp_connections = False`:
    its turns must not wait for it."""

    name = "mcp_impatient"

    def get_mcp_servers(self) -> list[McpServer]:
        return [
            McpServer.stdio(
                "mute",
                command=sys.executable,
                # Never answers, and exits when its stdin closes (its worker is gone), as a
                # well-behaved stdio server does: a killed worker leaves no process behind.
                args=["-c", "import sys; sys.stdin.read()"],
                # Were it waited for, a turn would take ten minutes (its test would fail).
                connect_timeout_seconds=600,
            )
        ]


class McpHidden(McpUser):
    """`McpUser` with `include_mcp_tools = False`: its servers' tools reach no model."""

    name = "mcp_hidden"
    include_mcp_tools = False


# -- built-in tools (tests/tools/test_builtin_tools.py) --------------------------------------------

SKILLS_DIR = Path(__file__).resolve().parent / "skills"


class Workspaced(Helper):
    """The workspace tools, and media eviction that acts early (every message past the 4th)."""

    name = "workspaced"
    max_steps = 12
    workspace_tools = True
    truncation_step = 1
    media_eviction = MediaEviction(keep_recent_messages=4, min_part_bytes=16)

    def get_tools(self) -> list[Tool]:
        return []


class Skilled(Helper):
    """Skills from the conversation's workspace first, then from tests/skills."""

    name = "skilled"
    max_steps = 8
    workspace_tools = True

    def get_tools(self) -> list[Tool]:
        return []

    def get_skills(self) -> list[skills.SkillSource]:
        return [skills.workspace(), skills.directory(SKILLS_DIR)]


class Fetcher(Helper):
    """Fetch tools built per turn from the conversation's configuration (the port of the test's
    127.0.0.1 server). `fetch_url` resolves and connects through the sealed test connector:
    docs.example.com is a public-looking address only it routes, to that server."""

    name = "fetcher"
    max_steps = 8

    def get_tools(self) -> list[Tool]:
        port = int(self.get_config().get("port", 9))
        return FetchTools(
            allowlist=["http://docs.example.com/v1/**", "http://169.254.169.254/**"],
            targets={
                "docs": FetchTarget(
                    base_url=f"http://127.0.0.1:{port}",
                    allowlist=["/v1/docs/**"],
                    headers={"x-agent": "think"},
                    description="The test docs service.",
                )
            },
            resolver=FetchResolver({"docs.example.com": [[PUBLIC_IP]]}),
            connector=Sealed({PUBLIC_IP: port, "127.0.0.1": port}),
            max_model_chars=1000,
        ).tools()


# -- hostile content (tests/storage/test_hostile_content.py) ---------------------------------------


@tool
def characters(codes: list[int]) -> str:
    """The text of these code points: a tool whose output Postgres may not store as it is."""
    return "".join(map(chr, codes))


@tool
def characters_object(codes: list[int]) -> dict[str, object]:
    """The same text as an object's key and as a value in it."""
    text = "".join(map(chr, codes))
    return {text: [text], "fine": "\U0001f600"}


class Hostile(Helper):
    """Tools whose outputs hold NUL and lone surrogates, beside the `helper`'s."""

    name = "hostile"

    def get_tools(self) -> list[Tool]:
        return [*super().get_tools(), characters, characters_object]


_FAR_AHEAD = f"every week on {DAYS[(datetime.now(UTC).weekday() + 1 + 3) % 7]} at 12:00 in UTC"
"""Three days ahead of today (Temporal numbers days from Sunday, Python from Monday): an
occurrence that never comes while the tests run."""


@tool
async def wipe(ctx: ToolContext) -> str:
    """Try to clear this conversation from inside one of its turns."""
    conversation = await ctx.conversation()
    try:
        await conversation.clear()
    except UserError as exc:
        return f"refused: {exc}"
    return "cleared"


class Eraser(Helper):
    """Clearing forgets (`clear_history = "delete"`); a conversation configured with a
    `reminder` gets a schedule of its own (conversation scope, `_FAR_AHEAD`), and it has a
    workspace: what deleting a conversation must take with it; `wipe` tries a clear from
    inside a turn (tests/turns/test_clear_and_delete.py)."""

    name = "eraser"
    clear_history = "delete"
    workspace_tools = True

    def get_tools(self) -> list[Tool]:
        return [*super().get_tools(), wipe]

    def get_scheduled_tasks_scope(self) -> ScheduledTasksScope:
        return "conversation"

    def get_scheduled_tasks(self) -> dict[str, ScheduledTask]:
        reminder = self.get_config().get("reminder")
        if reminder is None:
            return {}
        return {"reminder": ScheduledTask(schedule=_FAR_AHEAD, prompt=str(reminder))}
