"""What the turn-level hooks receive and return: `before_turn`, `before_step`, `on_step_finish`,
`on_chat_response` and `on_chat_error`.

Every hook runs on a worker, inside an activity (docs/hooks.md says which). `before_turn` runs
once, in the turn's first model step, and what it returns is stored with the turn, so every
later step (on any worker) runs with the same settings; that is why `TurnConfig` holds data
and names rather than live objects.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from think.exceptions import UserError
from think.models import ModelSettings
from think.tools import Tool

T = TypeVar("T")


class TurnContext(BaseModel):
    """The turn as assembled before its first model call."""

    model_config = ConfigDict(frozen=True)

    agent: str
    conversation_id: str
    turn_id: str
    system: str
    """The system prompt `get_system_prompt` gave (with context blocks: the frozen one)."""
    messages: list[dict[str, Any]]
    """The transcript as the model will read it (Chat Completions messages, system excluded)."""
    tools: list[str]
    """Names of the tools the model may call (the agent's and the turn's client tools)."""
    model: str
    body: dict[str, Any] = Field(default_factory=dict)
    """The `body` of the submission: per-turn data from the client."""
    continuation: bool = False
    """True when the turn brings no new user message (it continues the last answer)."""


class TurnConfig(ModelSettings):
    """Overrides for one turn; `None` keeps the agent's default.

    The call settings (`temperature`, `max_output_tokens`, `tool_choice`, ...: `ModelSettings`)
    are laid over the agent's `model_settings` for every step of the turn. Unknown fields are
    refused, so that a misspelt one is an error rather than silence.

    `model` is a model id (an endpoint name may prefix it: `"cheap/gpt-4o-mini"`). `tools`
    adds module-level `@tool`s for this turn, and `active_tools` narrows what the model may
    call to those names. `output` makes the answer a validated object: a pydantic model
    class (importable by module path) or a JSON Schema.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: str | list[str] | None = None
    """A model id, or several: a fallback chain, tried in order (docs/models.md)."""
    system: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[Tool] | None = None
    active_tools: list[str] | None = None
    send_reasoning: bool | None = None
    output: type[BaseModel] | dict[str, Any] | None = None
    max_steps: int | None = Field(default=None, ge=1)
    chat_stream_stall_timeout: float | None = Field(default=None, ge=0)
    """0 turns the agent's stall watchdog off for this turn; None keeps the agent's."""
    turn_budget_seconds: float | None = Field(default=None, gt=0)
    turn_budget_tokens: int | None = Field(default=None, ge=1)
    turn_budget_cost: float | None = Field(default=None, gt=0)
    """US dollars this turn may spend on model steps (`Think.turn_budget_cost`)."""

    def kept(self) -> StoredTurnConfig:
        """What the turn keeps of this for its later steps: data and names, not objects (a
        tool and an output class by import path, which every worker can import)."""
        output: StoredOutput | None = None
        if isinstance(self.output, dict):
            output = StoredOutput(schema_=self.output)
        elif self.output is not None:
            output = StoredOutput(class_path=import_path(self.output))
        return StoredTurnConfig(
            **self.set_fields(),
            model=self.model,
            system=self.system,
            messages=self.messages,
            tools=[import_path(t.fn) for t in self.tools] if self.tools else None,
            active_tools=self.active_tools,
            send_reasoning=self.send_reasoning,
            output=output,
            max_steps=self.max_steps,
            chat_stream_stall_timeout=self.chat_stream_stall_timeout,
            turn_budget_seconds=self.turn_budget_seconds,
            turn_budget_tokens=self.turn_budget_tokens,
            turn_budget_cost=self.turn_budget_cost,
        )

    def stored(self) -> dict[str, Any]:
        """The JSON form kept with the turn for its later steps (`kept`)."""
        return self.kept().as_json()


def stored_or(value: T | None, default: T) -> T:
    """A turn's stored setting, else the agent's default (None is never stored)."""
    return default if value is None else value


def import_path(target: Any) -> str:
    """`module:qualname`: how a stored config names a module-level object."""
    return f"{target.__module__}:{target.__qualname__}"


class StoredOutput(BaseModel):
    """A stored `TurnConfig.output`: the JSON Schema (`{"schema": ...}`), or the pydantic
    class by import path (`{"class": "module:qualname"}`)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    class_path: str | None = Field(default=None, alias="class")

    def resolve(self) -> type[BaseModel] | dict[str, Any]:
        """The JSON Schema, or the class, imported again."""
        if self.schema_ is not None:
            return self.schema_
        module_name, _, qualname = str(self.class_path).partition(":")
        target: Any = importlib.import_module(module_name)
        for attribute in qualname.split("."):
            target = getattr(target, attribute, None)
        if not (isinstance(target, type) and issubclass(target, BaseModel)):
            raise UserError(
                f"TurnConfig.output {self.class_path!r} is not an importable pydantic model: "
                "define the class at module level"
            )
        return target


class StoredTurnConfig(ModelSettings):
    """A turn's configuration as kept with it (`turns.config`, JSON), read back by every
    later step on whatever worker: `before_turn`'s `TurnConfig` (`TurnConfig.kept`), and the
    MCP tools its first step found (`mcp`). `None` keeps the agent's default; only what is
    set is stored. Unknown keys are kept as they are (a turn stored by a newer release)."""

    model_config = ConfigDict(extra="allow")

    model: str | list[str] | None = None
    system: str | None = None
    messages: list[dict[str, Any]] | None = None
    tools: list[str] | None = None
    """Tools `before_turn` added, by import path (`module:qualname`)."""
    active_tools: list[str] | None = None
    send_reasoning: bool | None = None
    output: StoredOutput | None = None
    max_steps: int | None = None
    chat_stream_stall_timeout: float | None = None
    turn_budget_seconds: float | None = None
    turn_budget_tokens: int | None = None
    turn_budget_cost: float | None = None
    mcp: dict[str, Any] | None = None
    """The turn's MCP record (`think.engine.activities._mcp`)."""

    @classmethod
    def read(cls, stored: dict[str, Any] | None) -> StoredTurnConfig:
        """A turn's stored config (`TurnRecord.config`; None: nothing stored)."""
        return cls.model_validate(stored or {})

    def as_json(self) -> dict[str, Any]:
        """The JSON form stored with the turn: only what is set."""
        return self.model_dump(by_alias=True, exclude_none=True)


class StepContext(BaseModel):
    """One model step about to run (`before_step`)."""

    model_config = ConfigDict(frozen=True)

    agent: str
    conversation_id: str
    turn_id: str
    step: int
    """0 for the first model call of the turn."""
    system: str
    messages: list[dict[str, Any]]
    tools: list[str]
    model: str
    previous_steps: list[StepResult] = Field(default_factory=list)
    settings: ModelSettings = Field(default_factory=ModelSettings)
    """The call settings the step runs with unless `StepConfig` changes them: the agent's
    `model_settings` under the turn's `TurnConfig`."""


class StepConfig(ModelSettings):
    """Overrides for one step; `None` keeps what the turn uses. Its call settings
    (`ModelSettings`: `tool_choice="my_tool"` forces that tool in this step) are laid over the
    turn's. Unknown fields are refused."""

    model: str | list[str] | None = None
    """A model id, or a fallback chain of them."""
    system: str | None = None
    messages: list[dict[str, Any]] | None = None
    active_tools: list[str] | None = None


class ToolCallRecord(BaseModel):
    tool_call_id: str
    tool_name: str
    input: Any = None
    state: str = ""
    output: Any = None
    error: str | None = None


class StepResult(BaseModel):
    """What one finished step produced (`on_step_finish`, and `previous_steps`)."""

    step: int
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    finish_reason: str = "stop"
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0


class StepFinishContext(StepResult):
    agent: str
    conversation_id: str
    turn_id: str


class ChatResponseResult(BaseModel):
    """A turn that stored its assistant message (`on_chat_response`)."""

    agent: str
    conversation_id: str
    turn_id: str
    status: str
    message: dict[str, Any] | None = None
    output: Any = None
    error: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)


ChatErrorStage = Literal[
    "before_turn", "before_step", "context", "model", "output", "recovery", "turn"
]


class ChatErrorContext(BaseModel):
    """Where a turn failed (`on_chat_error`)."""

    agent: str
    conversation_id: str
    turn_id: str
    stage: ChatErrorStage
    """`before_turn`/`before_step`: a hook raised; `context`: `configure_context` or a
    context block's provider raised; `model`: the model refused the request; `output`: the
    answer did not validate; `turn`: an override of the agent's (`get_model`, `get_tools`,
    `get_system_prompt`, `repair_interrupted_tool_part`, `configure_session`) raised, its
    model could not be resolved, or the turn failed outside any step."""
    user_message_persisted: bool
    partial_message_persisted: bool
    classification: str | None = None


StepContext.model_rebuild()
