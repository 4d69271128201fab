"""A turn's first step, begun by the worker that starts its workflow eagerly, beside the start:
read the turn and its transcript, run the hooks that build the request and send it, for the
step's first attempt to take on (`StepAttempt.early_step`, `take`). Nothing is written before a
step takes it on; work nobody takes is dropped, its model request cut off (`UNEAGER_SECONDS`,
`KEEP_SECONDS`). The sequence: docs/architecture.md, "The eager start, and the first step
begun beside it".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from typing import TYPE_CHECKING

from think import metrics
from think._current import bound_turn
from think.engine.activities._assembly import HookFailed
from think.engine.activities._compaction import Compactions
from think.engine.activities._model_step import StepAttempt
from think.engine.activities._model_stream import EarlyStep
from think.engine.activities._resources import ActivityResources
from think.engine.activities._step_outcomes import StepOutcomes
from think.streaming import FirstClaim
from think.workflows.inputs import ModelStepInput

if TYPE_CHECKING:
    from think.turns import ThinkService

log = logging.getLogger("think.engine.activities")


class EarlySteps:
    """The first steps this worker began beside their workflows' starts, by turn id."""

    KEEP_SECONDS = 30.0
    """The longest one waits to be taken: an eager start's first task runs here, if late."""
    UNEAGER_SECONDS = 1.0
    """How long one whose start was not eager waits: its first task went through the task
    queue, to this worker or another."""

    def __init__(
        self, res: ActivityResources, compactions: Compactions, outcomes: StepOutcomes
    ) -> None:
        self._res = res
        self._compactions = compactions
        self._outcomes = outcomes
        self._steps: dict[str, asyncio.Task[EarlyStep | None]] = {}
        self._claims: dict[str, asyncio.Task[FirstClaim]] = {}
        self._dropping: set[asyncio.Task[None]] = set()

    def begin(self, turn_id: str, service: ThinkService | None = None) -> None:
        """Begin turn `turn_id`'s first step; `service` is what its hooks reach through
        `current_conversation()`, as in the step's activity."""
        attempt = StepAttempt(
            self._res, self._compactions, self._outcomes, ModelStepInput(turn_id=turn_id, step=0)
        )

        async def early() -> EarlyStep | None:
            if service is None:
                return await attempt.early_step()
            with bound_turn(service, turn_id):
                return await attempt.early_step()

        self.drop(turn_id)  # never two for one turn
        self._steps[turn_id] = asyncio.create_task(early())
        self._drop_later(turn_id, self.KEEP_SECONDS)

    def started(self, turn_id: str, *, eager: bool) -> None:
        """Its workflow started. Eagerly: its first task runs here, so the step's first attempt
        is this worker's, and its fence's claim is sent now, while that task is activated (the
        step awaits it before it writes, `Fence.first`). Else the task may run elsewhere."""
        if turn_id not in self._steps:
            return
        if eager:
            claim = asyncio.create_task(self._res.store.claim_first(turn_id, "step-0"))
            # One nobody waits for (the step failed to start) must not log its error.
            claim.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._claims[turn_id] = claim
        else:
            self._drop_later(turn_id, self.UNEAGER_SECONDS)

    async def take(self, turn_id: str) -> EarlyStep | None:
        """What was begun for `turn_id`, once; None when nothing was (or it failed: the step
        then does it all itself)."""
        task = self._steps.pop(turn_id, None)
        claim = self._claims.pop(turn_id, None)
        if task is None:
            return None
        try:
            early = await task
        except Exception as exc:
            # The step does it all itself: a hook's failure is reported by it, from where the
            # hook runs as always (its activity), and a failed read is read again.
            log.log(
                logging.DEBUG if isinstance(exc, HookFailed) else logging.WARNING,
                "the first step begun for turn %s failed; the step begins anew",
                turn_id,
                exc_info=True,
            )
            metrics.EARLY_FIRST_STEPS.labels("failed").inc()
            early = None
        if early is None:
            if claim is not None:
                # The step begins for itself, and finds its fence claimed as a retry would.
                with contextlib.suppress(Exception):
                    await claim
            return None
        early.claim = claim
        metrics.EARLY_FIRST_STEPS.labels("taken").inc()
        return early

    def drop(self, turn_id: str) -> None:
        """Give up what was begun for `turn_id`, if it is still here: its model request is cut
        off."""
        task = self._steps.pop(turn_id, None)
        self._claims.pop(turn_id, None)
        if task is not None:
            metrics.EARLY_FIRST_STEPS.labels("dropped").inc()
            dropping = asyncio.create_task(_given_up(task))
            self._dropping.add(dropping)
            dropping.add_done_callback(self._dropping.discard)

    def _drop_later(self, turn_id: str, seconds: float) -> None:
        # Weakly: a step taken goes on without this timer. Held here, the task (and with it
        # the step's message, a 14 MiB tool call's input included) outlived its step by
        # `KEEP_SECONDS` (docs/benchmarks.md, "A large workspace write").
        task = self._steps.get(turn_id)
        ref = weakref.ref(task) if task is not None else None

        def drop() -> None:
            current = self._steps.get(turn_id)
            if current is not None and ref is not None and current is ref():
                self.drop(turn_id)  # still the one begun then, not a later one for the turn

        asyncio.get_running_loop().call_later(seconds, drop)


async def _given_up(task: asyncio.Task[EarlyStep | None]) -> None:
    task.cancel()
    await asyncio.wait([task])
    if task.cancelled() or task.exception() is not None:
        return  # cut off on its way, or failed: nothing it sent is still open
    early = task.result()
    if early is not None:
        with contextlib.suppress(Exception):
            await early.close()
