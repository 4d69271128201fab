"""Fallback chains: several models for one step, tried in order.

An agent's `get_model()` (or `TurnConfig.model`, `StepConfig.model`) may name a list of models.
A step asks the first; when it fails before its first event with an error another model may
not share (a retryable one: unreachable, overloaded, rate limited, a 5xx; or the endpoint
refusing us: 401, 403, 404), the next is asked in the same attempt, so a dead provider costs
the turn one failed request, not its retry budget. A request the model refused for what it
is (a 400: bad input, a context too long) is not asked of the next: it would be refused there
too, and the turn's own handling of it (compaction, the error) applies.

Once a model has begun to answer, a failure cannot be handed over mid-answer: it goes to the
turn's recovery (`chat_recovery`), which resets the step (`reset-step`) and tries again; the
retry starts the chain at the next model (`start`, the step's failures so far), so a model
that breaks mid-stream is not simply asked again first.

The chain reports the model that answered (`answered`): the step records it, its cost is
that model's, and `/v1/usage` counts it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal

from think.exceptions import ModelError
from think.models._base import ModelClient, ModelEvent, ModelRequest, Usage
from think.models._prices import cost_of

log = logging.getLogger("think.models")

_ENDPOINT_REFUSED = frozenset({401, 403, 404})
"""Statuses that say this endpoint will not serve us (a key, a permission, a model it does not
have), not that the request is wrong: another endpoint may."""


def falls_back(exc: ModelError) -> bool:
    """Whether a failure before the first event lets the next model of a chain be asked."""
    return exc.retryable or exc.status in _ENDPOINT_REFUSED


class FallbackModel:
    """Models tried in order for one step (see the module's docstring). `start` is where the
    order begins, wrapping around: the step's retry after a failure mid-answer begins at the
    model after the one that failed."""

    def __init__(self, models: Sequence[ModelClient], *, start: int = 0) -> None:
        if not models:
            raise ValueError("a fallback chain needs at least one model")
        self.models = list(models)
        first = start % len(self.models)
        self._order = self.models[first:] + self.models[:first]
        self.answered: ModelClient | None = None
        """The model that began to answer, once one has."""

    @property
    def name(self) -> str:
        """The answering model's name once one answers; before, the first one to be asked."""
        return (self.answered or self._order[0]).name

    @property
    def supports_native_output(self) -> bool:
        """Native structured output only when every model of the chain has it: the request is
        built before it is known which one answers."""
        return all(getattr(m, "supports_native_output", False) is True for m in self.models)

    def cost(self, usage: Usage) -> Decimal | None:
        """At the answering model's prices; before any answers, at the first one's."""
        return cost_of(self.answered or self._order[0], usage)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        failed: list[str] = []
        for index, model in enumerate(self._order):
            events = model.stream(request)
            began = False
            try:
                async for event in events:
                    if not began:
                        began, self.answered = True, model
                    yield event
                return
            except ModelError as exc:
                last = index == len(self._order) - 1
                if began or last or not falls_back(exc):
                    if failed and not began:
                        raise ModelError(
                            f"every model of the chain failed: {'; '.join(failed)}; "
                            f"{model.name}: {exc}",
                            retryable=exc.retryable,
                            status=exc.status,
                            kind=exc.kind,
                        ) from exc
                    raise
                failed.append(f"{model.name}: {exc}")
                log.warning(
                    "model %s failed before answering (%s); asking %s",
                    model.name,
                    exc,
                    self._order[index + 1].name,
                )
            finally:
                close = getattr(events, "aclose", None)
                if close is not None:
                    await close()


def chain_of(model: ModelClient) -> list[ModelClient]:
    """The models a client may ask: a chain's, else itself."""
    return list(model.models) if isinstance(model, FallbackModel) else [model]


def answering(model: ModelClient) -> ModelClient:
    """The model that answered a step: a chain's answering one, else the client itself."""
    if isinstance(model, FallbackModel) and model.answered is not None:
        return model.answered
    return model
