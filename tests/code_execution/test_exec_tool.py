"""`exec` and `run_skill_script` end to end: the scripted model calls them through a real
worker, on real Postgres and Temporal; the files they write are saved to the conversation's
workspace (once per tool call) and seen by the next turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests._fetch_fixtures import PUBLIC_IP, Resolver, Sealed, local_server
from tests.code_execution_agents import Executor, ScriptRunner
from think import Think, ThinkService, UserError
from think._current import BOUND, _Binding
from think.testing import FakeOpenAIServer, text, tool_call
from think.tools import FetchTools, ToolContext, exec_tool, exec_tool_for

SUMMARIZE = """
import csv
from collections import Counter
totals = Counter()
for row in csv.DictReader(open("sales.csv")):
    totals[row["region"]] += int(row["amount"])
with open("totals.csv", "w", newline="") as out:
    writer = csv.writer(out)
    writer.writerow(["region", "total"])
    for region, total in sorted(totals.items()):
        writer.writerow([region, total])
print(f"{len(totals)} regions")
"""


def test_exec_tools_without_the_workspace_is_refused_at_the_class() -> None:
    with pytest.raises(UserError, match=r"Loner.exec_tools needs workspace_tools = True"):

        class Loner(Think):
            exec_tools = True


def tool_results(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


def answer(fake_model: FakeOpenAIServer, cid: str, n: int) -> Any:
    """What the model read back after its n-th step's tool call (0-based), parsed."""
    raw = tool_results(fake_model.requests(cid)[n + 1])[-1]
    try:
        return json.loads(raw)
    except ValueError:
        return raw


async def test_a_workspace_csv_transformed_and_seen_by_the_next_turn(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    sales = "region,amount\nnorth,10\nsouth,5\nnorth,7\n"
    fake_model.script(
        cid,
        tool_call("write", {"path": "sales.csv", "content": sales}),
        tool_call("exec", {"code": SUMMARIZE}),
        text("Summarized."),
    )
    conversation = service.conversation(Executor, cid)
    assert (await conversation.run_turn("Total my sales by region.")).status == "completed"
    names = [t["function"]["name"] for t in fake_model.requests(cid)[0]["body"]["tools"]]
    assert names == ["read", "ls", "find", "grep", "write", "edit", "delete", "exec"]
    ran = answer(fake_model, cid, 1)
    assert ran["exit_code"] == 0 and ran["stdout"] == "2 regions\n" and ran["stderr"] == ""
    assert ran["files_changed"] == [{"path": "totals.csv", "change": "created", "bytes": 33}]
    saved = await (await conversation.workspace()).read("totals.csv")
    assert saved is not None and saved.text() == "region,total\r\nnorth,17\r\nsouth,5\r\n"

    before = len(fake_model.requests(cid))
    fake_model.script(cid, tool_call("read", {"path": "totals.csv"}), text("North leads."))
    assert (await conversation.run_turn("Show me.")).status == "completed"
    shown = tool_results(fake_model.requests(cid)[before + 1])[-1]
    assert "north,17" in shown and "south,5" in shown


async def test_a_skill_script_runs_with_the_skills_files(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    arguments = {"skill": "word-count", "script": "count.py", "args": ["notes.txt"]}
    fake_model.script(
        cid,
        tool_call("write", {"path": "notes.txt", "content": "the cat sat down"}),
        tool_call("run_skill_script", arguments),
        tool_call("run_skill_script", {"skill": "word-count", "script": "missing.py"}),
        text("Four words."),
    )
    conversation = service.conversation(ScriptRunner, cid)
    assert (await conversation.run_turn("How long are my notes?")).status == "completed"
    names = [t["function"]["name"] for t in fake_model.requests(cid)[0]["body"]["tools"]]
    assert names[-2:] == ["exec", "run_skill_script"]
    ran = answer(fake_model, cid, 1)
    assert ran["exit_code"] == 0, ran
    assert ran["stdout"] == "notes.txt: 4 words (3 stopwords known)\n"
    assert ran["files_changed"] == [{"path": "notes.txt.count", "change": "created", "bytes": 1}]
    count = await (await conversation.workspace()).read("notes.txt.count")
    assert count is not None and count.text() == "4"
    missing = answer(fake_model, cid, 2)
    assert missing == (
        "Error: skill 'word-count' has no script 'scripts/missing.py'; its scripts: "
        "scripts/count.py"
    )


ESCAPES = """
ls -A /work
cat /etc/passwd 2>&1 | head -1
ls /tmp | head -1
ln -s /etc/passwd leak
ln -s ../../../ up
echo pwned > /usr/evil 2>/dev/null || echo "no /usr"
echo fine > ok.txt
"""


async def test_exec_sees_only_its_own_conversation_and_saves_no_link(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    fake_model.script(cid, tool_call("write", {"path": "secret.txt", "content": "42"}), text("k"))
    assert (await service.conversation(Executor, cid).run_turn("Keep it.")).status == "completed"
    other = f"{cid}-other"
    fake_model.script(
        other,
        tool_call("exec", {"code": ESCAPES, "language": "bash"}),
        tool_call("exec", {"code": "while True: pass", "timeout": 1}),
        text("no"),
    )
    conversation = service.conversation(Executor, other)
    assert (await conversation.run_turn("Look around.")).status == "completed"
    ran = answer(fake_model, other, 0)
    assert "secret" not in ran["stdout"]
    assert ran["stdout"] == "cat: /etc/passwd: No such file or directory\nno /usr\n"
    assert ran["files_changed"] == [{"path": "ok.txt", "change": "created", "bytes": 5}]
    assert ran["not_saved"] == [
        "leak (symlink): only regular files are saved",
        "up (symlink): only regular files are saved",
    ]
    files = [e.path for e in await (await conversation.workspace()).list()]
    assert files == ["ok.txt"]
    looped = answer(fake_model, other, 1)
    assert looped["killed"] == "the program ran past its time limit and was stopped"
    assert looped["exit_code"] == -9


async def test_a_retried_exec_saves_its_files_once(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """The attempt after a crash (same idempotency key) runs the program again in a fresh
    sandbox, but saves nothing twice and answers what the first one answered."""
    fake_model.script(cid, tool_call("write", {"path": "log.txt", "content": "start\n"}), text("k"))
    done = await service.conversation(Executor, cid).run_turn("Start a log.")
    assert done.status == "completed"
    ctx = ToolContext(
        agent="executor",
        conversation_id=cid,
        turn_id=done.turn_id,
        tool_call_id="call_retried",
        tool_name="exec",
    )
    code = "import random\nopen('log.txt', 'a').write('x\\n')\nprint(random.random())"
    token = BOUND.set(_Binding(service, done.turn_id))
    try:
        first = await exec_tool(ctx, code=code)
        again = await exec_tool(ctx, code=code)
        assert first == again
        workspace = await service.conversation(Executor, cid).workspace()
        stored = await workspace.read("log.txt")
        assert stored is not None and stored.text() == "start\nx\n"
        fresh = ctx.model_copy(update={"tool_call_id": "call_new"})
        await exec_tool(fresh, code=code)
        stored = await workspace.read("log.txt")
        assert stored is not None and stored.text() == "start\nx\nx\n"
    finally:
        BOUND.reset(token)


FETCHES = """
import json, socket, think_host
for url in ("http://docs.example.com/v1/page", "http://evil.example.com/", "http://127.0.0.1/v1"):
    print(json.dumps(think_host.fetch(url)))
try:
    socket.create_connection(("93.184.215.14", 80), timeout=2)
except OSError as e:
    print("socket", e.errno)
"""


async def test_exec_fetches_only_what_the_fetch_tools_allow(
    service: ThinkService, fake_model: FakeOpenAIServer, cid: str
) -> None:
    """With `fetch_tools`, a program reaches the network through the worker's `fetch_url`
    (allowlist, SSRF guard); its own sockets still reach nothing."""
    assert exec_tool_for(None) is exec_tool
    fake_model.script(cid, tool_call("write", {"path": "a.txt", "content": "a"}), text("k"))
    done = await service.conversation(Executor, cid).run_turn("Start.")
    ctx = ToolContext(
        agent="executor",
        conversation_id=cid,
        turn_id=done.turn_id,
        tool_call_id="call_fetch",
        tool_name="exec",
    )
    token = BOUND.set(_Binding(service, done.turn_id))
    try:
        with local_server() as server:
            fetch = FetchTools(
                allowlist=["http://docs.example.com/v1/**"],
                resolver=Resolver({"docs.example.com": [[PUBLIC_IP]]}),
                connector=Sealed({PUBLIC_IP: server.port}),
            )
            ran = await exec_tool_for(fetch)(ctx, code=FETCHES)
            assert server.paths == ["/v1/page"]
    finally:
        BOUND.reset(token)
    assert ran["exit_code"] == 0, ran
    *fetched, sock = ran["stdout"].splitlines()
    page, evil, loopback = (json.loads(line) for line in fetched)
    assert page["ok"] is True and page["body"] == "# Limits\n\nAt most 10 requests."
    assert evil["ok"] is False and "not on the allowlist" in evil["message"]
    assert loopback["ok"] is False
    assert sock == "socket 101"  # ENETUNREACH: the sandbox's network has no route
