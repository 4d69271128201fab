"""One attempt at one model step, in phases, each with what it needs passed in:

- `load`: the turn and the transcript are read and the step's fence claimed (a first
  attempt's claim goes on its way beside the model request, `Fence.first`); a step a
  previous attempt finished answers from its record. A turn its admission started needs one
  read; one still `pending` is started by its first step, in a transaction under the
  conversation's and the turn's locks. A later step checks the budgets first.
- `assemble`: the agent's hooks build the request (context, prompt, tools, output).
- `stream`: the model's answer becomes chunks, batched into the stream log; the calls it made
  are planned (`_model_stream.py`: what runs while the model speaks).
- `record` (`_step_record.py`): the step is stored: in one statement when it called tools,
  else in the transaction that ends the turn.

What goes wrong is settled by `StepOutcomes` (out of time, failed, retried, cancelled); a
stale attempt, wherever it is found, by `run` alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from think._messages import UIMessage
from think.agent import StoredTurnConfig, Think
from think.engine.activities import _crash_recovery as crash
from think.engine.activities import _observe as observe
from think.engine.activities._agent_tool import ParentProgress
from think.engine.activities._assembly import (
    HookFailed,
    StepSetup,
    agent_code,
    assemble,
    overrides,
    turn_tools,
)
from think.engine.activities._compaction import Compactions
from think.engine.activities._mcp import declared_servers, discover
from think.engine.activities._model_stream import (
    CancelSubscription,
    EarlyStep,
    LoadedStep,
    PreparedStep,
    SentRequest,
    Streamed,
    stream_answer,
)
from think.engine.activities._resources import ActivityResources
from think.engine.activities._step_budget import (
    budget_message,
    budget_spent,
    refused_stream,
    unpriced_budget,
)
from think.engine.activities._step_outcomes import StepOutcomes
from think.engine.activities._step_record import record_step
from think.engine.activities._step_stream import StepStream
from think.engine.activities._system_prompt import step_prompt
from think.engine.activities._tool_plan import recorded_step
from think.engine.activities._turn_state import start_turn
from think.exceptions import STALE_ATTEMPT
from think.models import (
    ModelRequest,
    OutputSpec,
    ToolSpec,
    output_spec,
    supports_native_output,
)
from think.storage import (
    Conn,
    TurnNotRecorded,
    TurnRecord,
    gives_up,
    pending_steering,
    steering_chunk,
)
from think.streaming import (
    ChunkWriter,
    Fence,
    MessageBuilder,
    StaleAttempt,
    TurnEnded,
    step_is_open,
)
from think.workflows.inputs import ModelStepInput, ModelStepResult

log = logging.getLogger("think.engine.activities")

OVERTAKEN_COMMIT_WAIT = 0.05
"""How long a first step that cannot find its turn waits before it looks again."""
UNRECORDED_ATTEMPTS = 6
"""Attempts (about 15 s, at `MODEL_RETRY`'s intervals) after which a first step that still
cannot find its turn ends the workflow: its admission's commit failed."""

ANSWER_TOOL = "final_answer"
"""Structured output without a native mode: the tool whose call is the answer."""


class StepAttempt:
    """One attempt at step `inp.step` of turn `inp.turn_id`."""

    def __init__(
        self,
        res: ActivityResources,
        compactions: Compactions,
        outcomes: StepOutcomes,
        inp: ModelStepInput,
        early: EarlyStep | None = None,
    ) -> None:
        self.res = res
        self.compactions = compactions
        self.outcomes = outcomes
        self.inp = inp
        self.early = early
        self.chain_start = 0
        """Where a fallback chain begins: the step's failures so far (`_loaded`)."""
        """The first step's work done beside its workflow's start, if this worker did it."""

    async def run(self) -> ModelStepResult:
        self.fence: Fence | None = None
        """The step's fence, once `load` (or `_take_on`) has it: what `give_up` writes under."""
        if self.early is not None:
            self.cancels = self.early.cancels  # opened before the early read
        else:
            self.cancels = CancelSubscription(self.res, self.inp.turn_id)
        try:
            if self.early is not None:
                return await self._take_on(self.early)
            loaded = await self.load()
            if isinstance(loaded, ModelStepResult):
                return loaded
            return await self._call_model(loaded)
        except asyncio.CancelledError as exc:
            crash.mark_failed_here(self.inp.turn_id, self.fence, exc)
            raise
        except StaleAttempt as exc:
            # A newer attempt took the step's fence (this one's worker was presumed dead):
            # stand down without retrying; the workflow drops this attempt's outcome.
            raise ApplicationError(str(exc), type=STALE_ATTEMPT, non_retryable=True) from exc
        except TurnEnded:
            # A cancel ended the turn before this attempt's claim landed (`Fence.held`): it
            # wrote nothing, and the turn is as the cancel left it.
            ended = await self.res.store.get_turn(self.inp.turn_id)
            return ModelStepResult(ended=True, status=ended.status if ended else "aborted")
        except Exception as exc:
            # Not transient, and tried `NON_TRANSIENT_ATTEMPTS` times: what `stream` could not
            # settle with the partial answer kept (a failure before it, or in storing it).
            if not gives_up(exc):
                await crash.mark_failed(self.res, self.inp.turn_id, self.fence, exc)
                raise
            return await self.outcomes.give_up(self.inp.turn_id, self.inp.step, exc, self.fence)
        finally:
            self.cancels.close()

    # -- load ------------------------------------------------------------------------------

    async def load(self) -> LoadedStep | ModelStepResult:
        if self.inp.step > 0:
            return await self._load_later_step()
        try:
            return await self._load_first_step()
        except TurnNotRecorded:
            # The workflow is started as its admission commits: this step overtook the
            # commit (it lands within milliseconds), or the commit failed (never will).
            await asyncio.sleep(OVERTAKEN_COMMIT_WAIT)
        try:
            return await self._load_first_step()
        except TurnNotRecorded:
            if activity.info().attempt < UNRECORDED_ATTEMPTS:
                raise  # retried (MODEL_RETRY), at growing intervals
            log.warning("turn %s was never recorded; its workflow ends", self.inp.turn_id)
            return ModelStepResult(ended=True, status="error")

    async def _load_first_step(self) -> LoadedStep | ModelStepResult:
        inp, store = self.inp, self.res.store
        key = f"step-{inp.step}"
        # Most turns were started by their admission: one read then, and no transaction.
        async with store.db.connection() as conn:
            started = await self._read_started(conn)
            if started is not None:
                turn, agent = started
                return self._answered(turn, agent) or await self._claimed(conn, turn, agent, key)
        async with store.db.transaction() as conn:
            turn, queue, attempt = await store.claim_queued_turn(conn, inp.turn_id, key)
            agent = self.res.bound_agent(turn)
            if answered := self._answered(turn, agent):
                return answered
            turn, stored = await start_turn(store, conn, turn, queue)
            if turn.terminal:
                return ModelStepResult(ended=True, status=turn.status)  # skipped as it started
            # The path's new tail is what was just stored: the read below then finds it here.
            self.res.paths.extend(turn.conversation_uid, turn.messages_revision, stored)
            return await self._loaded(conn, turn, agent, Fence(key=key, attempt=attempt))

    async def _read_started(self, conn: Conn) -> tuple[TurnRecord, Think] | None:
        """The turn as its admission started it, and its agent; the messages the start stored
        are the cached path's new tail. None: its admission did not start it."""
        started = await self.res.store.read_started_turn(conn, self.inp.turn_id)
        if started is None:
            return None
        turn, stored = started
        self.res.paths.extend(turn.conversation_uid, turn.messages_revision, stored)
        return turn, self.res.bound_agent(turn)

    async def _claimed(
        self, conn: Conn, turn: TurnRecord, agent: Think, key: str
    ) -> LoadedStep | ModelStepResult:
        """`_loaded`, with the step's fence. A first attempt claims it beside the model request
        (`Fence.first`): what it writes waits for the claim to land, and should another attempt
        have claimed first, it stands down at its first write, having written nothing. A retry
        claims before anything else: it must know whether to reset what an abandoned attempt
        streamed."""
        if key not in turn.fences:
            fence = Fence.first(key, self.res.store.claim_first(turn.id, key))
            return await self._loaded(conn, turn, agent, fence)
        turn, attempt = await self.res.store.claim_step(conn, turn.id, key)
        if answered := self._answered(turn, agent):
            return answered
        return await self._loaded(conn, turn, agent, Fence(key=key, attempt=attempt))

    async def early_step(self) -> EarlyStep | None:
        """The first step of a turn its admission started, up to its model request, which is
        sent: what the worker that starts the workflow does beside the start, for the step to
        take on (`_take_on`). None when there is nothing to take on (the turn is not one its
        admission started, has ended, or a step has begun): the step then does it all. Raises
        `HookFailed` as `assemble` does; the step then does it all too, in its activity, where
        the hook may have wanted to be (`activity.info()`), and reports what it raises there."""
        cancels = CancelSubscription(self.res, self.inp.turn_id)
        try:
            early = await self._early_step(cancels)
        except BaseException:
            cancels.close()
            raise
        if early is None:
            cancels.close()
        return early

    async def _early_step(self, cancels: CancelSubscription) -> EarlyStep | None:
        async with self.res.store.db.connection() as conn:
            started = await self._read_started(conn)
            if started is None:
                return None
            turn, agent = started
            if self._answered(turn, agent) is not None or f"step-{self.inp.step}" in turn.fences:
                return None
            transcript = await self._transcript(conn, turn, agent)
        prepared = await self._prepare(turn, agent, transcript, send=True)
        return EarlyStep(turn, agent, transcript, prepared, cancels)

    async def _take_on(self, early: EarlyStep) -> ModelStepResult:
        """Go on from `early`: claim the step's fence (beside the model's answer, as a first
        attempt does, `Fence.first`), then stream the answer already on its way."""
        turn, agent, key = early.turn, early.agent, f"step-{self.inp.step}"
        fence = Fence.first(key, early.claim or self.res.store.claim_first(turn.id, key))
        loaded = LoadedStep(turn, agent, fence, False, early.transcript)
        self.fence = fence
        return await self._call_model(loaded, early.prepared)

    def _answered(self, turn: TurnRecord, agent: Think) -> ModelStepResult | None:
        """What a step whose turn has ended, or whose step is recorded, answers with no model
        call: a previous attempt finished the step but its completion never reached Temporal,
        so it answers from what that attempt recorded."""
        if turn.terminal:
            return ModelStepResult(ended=True, status=turn.status)
        if turn.steps_done > self.inp.step:
            return recorded_step(turn, self.inp.step, turn_tools(agent, turn), agent.max_steps)
        return None

    async def _loaded(self, conn: Conn, turn: TurnRecord, agent: Think, fence: Fence) -> LoadedStep:
        """The step's transcript, and whether this attempt must first reset what an abandoned
        one streamed of the step (a retry after a crash or a stall)."""
        self.fence = fence
        # A retry begins a fallback chain at the model after the one that failed last.
        self.chain_start = turn.fences.get(f"{fence.key}:failures", 0)
        interrupted = fence.attempt > 1 and await step_is_open(conn, turn.id)
        crashed = interrupted and crash.lost_to_crash(turn, fence)  # not failed: cut off
        transcript = await self._transcript(conn, turn, agent)
        # An abandoned attempt's answer the provider kept running (background mode): this
        # attempt picks it up instead of asking again.
        resume = turn.checkpoints.get(fence.key) if interrupted else None
        return LoadedStep(turn, agent, fence, interrupted, transcript, resume, crashed)

    async def _transcript(self, conn: Conn, turn: TurnRecord, agent: Think) -> list[UIMessage]:
        return await self.res.paths.path(
            conn,
            turn.conversation_uid,
            turn.parent_id,
            revision=turn.messages_revision,
            byte_budget=agent.hydration_byte_budget,
        )

    async def _load_later_step(self) -> LoadedStep | ModelStepResult:
        """`load` for a step after the first: the turn has started, so claiming the step's
        fence and reading the turn is one statement, with no transaction around it; a spent
        budget ends the turn in a transaction of its own (`end_once`, under the locks)."""
        inp, store = self.inp, self.res.store
        async with store.db.connection() as conn:
            turn = await store.read_turn(conn, inp.turn_id)
            agent = self.res.bound_agent(turn)
            if answered := self._answered(turn, agent):
                return answered
            spent = budget_spent(agent, turn)
            if spent is None:
                loaded = await self._claimed(conn, turn, agent, f"step-{inp.step}")
                if isinstance(loaded, ModelStepResult):
                    return loaded
        await self.outcomes.step_finished(agent, turn, inp.step - 1)
        if spent is None:
            return loaded
        # Checked between steps: the turn keeps what it has and stops asking the model.
        which, used, limit = spent
        earlier = await self.outcomes.end_once(
            turn,
            status="interrupted",
            message=turn.message or {"id": turn.message_id, "role": "assistant", "parts": []},
            chunks=[],
            error=budget_message(which, used, limit),
            finish_reason="length",
        )
        if earlier is not None:
            return ModelStepResult(ended=True, status=earlier)
        await observe.budget_exhausted(turn, which, used, limit)
        await observe.finished(turn, "interrupted", finish_reason="length")
        respond = overrides(agent, "on_chat_response")
        return ModelStepResult(ended=True, status="interrupted", respond=respond)

    # -- assemble --------------------------------------------------------------------------

    async def assemble(
        self, turn: TurnRecord, agent: Think, transcript: list[UIMessage], builder: MessageBuilder
    ) -> tuple[StepSetup, ModelRequest, str | None]:
        """The step's setup, its request, and the tool that stands for a structured answer
        when the model has no native structured output. Raises `HookFailed`."""
        step = self.inp.step
        # Summaries in place of what they cover; compacts first if the window is near.
        transcript = await self.compactions.model_context(agent, turn, transcript, step)
        prompt = await step_prompt(agent, turn, step, self.res.store)  # context blocks
        mcp = None
        if step == 0 and StoredTurnConfig.read(turn.config).mcp is None:
            with agent_code("get_mcp_servers"):
                declared = declared_servers(agent) if agent.include_mcp_tools else []
            mcp = await discover(agent, turn, self.res.store, declared)  # recorded with the turn
        setup = await assemble(
            agent,
            turn,
            transcript,
            builder.message,
            step,
            self.res.settings,
            histories=self.res.histories,
            prompt=prompt,
            mcp=mcp,
            chain_start=self.chain_start,
        )
        specs = [t.spec for t in setup.tools.values()] + setup.client_specs
        native: OutputSpec | None = None
        answer_tool: str | None = None
        if setup.output is not None:
            wanted = output_spec(setup.output)
            if supports_native_output(setup.model):
                native = wanted
            else:
                # No native structured output: the answer comes as a call of a tool of ours.
                answer_tool = ANSWER_TOOL
                specs.append(
                    ToolSpec(
                        name=ANSWER_TOOL,
                        description="Give your final answer by calling this tool, once.",
                        parameters=wanted.json_schema,
                    )
                )
        # Built from what was validated already: checking every message of a long transcript
        # again (copying each) cost 1.3 ms a step at 4,000 messages.
        request = ModelRequest.model_construct(
            model=setup.model.name,
            messages=setup.messages,
            tools=specs,
            output=native,
            settings=setup.settings,
            metadata={"conversation-id": turn.conversation_id, "turn-id": turn.id},
            encoded=setup.encoded,
        )
        return setup, request, answer_tool

    # -- stream, and what goes wrong on the way ----------------------------------------------

    async def _prepare(
        self,
        turn: TurnRecord,
        agent: Think,
        transcript: list[UIMessage],
        *,
        send: bool = False,
        resume: dict[str, Any] | None = None,
    ) -> PreparedStep:
        """Assemble the step's request (`resume`: an abandoned attempt's checkpoint); `send`
        it now, else at the stream's first `anext`. Raises `HookFailed`."""
        builder = MessageBuilder(turn.message)
        steering = [steering_chunk(s) for s in pending_steering(turn, turn.message)]
        if steering:
            # Delivered in this step: after its start, before the model is asked.
            builder.apply({"type": "start-step"})
            for chunk in steering:
                builder.apply(chunk)
        setup, request, answer_tool = await self.assemble(turn, agent, transcript, builder)
        request.resume = resume
        refusal = unpriced_budget(setup.cost_budget, setup.model)
        events = setup.model.stream(request) if refusal is None else refused_stream(refusal)
        if send:
            events = SentRequest(events)
        sent = time.monotonic()
        return PreparedStep(builder, setup, request, answer_tool, events, sent, steering)

    async def _call_model(
        self, loaded: LoadedStep, prepared: PreparedStep | None = None
    ) -> ModelStepResult:
        agent, turn, fence = loaded.agent, loaded.turn, loaded.fence
        if loaded.crashed:
            recovered = await crash.recover_crash(
                self.res, self.outcomes, loaded, self.inp.step, self.assemble
            )
            if recovered is not None:
                return recovered
        if prepared is None:
            try:
                prepared = await self._prepare(turn, agent, loaded.transcript, resume=loaded.resume)
            except HookFailed as exc:
                return await self.outcomes.fail(agent, turn, exc.stage, exc.cause, fence)
        builder, setup, answer_tool = prepared.builder, prepared.setup, prepared.answer_tool
        await observe.started(turn, setup.model.name, self.inp.step, fence.attempt)
        # A sub-agent's turn shows its progress in the parent's stream as it goes.
        progress = ParentProgress(turn, builder) if turn.request.delegated_by else None
        writer = ChunkWriter(
            self.res.store.db,
            turn.id,
            fence,
            interval=self.res.settings.chunk_flush_interval,
            after_flush=progress.after_flush if progress is not None else None,
            # A submitter that waits for the whole answer reads none of it as it streams.
            first_content_at_once=not turn.request.awaited,
        )
        step = StepStream(
            builder,
            writer,
            self.inp.step,
            send_reasoning=setup.send_reasoning,
            on_chunk=agent.on_chunk if overrides(agent, "on_chunk") else None,
            answer_tool=answer_tool,
        )
        streamed = await self.stream(loaded, prepared, step)
        if isinstance(streamed, ModelStepResult):
            return streamed
        try:
            return await self.record(loaded, setup, step, streamed)
        except Exception as exc:
            # Storing the step failed for good (say Postgres refuses its content): end the
            # turn with the partial answer, if that can be stored (else `give_up`, in `run`).
            if not gives_up(exc):
                raise
            return await self.outcomes.fail(agent, turn, "model", exc, fence, step, streamed.rest)

    async def stream(
        self, loaded: LoadedStep, prepared: PreparedStep, step: StepStream
    ) -> Streamed | ModelStepResult:
        return await stream_answer(
            self.res,
            self.outcomes,
            self.compactions,
            self.cancels,
            self.inp.step,
            loaded,
            prepared,
            step,
        )

    # -- record ----------------------------------------------------------------------------

    async def record(
        self, loaded: LoadedStep, setup: StepSetup, step: StepStream, streamed: Streamed
    ) -> ModelStepResult:
        return await record_step(
            self.res, self.outcomes, self.compactions, self.inp.step, loaded, setup, step, streamed
        )
