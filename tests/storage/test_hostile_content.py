"""Hostile content through every door: a NUL or a lone surrogate is stored replaced, never
retried (docs/durability.md, "a message or tool output the database cannot store").

Postgres refuses a NUL in `text` and `\\u0000` in `jsonb`, and nothing can encode a lone
surrogate as UTF-8. Before, a model or a page that produced one wedged its conversation: the
write failed, the step was retried like an outage (calling the model or fetching the page
again each time), the turn stayed `running` and every later turn `pending`. Each test here
sends such content through one door, end to end (the fake model over real HTTP, the worker,
Postgres, the gateway's stream) and checks that the turn ends within seconds, that the
stored message is what the stream rebuilds, that the model was called a bounded number of
times, that the model is later shown what was stored, and that the conversation's next turn
runs. The replacement is U+FFFD, one for each NUL and each lone surrogate; a valid pair (an
emoji) is kept.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine

from tests._fetch_fixtures import local_server
from tests._sse import chunks, read_stream
from tests.agents import Fetcher, Helper, Workspaced
from think import ThinkService
from think.streaming._builder import MessageBuilder
from think.testing import (
    FakeOpenAIServer,
    content_parts,
    raw_delta,
    reasoning,
    text,
    tool_call,
)

WAIT = 15
"""Seconds a turn may take: each of these ends in well under one. A wedged turn is still
`running` after them, so the test fails instead of hanging."""

EMOJI = "\U0001f600"
CLEAN = f"a\ufffdb {EMOJI}"
"""What every hostile string below is stored (and shown to the model) as."""

HOSTILE = [
    pytest.param(f"a\x00b {EMOJI}", id="nul"),
    pytest.param(f"a\ud800b {EMOJI}", id="high-surrogate"),
    # A pair held as two code points: it goes out as the escapes `\ud83d\ude00`, which the
    # model's client joins into the emoji, beside a lone low surrogate.
    pytest.param("a\udfffb \ud83d\ude00", id="low-surrogate"),
]
CODES = [
    pytest.param([0x61, 0x00, 0x62, 0x20, 0x1F600], id="nul"),
    pytest.param([0x61, 0xD800, 0x62, 0x20, 0x1F600], id="high-surrogate"),
    pytest.param([0x61, 0xDFFF, 0x62, 0x20, 0xD83D, 0xDE00], id="low-surrogate-and-a-pair"),
]


def path(agent: str, cid: str) -> str:
    return f"/v1/agents/{agent}/conversations/{cid}"


async def completed(
    api: httpx.AsyncClient, agent: str, cid: str, input: Any = "go", **fields: Any
) -> dict[str, Any]:
    """A wait-mode turn that must have completed within `WAIT` seconds."""
    body = {"input": input, "mode": "wait", "wait_timeout": WAIT, **fields}
    response = await api.post(f"{path(agent, cid)}/turns", json=body)
    assert response.status_code == 200, response.text
    turn: dict[str, Any] = response.json()
    assert turn["status"] == "completed", turn
    return turn


async def stored_as_streamed(
    api: httpx.AsyncClient, agent: str, cid: str, turn: dict[str, Any]
) -> dict[str, Any]:
    """The turn's stored answer, checked equal to what its stream rebuilds."""
    _, events = await read_stream(api, turn["stream_url"])
    builder = MessageBuilder()
    for chunk in chunks(events):
        builder.apply(chunk)
    stored: dict[str, Any] = (await api.get(f"{path(agent, cid)}/messages")).json()["messages"][-1]
    assert stored["id"] == turn["message_id"]
    assert builder.message == stored
    return stored


async def next_turn_runs(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, agent: str, cid: str
) -> list[dict[str, Any]]:
    """The conversation's next turn completes; answers what the model was sent for it."""
    fake_model.script(cid, text("Still here."))
    turn = await completed(api, agent, cid, "again")
    assert [p["text"] for p in turn["message"]["parts"] if p["type"] == "text"] == ["Still here."]
    sent: list[dict[str, Any]] = fake_model.requests(cid)[-1]["body"]["messages"]
    return sent


def parts(message: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == kind]


def tool_messages(sent: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in sent if m["role"] == "tool"]


def call_arguments(sent: list[dict[str, Any]]) -> list[Any]:
    return [
        json.loads(c["function"]["arguments"])
        for m in sent
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or ()
    ]


# -- the model's words ---------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_model_text(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, hostile: str
) -> None:
    fake_model.script(cid, text("Hi ", hostile))
    turn = await completed(api, "helper", cid)
    stored = await stored_as_streamed(api, "helper", cid, turn)
    assert [p["text"] for p in parts(stored, "text")] == [f"Hi {CLEAN}"]
    assert fake_model.calls(cid) == 1
    sent = await next_turn_runs(api, fake_model, "helper", cid)
    assert [m["content"] for m in sent if m["role"] == "assistant"] == [f"Hi {CLEAN}"]


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_model_reasoning(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, hostile: str
) -> None:
    fake_model.script(cid, reasoning("Hmm ", hostile) + text("Done."))
    turn = await completed(api, "helper", cid)
    stored = await stored_as_streamed(api, "helper", cid, turn)
    assert [p["text"] for p in parts(stored, "reasoning")] == [f"Hmm {CLEAN}"]
    assert fake_model.calls(cid) == 1
    await next_turn_runs(api, fake_model, "helper", cid)


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_tool_call_arguments(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, hostile: str
) -> None:
    """The arguments are JSON text in which the hostile character is an escape
    (`\\u0000`, `\\ud800`): the decoded value is what is made storable, and the tool, the
    stored input and the model's next request all have the same replaced text."""
    fake_model.script(cid, tool_call("get_weather", {"city": hostile}, id="c1"), text("Sunny."))
    turn = await completed(api, "helper", cid)
    stored = await stored_as_streamed(api, "helper", cid, turn)
    (part,) = parts(stored, "tool-get_weather")
    assert part["state"] == "output-available"
    assert part["input"] == {"city": CLEAN}
    assert part["output"] == {"city": CLEAN, "temp_c": 21}
    assert fake_model.calls(cid) == 2
    sent = fake_model.requests(cid)[1]["body"]["messages"]
    assert call_arguments(sent) == [{"city": CLEAN}]
    assert json.loads(tool_messages(sent)[0]) == {"city": CLEAN, "temp_c": 21}
    await next_turn_runs(api, fake_model, "helper", cid)


async def test_a_raw_nul_in_tool_arguments(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """A NUL character itself (not an escape) in the arguments' JSON text, which JSON does not
    allow in a string: the fragment is replaced as it streams, so the text the call stores
    and parses is valid JSON holding U+FFFD."""
    call = {"index": 0, "id": "c1", "type": "function"}
    fake_model.script(
        cid,
        raw_delta({"tool_calls": [{**call, "function": {"name": "get_weather", "arguments": ""}}]})
        + raw_delta({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "\x00"}'}}]}),
        text("Sunny."),
    )
    turn = await completed(api, "helper", cid)
    stored = await stored_as_streamed(api, "helper", cid, turn)
    (part,) = parts(stored, "tool-get_weather")
    assert part["state"] == "output-available", part
    assert part["input"] == {"city": "\ufffd"}
    assert fake_model.calls(cid) == 2
    await next_turn_runs(api, fake_model, "helper", cid)


async def test_list_typed_content_is_read_as_parts(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Mistral's reasoning models stream `content` as a list of parts: thinking parts are
    reasoning, text parts text, and a part of a type the turn does not know is skipped."""
    thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Let me see."}]}
    fake_model.script(
        cid,
        content_parts(thinking)
        + content_parts({"type": "text", "text": "Hello"}, {"type": "reference", "ids": [1]})
        + content_parts({"type": "text", "text": f" there \x00{EMOJI}"}),
    )
    turn = await completed(api, "helper", cid)
    stored = await stored_as_streamed(api, "helper", cid, turn)
    assert [p["text"] for p in parts(stored, "reasoning")] == ["Let me see."]
    assert [p["text"] for p in parts(stored, "text")] == [f"Hello there \ufffd{EMOJI}"]
    assert fake_model.calls(cid) == 1
    await next_turn_runs(api, fake_model, "helper", cid)


# -- what tools answer ---------------------------------------------------------------------------


@pytest.mark.parametrize("codes", CODES)
async def test_tool_output(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str, codes: list[int]
) -> None:
    fake_model.script(
        cid,
        tool_call("characters", {"codes": codes}, id="c1")
        + tool_call("characters_object", {"codes": codes}, id="c2"),
        text("Odd."),
    )
    turn = await completed(api, "hostile", cid)
    stored = await stored_as_streamed(api, "hostile", cid, turn)
    assert parts(stored, "tool-characters")[0]["output"] == CLEAN
    assert parts(stored, "tool-characters_object")[0]["output"] == {
        CLEAN: [CLEAN],
        "fine": EMOJI,
    }
    assert fake_model.calls(cid) == 2
    sent = fake_model.requests(cid)[1]["body"]["messages"]
    assert tool_messages(sent)[0] == CLEAN
    assert json.loads(tool_messages(sent)[1]) == {CLEAN: [CLEAN], "fine": EMOJI}
    await next_turn_runs(api, fake_model, "hostile", cid)


async def test_a_fetched_page_with_a_nul_byte(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, service: ThinkService, cid: str
) -> None:
    """A page with a NUL byte, and JSON whose escapes decode to a NUL and a lone surrogate:
    fetched once each (not again and again), shown and stored replaced."""
    with local_server() as docs:
        await service.conversation(Fetcher, cid).configure({"port": docs.port})
        fake_model.script(
            cid,
            tool_call("fetch_docs", {"path": "/v1/docs/nul"}, id="c1")
            + tool_call("fetch_docs", {"path": "/v1/docs/nul.json"}, id="c2"),
            text("Read them."),
        )
        turn = await completed(api, "fetcher", cid)
        assert sorted(docs.paths) == ["/v1/docs/nul", "/v1/docs/nul.json"]
    stored = await stored_as_streamed(api, "fetcher", cid, turn)
    page, data = (p["output"] for p in parts(stored, "tool-fetch_docs"))
    assert page["body"] == CLEAN
    assert data["json"] == {"a\ufffd": f"x\ufffdy \ufffd {EMOJI}"}
    assert fake_model.calls(cid) == 2
    sent = fake_model.requests(cid)[1]["body"]["messages"]
    assert json.loads(tool_messages(sent)[0])["body"] == CLEAN
    await next_turn_runs(api, fake_model, "fetcher", cid)


async def test_workspace_write_and_read(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, service: ThinkService, cid: str
) -> None:
    """A file name and content the model writes, and a file whose bytes hold a NUL (put there
    from Python: a workspace keeps bytes as they are), read back into the conversation."""
    fake_model.script(
        cid,
        tool_call("write", {"path": "notes/a\x00.txt", "content": f"a\x00b {EMOJI}"}, id="c1"),
        tool_call("read", {"path": "notes/a\x00.txt"}, id="c2"),
        text("Written."),
    )
    turn = await completed(api, "workspaced", cid)
    stored = await stored_as_streamed(api, "workspaced", cid, turn)
    (write,) = parts(stored, "tool-write")
    assert write["state"] == "output-available", write
    assert write["input"] == {"path": "notes/a\ufffd.txt", "content": CLEAN}
    (read,) = parts(stored, "tool-read")
    assert read["output"] == f"1\t{CLEAN}"
    workspace = await service.conversation(Workspaced, cid).workspace()
    found = await workspace.read("notes/a\ufffd.txt")
    assert found is not None and found.data == CLEAN.encode()
    await workspace.write("raw.txt", b"line\x00one\n")
    fake_model.script(cid, tool_call("read", {"path": "raw.txt"}, id="c3"), text("Read."))
    turn = await completed(api, "workspaced", cid, "read it")
    stored = await stored_as_streamed(api, "workspaced", cid, turn)
    assert parts(stored, "tool-read")[0]["output"] == "1\tline\ufffdone"
    assert fake_model.calls(cid) == 5
    await next_turn_runs(api, fake_model, "workspaced", cid)


async def test_an_mcp_result_with_a_nul(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The notes server (tests/mcp_notes_server.py, over stdio) answers a NUL. (An MCP server
    built on the SDK cannot send a lone surrogate at all: its JSON encoder refuses one.)"""
    codes = [0x61, 0x00, 0x62, 0x20, 0x1F600]
    fake_model.script(cid, tool_call("notes_chars", {"codes": codes}, id="c1"), text("Odd."))
    turn = await completed(api, "mcp_user", cid)
    stored = await stored_as_streamed(api, "mcp_user", cid, turn)
    (part,) = parts(stored, "tool-notes_chars")
    assert part["state"] == "output-available", part
    assert CLEAN in json.dumps(part["output"], ensure_ascii=False)
    assert "\x00" not in json.dumps(part["output"], ensure_ascii=False)
    assert fake_model.calls(cid) == 2
    await next_turn_runs(api, fake_model, "mcp_user", cid)


# -- what users send -----------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", HOSTILE)
async def test_python_input_is_stored_replaced(
    api: httpx.AsyncClient,
    fake_model: FakeOpenAIServer,
    service: ThinkService,
    cid: str,
    hostile: str,
) -> None:
    """From Python (agent code, a schedule, a sub-agent's task: text that often comes from a
    model or a page) a turn's input is replaced, not refused; HTTP refuses it (below)."""
    fake_model.script(cid, text("Seen."))
    result = await service.conversation(Helper, cid).run_turn(hostile, body={"note": hostile})
    assert result.status == "completed"
    messages = (await api.get(f"{path('helper', cid)}/messages")).json()["messages"]
    assert [p["text"] for p in messages[0]["parts"]] == [CLEAN]
    sent = fake_model.requests(cid)[0]["body"]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [CLEAN]
    await next_turn_runs(api, fake_model, "helper", cid)


REFUSED = [
    pytest.param("turns", b'{"input": "a\\u0000b"}', "input", id="input-nul"),
    pytest.param("turns", b'{"input": "a\\ud800b"}', "input", id="input-high-surrogate"),
    pytest.param("turns", b'{"input": "a\\udfffb"}', "input", id="input-low-surrogate"),
    pytest.param(
        "turns",
        b'{"input": {"role": "user", "parts": [{"type": "text", "text": "\\udfff"}]}}',
        "input",
        id="message-low-surrogate",
    ),
    pytest.param("turns", b'{"input": "hi", "body": {"\\ud800": 1}}', "body", id="body-key"),
    pytest.param(
        "messages",
        b'{"messages": [{"role": "user", "parts": [{"type": "text", "text": "a\\u0000"}]}]}',
        "messages",
        id="add-messages-nul",
    ),
    pytest.param(
        "messages",
        b'{"messages": [{"role": "user", "parts": [{"type": "text", "text": "\\ud800"}]}]}',
        "messages",
        id="add-messages-surrogate",
    ),
]


@pytest.mark.parametrize(("route", "raw", "field"), REFUSED)
async def test_http_input_is_refused_naming_the_field(
    api: httpx.AsyncClient, engine: AsyncEngine, cid: str, route: str, raw: bytes, field: str
) -> None:
    """Over HTTP such text is refused (422, the field named) and nothing is stored: the
    client can see what it sent and fix it. Never a 500."""
    response = await api.post(
        f"{path('helper', cid)}/{route}", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    named = [e["field"] for e in problem.get("errors", [])]
    assert any(f == field or f.startswith(f"{field}.") for f in named) or field in problem["detail"]
    async with engine.connect() as conn:
        found = await conn.execute(
            sql("SELECT count(*) FROM conversations WHERE id = :c"), {"c": cid}
        )
        assert found.scalar_one() == 0
