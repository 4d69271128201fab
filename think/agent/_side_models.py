"""The models a compaction function calls: reached as the agent's `get_gateway` says, and
metered.

`get_gateway` may be async, while `CompactionContext.model` is there before any call and
`CompactionContext.resolve_model` is sync: so a `SideModel` asks the gateway when it is first
called, then resolves. Each answer's usage is kept (`spent`), for the compactor to record in
`model_calls`: what a summary cost counts in the conversation's and tenant's usage, the daily
budgets and the metrics like a step's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from think._settings import Settings
from think.agent._gateway_context import GatewayContext, ask_gateway
from think.agent._think import Think
from think.models import (
    Finish,
    Gateway,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ModelSpec,
    answering,
    cost_of,
    resolve_model,
)
from think.storage import StepUsage

AskGateway = Callable[[str], Awaitable[Gateway | None]]
"""The agent's `get_gateway` for one model id, with the context of its call at hand."""


def gateway_of(agent: Think, ctx: GatewayContext) -> AskGateway | None:
    """The agent's `get_gateway` with `ctx` at hand; None when the agent keeps the default."""
    if type(agent).get_gateway is Think.get_gateway:
        return None

    async def ask(model: str) -> Gateway | None:
        return await ask_gateway(agent, model, ctx)

    return ask


def step_usage(model: ModelClient, finish: Finish) -> StepUsage:
    """What one answer of `model` spent, as a turn's step or a side call records it: the model
    that answered (a chain's answering one) and its cost (None when the price is unknown)."""
    cost = cost_of(model, finish.usage)
    return StepUsage(
        model=answering(model).name,
        finish_reason=finish.finish_reason,
        **finish.usage.model_dump(),
        cost=None if cost is None else float(cost),
    )


class SideModel:
    """A `ModelClient` for `spec`, resolved at each call through `ask` (None: the endpoints as
    configured), whose answers' usage is appended to `spent`."""

    def __init__(
        self,
        spec: ModelSpec,
        settings: Settings,
        ask: AskGateway | None,
        spent: list[StepUsage],
    ) -> None:
        if ask is None:
            resolve_model(spec, settings)  # a spec that cannot resolve fails here, not later
        self._spec = spec
        self._settings = settings
        self._ask = ask
        self._spent = spent

    @property
    def name(self) -> str:
        first = self._spec[0] if isinstance(self._spec, list) and self._spec else self._spec
        return first if isinstance(first, str) else getattr(first, "name", repr(first))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        model = await self._resolved()
        finish: Finish | None = None
        try:
            async for event in model.stream(request):
                if isinstance(event, Finish):
                    finish = event
                yield event
        finally:
            if finish is not None:
                self._spent.append(step_usage(model, finish))

    async def _resolved(self) -> ModelClient:
        if self._ask is None:
            return resolve_model(self._spec, self._settings)
        specs = self._spec if isinstance(self._spec, list) else [self._spec]
        decided: dict[str, Gateway | None] = {}
        for spec in specs:
            if isinstance(spec, str) and spec not in decided:
                decided[spec] = await self._ask(spec)
        return resolve_model(self._spec, self._settings, gateway=decided.get)
