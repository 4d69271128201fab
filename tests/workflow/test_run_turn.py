"""`think.workflow.run_turn`: Think turns inside a user's own Temporal workflow, on the real
stack (a worker and gateway of their own, hosting `tests.user_workflows` and the sample
`examples.webhook_reply`): typed output, endings that come back as statuses, a refused
admission as a typed failure, cancel, one turn however often a call is replayed or retried,
and the sample's histories (tests/histories/, replayed by tests/durability/test_replay.py)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError

from examples.webhook_reply import Ticket, accept
from tests._replay import HISTORIES, replayer
from tests._sse import deltas, read_until
from tests._stack import Stack, own_stack
from tests.user_workflows import Ask, Asked, AskThink
from think.testing import FakeOpenAIServer, reply, text
from think.workflows.names import turn_workflow_id

QUEUE = "think-workflow"
WORDS = [f"word{i} " for i in range(40)]
ANSWER = '{"severity": "high", "reason": "smoke"}'


@pytest.fixture(scope="module")
def wf_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A worker hosting the user's workflows and a gateway, on a queue of their own (a test
    kills the worker)."""
    logs = tmp_path_factory.mktemp("run-turn")
    env = {
        **stack.env,
        "THINK_TASK_QUEUE": QUEUE,
        "THINK_WORKFLOWS": "tests.user_workflows:AskThink,examples.webhook_reply:WebhookReply",
        "THINK_ACTIVITIES": "examples.webhook_reply:post_reply",
    }
    with own_stack(env, logs) as own:
        yield own


@pytest.fixture
async def wf_api(wf_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=wf_stack.api_url, timeout=30) as client:
        yield client


async def start(temporal: Client, ask: Ask) -> WorkflowHandle[Any, Asked]:
    return await temporal.start_workflow(
        AskThink.run, ask, id=f"ask-{ask.conversation_id}", task_queue=QUEUE
    )


async def turns_of(api: httpx.AsyncClient, agent: str, cid: str) -> list[dict[str, Any]]:
    answer = await api.get(f"/v1/agents/{agent}/conversations/{cid}/turns")
    if answer.status_code == 404:
        return []  # not admitted yet
    assert answer.status_code == 200, answer.text
    turns: list[dict[str, Any]] = answer.json()["turns"]
    return turns


async def first_turn(api: httpx.AsyncClient, agent: str, cid: str) -> dict[str, Any]:
    for _ in range(400):
        turns = await turns_of(api, agent, cid)
        if turns:
            return turns[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"no turn in conversation {cid}")


def record(name: str, history: Any) -> None:
    """Only new files (see tests/durability/test_replay.py)."""
    path = HISTORIES / f"{name}.json"
    if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
        path.write_text(history.to_json())


async def test_a_workflow_runs_a_turn_and_gets_its_typed_output(
    wf_stack: Stack,
    wf_api: httpx.AsyncClient,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    fake_model.script(cid, text('{"severity": "high", ', '"reason": "smoke"}'))
    handle = await start(temporal, Ask(conversation_id=cid, input="is it on fire?"))
    asked = await handle.result()
    result = asked.results[0]
    assert result["status"] == "completed", result
    assert result["output"] == {"severity": "high", "reason": "smoke"}
    assert asked.output_classes == ["Answer"]
    assert result["text"] == ANSWER
    assert result["message"]["role"] == "assistant"
    assert result["accepted"] is True
    assert result["usage"]["models"], result["usage"]
    # The turn asked the model for the workflow's type, as its JSON Schema.
    response_format = fake_model.requests(cid)[0]["body"]["response_format"]
    assert response_format["json_schema"]["schema"]["properties"]["severity"]["enum"] == [
        "low",
        "high",
    ]
    # The turn is the conversation's like any other: the same record over HTTP.
    [turn] = await turns_of(wf_api, "helper", cid)
    assert turn["turn_id"] == result["turn_id"] and turn["output"] == result["output"]


async def test_a_turn_that_fails_comes_back_as_its_status(
    wf_stack: Stack, temporal: Client, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """An answer that does not fit the type ends the turn `error`: the call returns it, the
    workflow goes on (no exception)."""
    fake_model.script(cid, text('{"severity": "medium"}'))
    asked = await (await start(temporal, Ask(conversation_id=cid, input="how bad?"))).result()
    [result] = asked.results
    assert result["status"] == "error", result
    assert result["error"].startswith("the answer does not match the schema")
    assert result["output"] is None and asked.output_classes == [None]
    assert result["text"] == '{"severity": "medium"}'  # what the model said is kept


async def test_an_unknown_agent_fails_the_call_with_a_typed_error(
    wf_stack: Stack, temporal: Client, cid: str
) -> None:
    handle = await start(temporal, Ask(conversation_id=cid, input="hi", agent="nobody"))
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert cause.type == "ThinkUserError"
    assert "'nobody'" in cause.message and "was not admitted" in cause.message


async def test_cancelling_the_workflow_cancels_the_turn(
    wf_stack: Stack,
    wf_api: httpx.AsyncClient,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    fake_model.script(cid, reply(text(*WORDS), delay=0.25))
    handle = await start(temporal, Ask(conversation_id=cid, input="go on", typed=False))
    turn = await first_turn(wf_api, "helper", cid)
    await read_until(wf_api, turn["stream_url"], deltas(3))
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    assert isinstance(failed.value.cause, CancelledError), failed.value.cause
    ended = (await wf_api.get(turn["status_url"])).json()
    assert ended["status"] == "aborted", ended
    kept = ended["message"]["parts"][-1]["text"]
    assert kept.startswith("word0 word1 word2 ") and len(kept) < len("".join(WORDS))
    # `think.RunTurn` cancelled the turn, waited for its end, and ended cancelled itself.
    child = temporal.get_workflow_handle(f"think-turn:{(await handle.describe()).run_id}:1")
    with pytest.raises(WorkflowFailureError) as child_failed:
        await child.result()
    assert isinstance(child_failed.value.cause, CancelledError)
    history = await child.fetch_history()
    result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
    record("run-turn-cancelled", history)


async def test_a_repeated_key_waits_for_the_same_turn(
    wf_stack: Stack,
    wf_api: httpx.AsyncClient,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    """Two calls with one `idempotency_key`: the second finds the first's turn."""
    fake_model.script(cid, text(ANSWER), text(ANSWER))
    ask = Ask(conversation_id=cid, input="once", idempotency_key="ticket-7", calls=2)
    asked = await (await start(temporal, ask)).result()
    first, second = asked.results
    assert first["turn_id"] == second["turn_id"]
    assert (first["accepted"], second["accepted"]) == (True, False)
    assert second["output"] == first["output"] == json.loads(ANSWER)
    assert len(await turns_of(wf_api, "helper", cid)) == 1
    assert fake_model.calls(cid) == 1


async def test_a_worker_killed_mid_turn_submits_it_once(
    wf_stack: Stack,
    wf_api: httpx.AsyncClient,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    cid: str,
) -> None:
    """The worker hosting the caller, `think.RunTurn` and the turn dies while the turn streams:
    the replacement replays them all, and the conversation still has one turn."""
    slow = reply(text(*WORDS), delay=0.05)
    fake_model.script(cid, slow, slow)
    handle = await start(temporal, Ask(conversation_id=cid, input="tell me", typed=False))
    turn = await first_turn(wf_api, "helper", cid)
    await read_until(wf_api, turn["stream_url"], deltas(5))
    wf_stack.replace_worker()
    asked = await asyncio.wait_for(handle.result(), timeout=90)
    [result] = asked.results
    assert result["status"] == "completed", result
    assert result["text"] == "".join(WORDS)
    assert [t["turn_id"] for t in await turns_of(wf_api, "helper", cid)] == [turn["turn_id"]]
    assert fake_model.calls(cid) == 2  # the killed step and its retry; one turn


class _Replies(BaseHTTPRequestHandler):
    got: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        size = int(self.headers["content-length"])
        body = json.loads(self.rfile.read(size))
        self.got.append({"key": self.headers["idempotency-key"], **body})
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def replies() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Where the sample posts its replies: a URL and what arrived there."""
    got: list[dict[str, Any]] = []
    handler = type("Replies", (_Replies,), {"got": got})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/reply", got
    finally:
        server.shutdown()
        server.server_close()


async def test_the_webhook_sample_answers_a_ticket_once(
    wf_stack: Stack,
    temporal: Client,
    fake_model: FakeOpenAIServer,
    replies: tuple[str, list[dict[str, Any]]],
    cid: str,
) -> None:
    """examples/webhook_reply.py: the webhook arrives twice, one workflow runs one turn of the
    assistant and posts its typed reply; its histories replay, and are the committed ones."""
    url, got = replies
    answer = {"severity": "low", "reply": "Restart the router."}
    fake_model.script(f"ticket-{cid}", text(json.dumps(answer)))
    ticket = Ticket(event_id=cid, text="The internet is down.", reply_url=url)
    await accept(temporal, ticket, task_queue=QUEUE)
    await accept(temporal, ticket, task_queue=QUEUE)  # delivered twice
    handle = temporal.get_workflow_handle(f"webhook-{cid}", result_type=str)
    assert await handle.result() == "completed"
    assert got == [{"key": cid, "text": "Restart the router.", "severity": "low"}]
    run_turn = temporal.get_workflow_handle(f"think-turn:{(await handle.describe()).run_id}:1")
    outcome = await run_turn.result()
    turn = temporal.get_workflow_handle(
        turn_workflow_id("assistant", f"ticket-{cid}", outcome["stored_id"])
    )
    await turn.result()  # stored before its workflow has quite finished
    histories = {
        "webhook-reply": await handle.fetch_history(),
        "run-turn": await run_turn.fetch_history(),
        "run-turn-turn": await turn.fetch_history(),
    }
    for name, history in histories.items():
        result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None, name
        record(name, history)
    # The turn told `think.RunTurn` it had ended: a Signal, not a look 15 s later.
    events = [e.event_type for e in histories["run-turn"].events]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED in events
