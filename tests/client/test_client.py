"""`think.client` against the real gateway: every call, its errors, and streams that resume
after the connection is cut under them (by a TCP proxy in this file), with no chunk lost or
repeated."""

from __future__ import annotations

import asyncio
import gc
import inspect
import re
import signal
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import Any

import httpx
import pytest

import think.client
from tests._sse import finished
from tests._stack import Stack, free_port
from think import UIMessage
from think.client import (
    AsyncThinkClient,
    AsyncTurnStream,
    ClientTool,
    ConflictError,
    InvalidRequestError,
    Message,
    NotFoundError,
    StreamChunk,
    ThinkAPIError,
    ThinkClient,
    ThinkConnectionError,
    ThinkStreamError,
    TurnStream,
    new_idempotency_key,
)
from think.client._sse import SSEDecoder, SSEEvent
from think.testing import FakeOpenAIServer, reply, text, tool_call

WORDS = [f"w{i} " for i in range(60)]


@pytest.fixture(scope="session")
async def client(stack: Stack) -> AsyncIterator[AsyncThinkClient]:
    async with AsyncThinkClient(stack.api_url) as client:
        yield client


@pytest.fixture
def sync_client(stack: Stack) -> Iterator[ThinkClient]:
    with ThinkClient(stack.api_url) as client:
        yield client


def text_of(chunks: list[StreamChunk]) -> str:
    return "".join(c["delta"] for c in chunks if c["type"] == "text-delta")


def gateway_routes(stack: Stack) -> set[str]:
    paths: dict[str, Any] = httpx.get(f"{stack.api_url}/openapi.json").json()["paths"]
    return set(paths)


# --------------------------------------------------------------------------- the proxy


class CuttingProxy:
    """A TCP proxy to the gateway that hard-closes one connection (the first, by default; every
    one if `cut_connection` is None) once `cut_after` bytes of the gateway's answer have gone
    through, as a dropped network would.

    It runs its own event loop in a thread, so sync and async clients alike can use it, and it
    keeps what each connection sent, to check the requests a client made.
    """

    def __init__(self, target: str, cut_after: int, cut_connection: int | None = 0) -> None:
        host, port = httpx.URL(target).host, httpx.URL(target).port
        assert port is not None
        self.target = (host, port)
        self.cut_after = cut_after
        self.cut_connection = cut_connection
        self.sent: list[bytearray] = []
        self.cuts = 0
        self.port = free_port()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="CuttingProxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> CuttingProxy:
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not start"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def header_values(self, name: str) -> list[str]:
        """The values of request header `name` on every connection, in order."""
        pattern = re.compile(rb"^" + name.encode() + rb":\s*(\S+)\r$", re.IGNORECASE | re.M)
        return [m.decode() for sent in self.sent for m in pattern.findall(bytes(sent))]

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(self.sent)
        self.sent.append(bytearray())
        cut = self.cut_after if self.cut_connection in (None, index) else None
        writer.transport.set_write_buffer_limits(high=0)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return

        async def upstream() -> None:
            while data := await reader.read(65536):
                self.sent[index] += data
                up_writer.write(data)
                await up_writer.drain()

        async def downstream() -> None:
            passed = 0
            while data := await up_reader.read(65536):
                if cut is not None and passed + len(data) >= cut:
                    writer.write(data[: cut - passed])
                    await writer.drain()  # all of it: the high-water mark is 0
                    self.cuts += 1
                    return
                passed += len(data)
                writer.write(data)
                await writer.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            writer.transport.abort()  # a reset, not a polite close
            up_writer.transport.abort()


# --------------------------------------------------------------------------- surface


def test_exports() -> None:
    assert sorted(think.client.__all__) == [
        "Agent",
        "AgentTool",
        "AsyncThinkClient",
        "AsyncTurnStream",
        "AuthenticationError",
        "ClientTool",
        "ConflictError",
        "Conversation",
        "InvalidRequestError",
        "Message",
        "NotFoundError",
        "PAUSED_STATUSES",
        "PendingApproval",
        "PendingClientTool",
        "QueuedBehind",
        "SearchHit",
        "StreamChunk",
        "TERMINAL_STATUSES",
        "ThinkAPIError",
        "ThinkClient",
        "ThinkConnectionError",
        "ThinkStreamError",
        "Turn",
        "TurnStream",
        "WorkspaceFile",
        "new_idempotency_key",
        "run_chat",
    ]
    for name in think.client.__all__:
        assert getattr(think.client, name) is not None


@pytest.mark.parametrize(
    ("sync", "async_"), [(ThinkClient, AsyncThinkClient), (TurnStream, AsyncTurnStream)]
)
def test_the_sync_twin_has_the_same_methods(sync: type, async_: type) -> None:
    renamed = {
        "aclose": "close",
        "__aiter__": "__iter__",
        "__aenter__": "__enter__",
        "__aexit__": "__exit__",
    }
    protocol = set(renamed) | set(renamed.values())

    def public(cls: type) -> dict[str, list[str]]:
        return {
            renamed.get(name, name): list(inspect.signature(member).parameters)
            for name, member in inspect.getmembers(cls)
            if callable(member) and (not name.startswith("_") or name in protocol)
        }

    assert public(sync) == public(async_)


# --------------------------------------------------------------------------- SSE parsing


def test_sse_decoder_handles_every_line_ending_split_anywhere() -> None:
    wire = (
        b'\xef\xbb\xbf: ping\r\n\r\nid: 0\r\ndata: {"type":"start"}\r\n\r\n'
        b'id: 1\rdata: {"a":\r\rid: 2\ndata: line one\ndata:line two\n\n'
        b"data: [DONE]\n\n"
    )
    expected = [
        SSEEvent("0", '{"type":"start"}'),
        SSEEvent("1", '{"a":'),
        SSEEvent("2", "line one\nline two"),
        SSEEvent(None, "[DONE]"),
    ]
    for size in (1, 2, 3, 7, len(wire)):
        decoder = SSEDecoder()
        got: list[SSEEvent] = []
        for start in range(0, len(wire), size):
            got += decoder.feed(wire[start : start + size])
        assert got == expected, size


def test_sse_decoder_never_returns_an_event_cut_short() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'id: 4\ndata: {"type":"text-delta","del') == []
    assert decoder.feed(b'ta":"x"}\n') == []
    assert decoder.feed(b"\n") == [SSEEvent("4", '{"type":"text-delta","delta":"x"}')]


# --------------------------------------------------------------------------- the calls


async def test_agents_and_conversations(client: AsyncThinkClient, cid: str) -> None:
    agents = {a.name: a for a in await client.agents()}
    assert "get_weather" in [t.name for t in agents["helper"].tools]
    assert [t.needs_approval for t in agents["assistant"].tools if t.name == "delete_file"] == [
        True
    ]
    created = await client.create_conversation("helper", id=cid, metadata={"topic": "x"})
    assert (created.id, created.agent, created.metadata) == (cid, "helper", {"topic": "x"})
    again = await client.create_conversation("helper", id=cid)
    assert again == created
    assert await client.get_conversation("helper", cid) == created
    fresh = await client.create_conversation("helper")
    assert fresh.id != cid

    with pytest.raises(NotFoundError) as unknown:
        await client.get_conversation("helper", f"{cid}-nope")
    assert unknown.value.status == 404
    assert f"{cid}-nope" in unknown.value.detail
    with pytest.raises(NotFoundError, match="no agent named 'nobody'"):
        await client.create_conversation("nobody")


async def test_submit_then_wait_and_read_back(
    client: AsyncThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("first answer"), text("second answer"))
    turn = await client.submit("helper", cid, "first")
    assert turn.accepted and turn.status in ("pending", "running", "completed")
    assert turn.conversation_id == cid and turn.agent == "helper"
    waited = await client.wait("helper", cid, "second", wait_timeout=60)
    assert waited.status == "completed" and waited.terminal
    assert waited.text == "second answer"
    assert (await client.get_turn("helper", cid, turn.turn_id)).text == "first answer"

    messages = await client.messages("helper", cid)
    assert all(isinstance(m, Message) and isinstance(m, UIMessage) for m in messages)
    assert [(m.role, m.text) for m in messages] == [
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "second"),
        ("assistant", "second answer"),
    ]
    assert messages[-1].id == waited.message_id
    older = await client.messages("helper", cid, leaf_id=turn.message_id)
    assert older == messages[:2]

    turns = await client.list_turns("helper", cid)
    assert [t.turn_id for t in turns] == [waited.turn_id, turn.turn_id]  # newest first
    assert await client.list_turns("helper", cid, status="error") == []
    both = await client.list_turns("helper", cid, status=["completed", "error"])
    assert len(both) == 2


async def test_stream_reconstructs_the_scripted_answer(
    client: AsyncThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello", " from", " the model"))
    async with client.stream("helper", cid, "hi") as stream:
        chunks = [chunk async for chunk in stream]
    assert text_of(chunks) == "Hello from the model"
    assert chunks[0]["type"] == "start" and finished(chunks[-1]) == {
        "type": "finish",
        "finishReason": "stop",
    }
    assert [c.event_id for c in chunks] == list(range(len(chunks)))
    assert stream.reconnects == 0 and stream.last_event_id == len(chunks) - 1
    (turn,) = await client.list_turns("helper", cid)
    assert turn.message_id == chunks[0]["messageId"]
    assert turn.idempotency_key == stream.idempotency_key  # always sent, to resume safely
    replay = [c async for c in client.stream_turn("helper", cid, turn.turn_id, last_event_id=2)]
    assert replay == chunks[3:]


async def test_idempotent_resubmission_and_conflict(client: AsyncThinkClient, cid: str) -> None:
    key = new_idempotency_key()
    first = await client.submit("helper", cid, "once", idempotency_key=key)
    again = await client.submit("helper", cid, "once", idempotency_key=key)
    assert first.accepted is True and again.accepted is False
    assert again.turn_id == first.turn_id and again.idempotency_key == key
    with pytest.raises(ConflictError) as conflict:
        await client.submit("helper", cid, "something else", idempotency_key=key)
    assert conflict.value.status == 409
    assert conflict.value.turn_id == first.turn_id
    assert len(await client.list_turns("helper", cid)) == 1


async def test_errors_name_what_is_wrong(client: AsyncThinkClient, cid: str) -> None:
    with pytest.raises(InvalidRequestError) as invalid:
        await client.submit("helper", cid, "   ")
    error = invalid.value
    assert error.status == 422 and "input" in error.fields
    assert error.body["status"] == 422 and error.title == "Unprocessable Content"
    assert (
        "422" in str(error)
        and "input" in str(error)
        and f"/conversations/{cid}/turns" in str(error)
    )

    with pytest.raises(NotFoundError) as missing:
        await client.get_turn("helper", cid, "turn_nope")
    assert isinstance(missing.value, ThinkAPIError) and missing.value.status == 404
    await client.create_conversation("helper", id=cid)
    with pytest.raises(NotFoundError) as no_turn:
        await client.get_turn("helper", cid, "turn_nope")
    assert "turn_nope" in str(no_turn.value)
    with pytest.raises(NotFoundError, match="turn_nope"):
        async with client.stream_turn("helper", cid, "turn_nope") as stream:
            [c async for c in stream]

    # The approval and tool-result endpoints: an unknown turn is a 404 problem document.
    with pytest.raises(NotFoundError) as approval:
        await client.approve("helper", cid, "turn_nope", "appr_nope", True, reason="ok")
    assert approval.value.body["status"] == 404
    with pytest.raises(NotFoundError) as result:
        await client.submit_tool_result("helper", cid, "turn_nope", "call_nope", output={"x": 1})
    assert result.value.body["status"] == 404
    with pytest.raises(TypeError):
        await client.submit_tool_result("helper", cid, "turn_nope", "call_nope")
    with pytest.raises(TypeError):
        await client.submit_tool_result("helper", cid, "t", "c", output=1, error="no")


async def test_cancel_a_running_turn(
    client: AsyncThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.05))
    turn = await client.submit("helper", cid, "long")
    seen: list[StreamChunk] = []
    async with client.stream_turn("helper", cid, turn.turn_id) as stream:
        async for chunk in stream:
            seen.append(chunk)
            if chunk["type"] == "text-delta" and len(text_of(seen)) > 6:
                cancelled = await client.cancel("helper", cid, turn.turn_id, reason="stop it")
                assert cancelled.turn_id == turn.turn_id
    assert seen[-1] == {"type": "abort", "reason": "stop it"}
    final = await client.get_turn("helper", cid, turn.turn_id)
    assert final.status == "aborted" and final.error == "stop it"
    assert 0 < len(final.text) < len("".join(WORDS))
    again = await client.cancel("helper", cid, turn.turn_id)
    assert again.status == "aborted"


async def test_approve_while_streaming(
    client: AsyncThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid, tool_call("delete_file", {"path": "/tmp/x"}, id="call_rm"), text("Deleted.")
    )
    got: list[StreamChunk] = []
    async with client.stream("assistant", cid, "delete /tmp/x") as stream:
        async for chunk in stream:
            got.append(chunk)
            if chunk.type == "tool-approval-request":
                assert chunk["toolCallId"] == "call_rm"
                turn = await stream.get_turn()  # found by the stream's Idempotency-Key
                decided = await client.approve(
                    "assistant", cid, turn.turn_id, chunk["approvalId"], True, reason="fine"
                )
                assert decided.turn_id == turn.turn_id == stream.turn_id
    assert stream.reconnects == 0  # the stream followed the turn through its pause
    assert [c["output"] for c in got if c.type == "tool-output-available"] == ["deleted /tmp/x"]
    assert text_of(got) == "Deleted." and got[-1].type == "finish"
    approval = next(c for c in got if c.type == "tool-approval-request")
    with pytest.raises(ConflictError, match="already decided"):
        await client.approve("assistant", cid, stream.turn_id or "", approval["approvalId"], False)
    with pytest.raises(NotFoundError):
        await client.approve("assistant", cid, stream.turn_id or "", "appr_nope", True)


async def test_a_wait_behind_a_paused_turn_names_it(
    client: AsyncThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The client reads HTTP's `queued_behind` typed: the wait answered at once, pending."""
    fake_model.script(cid, tool_call("delete_file", {"path": "a"}, id="call_a"), text("Gone."))
    first = await client.wait("assistant", cid, "delete a", wait_timeout=30)
    assert first.paused and first.queued_behind is None
    second = await client.wait("assistant", cid, "and then?", wait_timeout=60)
    assert second.status == "pending", second
    assert second.queued_behind is not None
    assert second.queued_behind.turn_id == first.turn_id
    assert second.queued_behind.status == "awaiting_approval"
    assert second.queued_behind.status_url == first.status_url
    await client.cancel("assistant", cid, second.turn_id)
    await client.cancel("assistant", cid, first.turn_id)


async def test_client_tool_results(
    client: AsyncThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("get_location", {"precise": True}, id="call_loc"),
        text("You are in Lyon."),
    )
    location = ClientTool(
        name="get_location",
        description="Where the user is.",
        input_schema={"type": "object", "properties": {"precise": {"type": "boolean"}}},
    )
    turn = await client.wait("helper", cid, "where am I?", client_tools=[location])
    assert turn.status == "awaiting_client_tool" and turn.paused
    (pending,) = turn.pending_client_tools
    assert (pending.tool_call_id, pending.tool_name, pending.input) == (
        "call_loc",
        "get_location",
        {"precise": True},
    )
    answered = await client.submit_tool_result(
        "helper", cid, turn.turn_id, "call_loc", output={"city": "Lyon"}
    )
    assert answered.turn_id == turn.turn_id
    async with client.stream_turn("helper", cid, turn.turn_id) as stream:
        assert text_of([c async for c in stream]) == "You are in Lyon."
    final = await client.get_turn("helper", cid, turn.turn_id)
    assert final.status == "completed"
    with pytest.raises(ConflictError):
        await client.submit_tool_result("helper", cid, turn.turn_id, "call_loc", error="late")


async def test_search(client: AsyncThinkClient, fake_model: FakeOpenAIServer, cid: str) -> None:
    fake_model.script(cid, text("A quokka is a small marsupial."))
    answer = await client.wait("helper", cid, "what is a quokka?")
    hits = await client.search("helper", cid, "marsupial", limit=5)
    assert [(h.message_id, h.role) for h in hits] == [(answer.message_id, "assistant")]
    assert "marsupial" in hits[0].snippet and 0 <= hits[0].rank < 1
    with pytest.raises(InvalidRequestError) as blank:
        await client.search("helper", cid, "  ")
    assert blank.value.fields == ["q"]


async def test_add_messages_and_regenerate(
    client: AsyncThinkClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """As API.md defines them."""
    routes = gateway_routes(stack)
    base = "/v1/agents/{agent}/conversations/{cid}"
    assert {f"{base}/messages", f"{base}/regenerate"} <= routes
    await client.add_messages(
        "helper",
        cid,
        [
            UIMessage.user_text("what is a quokka?", id="m1"),
            {"id": "m2", "role": "assistant", "parts": [{"type": "text", "text": "A marsupial."}]},
        ],
    )
    assert [m.id for m in await client.messages("helper", cid)] == ["m1", "m2"]
    fake_model.script(cid, text("A small wallaby."))
    turn = await client.regenerate("helper", cid, "m2")
    assert turn.accepted
    async with client.stream_turn("helper", cid, turn.turn_id) as stream:
        assert text_of([c async for c in stream]) == "A small wallaby."
    assert [m.text for m in await client.messages("helper", cid)] == [
        "what is a quokka?",
        "A small wallaby.",
    ]


async def test_unreachable_gateway_is_a_connection_error() -> None:
    async with AsyncThinkClient(f"http://127.0.0.1:{free_port()}", max_retries=1) as client:
        with pytest.raises(ThinkConnectionError, match=r"GET http://127\.0\.0\.1:\d+/v1/agents"):
            await client.agents()


# --------------------------------------------------------------------------- cut connections


async def read_cut(
    stream_chunks: AsyncIterable[StreamChunk], reconnects: Callable[[], int]
) -> tuple[list[StreamChunk], int | None]:
    """All chunks, and the id of the last one received before the first reconnect."""
    got: list[StreamChunk] = []
    before_cut: int | None = None
    async for chunk in stream_chunks:
        if reconnects() and before_cut is None:
            before_cut = got[-1].event_id if got else -1
        got.append(chunk)
    return got, before_cut


async def test_stream_turn_resumes_after_the_connection_is_cut(
    client: AsyncThinkClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.02))
    turn = await client.submit("helper", cid, "go")
    with CuttingProxy(stack.api_url, cut_after=900) as proxy:
        async with AsyncThinkClient(proxy.url) as proxied:
            stream = proxied.stream_turn("helper", cid, turn.turn_id)
            async with stream:
                got, before_cut = await read_cut(stream, lambda: stream.reconnects)
    assert proxy.cuts == 1 and stream.reconnects == 1
    full = [c async for c in client.stream_turn("helper", cid, turn.turn_id)]
    assert got == full  # nothing lost, nothing twice
    assert [c.event_id for c in got] == list(range(len(full)))
    assert text_of(got) == "".join(WORDS)
    assert before_cut is not None and before_cut >= 0, "the cut came before any chunk"
    assert proxy.header_values("last-event-id") == [str(before_cut)]


async def test_stream_mode_resumes_from_the_turn_id_header(
    client: AsyncThinkClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.02))
    with CuttingProxy(stack.api_url, cut_after=900) as proxy:
        async with AsyncThinkClient(proxy.url) as proxied:
            stream = proxied.stream("helper", cid, "go")
            async with stream:
                got, before_cut = await read_cut(stream, lambda: stream.reconnects)
    assert proxy.cuts == 1 and stream.reconnects == 1
    (turn,) = await client.list_turns("helper", cid)  # one turn, however many requests
    assert stream.turn_id == turn.turn_id
    # The gateway named the turn (x-think-turn-id): the resume needs no second submission.
    assert proxy.header_values("idempotency-key") == [stream.idempotency_key]
    full = [c async for c in client.stream_turn("helper", cid, turn.turn_id)]
    assert got == full
    assert [c.event_id for c in got] == list(range(len(full)))
    assert before_cut is not None and before_cut >= 0
    assert proxy.header_values("last-event-id") == [str(before_cut)]


async def test_submit_with_a_key_survives_a_lost_answer(
    client: AsyncThinkClient, stack: Stack, cid: str
) -> None:
    # The gateway admits the turn, then its answer is lost: retried with the same key, the
    # same turn comes back, not a second one.
    with CuttingProxy(stack.api_url, cut_after=0) as proxy:
        async with AsyncThinkClient(proxy.url) as proxied:
            turn = await proxied.submit("helper", cid, "hi", idempotency_key=new_idempotency_key())
    assert proxy.cuts == 1
    assert turn.accepted is False  # the first attempt created it
    assert [t.turn_id for t in await client.list_turns("helper", cid)] == [turn.turn_id]

    # Without a key, a retry could run the turn twice: the client does not retry.
    with CuttingProxy(stack.api_url, cut_after=0) as proxy:
        async with AsyncThinkClient(proxy.url) as proxied:
            with pytest.raises(ThinkConnectionError, match=r"POST .*/turns"):
                await proxied.submit("helper", cid, "again")
    assert len(await client.list_turns("helper", cid)) == 2


async def test_a_stream_that_keeps_breaking_gives_up(
    client: AsyncThinkClient, stack: Stack, cid: str
) -> None:
    turn = await client.wait("helper", cid, "hi")
    with CuttingProxy(stack.api_url, cut_after=100, cut_connection=None) as proxy:
        async with AsyncThinkClient(proxy.url, max_retries=2) as proxied:
            stream = proxied.stream_turn("helper", cid, turn.turn_id)
            with pytest.raises(ThinkStreamError, match="could not resume it in 2 attempts"):
                async with stream:
                    [c async for c in stream]
    assert proxy.cuts == 3 and stream.reconnects == 2


# --------------------------------------------------------------------------- the sync client


def test_sync_submit_wait_and_stream(
    sync_client: ThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("one"), text("Hello", " from", " the model"))
    submitted = sync_client.submit("helper", cid, "first")
    assert submitted.accepted
    waited = sync_client.wait("helper", cid, "second", idempotency_key=new_idempotency_key())
    assert waited.status == "completed" and waited.text == "Hello from the model"
    assert sync_client.get_turn("helper", cid, submitted.turn_id).text == "one"
    with sync_client.stream("helper", cid, "third") as stream:
        chunks = list(stream)
    assert text_of(chunks) == "echo: third"
    assert [c.event_id for c in chunks] == list(range(len(chunks)))
    assert [m.text for m in sync_client.messages("helper", cid)][-2:] == ["third", "echo: third"]
    assert len(sync_client.list_turns("helper", cid)) == 3
    with pytest.raises(InvalidRequestError) as invalid:
        sync_client.wait("helper", cid, [])
    assert invalid.value.fields == ["input"]


def test_sync_stream_resumes_after_the_connection_is_cut(
    sync_client: ThinkClient, stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.02))
    got: list[StreamChunk] = []
    before_cut: int | None = None
    with (
        CuttingProxy(stack.api_url, cut_after=900) as proxy,
        ThinkClient(proxy.url) as proxied,
        proxied.stream("helper", cid, "go") as stream,
    ):
        for chunk in stream:
            if stream.reconnects and before_cut is None:
                before_cut = got[-1].event_id if got else -1
            got.append(chunk)
    assert proxy.cuts == 1 and stream.reconnects == 1 and stream.turn_id is not None
    full = list(sync_client.stream_turn("helper", cid, stream.turn_id))
    assert got == full
    assert [c.event_id for c in got] == list(range(len(full)))
    assert proxy.header_values("last-event-id") == [str(before_cut)]
    assert len(sync_client.list_turns("helper", cid)) == 1


def new_client_thread(make: Callable[[], ThinkClient]) -> tuple[ThinkClient, threading.Thread]:
    """A new client, and the one thread it started."""
    before = set(threading.enumerate())
    client = make()
    (thread,) = set(threading.enumerate()) - before
    return client, thread


@pytest.mark.usefixtures("sigint_default")
def test_ctrl_c_in_a_sync_stream_stops_it_and_the_client_goes_on(
    sync_client: ThinkClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """As `think chat` does: Ctrl-C while the stream waits for a chunk, then cancel the turn.
    The interrupted read is stopped on the client's loop before the KeyboardInterrupt arrives,
    so closing the stream and the next calls find nothing half-done."""
    fake_model.script(cid, reply(text(*WORDS), delay=0.05))
    turn = sync_client.submit("helper", cid, "long")
    seen: list[StreamChunk] = []
    main = threading.main_thread().ident
    assert main is not None
    with (
        pytest.raises(KeyboardInterrupt),
        sync_client.stream_turn("helper", cid, turn.turn_id) as s,
    ):
        for chunk in s:
            seen.append(chunk)
            if len(seen) == 3:  # then, while the next read blocks:
                threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT)).start()
    assert 3 <= len(seen) < len(WORDS)
    assert list(s) == []  # the interrupted iterator has ended, as a blocking one would
    cancelled = sync_client.cancel("helper", cid, turn.turn_id, reason="Ctrl-C")
    assert cancelled.turn_id == turn.turn_id
    rest = list(sync_client.stream_turn("helper", cid, turn.turn_id, s.last_event_id))
    assert rest[-1] == {"type": "abort", "reason": "Ctrl-C"}
    assert sync_client.get_turn("helper", cid, turn.turn_id).status == "aborted"


def test_a_sync_client_closes_once_and_stops_its_thread(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.02))
    client, thread = new_client_thread(lambda: ThinkClient(stack.api_url))
    stream = client.stream("helper", cid, "go")
    assert next(iter(stream))["type"] == "start"
    client.close()  # with the stream still open: it closes with the client
    assert not thread.is_alive()
    client.close()
    stream.close()
    assert list(stream) == []
    with pytest.raises(RuntimeError, match="closed"):
        client.agents()
    dropped, thread = new_client_thread(lambda: ThinkClient(stack.api_url))
    assert [a.name for a in dropped.agents()]
    del dropped
    gc.collect()
    thread.join(5)  # a dropped client's thread ends once the client is collected
    assert not thread.is_alive()
