"""Call settings: how a model is asked, beside what it is asked.

The agent declares defaults (`Think.model_settings`), `before_turn` may override them for a
turn (`TurnConfig`, whose fields these are too) and `before_step` for one step (`StepConfig`).
Each adapter puts them in its own API's terms (`max_output_tokens` is `max_completion_tokens`
on OpenAI's Chat Completions, `max_tokens` on most other servers); a setting an adapter cannot
honour is a `ModelError` naming it, never silently dropped.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
TOOL_CHOICE_MODES = ("auto", "none", "required")


class ModelSettings(BaseModel):
    """How the model is called; `None` keeps what the level below says (the step keeps the
    turn's, the turn the agent's, the agent the provider's own default).

    `tool_choice` is `"auto"`, `"none"`, `"required"`, or the name of one of the step's tools,
    which the model must then call. `provider_options` are request fields of the provider's
    own, sent as they are (and last, so they win over what the other settings made): for what
    no setting here names (`{"top_k": 20}` on vLLM, `{"user": "u-1"}` on OpenAI). Unknown
    settings are refused: a misspelt `temprature` would otherwise be silence.
    """

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    tool_choice: str | None = Field(default=None, min_length=1)
    parallel_tool_calls: bool | None = None
    reasoning_effort: ReasoningEffort | None = None
    stop: list[str] | None = None
    seed: int | None = None
    provider_options: dict[str, JsonValue] | None = None

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop(cls, value: Any) -> Any:
        """A single stop sequence may be given as a string, as the providers' APIs allow."""
        return [value] if isinstance(value, str) else value

    def call_settings(self) -> ModelSettings:
        """Only the call settings of this (a `TurnConfig` or `StepConfig` holds more)."""
        if type(self) is ModelSettings:
            return self
        return ModelSettings.model_construct(
            **{name: getattr(self, name) for name in ModelSettings.model_fields}
        )

    def set_fields(self) -> dict[str, Any]:
        """The call settings that are set (not None), by name."""
        return {
            name: value
            for name in ModelSettings.model_fields
            if (value := getattr(self, name)) is not None
        }

    def overridden_by(self, *overrides: ModelSettings | None) -> ModelSettings:
        """These settings with each override's set fields laid over them, in order;
        `provider_options` merge key by key (an override's key wins)."""
        merged = self.set_fields()
        for override in overrides:
            if override is None:
                continue
            for name, value in override.set_fields().items():
                if name == "provider_options" and isinstance(merged.get(name), dict):
                    value = {**merged[name], **value}
                merged[name] = value
        return ModelSettings.model_construct(**merged)

    def is_empty(self) -> bool:
        return not self.set_fields()
