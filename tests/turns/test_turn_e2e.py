"""A turn end to end: HTTP submit -> Temporal workflows -> fake model -> Postgres -> SSE."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import httpx

from tests._sse import chunks, finished, read_stream, started
from tests._turn_helpers import helper_path
from think.testing import FakeOpenAIServer, reasoning, text, tool_call


async def submit(
    api: httpx.AsyncClient, cid: str, body: dict[str, Any], key: str | None = None
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return await api.post(f"{helper_path(cid)}/turns", json=body, headers=headers)


async def test_submit_stream_and_store(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello", " from", " the model"))
    response = await submit(api, cid, {"input": "hi"})
    assert response.status_code == 202
    turn = response.json()
    assert turn["accepted"] is True
    assert turn["status"] in ("pending", "running", "completed")
    assert turn["stream_url"].endswith(f"/turns/{turn['turn_id']}/stream")

    _, events = await read_stream(api, turn["stream_url"])
    assert events[-1].data == "[DONE]"
    ids = [e.id for e in events if e.id is not None]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    got = chunks(events)
    assert started(got[0]) == {"type": "start", "messageId": turn["message_id"]}
    assert finished(got[-1]) == {"type": "finish", "finishReason": "stop"}
    # Which turn wrote the answer, and when it was accepted, before its first word; which
    # model gave it, and when it ended, on its `finish` (the AI SDK's messageMetadata).
    begun, ended = got[0]["messageMetadata"], got[-1]["messageMetadata"]
    accepted = datetime.fromisoformat(turn["created_at"])
    assert begun == {
        "turnId": turn["turn_id"],
        "agent": "helper",
        "createdAt": int(accepted.timestamp() * 1000),
    }
    assert ended["model"] == "openai:scripted-model"
    assert begun["createdAt"] <= ended["finishedAt"] <= time.time() * 1000
    streamed = "".join(c["delta"] for c in got if c["type"] == "text-delta")
    assert streamed == "Hello from the model"

    messages = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[0]["parts"] == [{"type": "text", "text": "hi"}]
    assert messages[1]["id"] == turn["message_id"]
    # The message a client builds from the stream (start's and finish's metadata merged) is
    # the one stored.
    assert messages[1]["metadata"] == {**begun, **ended}
    assert messages[1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Hello from the model", "state": "done"},
    ]

    final = (await api.get(turn["status_url"])).json()
    assert final["status"] == "completed"
    assert final["message"]["parts"] == messages[1]["parts"]
    assert final["completed_at"] is not None

    conversation = (await api.get(helper_path(cid))).json()
    assert conversation["active_leaf_id"] == turn["message_id"]

    # The model saw the system prompt and the user's message.
    sent = fake_model.requests(cid)[0]["body"]["messages"]
    assert sent == [
        {"role": "system", "content": "You are a test agent."},
        {"role": "user", "content": "hi"},
    ]


async def test_tool_turn(api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str) -> None:
    fake_model.script(
        cid,
        text("Checking.") + tool_call("get_weather", {"city": "Paris"}, id="call_w"),
        text("It is 21 degrees in Paris."),
    )
    response = await submit(api, cid, {"input": "Weather in Paris?", "mode": "wait"})
    assert response.status_code == 200
    turn = response.json()
    assert turn["status"] == "completed", turn
    parts = turn["message"]["parts"]
    assert [p["type"] for p in parts] == [
        "step-start",
        "text",
        "tool-get_weather",
        "step-start",
        "text",
    ]
    assert parts[2] == {
        "type": "tool-get_weather",
        "toolCallId": "call_w",
        "state": "output-available",
        "input": {"city": "Paris"},
        "output": {"city": "Paris", "temp_c": 21},
    }
    # The second model call carried the tool result back in Chat Completions form.
    second = fake_model.requests(cid)[1]["body"]["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    }
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_w",
        "content": '{"city": "Paris", "temp_c": 21}',
    }
    stored = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert stored[-1]["parts"] == parts


async def test_parallel_tools_failures_and_bad_arguments(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        tool_call("add", {"a": 2, "b": 3}, id="c1")
        + tool_call("explode", {"reason": "test"}, id="c2")
        + tool_call("add", {"a": "not a number"}, id="c3")
        + tool_call("no_such_tool", {}, id="c4")
        + tool_call("add", '{"a": 1', id="c5"),
        text("Done."),
    )
    turn = (await submit(api, cid, {"input": "go", "mode": "wait"})).json()
    assert turn["status"] == "completed", turn
    by_id = {p["toolCallId"]: p for p in turn["message"]["parts"] if "toolCallId" in p}
    assert by_id["c1"]["state"] == "output-available" and by_id["c1"]["output"] == 5
    assert by_id["c2"]["state"] == "output-error"
    assert "boom: test" in by_id["c2"]["errorText"]
    assert by_id["c3"]["state"] == "output-error"
    assert "invalid arguments for tool 'add'" in by_id["c3"]["errorText"]
    assert "no tool named 'no_such_tool'" in by_id["c4"]["errorText"]
    assert by_id["c5"]["state"] == "output-error"
    assert "not valid JSON" in by_id["c5"]["errorText"]
    # Results go back to the model in call order.
    second = fake_model.requests(cid)[1]["body"]["messages"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == [
        "c1",
        "c2",
        "c3",
        "c4",
        "c5",
    ]


async def test_stream_mode_and_reasoning(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reasoning("Think first.") + text("Answer."))
    async with api.stream(
        "POST", f"{helper_path(cid)}/turns", json={"input": "q", "mode": "stream"}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        turn_id = response.headers["x-think-turn-id"]
        body = (await response.aread()).decode()
    from tests._sse import parse

    turn = (await api.get(f"{helper_path(cid)}/turns/{turn_id}")).json()
    assert turn["status"] == "completed"

    got = chunks(parse(body))
    kinds = [c["type"] for c in got]
    assert kinds[:3] == ["start", "start-step", "reasoning-start"]
    assert "text-delta" in kinds and kinds[-1] == "finish"
    stored = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"][-1]
    assert stored["parts"][1]["type"] == "reasoning"
    assert stored["parts"][1]["text"] == "Think first."


async def test_turns_of_one_conversation_run_in_order(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("one"), text("two"), text("three"))
    ids = []
    for word in ("first", "second", "third"):
        response = await submit(api, cid, {"input": word})
        assert response.status_code == 202
        ids.append(response.json()["turn_id"])
    last = ids[-1]
    waited = await submit(api, cid, {"input": "fourth", "mode": "wait"})
    assert waited.json()["status"] == "completed"
    messages = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    texts = [
        "".join(p.get("text", "") for p in m["parts"] if p["type"] == "text") for m in messages
    ]
    assert texts == ["first", "one", "second", "two", "third", "three", "fourth", "echo: fourth"]
    listed = (await api.get(f"{helper_path(cid)}/turns")).json()["turns"]
    assert [t["turn_id"] for t in listed][1] == last  # newest first
    assert all(t["status"] == "completed" for t in listed)
    only = (await api.get(f"{helper_path(cid)}/turns", params={"status": "error"})).json()
    assert only["turns"] == []


async def test_model_error_ends_turn_with_readable_error(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    from think.testing import error

    fake_model.script(cid, error(400, "This model does not support that."))
    turn = (await submit(api, cid, {"input": "x", "mode": "wait"})).json()
    assert turn["status"] == "error"
    assert "This model does not support that." in turn["error"]
    assert fake_model.calls(cid) == 1  # not retried: a 400 fails the same way again
    _, events = await read_stream(api, turn["stream_url"])
    assert chunks(events)[-1]["type"] == "error"
    assert events[-1].data == "[DONE]"


async def test_branch_from_parent(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    first = (await submit(api, cid, {"input": "a", "mode": "wait"})).json()
    await submit(api, cid, {"input": "b", "mode": "wait"})
    messages = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert len(messages) == 4
    branched = (
        await submit(api, cid, {"input": "c", "mode": "wait", "parent_id": first["message_id"]})
    ).json()
    assert branched["status"] == "completed"
    path = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    assert [m["parts"][-1].get("text") for m in path] == ["a", "echo: a", "c", "echo: c"]
    old = (
        await api.get(f"{helper_path(cid)}/messages", params={"leaf_id": messages[-1]["id"]})
    ).json()["messages"]
    assert old == messages


async def test_reused_message_ids_are_refused_or_renamed_never_dropped(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    from think.testing import stall

    def msg(mid: str, words: str) -> dict[str, Any]:
        return {"id": mid, "role": "user", "parts": [{"type": "text", "text": words}]}

    first = await submit(api, cid, {"input": msg("m1", "one"), "mode": "wait"})
    assert first.json()["status"] == "completed"
    again = await submit(api, cid, {"input": msg("m1", "again")})
    assert again.status_code == 409
    assert again.json()["errors"][0]["field"] == "input.id"
    twice = await submit(api, cid, {"input": [msg("m2", "a"), msg("m2", "b")]})
    assert twice.status_code == 409

    # Two queued turns admitted with the same new id: the later one keeps its text.
    fake_model.script(cid, stall(0.3) + text("slow"))
    await submit(api, cid, {"input": "hold the queue"})
    await submit(api, cid, {"input": msg("m3", "first m3")})
    last = (await submit(api, cid, {"input": msg("m3", "second m3"), "mode": "wait"})).json()
    assert last["status"] == "completed"
    path = (await api.get(f"{helper_path(cid)}/messages")).json()["messages"]
    texts = [m["parts"][-1]["text"] for m in path if m["role"] == "user"]
    assert texts == ["one", "hold the queue", "first m3", "second m3"]
    assert len({m["id"] for m in path}) == len(path)
