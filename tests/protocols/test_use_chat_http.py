"""`POST /v1/agents/{agent}/chat` and `GET …/chat/{id}/stream` over plain HTTP (issue 36):
the bodies useChat's transports send, the answers they expect, and the refusals.

tests/protocols/test_use_chat.py drives the real useChat against the same routes in Chromium.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests._sse import chunks, parse, until_terminal
from tests._stack import bearer_client
from think.testing import FakeOpenAIServer, reply, text, tool_call

CHAT = "/v1/agents/{agent}/chat"


def _user(mid: str, words: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": words}]}


async def _post(
    api: httpx.AsyncClient, body: dict[str, Any], agent: str = "helper"
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    response = await api.post(CHAT.format(agent=agent), json=body)
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return response, chunks(parse(response.text))
    return response, []


async def _messages(api: httpx.AsyncClient, agent: str, cid: str) -> list[dict[str, Any]]:
    response = await api.get(f"/v1/agents/{agent}/conversations/{cid}/messages")
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["messages"]
    return found


async def test_a_new_chat_streams_its_answer_and_a_resent_post_is_the_same_turn(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello ", "there."))
    body = {"id": cid, "messages": [_user("u1", "Hi")], "trigger": "submit-message"}
    response, got = await _post(api, body)
    assert response.status_code == 200, response.text
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    run_id = response.headers["x-workflow-run-id"]
    assert run_id == response.headers["x-think-turn-id"]
    assert "".join(c.get("delta", "") for c in got) == "Hello there."
    assert got[0]["type"] == "start" and got[-1]["type"] == "finish"
    # The same body again (a retry): the same turn, replayed; no second call to the model.
    again, replayed = await _post(api, body)
    assert again.headers["x-workflow-run-id"] == run_id
    assert replayed == got
    # One turn (a model call may be retried by its activity under load: not a second turn).
    listed = await api.get(f"/v1/agents/helper/conversations/{cid}/turns")
    assert len(listed.json()["turns"]) == 1
    stored = await _messages(api, "helper", cid)
    assert [m["id"] for m in stored][:1] == ["u1"] and stored[1]["id"] == got[0]["messageId"]
    # The next message, with the transcript as useChat holds it.
    fake_model.script(cid, text("Second."))
    answer = {"id": stored[1]["id"], "role": "assistant", "parts": stored[1]["parts"]}
    body = {"id": cid, "messages": [_user("u1", "Hi"), answer, _user("u2", "And?")]}
    response, got = await _post(api, body)
    assert response.status_code == 200 and got[-1]["type"] == "finish"
    assert [m["id"] for m in await _messages(api, "helper", cid)][2] == "u2"


async def test_a_transcript_that_contradicts_the_stored_one_is_a_409(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("One."))
    response, _ = await _post(api, {"id": cid, "messages": [_user("u1", "First")]})
    assert response.status_code == 200
    # Other words under the stored message's id.
    forged = {"id": cid, "messages": [_user("u1", "Something else"), _user("u9", "Next")]}
    response, _ = await _post(api, forged)
    assert response.status_code == 409, response.text
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert problem["errors"][0]["field"] == "messages.0"
    # A message the conversation never had.
    invented = {"id": cid, "messages": [_user("zz", "First"), _user("u9", "Next")]}
    response, _ = await _post(api, invented)
    assert response.status_code == 409 and "messages.0" in response.json()["detail"]
    # A prefix is fine: the first message alone, then a new one.
    fake_model.script(cid, text("Two."))
    response, got = await _post(
        api, {"id": cid, "messages": [_user("u1", "First"), _user("u3", "More")]}
    )
    assert response.status_code == 200 and got[-1]["type"] == "finish"


async def test_bad_bodies_are_422_naming_the_field(api: httpx.AsyncClient, cid: str) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"id": cid, "messages": []}, "messages"),
        ({"id": cid, "messages": [_user("u1", "x")], "trigger": "other"}, "trigger"),
        ({"id": "bad id!", "messages": [_user("u1", "x")]}, "id"),
        ({"messages": [_user("u1", "x")]}, "id"),
        ({"id": cid, "messages": [{"id": "u1", "role": "robot", "parts": []}]}, "messages.0.role"),
    ]
    for body, field in cases:
        response = await api.post(CHAT.format(agent="helper"), json=body)
        assert response.status_code == 422, (body, response.text)
        assert field in [e["field"] for e in response.json()["errors"]], response.json()
    response = await api.post(
        CHAT.format(agent="helper"),
        json={
            "id": cid,
            "messages": [{"id": "u1", "role": "user", "parts": [{"type": "step-start"}]}],
        },
    )
    assert (
        response.status_code == 409 and response.json()["errors"][0]["field"] == "messages.0.parts"
    )
    unknown = await api.post(
        CHAT.format(agent="nobody"), json={"id": cid, "messages": [_user("u", "x")]}
    )
    assert unknown.status_code == 404


async def test_resume_answers_204_without_an_active_turn_and_the_tail_on_a_negative_start(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    url = f"{CHAT.format(agent='helper')}/{cid}/stream"
    assert (await api.get(url)).status_code == 204  # no such chat yet: useChat's first load
    fake_model.script(cid, text("a ", "b ", "c"))
    response, got = await _post(api, {"id": cid, "messages": [_user("u1", "Go")]})
    run_id = response.headers["x-workflow-run-id"]
    assert (await api.get(url)).status_code == 204  # the turn has ended
    # By the turn's id (the workflow transport): the whole stream, or from chunk N.
    by_run = f"{CHAT.format(agent='helper')}/{run_id}/stream"
    whole = await api.get(by_run)
    assert whole.status_code == 200 and chunks(parse(whole.text)) == got
    assert whole.headers["x-workflow-run-id"] == run_id
    from_two = await api.get(by_run, params={"startIndex": 2})
    assert chunks(parse(from_two.text)) == got[2:]
    last_two = await api.get(by_run, params={"startIndex": -2})
    assert chunks(parse(last_two.text)) == got[-2:]
    assert last_two.headers["x-workflow-stream-tail-index"] == str(len(got) - 1)
    bad = await api.get(by_run, params={"startIndex": "x"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "startIndex"


async def test_a_paused_turn_ends_the_response_and_the_next_post_approves_and_goes_on(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("delete_file", {"path": "a.txt"}), text("Deleted a.txt."))
    body = {"id": cid, "messages": [_user("u1", "Delete a.txt")]}
    response, got = await _post(api, body, agent="gatekeeper")
    assert got[-1] == {"type": "finish", "finishReason": "tool-calls"}, got
    request = next(c for c in got if c["type"] == "tool-approval-request")
    # A reconnect meanwhile (a reload) sees the same pause.
    url = f"{CHAT.format(agent='gatekeeper')}/{cid}/stream"
    resumed = await api.get(url)
    assert chunks(parse(resumed.text)) == got
    # useChat's message after addToolApprovalResponse: the part in approval-responded.
    tool = {
        "type": "tool-delete_file",
        "toolCallId": request["toolCallId"],
        "state": "approval-responded",
        "input": {"path": "a.txt"},
        "approval": {"id": request["approvalId"], "approved": True},
    }
    answer = {
        "id": got[0]["messageId"],
        "role": "assistant",
        "parts": [{"type": "step-start"}, tool],
    }
    body = {"id": cid, "messages": [_user("u1", "Delete a.txt"), answer]}
    response, rest = await _post(api, body, agent="gatekeeper")
    assert response.status_code == 200, response.text
    types = [c["type"] for c in rest]
    assert "tool-output-available" in types and types[-1] == "finish", types
    assert "start" not in types  # the rest of the same message, not a new one
    assert "".join(c.get("delta", "") for c in rest) == "Deleted a.txt."
    turn = await until_terminal(
        api,
        f"/v1/agents/gatekeeper/conversations/{cid}/turns/{response.headers['x-workflow-run-id']}",
    )
    assert turn["status"] == "completed"
    # Going on again with nothing waiting is a 409.
    response, _ = await _post(api, body, agent="gatekeeper")
    assert response.status_code == 409, response.text


async def test_regenerate_answers_the_last_user_message_again(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("First answer."), text("Second answer."))
    response, got = await _post(api, {"id": cid, "messages": [_user("u1", "Q")]})
    first_id = got[0]["messageId"]
    body = {
        "id": cid,
        "messages": [_user("u1", "Q")],
        "trigger": "regenerate-message",
        "messageId": first_id,
    }
    response, again = await _post(api, body)
    assert response.status_code == 200, response.text
    assert "".join(c.get("delta", "") for c in again) == "Second answer."
    await until_terminal(
        api, f"/v1/agents/helper/conversations/{cid}/turns/{response.headers['x-workflow-run-id']}"
    )
    stored = await _messages(api, "helper", cid)
    assert [m["id"] for m in stored] == ["u1", again[0]["messageId"]] and again[0][
        "messageId"
    ] != first_id


async def test_another_tenants_chat_is_out_of_reach(
    tenants: str, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("alice only"))
    async with (
        bearer_client(tenants, "alice-key") as alice,
        bearer_client(tenants, "bob-key") as bob,
    ):
        response, got = await _post(alice, {"id": cid, "messages": [_user("u1", "secret")]})
        run_id = response.headers["x-workflow-run-id"]
        assert got[-1]["type"] == "finish"
        # Bob resumes neither alice's chat nor her turn: as for ids nobody used.
        assert (await bob.get(f"{CHAT.format(agent='helper')}/{cid}/stream")).status_code == 204
        assert (await bob.get(f"{CHAT.format(agent='helper')}/{run_id}/stream")).status_code == 204
        # The same chat id is bob's own conversation: alice's transcript is not his.
        response, _ = await _post(
            bob, {"id": cid, "messages": [_user("u1", "secret"), _user("u2", "x")]}
        )
        assert response.status_code == 409 and "alice" not in response.text
        assert (
            await bob.post(CHAT.format(agent="helper"), json={"id": cid, "messages": []})
        ).status_code == 422
        async with httpx.AsyncClient(base_url=tenants) as anonymous:
            unauthenticated = await anonymous.post(
                CHAT.format(agent="helper"), json={"id": cid, "messages": [_user("u1", "x")]}
            )
        assert unauthenticated.status_code == 401
        assert (await _messages(alice, "helper", cid))[0]["id"] == "u1"


async def test_a_string_body_without_a_json_content_type_is_read_as_json(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """`WorkflowChatTransport` posts `JSON.stringify(body)` with no headers: `fetch` calls it
    `text/plain;charset=UTF-8`. Other types are still a 400."""
    fake_model.script(cid, text("Plain."))
    body = json.dumps({"id": cid, "messages": [_user("u1", "Hi")]})
    plain = {"content-type": "text/plain;charset=UTF-8"}
    response = await api.post(CHAT.format(agent="helper"), content=body, headers=plain)
    assert response.status_code == 200, response.text
    assert chunks(parse(response.text))[-1]["type"] == "finish"
    other = {"content-type": "application/x-www-form-urlencoded"}
    response = await api.post(CHAT.format(agent="helper"), content=body, headers=other)
    assert response.status_code == 400, response.text


async def test_a_client_tools_output_from_use_chat_answers_the_call_and_the_turn_goes_on(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("ask_user", {"question": "Which city?"}), text("Paris, then."))
    ask = {"name": "ask_user", "input_schema": {"type": "object"}}
    body = {"id": cid, "messages": [_user("u1", "Plan a trip")], "client_tools": [ask]}
    response, got = await _post(api, body)
    assert got[-1] == {"type": "finish", "finishReason": "tool-calls"}, got
    call = next(c for c in got if c["type"] == "tool-input-available")
    # useChat's message after addToolOutput (sendAutomaticallyWhen sends it).
    tool = {
        "type": "tool-ask_user",
        "toolCallId": call["toolCallId"],
        "state": "output-available",
        "input": call["input"],
        "output": {"answer": "Paris"},
    }
    answer = {"id": got[0]["messageId"], "role": "assistant", "parts": [tool]}
    response, rest = await _post(api, {"id": cid, "messages": [_user("u1", "Plan a trip"), answer]})
    assert response.status_code == 200, response.text
    assert "".join(c.get("delta", "") for c in rest) == "Paris, then."
    assert rest[-1]["type"] == "finish"
    turn = await until_terminal(
        api, f"/v1/agents/helper/conversations/{cid}/turns/{response.headers['x-workflow-run-id']}"
    )
    outputs = [p.get("output") for p in turn["message"]["parts"] if p.get("toolCallId")]
    assert outputs == [{"answer": "Paris"}]


async def test_an_approval_another_door_decided_first_streams_from_where_it_was_asked(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The chat page's race: someone denies the call through the approvals route, the turn
    goes on, and only then does the page's useChat POST its own (now stale) approval. The
    answer must still be a stream the AI SDK reads: from where the approval was asked, not
    from the tail, which is by then inside a text part whose start the client never saw."""
    words = " ".join(f"w{i}" for i in range(12))
    fake_model.script(
        cid, tool_call("delete_file", {"path": "b.txt"}), reply(text(words), delay=0.2)
    )
    first = {"id": cid, "messages": [_user("u1", "Delete b.txt")]}
    response, got = await _post(api, first, agent="gatekeeper")
    request = next(c for c in got if c["type"] == "tool-approval-request")
    turn = (
        f"/v1/agents/gatekeeper/conversations/{cid}/turns/{response.headers['x-workflow-run-id']}"
    )
    denied = await api.post(f"{turn}/approvals/{request['approvalId']}", json={"approved": False})
    assert denied.status_code in (200, 202), denied.text
    async with api.stream("GET", f"{turn}/stream") as live:  # until the answer's text began
        async for line in live.aiter_lines():
            if '"text-delta"' in line:
                break
    tool = {
        "type": "tool-delete_file",
        "toolCallId": request["toolCallId"],
        "state": "approval-responded",
        "input": {"path": "b.txt"},
        "approval": {"id": request["approvalId"], "approved": True},
    }
    answer = {"id": got[0]["messageId"], "role": "assistant", "parts": [tool]}
    response, rest = await _post(
        api, {"id": cid, "messages": [_user("u1", "Delete b.txt"), answer]}, agent="gatekeeper"
    )
    assert response.status_code == 200, response.text
    started: set[str] = set()
    for chunk in rest:  # every text part begins before its deltas and end: the SDK's rule
        if chunk["type"] == "text-start":
            started.add(chunk["id"])
        elif chunk["type"] in ("text-delta", "text-end"):
            assert chunk["id"] in started, rest
    types = [c["type"] for c in rest]
    assert "tool-output-denied" in types and types[-1] == "finish", types
    assert "".join(c.get("delta", "") for c in rest) == words
