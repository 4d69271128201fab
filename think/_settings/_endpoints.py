"""Named model endpoints (`THINK_MODEL_ENDPOINTS`): the one setting whose value is a JSON
document, and whose entries name further variables to read keys from, so it has its own parser
(called by `Settings.from_env`, which declares the variable)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from think.exceptions import ConfigurationError

MODEL_ENDPOINTS_VAR = "THINK_MODEL_ENDPOINTS"
_ENDPOINT_KEYS = (
    "base_url",
    "api_key",
    "api_key_env",
    "native_output",
    "think_tags",
    "prices",
    "price_provider",
    "api",
    "store",
    "background",
)


class Prices(BaseModel):
    """An endpoint's prices, in US dollars per million tokens (the unit every provider's price
    page uses). `cached_input` and `cache_write` default to `input`: a server without a cache
    charges every input token alike."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cached_input: Decimal | None = Field(default=None, ge=0)
    cache_write: Decimal | None = Field(default=None, ge=0)


class Endpoint(BaseModel):
    """A named OpenAI-compatible endpoint, so that one agent can use two providers.

    Configured in `THINK_MODEL_ENDPOINTS`; the model id `"cheap/gpt-4o-mini"` means the model
    `gpt-4o-mini` on the endpoint named `cheap` (see `think.models.resolve_model`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    api: Literal["chat", "responses", "anthropic"] = "chat"
    """The protocol the endpoint speaks: OpenAI's Chat Completions (OpenAI, Azure, vLLM,
    Ollama, OpenRouter, ...), OpenAI's Responses API (OpenAI, Azure) or Anthropic's Messages
    API."""
    base_url: str | None = None
    """None: the provider's own API (OpenAI's, or Anthropic's for `api: anthropic`)."""
    api_key: str | None = Field(default=None, repr=False)
    native_output: bool = True
    """Send structured output as `response_format`; off for servers that reject it (the turn
    then asks for the answer through a final-answer tool)."""
    api_key_env: str | None = None
    """The variable the key is read from, when it came from one: named if it was not set."""
    think_tags: Literal["leading", "off"] = "leading"
    """`leading`: a `<think>…</think>` block that opens the answer is the model's reasoning
    (Groq's raw format, older Ollama, local reasoning models without a parser); `off`: the
    text is kept exactly as sent."""
    prices: Prices | None = None
    """What a step costs here; none: the published prices (`price_provider`'s, else those of
    the provider at `base_url`), unknown when the model has none."""
    price_provider: str | None = None
    """Price this endpoint's models as this provider's (`"openai"`, `"anthropic"`): a proxy
    or gateway in front of one (LiteLLM, a company gateway) has a URL no price table knows."""
    store: bool | None = None
    """`api: responses` only: let the provider keep each response (`store`). Off by default
    (nothing is kept, and reasoning is carried from step to step encrypted); on when
    `background` is."""
    background: bool = False
    """`api: responses` only: run each response in background mode, kept by the provider, so a
    step whose worker dies or whose connection drops picks the same response up where it was
    (`starting_after`) instead of asking, and paying, again. Needs `store`."""

    @model_validator(mode="after")
    def _responses_only(self) -> Endpoint:
        if self.api != "responses" and (self.store is not None or self.background):
            raise ValueError("store and background are options of api 'responses' only")
        if self.background and self.store is False:
            raise ValueError("background mode needs store: the provider keeps the response")
        return self


def parse_model_endpoints(raw: str, env: Mapping[str, str]) -> dict[str, Endpoint]:
    """Endpoints from `THINK_MODEL_ENDPOINTS`, a JSON object of endpoints by name.

    `{"cheap": {"base_url": "https://...", "api_key_env": "CHEAP_KEY"}}`: `api_key_env` names
    the variable holding the key, so no secret sits in this JSON (a literal `api_key` is
    accepted too); `native_output: false` for a server that rejects `response_format`;
    `think_tags: "off"` to keep a leading `<think>` block as text. A
    variable that is not set leaves the key empty: the process that calls that endpoint
    reports it, and a process that never does (the API) runs without the secret.
    """
    if not raw.strip():
        return {}

    def bad(problem: str) -> ConfigurationError:
        return ConfigurationError(f"{MODEL_ENDPOINTS_VAR}: {problem}")

    try:
        found = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise bad(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(found, dict):
        raise bad(f"expected a JSON object of endpoints by name, got {type(found).__name__}")
    endpoints: dict[str, Endpoint] = {}
    for name, entry in found.items():
        if not name or "/" in name or name != name.strip():
            raise bad(f"endpoint name {name!r} must be non-empty, without '/' or outer spaces")
        if not isinstance(entry, dict):
            raise bad(f'endpoint {name!r} must be an object such as {{"base_url": ...}}')
        unknown = sorted(set(entry) - set(_ENDPOINT_KEYS))
        if unknown:
            raise bad(
                f"endpoint {name!r} has unknown keys {unknown}; known: {', '.join(_ENDPOINT_KEYS)}"
            )
        key_var = entry.get("api_key_env")
        if key_var is not None:
            if "api_key" in entry:
                raise bad(f"endpoint {name!r} gives both api_key and api_key_env: keep one")
            if not isinstance(key_var, str) or not key_var.strip():
                raise bad(f"endpoint {name!r}: api_key_env must name a variable, not {key_var!r}")
            entry = {**entry, "api_key": env.get(key_var) or None}
        try:
            endpoints[name] = Endpoint.model_validate(entry)
        except ValidationError as exc:
            problems = "; ".join(
                ": ".join([*([".".join(str(p) for p in e["loc"])] if e["loc"] else []), e["msg"]])
                for e in exc.errors(include_url=False, include_input=False)
            )
            raise bad(f"endpoint {name!r}: {problems}") from None
    return endpoints
