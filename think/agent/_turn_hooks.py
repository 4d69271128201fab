"""What the turn-level hooks receive and return: `before_turn`, `before_step`, `on_step_finish`,
`on_chat_response` and `on_chat_error`.

Every hook runs on a worker, inside an activity (docs/hooks.md says which). `before_turn` runs
once, in the turn's first model step, and what it returns is stored with the turn, so every
later step (on any worker) runs with the same settings; that is why `TurnConfig` holds data
and names rather than live objects.
"""

from __future__ import annotations

import importlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from think.exceptions import UserError
from think.tools import Tool


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


class TurnConfig(BaseModel):
    """Overrides for one turn; `None` keeps the agent's default.

    `model` is a model id (an endpoint name may prefix it: `"cheap/gpt-4o-mini"`). `tools`
    adds module-level `@tool`s for this turn, and `active_tools` narrows what the model may
    call to those names. `output` makes the answer a validated object: a pydantic model
    class (importable by module path) or a JSON Schema.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: str | None = None
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

    def stored(self) -> dict[str, Any]:
        """The JSON form kept with the turn for its later steps."""
        data = self.model_dump(exclude={"tools", "output"}, exclude_none=True)
        if self.tools:
            data["tools"] = [t.name for t in self.tools]
        if isinstance(self.output, dict):
            data["output"] = {"schema": self.output}
        elif self.output is not None:
            data["output"] = {"class": f"{self.output.__module__}:{self.output.__qualname__}"}
        return data


def output_type(stored: dict[str, Any]) -> type[BaseModel] | dict[str, Any]:
    """The `output` of a stored `TurnConfig`: the JSON Schema, or the class, imported again."""
    if "schema" in stored:
        schema: dict[str, Any] = stored["schema"]
        return schema
    module_name, _, qualname = str(stored["class"]).partition(":")
    target: Any = importlib.import_module(module_name)
    for attribute in qualname.split("."):
        target = getattr(target, attribute, None)
    if not (isinstance(target, type) and issubclass(target, BaseModel)):
        raise UserError(
            f"TurnConfig.output {stored['class']!r} is not an importable pydantic model: "
            "define the class at module level"
        )
    return target


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


class StepConfig(BaseModel):
    """Overrides for one step; `None` keeps what the turn uses."""

    model: str | None = None
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


ChatErrorStage = Literal["before_turn", "before_step", "context", "model", "output", "turn"]


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
