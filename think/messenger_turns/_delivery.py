"""Delivery: a reply posted into its chat thread, durably and aware of recovery.

One activity per delivery (`think.MessengerDelivery` runs it, retried on any worker after a
crash) follows the turn's chunks as the SSE endpoint does and drives the delivery's row in
Postgres through its stages:

    accepted ──(first words: stage first, then the send)──▶ streaming ──▶ completed
        │                                                      │
        └── merged (the burst was answered by another turn)    └── failed (the error message)

An attempt that starts and finds `streaming` knows a previous attempt had posted (or was
about to post) part of the reply: it posts the messenger's interruption notice and ends
`interrupted`, never a second partial. One that finds `accepted` posts the reply from the
start: nothing was shown. With `stream="edit"` the reply is one message edited at most once
per the platform's `edit_interval` (more messages past its length limit); with `"whole"` it
is sent once complete. An approval the turn asks for is posted with Approve/Deny buttons,
and the answer that follows goes to a new message below them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

from temporalio import activity

from think.messenger_turns._draft import ReplyDraft, approval_text, message_text
from think.messenger_turns._hub import MessengerHub
from think.messengers import Button, Messenger, Platform, PlatformError, RateLimited, ThreadRef
from think.storage import messenger_store
from think.storage.messenger_store import DeliveryRow, DeliveryStage
from think.streaming import read
from think.workflows.inputs import DeliveryInput
from think.workflows.names import DELIVERY_ACTIVITY

log = logging.getLogger("think.messengers")

POLL = 0.05
"""Seconds between reads of the turn's chunks when none were new."""
FINAL_TRIES = 5
FAILED_STATUSES = frozenset({"error", "interrupted"})


class DeliveryActivities:
    """The delivery activity, bound to the worker's `MessengerHub`."""

    def __init__(self, hub: MessengerHub) -> None:
        self.hub = hub

    def activities(self) -> list[Callable[..., Any]]:
        return [self.deliver]

    @activity.defn(name=DELIVERY_ACTIVITY)
    async def deliver(self, inp: DeliveryInput) -> str:
        """Carry the delivery to an end stage; the stage it ended at."""
        db = self.hub.store.db
        row = await messenger_store.begin_attempt(db, inp.delivery_id)
        if row is None:
            return "missing"
        if row.ended:
            return row.stage
        found = self.hub.messenger(row.agent, row.messenger)
        if found is None:
            log.error("delivery %s: messenger %s/%s is gone", row.id, row.agent, row.messenger)
            await messenger_store.move(db, row.id, "failed", expect=("accepted", "streaming"))
            return "failed"
        messenger = found[1]
        platform = self.hub.client(row.agent, messenger)
        run = _Run(self.hub, row, messenger, platform)
        async with _heartbeating():
            if row.stage == "streaming":
                return await run.interrupted()
            if row.kind == "notice":
                return await run.notice()
            return await run.reply()


@contextlib.asynccontextmanager
async def _heartbeating(every: float = 1.0) -> AsyncIterator[None]:
    """Heartbeat from beside the work, so that a slow platform call (or a wait its rate limit
    asks for) is not taken for a dead worker; a SIGKILLed one stops beating, and its
    delivery is taken over once the heartbeat timeout passes."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class _Run:
    """One attempt at one delivery."""

    def __init__(
        self, hub: MessengerHub, row: DeliveryRow, messenger: Messenger, platform: Platform
    ) -> None:
        self.hub = hub
        self.db = hub.store.db
        self.row = row
        self.messenger = messenger
        self.platform = platform
        self.thread = ThreadRef(chat=row.chat, thread=row.thread)
        self.draft = ReplyDraft()
        self.begun = False
        self.base = 0
        """Where in the draft's text the current message(s) begin (after approval buttons)."""
        self.ids: list[str] = []
        self.shown: list[str] = []
        self.next_edit = 0.0
        self.posted_asks = 0
        self.flushed = ""
        """The segment's text as last shown."""

    async def interrupted(self) -> str:
        """A previous attempt had begun: the notice, once, instead of a second partial."""
        log.warning("delivery %s resumed after it had begun: posting the notice", self.row.id)
        await self._send_all(self.messenger.interruption_notice)
        await messenger_store.move(self.db, self.row.id, "interrupted", expect=("streaming",))
        return "interrupted"

    async def notice(self) -> str:
        await self._begin()
        await self._send_all(self.row.text or "")
        await messenger_store.move(self.db, self.row.id, "completed", expect=("streaming",))
        return "completed"

    async def reply(self) -> str:
        turn_id = self.row.turn_id
        assert turn_id is not None
        after, idle = -1, 0
        while self.draft.ended is None:
            activity.heartbeat()
            async with self.db.connection() as conn:
                rows = await read(conn, turn_id, after)
            for seq, chunk in rows:
                self.draft.take(chunk)
                after = seq
            await self._asks()
            if self.messenger.stream == "edit":
                await self._flush(final=False)  # also what the rate held back, once it allows
            if rows or self.draft.ended is not None:
                idle = 0
                continue
            turn = await self.hub.store.get_turn(turn_id)
            if turn is None or turn.terminal:
                async with self.db.connection() as conn:
                    if await read(conn, turn_id, after, limit=1):
                        continue
                if turn is not None and not self.draft.text:  # pruned: the stored answer
                    self.draft.text = message_text(turn.message)
                break
            # Quiet (a slow model, a turn waiting for a person): read less often, up to 1 s.
            idle += 1
            await asyncio.sleep(min(POLL * (1 + idle // 20), 1.0))
        return await self._end(turn_id)

    async def _end(self, turn_id: str) -> str:
        turn = await self.hub.store.get_turn(turn_id)
        status = turn.status if turn is not None else "error"
        if status == "skipped" and not self.begun:
            stage: DeliveryStage = (
                "merged" if turn is not None and turn.answered_by else "completed"
            )
            await messenger_store.move(self.db, self.row.id, stage, expect=("accepted",))
            return stage
        if status in FAILED_STATUSES or self.draft.ended == "error":
            detail = turn.error if turn is not None else "the turn is gone"
            log.error("delivery %s: turn %s failed: %s", self.row.id, turn_id, detail)
            await self._begin()
            await self._send_all(self.messenger.error_message)
            await messenger_store.move(self.db, self.row.id, "failed", expect=("streaming",))
            return "failed"
        await self._flush(final=True)
        if not self.begun:  # nothing to say (a cancelled turn, an empty answer)
            await messenger_store.move(self.db, self.row.id, "completed", expect=("accepted",))
            return "completed"
        await messenger_store.move(self.db, self.row.id, "completed", expect=("streaming",))
        return "completed"

    async def _begin(self) -> None:
        """Mark the delivery begun before its first message is sent: a crash after this point
        gets the interruption notice, never a second partial."""
        if not self.begun:
            await messenger_store.move(self.db, self.row.id, "streaming", expect=("accepted",))
            self.begun = True

    async def _asks(self) -> None:
        """Post the approvals the turn asked for since the last look, with their buttons."""
        while self.posted_asks < len(self.draft.asks):
            ask = self.draft.asks[self.posted_asks]
            self.posted_asks += 1
            if await messenger_store.button_posted(self.db, ask.approval_id) is not None:
                continue
            await self._flush(final=True)
            await self._begin()
            text = self.platform.format(approval_text(ask))
            buttons = [
                Button(label="Approve", data=f"a:{ask.approval_id}"),
                Button(label="Deny", data=f"d:{ask.approval_id}"),
            ]
            message_id = await self._retrying(
                partial(self.platform.send_buttons, self.thread, text, buttons)
            )
            assert self.row.turn_id is not None
            await messenger_store.record_button(
                self.db, ask.approval_id, self.row.id, self.row.turn_id, message_id
            )
            # What the turn says after the decision goes below the buttons, in a new message.
            self.base, self.ids, self.shown = len(self.draft.text), [], []
            self.flushed = ""

    async def _flush(self, *, final: bool) -> None:
        """Show the draft: send its first message, then edit it (and send more past the
        platform's limit) at the allowed rate; `final` shows it all now."""
        segment = self.draft.text[self.base :]
        if not segment.strip() or (not final and segment == self.flushed):
            return
        now = time.monotonic()
        if not final and (self.messenger.stream == "whole" or now < self.next_edit):
            return
        pieces = [self.platform.format(p) for p in self.platform.split(segment)]
        await self._begin()
        try:
            for i, text in enumerate(pieces):
                if i < len(self.ids):
                    if self.shown[i] != text:
                        await self._call(final, partial(self._edit, i, text))
                    continue
                message_id = await self._call(final, partial(self.platform.send, self.thread, text))
                self.ids.append(message_id)
                self.shown.append(text)
                await messenger_store.add_message(self.db, self.row.id, message_id)
        except RateLimited as exc:  # an intermediate edit: skip it, wait as told
            self.next_edit = time.monotonic() + exc.retry_after
            return
        self.next_edit = time.monotonic() + self.platform.edit_interval
        self.flushed = segment

    async def _edit(self, i: int, text: str) -> str:
        await self.platform.edit(self.thread, self.ids[i], text)
        self.shown[i] = text
        return self.ids[i]

    async def _call(self, final: bool, call: Callable[[], Awaitable[str]]) -> str:
        if final:
            return await self._retrying(call)
        return await call()

    async def _retrying(self, call: Callable[[], Awaitable[str]]) -> str:
        """A call that must land: wait as long as the platform says when rate-limited."""
        for _ in range(FINAL_TRIES - 1):
            try:
                return await call()
            except RateLimited as exc:
                activity.heartbeat()
                await asyncio.sleep(exc.retry_after)
        return await call()

    async def _send_all(self, markdown: str) -> None:
        for piece in self.platform.split(markdown):
            text = self.platform.format(piece)
            try:
                message_id = await self._retrying(partial(self.platform.send, self.thread, text))
            except PlatformError as exc:
                log.error("delivery %s: posting failed for good: %s", self.row.id, exc)
                return
            await messenger_store.add_message(self.db, self.row.id, message_id)
