"""`ThinkClient`: the blocking face of `AsyncThinkClient`, not a second implementation.

Each `ThinkClient` owns a private asyncio loop on a daemon thread and runs its
`AsyncThinkClient` there; every method is the async one, awaited on that loop while the caller
blocks. There is one place that sends a request, retries it, and opens, decodes and resumes a
stream (`Last-Event-ID`, the turn found again by its Idempotency-Key), so the two faces cannot
drift apart, and a fix lands in both at once.

Why this, and not two copies or a generated one: the shared part that matters is the stream's
resume loop, which lives inside `async with`/`async for` over httpx's streaming response; the
sans-IO layer (`_requests.py`, `_stream_state.py`) already holds every rule that can be lifted
out of it, and what is left is the I/O itself. Two hand-kept copies of that loop (the old
layout: 700 lines that differed in 46) drift; a generated copy (unasync) is still a second file
to review, to keep in step by a check, and to debug. A bridge is ~100 lines, once: a stream's
iterator asks the loop for the async iterator's next chunk, so it is pulled as slowly as the
caller reads, just as a blocking socket would be, and closing it closes the async one.

What the bridge guarantees, so that the sync face behaves as a blocking client would:
- An interrupted call (Ctrl-C while waiting, as `think chat` does to cancel a turn) cancels its
  work on the loop and waits until that work has stopped, before raising: the stream's
  connection is closed and the next call (closing the stream, cancelling the turn) finds it gone.
- `close()` (or leaving `with`) closes the connections and stops the thread; it may be called
  again. A client dropped without `close()` stops its thread when it is collected.
- Calls from several threads at once are safe: each is a task on the same loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Concatenate, ParamSpec, Self, TypeVar

from think.client import _requests as r
from think.client._async import AsyncThinkClient, AsyncTurnStream, _Client, _StreamPosition
from think.client._models import StreamChunk, Turn

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")


class _LoopThread:
    """A private event loop running on its own daemon thread, and a blocking `run` into it."""

    def __init__(self, cleanup: Callable[[], Awaitable[None]]) -> None:
        self._cleanup = cleanup
        self._loop = asyncio.new_event_loop()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="think-client", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Told to stop, or stopped: no new work is taken (it would never be run)."""
        return self._stopping or not self._thread.is_alive()

    def _serve(self) -> None:
        try:
            self._loop.run_forever()
        finally:
            try:
                self._loop.run_until_complete(self._cleanup())
            finally:
                # Streams dropped unfinished, and not yet collected, close theirs here.
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
                self._loop.close()

    def run(self, work: Awaitable[T]) -> T:
        """Await `work` on the loop and answer its result (or raise its error), blocking.

        Not `asyncio.run_coroutine_threadsafe`: its future is marked cancelled at once, while
        the task it cancels is still unwinding. Here an interrupted caller waits until the
        task has really ended, so that nothing it was doing can race the caller's next call.
        """
        if self.closed:
            if asyncio.iscoroutine(work):
                work.close()  # never started: no "never awaited" warning
            raise RuntimeError("Cannot send a request, as the client has been closed.")
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        started: list[asyncio.Future[T]] = []
        ran: list[bool] = []

        def start() -> None:
            ran.append(True)
            try:
                task = asyncio.ensure_future(work)
            except BaseException as error:
                done.set_exception(error)
                return
            started.append(task)
            task.add_done_callback(functools.partial(_settle, done))

        def cancel() -> None:
            """Queued after `start`, if that was queued at all: a Ctrl-C can land inside
            `call_soon_threadsafe(start)`, before or after the callback is in the queue."""
            if not ran:  # `start` never queued, so it never runs: settle `done` here
                if asyncio.iscoroutine(work):
                    work.close()
                done.cancel()
                done.set_running_or_notify_cancel()
            for task in started:
                task.cancel()

        try:
            self._loop.call_soon_threadsafe(start)
            return done.result()
        except BaseException:
            if not done.done():  # the caller was interrupted, not the work: stop it too
                self._loop.call_soon_threadsafe(cancel)
                concurrent.futures.wait([done])
            raise

    def stop(self) -> None:
        """Let the thread end: callable from any thread, any number of times."""
        self._stopping = True
        with contextlib.suppress(RuntimeError):  # already closed
            self._loop.call_soon_threadsafe(self._loop.stop)

    def join(self) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join()


def _settle(done: concurrent.futures.Future[T], task: asyncio.Future[T]) -> None:
    """Pass a finished task's outcome on to the future its caller waits on."""
    if task.cancelled():
        done.cancel()
        done.set_running_or_notify_cancel()  # wakes `concurrent.futures.wait`, as cancel() does not
    elif (error := task.exception()) is not None:
        done.set_exception(error)
    else:
        done.set_result(task.result())


async def _next(chunks: AsyncIterator[StreamChunk]) -> StreamChunk:
    """The next chunk, asked for on the loop, not by the caller's thread: an async generator's
    first `__anext__` registers it with that thread's loop (asyncgen hooks), which then closes
    its connection should it be dropped unfinished."""
    return await anext(chunks)


def _face(
    method: Callable[Concatenate[AsyncThinkClient, P], R],
    adapt: Callable[[ThinkClient, R], T],
    doc: str | None = None,
) -> Callable[Concatenate[ThinkClient, P], T]:
    """`ThinkClient`'s face of one `AsyncThinkClient` method: its signature and docstring (or
    `doc`), called on the client's async twin, its answer passed through `adapt`."""

    @functools.wraps(method)
    def call(self: ThinkClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return adapt(self, method(self._async, *args, **kwargs))

    call.__qualname__ = f"ThinkClient.{method.__name__}"
    call.__doc__ = doc or method.__doc__
    return call


def _awaited(client: ThinkClient, work: Awaitable[T]) -> T:
    return client._loop.run(work)


def _streamed(client: ThinkClient, stream: AsyncTurnStream) -> TurnStream:
    return TurnStream(client, stream)


def _blocking(
    method: Callable[Concatenate[AsyncThinkClient, P], Awaitable[T]],
) -> Callable[Concatenate[ThinkClient, P], T]:
    """A coroutine method, awaited on the client's loop while the caller blocks."""
    return _face(method, _awaited)


def _streaming(
    method: Callable[Concatenate[AsyncThinkClient, P], AsyncTurnStream], doc: str
) -> Callable[Concatenate[ThinkClient, P], TurnStream]:
    """A method that answers an `AsyncTurnStream`: the `TurnStream` over it."""
    return _face(method, _streamed, doc)


class _Closing:
    """`with it:` closes it on the way out, error or not."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ThinkClient(_Client, _Closing):
    """A client of one Think gateway. Use it as a context manager, or `close()` it.

    The same methods as `AsyncThinkClient`, blocking: each is the async one, run on a private
    event loop in a background thread (see this module's docstring for why and how). Reads,
    cancels and submissions that carry an Idempotency-Key are sent again after a dropped
    connection or a 502/503/504; every 4xx/5xx answer raises `ThinkAPIError`.
    """

    def _open(self, connection: r.Connection) -> None:
        """The async twin over `connection`, and the thread that runs it."""
        self._async = AsyncThinkClient._over(connection)
        # The thread's last act, closed or dropped: close the connections.
        self._loop = _LoopThread(cleanup=self._async.aclose)
        self._finalizer = weakref.finalize(self, self._loop.stop)  # dropped without close()
        self._streams: weakref.WeakSet[TurnStream] = weakref.WeakSet()

    @property
    def base_url(self) -> str:
        return self._async.base_url

    def close(self) -> None:
        """Close the client's streams and connections and stop its thread; a second call does
        nothing."""
        if self._loop.closed:
            return
        try:
            # Each stream outside in (its loop, then httpx's response): left to the loop's
            # shutdown, the generators would be closed all at once, in no order.
            for stream in list(self._streams):
                stream.close()
        finally:
            self._finalizer()  # stop: the thread closes the connections, then ends
            self._loop.join()

    # The API itself: each method the async one, with its signature and docstring.
    agents = _blocking(AsyncThinkClient.agents)
    create_conversation = _blocking(AsyncThinkClient.create_conversation)
    get_conversation = _blocking(AsyncThinkClient.get_conversation)
    messages = _blocking(AsyncThinkClient.messages)
    add_messages = _blocking(AsyncThinkClient.add_messages)
    search = _blocking(AsyncThinkClient.search)
    workspace_files = _blocking(AsyncThinkClient.workspace_files)
    read_workspace_file = _blocking(AsyncThinkClient.read_workspace_file)
    submit = _blocking(AsyncThinkClient.submit)
    wait = _blocking(AsyncThinkClient.wait)
    get_turn = _blocking(AsyncThinkClient.get_turn)
    list_turns = _blocking(AsyncThinkClient.list_turns)
    cancel = _blocking(AsyncThinkClient.cancel)
    steer_turn = _blocking(AsyncThinkClient.steer_turn)
    approve = _blocking(AsyncThinkClient.approve)
    submit_tool_result = _blocking(AsyncThinkClient.submit_tool_result)
    regenerate = _blocking(AsyncThinkClient.regenerate)
    stream = _streaming(
        AsyncThinkClient.stream,
        """Submit a turn and stream its chunks (`for chunk in client.stream(...)`).

        One request (`mode: "stream"`), always with an Idempotency-Key (a fresh one unless
        given), so a dropped connection is resumed without a second turn: see `TurnStream`.
        """,
    )
    stream_turn = _streaming(
        AsyncThinkClient.stream_turn,
        """Stream a turn's chunks: from its first, or from the one after `last_event_id`.""",
    )


class TurnStream(_StreamPosition, _Closing):
    """A turn's chunks, each once and in order, across dropped connections.

    Iterate it (`for chunk in stream`) to get `StreamChunk`s: the AI SDK UIMessageChunk
    dicts, each with its `event_id`. It is an `AsyncTurnStream` pulled through the client's
    loop one chunk at a time, so it reconnects, resumes and gives up exactly as that one does
    (see there). To stop early, leave a `with stream:` block or call `close()`: that closes
    the connection at once (an abandoned iterator holds it until it is collected).
    """

    def __init__(self, client: ThinkClient, stream: AsyncTurnStream) -> None:
        """The blocking face of `stream`, which `client`'s async twin made (as `client.stream()`
        and `stream_turn()` do)."""
        self._client = client  # keeps the client, and so its loop, alive while streaming
        self._stream = stream
        self._state = stream._state  # one position, read by both faces
        self._iterator: Generator[StreamChunk, None, None] | None = None
        client._streams.add(self)

    def get_turn(self) -> Turn:
        """The turn as it stands: see `AsyncTurnStream.get_turn`."""
        return self._client._loop.run(self._stream.get_turn())

    def __iter__(self) -> Iterator[StreamChunk]:
        if self._iterator is None:
            self._iterator = self._chunks()
        return self._iterator

    def close(self) -> None:
        if self._iterator is not None:
            self._iterator.close()
        if not self._client._loop.closed:  # else the client's close() closed it already
            self._client._loop.run(self._stream.aclose())

    def _chunks(self) -> Generator[StreamChunk, None, None]:
        chunks = aiter(self._stream)
        while True:
            try:
                chunk = self._client._loop.run(_next(chunks))
            except StopAsyncIteration:
                return
            yield chunk
