"""What one model step runs with: the agent's defaults, `before_turn`'s stored overrides, and
`before_step`'s, folded into one `StepSetup`.

`before_turn` runs in the first step only; its `TurnConfig` is stored with the turn (as data:
names and import paths, not objects) and read back by every later step, on whatever worker.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from temporalio.exceptions import ApplicationError

from think._messages import UIMessage
from think._protocol import (
    UIMessageJSON,
    joined_reasoning,
    joined_text,
    parts_of,
    split_steps,
    tool_calls,
    tool_name,
)
from think._settings import Settings
from think.agent import (
    AskGateway,
    ChatErrorStage,
    GatewayContext,
    ModelPurpose,
    StepConfig,
    StepContext,
    StepResult,
    StoredTurnConfig,
    Think,
    ToolCallRecord,
    TurnConfig,
    TurnContext,
    TurnTrigger,
    ask_gateway,
    channel_of,
    stored_or,
)
from think.engine.activities._ids import turn_ids
from think.engine.activities._mcp import recorded_tools
from think.exceptions import (
    HOOK_FAILED,
    ModelError,
    OutputValidationError,
    UserError,
)
from think.models import (
    EncodedMessages,
    Gateway,
    GatewayFor,
    ModelClient,
    ModelSettings,
    ModelSpec,
    ToolSpec,
    resolve_model,
    to_chat_messages,
)
from think.sessions import ChatHistories, eviction_settings, preserve
from think.storage import TurnRecord
from think.tools import Tool, maybe_await

if TYPE_CHECKING:
    from think.engine.activities._system_prompt import PromptSetup


class HookFailed(ApplicationError):
    """A turn hook or an override of the agent's raised: the turn ends with an error (through
    `on_chat_error`). The model step catches it and ends the turn; one that escapes another
    activity (a tool call's `get_tools`) is a non-retryable failure, which ends the turn too,
    rather than a retry that would fail the same way forever."""

    def __init__(self, stage: ChatErrorStage, cause: BaseException) -> None:
        super().__init__(
            f"{stage} failed: {type(cause).__name__}: {cause}", type=HOOK_FAILED, non_retryable=True
        )
        self.stage: ChatErrorStage = stage
        self._hook_cause = cause
        self.__cause__ = cause

    @property
    def cause(self) -> BaseException:
        """What the hook raised."""
        return self._hook_cause


class AgentCodeFailed(Exception):
    """An override of the agent's raised one of the exceptions whose text a client is shown
    (`UserError`, `ModelError`, ...): wrapped, so that it counts as internal like any other
    (the original is its `__cause__`, and its text goes to the worker's log only)."""


_SHOWN = (ModelError, UserError, OutputValidationError)
"""What `safe_error` shows a client as it is."""


@contextlib.contextmanager
def agent_code(what: str, stage: ChatErrorStage = "turn") -> Iterator[None]:
    """Run an override of the agent's (`get_tools`, `get_model`, `get_system_prompt`,
    `repair_interrupted_tool_part`) or what depends on it (resolving its model): an exception
    ends the turn in `error` (`HookFailed`) with the generic message, whatever it was, instead
    of failing the activity, which Temporal would retry forever while every turn queued behind
    this one waits."""
    try:
        yield
    except HookFailed:
        raise
    except Exception as exc:
        cause: Exception = exc
        if isinstance(exc, _SHOWN):
            cause = AgentCodeFailed(f"{what}: {type(exc).__name__}: {exc}")
            cause.__cause__ = exc
        raise HookFailed(stage, cause) from cause


@dataclass
class StepSetup:
    system: str
    messages: list[dict[str, Any]]
    """What the model receives, system prompt first."""
    encoded: EncodedMessages | None
    """A run of `messages` already encoded as JSON (the history)."""
    tools: dict[str, Tool]
    """The server tools the model may call in this step."""
    client_specs: list[ToolSpec]
    model: ModelClient
    send_reasoning: bool
    output: type[BaseModel] | dict[str, Any] | None
    max_steps: int
    stall_timeout: float | None
    """`chat_stream_stall_timeout`: None or 0, no stall watchdog."""
    time_budget: float | None = None
    """`turn_budget_seconds`: the whole turn's wall-clock budget."""
    cost_budget: float | None = None
    """`turn_budget_cost`: what the whole turn may spend, in US dollars."""
    config: StoredTurnConfig | None = None
    """The turn's stored configuration (`before_turn`'s overrides, the MCP record); None
    when nothing is set."""
    new_config: bool = False
    """True when this step made `config` (it ran `before_turn`, or found the MCP tools): it
    must be stored."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """The call settings: the agent's, under the turn's, under the step's."""


def import_tool(path: str) -> Tool:
    """A module-level `@tool` named by `module:qualname`."""
    module_name, _, qualname = path.partition(":")
    target: Any = importlib.import_module(module_name)
    for attribute in qualname.split("."):
        target = getattr(target, attribute, None)
    if not isinstance(target, Tool):
        raise UserError(
            f"TurnConfig.tools: {path!r} is not a module-level @tool, which every worker "
            "must be able to import"
        )
    return target


def turn_tools(
    agent: Think, turn: TurnRecord, mcp: dict[str, Any] | None = None
) -> dict[str, Tool]:
    """Every server tool the turn may call: the agent's, its MCP servers' as the turn
    recorded them (or `mcp`, the record the first step is making), and those `before_turn`
    added. Raises `HookFailed` when `get_tools` (or `configure_context`, or
    `get_mcp_servers`) raises or returns what is not a tool."""
    stored = StoredTurnConfig.read(turn.config)
    record = mcp if mcp is not None else stored.mcp
    with agent_code("get_tools"):
        tools = agent.tools_by_name()
        for name, value in tools.items():
            if not isinstance(value, Tool):
                raise TypeError(f"get_tools returned {value!r} (named {name!r}), not a @tool")
    if record:
        with agent_code("get_mcp_servers"):
            for name, mcp_tool in recorded_tools(agent, record).items():
                tools.setdefault(name, mcp_tool)  # a Python tool of the same name wins
    with agent_code("get_tools"):
        for path in stored.tools or []:
            extra = import_tool(path)
            tools[extra.name] = extra
        channel = channel_of(agent, turn.request.channel)
    if channel is not None and channel.tools is not None:
        # The channel's allowlist: the model is offered these only, and a call to another
        # finds no tool (a tool error), wherever the call comes from.
        tools = {name: t for name, t in tools.items() if name in channel.tools}
    return tools


def step_model(
    spec: ModelSpec, settings: Settings, chain_start: int = 0, gateway: GatewayFor | None = None
) -> ModelClient:
    """The step's model client (a chain's order beginning at `chain_start`, each id reached
    as `gateway` says); raises `HookFailed` when the model cannot be resolved (say a named
    endpoint whose key is not set, or a `get_model` that returned neither a model id nor a
    client)."""
    with agent_code("resolving the model"):
        return resolve_model(spec, settings, start=chain_start, gateway=gateway)


def gateway_asker(
    agent: Think, turn: TurnRecord, step: int, purpose: ModelPurpose = "step"
) -> AskGateway | None:
    """The agent's `get_gateway`, with the context of this step (or this turn's compaction:
    `purpose`) at hand; None when the agent does not override it."""
    if not overrides(agent, "get_gateway"):
        return None
    ctx = GatewayContext(
        **turn_ids(turn, agent.name),
        tenant=turn.tenant,
        step=step,
        trigger=trigger_of(turn),
        purpose=purpose,
    )

    async def ask(model: str) -> Gateway | None:
        with agent_code("get_gateway"):
            return await ask_gateway(agent, model, ctx)

    return ask


async def gateways(agent: Think, turn: TurnRecord, step: int, spec: ModelSpec) -> GatewayFor | None:
    """The agent's `get_gateway` decisions for each model id of `spec`, asked now (it may be
    async; resolving is not); None when the agent does not override it."""
    ask = gateway_asker(agent, turn, step)
    if ask is None:
        return None
    ids = [s for s in (spec if isinstance(spec, list) else [spec]) if isinstance(s, str)]
    decided: dict[str, Gateway | None] = {}
    for model in ids:
        decided[model] = await ask(model)
    return decided.get


def trigger_of(turn: TurnRecord) -> TurnTrigger:
    """What started the turn, as `GatewayContext.trigger` says it."""
    request = turn.request
    if request.delegated_by is not None:
        return "sub-agent"
    if request.regenerates is not None:
        return "regenerate"
    return "continuation" if request.continuation else "submission"


def named_models(spec: object) -> bool:
    """Whether `spec` names a model: an id, a client, or a non-empty list of them."""
    if isinstance(spec, list):
        return bool(spec) and all(isinstance(s, str | ModelClient) for s in spec)
    return isinstance(spec, str | ModelClient)


def client_specs(turn: TurnRecord, taken: dict[str, Tool]) -> list[ToolSpec]:
    """The turn's client tools, as the model sees them; a server tool's name wins."""
    return [
        ToolSpec(
            name=str(t["name"]),
            description=str(t.get("description") or ""),
            parameters=t.get("input_schema") or {"type": "object", "properties": {}},
        )
        for t in turn.request.client_tools
        if t["name"] not in taken
    ]


def previous_steps(message: Mapping[str, Any] | None, usage: dict[str, Any]) -> list[StepResult]:
    """The finished steps of the turn's draft message, with the usage recorded for each."""
    steps = split_steps(parts_of(message))[1:]  # what comes before the first: nothing
    if steps and all(p.get("type") == "steering-message" for p in steps[-1]):
        steps.pop()  # the step being assembled, begun with the steering it delivers
    recorded: list[dict[str, Any]] = usage.get("steps", [])
    results = []
    for i, parts in enumerate(steps):
        facts = recorded[i] if i < len(recorded) else {}
        results.append(
            StepResult(
                step=i,
                text=joined_text(parts),
                reasoning=joined_reasoning(parts),
                tool_calls=[
                    ToolCallRecord(
                        tool_call_id=p["toolCallId"],
                        tool_name=tool_name(p),
                        input=p.get("input"),
                        state=str(p.get("state", "")),
                        output=p.get("output"),
                        error=p.get("errorText"),
                    )
                    for p in tool_calls(parts)
                ],
                finish_reason=str(facts.get("finish_reason", "stop")),
                model=str(facts.get("model", "")),
                input_tokens=int(facts.get("input_tokens", 0)),
                output_tokens=int(facts.get("output_tokens", 0)),
            )
        )
    return results


async def assemble(
    agent: Think,
    turn: TurnRecord,
    transcript: list[UIMessage],
    draft: UIMessageJSON,
    step: int,
    settings: Settings,
    histories: ChatHistories,
    prompt: PromptSetup | None = None,
    mcp: dict[str, Any] | None = None,
    chain_start: int = 0,
) -> StepSetup:
    """The step's setup. Raises `HookFailed` when `before_turn` or `before_step` raises.
    `histories`: the worker's, which converts only what changed since the conversation's
    last step; `prompt`: the frozen system prompt and its reminders, for an agent with
    context blocks; `mcp`: the MCP tools the first step found, to be recorded with the
    turn."""
    # Context blocks (`think.engine.activities._system_prompt`): the frozen prompt, and
    # reminders after the transcript; read-time truncation of older messages
    # (`think.sessions._truncation`).
    if prompt is not None:
        system = prompt.system
    else:
        with agent_code("get_system_prompt"):
            system = agent.get_system_prompt()
    reminders = prompt.reminders if prompt is not None else []

    # Media eviction, then truncation (which would cut an evicted tool image's JSON, not drop
    # it), then conversion: of what changed since the conversation's last step only.
    with agent_code("repair_interrupted_tool_part"):
        chat = histories.convert(
            turn.conversation_uid,
            transcript,
            eviction=eviction_settings(agent.media_eviction),
            truncation_step=agent.truncation_step,
            repair=agent.repair_interrupted_tool_part,
        )
    await preserve(chat.evicted)
    histories.keep(chat)
    history = chat.messages
    agent_tools = turn_tools(agent, turn, mcp)
    with agent_code("get_model"):
        model_id: ModelSpec = agent.get_model()
        if not named_models(model_id):
            raise TypeError(
                f"get_model returned {model_id!r}, neither a model id, a client nor a list of them"
            )
    config = None if turn.config is None else StoredTurnConfig.read(turn.config)
    new_config = False
    if config is None and step == 0 and overrides(agent, "before_turn"):
        config = await before_turn(agent, turn, system, history, agent_tools, model_name(model_id))
        new_config = config is not None
    config = config or StoredTurnConfig()
    if mcp is not None:
        config.mcp, new_config = mcp, True
    system = config.system if config.system is not None else system
    with agent_code("configure_channels"):
        channel = channel_of(agent, turn.request.channel)
    if channel is not None and channel.instructions:
        system = f"{system}\n\n{channel.instructions}" if system else channel.instructions
    history = config.messages if config.messages is not None else history
    if config.model is not None:
        model_id = config.model
    active = config.active_tools
    call_settings = agent.model_settings.overridden_by(config)
    draft_messages = (
        to_chat_messages("", [UIMessage.model_construct(**draft)]) if draft.get("parts") else []
    )
    messages = [*history, *reminders, *draft_messages]
    # Unless a hook replaces it, the history goes to the model as the worker encoded it.
    encoded_history = chat.json if history is chat.messages else None
    if overrides(agent, "before_step"):
        context = StepContext(
            **turn_ids(turn, agent.name),
            step=step,
            system=system,
            messages=messages,
            tools=[n for n in agent_tools if active is None or n in active],
            model=model_name(model_id),
            previous_steps=previous_steps(draft, turn.usage),
            settings=call_settings,
        )
        try:
            step_config = await maybe_await(agent.before_step(context))
        except Exception as exc:
            raise HookFailed("before_step", exc) from exc
        if isinstance(step_config, StepConfig):
            system = step_config.system if step_config.system is not None else system
            if step_config.messages is not None:
                messages, encoded_history = step_config.messages, None
            model_id = step_config.model or model_id
            active = step_config.active_tools if step_config.active_tools is not None else active
            call_settings = call_settings.overridden_by(step_config)
    start = 1 if system else 0
    encoded = (
        EncodedMessages(start, start + len(history), encoded_history)
        if encoded_history is not None
        else None
    )
    tools = {n: t for n, t in agent_tools.items() if active is None or n in active}
    clients = [
        s
        for s in client_specs(turn, agent_tools)
        if (active is None or s.name in active)
        and (channel is None or channel.tools is None or s.name in channel.tools)
    ]
    max_steps = stored_or(config.max_steps, agent.max_steps)
    if channel is not None and channel.max_steps is not None:
        max_steps = min(max_steps, channel.max_steps)
    # `before_turn`'s output wins over the one the submission asked for (`run_turn`'s).
    output = config.output.resolve() if config.output is not None else turn.request.output
    return StepSetup(
        system=system,
        messages=([{"role": "system", "content": system}] if system else []) + messages,
        encoded=encoded,
        tools=tools,
        client_specs=clients,
        model=step_model(
            model_id, settings, chain_start, await gateways(agent, turn, step, model_id)
        ),
        send_reasoning=stored_or(config.send_reasoning, agent.send_reasoning),
        output=output,
        max_steps=max_steps,
        stall_timeout=stored_or(config.chat_stream_stall_timeout, agent.chat_stream_stall_timeout),
        time_budget=stored_or(config.turn_budget_seconds, agent.turn_budget_seconds),
        cost_budget=stored_or(config.turn_budget_cost, agent.turn_budget_cost),
        config=config if config.as_json() else None,
        new_config=new_config,
        settings=call_settings,
    )


async def before_turn(
    agent: Think,
    turn: TurnRecord,
    system: str,
    history: list[dict[str, Any]],
    tools: dict[str, Tool],
    model: str,
) -> StoredTurnConfig | None:
    """What the turn keeps of `before_turn`'s `TurnConfig` (None: it returned none); the
    tools it added join `tools`. Raises `HookFailed`."""
    context = TurnContext(
        **turn_ids(turn, agent.name),
        system=system,
        messages=history,
        tools=[*tools, *(s.name for s in client_specs(turn, tools))],
        model=model,
        body=turn.request.body,
        continuation=turn.request.continuation,
    )
    try:
        answer = await maybe_await(agent.before_turn(context))
    except Exception as exc:
        raise HookFailed("before_turn", exc) from exc
    if not isinstance(answer, TurnConfig):
        return None
    with agent_code("TurnConfig", stage="before_turn"):
        kept = answer.kept()
        for path in kept.tools or []:
            extra = import_tool(path)
            tools[extra.name] = extra
    return kept


def model_name(model: ModelSpec) -> str:
    """How a hook's context names the model: its id, or the client's name; a chain's first."""
    if isinstance(model, list):
        return model_name(model[0]) if model else ""
    return model if isinstance(model, str) else model.name


def overrides(agent: Think, hook: str) -> bool:
    """Whether the agent's class overrides a hook: a default is skipped, not called."""
    return getattr(type(agent), hook) is not getattr(Think, hook)
