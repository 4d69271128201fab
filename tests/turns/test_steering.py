"""Steering a running turn (`POST …/turns/{id}/steer`, `ConversationHandle.steer_turn`): the
user's words join the answer at the turn's next step boundary, as a `steering-message` part
the model reads as a user message there; a turn whose model has answered takes one more step
for them; a turn that has ended refuses them (409)."""

from __future__ import annotations

from typing import Any

import httpx

from tests._ai_sdk import NODE_DIR, reconstruct
from tests._sse import chunks, deltas, read_stream, read_until, until_terminal
from tests._turn_helpers import SLOW, helper_path, sent, wait_turn
from think import ThinkService
from think.storage import TurnNotSteerable
from think.testing import FakeOpenAIServer, reply, text, tool_call


def steering_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == "steering-message"]


async def test_a_steer_during_a_tool_step_joins_the_next_step_where_it_was_given(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        reply(text(*SLOW[:25]) + tool_call("add", {"a": 2, "b": 3}, id="c1"), delay=0.04),
        text("5, in metric."),
    )
    turn = (await api.post(f"{helper_path(cid)}/turns", json={"input": "add 2 and 3"})).json()
    await read_until(api, turn["stream_url"], deltas(3))
    steered = await api.post(f"{turn['status_url']}/steer", json={"input": "answer in metric"})
    assert steered.status_code == 202, steered.text
    assert steered.json()["turn_id"] == turn["turn_id"]

    final = await until_terminal(api, turn["status_url"])
    assert final["status"] == "completed", final
    assert fake_model.calls(cid) == 2  # no extra step: the steer joined the tool's step
    # The model read the steer after the tool's result, as the user's words.
    second = sent(fake_model, cid, 1)
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "user"]
    assert second[-1]["content"] == "answer in metric"

    parts = final["message"]["parts"]
    [steer] = steering_parts(final["message"])
    assert steer["parts"] == [{"type": "text", "text": "answer in metric"}]
    at = parts.index(steer)
    assert parts[at - 1] == {"type": "step-start"}  # opens the step it joined
    assert parts[at - 2]["type"] == "tool-add" and parts[at - 2]["state"] == "output-available"
    assert parts[-1]["text"] == "5, in metric."

    body, events = await read_stream(api, turn["stream_url"])
    kinds = [c["type"] for c in chunks(events)]
    assert kinds.count("steering-message") == 1
    assert kinds[kinds.index("steering-message") - 1] == "start-step"
    if (NODE_DIR / "node_modules" / "ai").exists():
        # The AI SDK's client folds the stream into the message that was stored.
        assert (await reconstruct(body))["message"] == final["message"]

    # The next turn's model reads the steer where it was given.
    fake_model.script(cid, text("ok"))
    await wait_turn(api, "helper", cid, "thanks")
    history = sent(fake_model, cid, 2)
    assert [m["role"] for m in history[1:]] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "user",
    ]
    assert history[4]["content"] == "answer in metric"


async def test_a_steer_while_the_model_answers_takes_one_more_step(
    api: httpx.AsyncClient, service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*SLOW), delay=0.04), text("Shorter: hi."))
    conv = service.conversation("helper", cid)
    turn = await conv.submit_messages("say hello at length")
    status_url = f"{helper_path(cid)}/turns/{turn.turn_id}"
    await read_until(api, f"{status_url}/stream", deltas(3))
    [steer_id] = await conv.steer_turn(turn.turn_id, "make it shorter")

    result = await conv.result(turn.turn_id)
    assert result.status == "completed"
    assert fake_model.calls(cid) == 2
    second = sent(fake_model, cid, 1)
    assert second[-2] == {"role": "assistant", "content": "".join(SLOW)}
    assert second[-1] == {"role": "user", "content": "make it shorter"}
    final = (await api.get(status_url)).json()
    [steer] = steering_parts(final["message"])
    assert steer["id"] == steer_id
    assert final["message"]["parts"][-1]["text"] == "Shorter: hi."


async def test_a_steer_after_the_end_or_of_the_wrong_shape_is_refused_and_changes_nothing(
    api: httpx.AsyncClient, service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("done"))
    done = await wait_turn(api, "helper", cid, "hi", status="completed")
    url = f"{done['status_url']}/steer"

    late = await api.post(url, json={"input": "too late"})
    assert late.status_code == 409, late.text
    problem = late.json()
    assert problem["turn_status"] == "completed" and "submit it as a new turn" in problem["detail"]
    try:
        await service.conversation("helper", cid).steer_turn(done["turn_id"], "too late")
        raise AssertionError("a steer of an ended turn was taken")
    except TurnNotSteerable as exc:
        assert exc.status == "completed"

    unknown = await api.post(
        f"{helper_path(cid)}/turns/turn_0000000000000000/steer", json={"input": "anyone?"}
    )
    assert unknown.status_code == 404, unknown.text
    not_users = {"id": "m1", "role": "assistant", "parts": [{"type": "text", "text": "x"}]}
    for body in ({"input": ""}, {"input": []}, {"input": not_users}, {}):
        refused = await api.post(url, json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert "input" in refused.text
    # Nothing of it reached the turn or the conversation.
    after = (await api.get(done["status_url"])).json()
    assert after["message"] == done["message"]
    assert fake_model.calls(cid) == 1


async def test_steer_as_the_message_concurrency_joins_the_running_turn_or_runs_alone(
    api: httpx.AsyncClient, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, reply(text(*SLOW), delay=0.04), text("Noted: in French."))
    url = f"{helper_path(cid)}/turns"
    running = (await api.post(url, json={"input": "tell a story", "concurrency": "steer"})).json()
    await read_until(api, running["stream_url"], deltas(3))
    joined = await api.post(url, json={"input": "in French please", "concurrency": "steer"})
    assert joined.status_code == 202, joined.text
    steer = joined.json()
    assert (steer["status"], steer["answered_by"]) == ("skipped", running["turn_id"])

    final = await until_terminal(api, running["status_url"])
    assert final["status"] == "completed", final
    [part] = steering_parts(final["message"])
    assert part["parts"] == [{"type": "text", "text": "in French please"}]
    assert sent(fake_model, cid, 1)[-1] == {"role": "user", "content": "in French please"}
    assert fake_model.calls(cid) == 2

    # In an idle conversation there is nothing to steer: it is a turn of its own.
    fake_model.script(cid, text("alone"))
    alone = await wait_turn(api, "helper", cid, "and now?", concurrency="steer")
    assert alone["status"] == "completed" and alone["message"]["parts"][-1]["text"] == "alone"
