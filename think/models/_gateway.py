"""What `Think.get_gateway` may say about one model resolution: which endpoint serves the model,
and headers, metadata and a timeout for its requests.

A gateway decision is per resolution, not per deployment: `THINK_MODEL_ENDPOINTS` declares the
endpoints (and their keys, which never pass through agent code), and the hook picks among them
with the turn at hand (a tenant's region, a paid tier's endpoint, a proxy's routing header).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field


class Gateway(BaseModel):
    """How one model is reached for one resolution. Every field is optional: None (or empty)
    keeps what the model id and the endpoint say."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str | None = None
    """A `THINK_MODEL_ENDPOINTS` name: the model is asked there (an endpoint prefix in the model
    id is replaced). Unknown names end the turn naming it."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every request for the model (over the endpoint's own)."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Sent as `x-think-<key>` headers, as the turn's own ids are: what a proxy or gateway
    logs and routes by."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds a request for the model may take, its stream included."""


GatewayFor = Callable[[str], Gateway | None]
"""The gateway decision for a model id (`resolve_model`'s `gateway`)."""
