"""A turn's chunks for Python code: `TurnStream` (what `run_turn(mode="stream")` answers,
replayed by the same loop as HTTP's SSE, `follow`) and the callback `chat()` drives."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from think._protocol import UIMessageChunk
from think.agent import TurnResult
from think.storage import Admission, public_turn_id
from think.tools import maybe_await
from think.turns._follow import follow

if TYPE_CHECKING:
    from think.turns._conversation import ConversationHandle


class TurnStream:
    """A submitted turn's UI message chunks: `async for chunk in stream`, from its first
    chunk to its last (`finish`, `error` or `abort`); `await stream.result()` afterwards."""

    def __init__(self, conversation: ConversationHandle, admission: Admission) -> None:
        self._conversation = conversation
        self._turn = admission.turn
        self.turn_id = public_turn_id(admission.turn.id)
        """The turn's id as clients name it (a submission id as it was given)."""
        self.stored_id = admission.turn.id
        """The id stored for it (`TurnRecord.id`), which the service's own calls take."""
        self.accepted = admission.accepted

    def __aiter__(self) -> AsyncIterator[UIMessageChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[UIMessageChunk]:
        service = self._conversation.service
        listener = await service.listener()
        async with contextlib.aclosing(follow(service.store, listener, self.stored_id)) as chunks:
            async for _, chunk in chunks:
                yield chunk

    async def result(self, wait_timeout: float | None = None) -> TurnResult:
        return await self._conversation.result_of(self._turn, wait_timeout=wait_timeout)


async def call_back(callback: Any, name: str, *args: Any) -> None:
    """Call `callback.<name>(*args)` if it has that method, awaiting it if it is async: a
    `chat()` callback may implement any of `StreamCallback`'s methods, either way."""
    method = getattr(callback, name, None)
    if method is None:
        return
    await maybe_await(method(*args))
