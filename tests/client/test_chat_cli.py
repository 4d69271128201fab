"""`think chat` as a user runs it: a real process, its stdin piped, against the test gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from tests._stack import ROOT, Stack
from think.client import ThinkClient
from think.testing import FakeOpenAIServer, error, reply, text, tool_call

APPROVALS = "/v1/agents/{agent}/conversations/{cid}/turns/{turn_id}/approvals/{approval_id}"


def chat(stack: Stack, *args: str, lines: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "think", "chat", "--url", stack.api_url, *args],
        input=lines,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


def test_a_text_turn_streams_the_reply(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, text("Hello", " there", "!"))
    done = chat(stack, "--agent", "helper", "--conversation", cid, lines="hi\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello there!\n"
    assert f"conversation {cid}" in done.stderr
    with ThinkClient(stack.api_url) as client:
        assert [m.text for m in client.messages("helper", cid)] == ["hi", "Hello there!"]


def test_tool_calls_and_results_are_shown(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(
        cid,
        text("Checking.") + tool_call("get_weather", {"city": "Paris"}),
        text("It is 21 degrees."),
    )
    done = chat(stack, "--agent", "helper", "--conversation", cid, lines="Weather in Paris?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        'Checking.\n→ get_weather {"city": "Paris"}\n← {"city": "Paris", "temp_c": 21}\n'
        "It is 21 degrees.\n"
    )


def test_quit_leaves_and_each_line_is_a_turn(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    done = chat(
        stack, "--agent", "helper", "--conversation", cid, lines="one\n\ntwo\n/quit\nthree\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: one\necho: two\n"
    assert fake_model.calls(cid) == 2


def test_help_is_answered_locally(stack: Stack, fake_model: FakeOpenAIServer, cid: str) -> None:
    """Issue 19: `/help` went to the model as a turn."""
    done = chat(stack, "--agent", "helper", "--conversation", cid, lines="/help\nhi\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: hi\n"
    assert "/quit /exit  leave" in done.stderr and "Ctrl-C" in done.stderr
    assert fake_model.calls(cid) == 1


def test_a_new_conversation_unless_one_is_named(stack: Stack) -> None:
    done = chat(stack, "--agent", "helper", lines="")
    assert done.returncode == 0, done.stderr
    assert "conversation conv_" in done.stderr


def test_an_unknown_agent_is_a_clear_error(stack: Stack) -> None:
    done = chat(stack, "--agent", "nobody", lines="hi\n")
    assert done.returncode == 2
    assert "no agent named 'nobody'" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unreachable_gateway_is_a_clear_error(stack: Stack) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "think", "chat", "--agent", "helper", "--url", "http://127.0.0.1:9"],
        input="hi\n",
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert "cannot reach http://127.0.0.1:9" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("answer", "result", "after"),
    [("y", "← deleted /tmp/x", "Deleted."), ("n", "← denied", "Left alone.")],
)
def test_a_tool_that_needs_approval_asks_first(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str, answer: str, result: str, after: str
) -> None:
    paths = httpx.get(f"{stack.api_url}/openapi.json").json()["paths"]
    assert "post" in paths[APPROVALS]  # the route this test drives
    fake_model.script(cid, tool_call("delete_file", {"path": "/tmp/x"}), text(after))
    done = chat(
        stack, "--agent", "assistant", "--conversation", cid, lines=f"delete /tmp/x\n{answer}\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f'→ delete_file {{"path": "/tmp/x"}}\napprove delete_file {{"path": "/tmp/x"}}? [y/N] '
        f"{answer}\n{result}\n{after}\n"
    )


def test_a_sub_agents_progress_is_shown_under_its_call(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    child = f"lead.{cid}.research"
    words = [f"w{i} " for i in range(12)]
    fake_model.script(cid, tool_call("research", {"input": "dig"}), text("Done."))
    fake_model.script(child, reply(text(*words), delay=0.05))
    done = chat(stack, "--agent", "lead", "--conversation", cid, lines="go\n")
    assert done.returncode == 0, done.stderr
    call, progress, result, answer = done.stdout.splitlines()
    assert call == '→ research {"input": "dig"}'
    head = f"  researcher ({child}): "
    assert progress.startswith(head)
    shown = progress.removeprefix(head)
    assert shown and "".join(words).startswith(shown)  # the child's answer as it grew
    assert json.loads(result.removeprefix("← "))["text"] == "".join(words)
    assert answer == "Done."


def test_a_turn_that_ends_in_error_makes_the_exit_status_1(
    stack: Stack, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """Issue 37: `think chat` exited 0 after a turn that ended in `error`, so a script piping
    lines into it could not tell."""
    fake_model.script(cid, error(400, "Invalid request: unsupported parameter"), text("Fine."))
    done = chat(stack, "--agent", "helper", "--conversation", cid, lines="hi\nagain\n")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "error: " in done.stdout and "Fine." in done.stdout  # it went on to the next line
    assert "a turn ended in error" in done.stderr
