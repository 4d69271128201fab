"""Scheduled tasks on the real stack: armed at worker start, listed and triggered over HTTP,
from the Temporal CLI and from `think schedules`; a prompt occurrence is one turn however
often it is delivered; a handler gets its `ScheduledRun`, with retries."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from sqlalchemy.ext.asyncio import AsyncEngine
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from tests._failures import ENDS_WITHIN, REFUSAL, refused, workflow_attempts
from tests._replay import HISTORIES, replayer
from tests._schedules import (
    Deployment,
    delete_schedules,
    deployment,
    run,
    schedule_ids,
)
from tests._stack import Stack
from tests._waits import eventually
from tests.schedule_agents import FAR
from think import ThinkService
from think._settings import Settings
from think.cli._dev import _write_endpoints
from think.schedules import (
    CATCHUP_WINDOW,
    OCCURRENCE_WORKFLOW,
    OVERLAP,
    ScheduleRef,
)
from think.schedules._inputs import OccurrenceInput, OccurrenceResult
from think.schedules._names import OCCURRENCE_ACTIVITY, occurrence_key

AGENTS = "tests.schedule_agents:Digest,tests.schedule_agents:PerConversation"
KEYS = {"Authorization": "Bearer k-default"}
OTHER = {"Authorization": "Bearer k-other"}


@pytest.fixture(scope="module")
async def digest(
    stack: Stack, temporal: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Deployment]:
    dep = deployment(
        stack,
        tmp_path_factory.mktemp("sched"),
        AGENTS,
        THINK_API_KEYS="k-default:default,k-other:other",
    )
    dep.stack.wait_polling(dep.stack.start_worker())
    dep.stack.start_api()
    try:
        yield dep
    finally:
        dep.stack.stop()
        for agent in ("sched_digest", "sched_per_conversation"):
            await delete_schedules(temporal, dep.queue, agent)


@pytest.fixture(scope="module")
async def gateway(digest: Deployment) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=digest.stack.api_url, timeout=30) as client:
        yield client


def ref(dep: Deployment, task: str) -> ScheduleRef:
    return ScheduleRef(dep.queue, "sched_digest", task)


async def test_worker_arms_declared_tasks_as_schedules(
    digest: Deployment, temporal: Client
) -> None:
    desc = await temporal.get_schedule_handle(ref(digest, "weekly").schedule_id).describe()
    assert desc.schedule.spec.time_zone_name == "Europe/London"  # the agent's default
    assert desc.schedule.policy.overlap == OVERLAP
    assert desc.schedule.policy.catchup_window == CATCHUP_WINDOW
    [when] = desc.info.next_action_times[:1]
    assert when > datetime.now(UTC) + timedelta(days=2)  # FAR: nothing fires by itself
    ledger = await temporal.get_schedule_handle(ref(digest, "ledger").schedule_id).describe()
    assert ledger.schedule.spec.time_zone_name == "America/New_York"  # the task's own


async def test_list_over_http(digest: Deployment, gateway: httpx.AsyncClient) -> None:
    answer = await gateway.get("/v1/agents/sched_digest/schedules", headers=KEYS)
    assert answer.status_code == 200
    by_task = {s["task"]: s for s in answer.json()["schedules"]}
    assert set(by_task) == {"weekly", "ticks", "ledger", "flaky", "broken"}
    weekly = by_task["weekly"]
    assert weekly["schedule"] == FAR and weekly["timezone"] == "Europe/London"
    assert weekly["kind"] == "prompt" and weekly["conversation_id"] == "weekly"
    assert weekly["schedule_kind"] == "weekly" and len(weekly["next_runs"]) >= 1
    assert by_task["ticks"]["conversation_id"] == "ops"
    assert by_task["ticks"]["timezone"] == "Asia/Tokyo"  # inline wins over the default
    assert by_task["ledger"]["kind"] == "handler" and by_task["ledger"]["conversation_id"] is None
    # Another tenant sees none of the deployment's own tasks, and cannot trigger them.
    other = await gateway.get("/v1/agents/sched_digest/schedules", headers=OTHER)
    assert other.json() == {"schedules": []}
    refused = await gateway.post("/v1/agents/sched_digest/schedules/weekly/trigger", headers=OTHER)
    assert refused.status_code == 404


async def test_unknown_task_or_agent_is_a_problem_404(gateway: httpx.AsyncClient) -> None:
    for path in ("sched_digest/schedules/nope/trigger", "nobody/schedules/weekly/trigger"):
        answer = await gateway.post(f"/v1/agents/{path}", headers=KEYS)
        assert answer.status_code == 404
        assert answer.headers["content-type"] == "application/problem+json"
    detail = await gateway.post("/v1/agents/sched_digest/schedules/nope/trigger", headers=KEYS)
    assert "no scheduled task 'nope'" in detail.json()["detail"]


async def _turns(gateway: httpx.AsyncClient, agent: str, cid: str) -> list[dict[str, Any]]:
    answer = await gateway.get(f"/v1/agents/{agent}/conversations/{cid}/turns", headers=KEYS)
    return list(answer.json()["turns"]) if answer.status_code == 200 else []


async def test_trigger_over_http_runs_a_prompt_turn(
    digest: Deployment, gateway: httpx.AsyncClient
) -> None:
    before = len(await _turns(gateway, "sched_digest", "weekly"))
    answer = await gateway.post("/v1/agents/sched_digest/schedules/weekly/trigger", headers=KEYS)
    assert answer.status_code == 202
    assert answer.json()["schedule_id"] == ref(digest, "weekly").schedule_id

    async def completed() -> dict[str, Any] | None:
        turns = await _turns(gateway, "sched_digest", "weekly")
        done = [t for t in turns if t["status"] == "completed"]
        return done[0] if len(turns) > before and done else None

    turn = await eventually(completed)
    assert turn["idempotency_key"].startswith(ref(digest, "weekly").schedule_id + "@")
    messages = await gateway.get(
        "/v1/agents/sched_digest/conversations/weekly/messages", headers=KEYS
    )
    texts = [p.get("text") for m in messages.json()["messages"] for p in m["parts"]]
    assert "Summarise last week's commits." in texts  # the prompt, as the user's message

    async def listed_result() -> str | None:
        found = await gateway.get("/v1/agents/sched_digest/schedules", headers=KEYS)
        weekly = [s for s in found.json()["schedules"] if s["task"] == "weekly"]
        return weekly[0]["last_result"] if weekly[0]["last_result"] == "completed" else None

    assert await eventually(listed_result) == "completed"


async def test_trigger_from_the_temporal_cli_runs_the_handler(
    digest: Deployment, settings: Settings
) -> None:
    schedule_id = ref(digest, "ledger").schedule_id
    started = datetime.now(UTC)
    temporal_cli = str(Path(sys.executable).parent / "temporal")
    address = settings.require_temporal_address()
    status, _, err = await run(
        temporal_cli,
        "schedule",
        "trigger",
        "--schedule-id",
        schedule_id,
        "--address",
        address,
        env=digest.stack.env,
    )
    assert status == 0, err
    [entry] = await eventually(lambda: _async(digest.runs("ledger")))
    assert entry["task_id"] == "ledger"
    assert entry["schedule"] == f"every week on {FAR.split()[3]} at 07:30"
    assert entry["schedule_kind"] == "weekly" and entry["timezone"] == "America/New_York"
    assert entry["metadata"] == {"kind": "ledger"} and entry["conversation_id"] is None
    assert entry["occurrence_key"] == occurrence_key(
        schedule_id, datetime.fromisoformat(entry["scheduled_for"])
    )
    assert entry["idempotency_key"].startswith("occ_") and len(entry["idempotency_key"]) == 36
    when = datetime.fromisoformat(entry["scheduled_for"])
    assert started - timedelta(seconds=5) < when < datetime.now(UTC)


async def _async(value: Any) -> Any:
    return value


async def test_prompt_occurrence_is_one_turn_however_often_delivered(
    digest: Deployment, temporal: Client, engine: AsyncEngine
) -> None:
    """A retried occurrence (a workflow run again for the same intended time, or its activity
    retried after a crash) carries the same occurrence key: one turn."""
    schedule_id = ref(digest, "ticks").schedule_id
    when = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    occ = OccurrenceInput(
        schedule_id=schedule_id, agent="sched_digest", task="ticks", scheduled_for=when
    )
    results = [
        await temporal.execute_workflow(
            OCCURRENCE_WORKFLOW,
            occ,
            id=f"{schedule_id}-retry-{attempt}",
            task_queue=digest.queue,
            result_type=OccurrenceResult,
        )
        for attempt in range(3)
    ]
    assert [r.outcome for r in results] == ["submitted", "duplicate", "duplicate"]
    assert len({r.turn_id for r in results}) == 1 and results[0].conversation_id == "ops"
    async with engine.connect() as conn:
        count = await conn.scalar(
            sql("SELECT count(*) FROM turns WHERE idempotency_key = :k"),
            {"k": occurrence_key(schedule_id, when)},
        )
    assert count == 1


async def test_a_prompt_occurrence_postgres_refuses_is_tried_once_and_the_next_one_runs(
    digest: Deployment, temporal: Client, engine: AsyncEngine, gateway: httpx.AsyncClient
) -> None:
    """One rule for failure (issue 31): Postgres refuses the occurrence's turn (a data error,
    class 22, refused again for the same data), so the occurrence is tried once, not its
    task's `retry` times, fails without the database's words, and the next occurrence's turn
    in the same conversation runs."""
    schedule_id = ref(digest, "ticks").schedule_id
    when = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    occurrence = OccurrenceInput(
        schedule_id=schedule_id, agent="sched_digest", task="ticks", attempts=3
    )
    key = occurrence_key(schedule_id, when)
    workflow_id = f"{schedule_id}-refused"
    async with refused(engine, "turns", f"NEW.idempotency_key = '{key}'", event="INSERT"):
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(
                temporal.execute_workflow(
                    OCCURRENCE_WORKFLOW,
                    occurrence.model_copy(update={"scheduled_for": when}),
                    id=workflow_id,
                    task_queue=digest.queue,
                    result_type=OccurrenceResult,
                ),
                ENDS_WITHIN,
            )
    assert await workflow_attempts(temporal, workflow_id, OCCURRENCE_ACTIVITY) == [1]
    causes, cause = [], failed.value.cause
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__
    assert REFUSAL not in " ".join(causes)
    result = await temporal.execute_workflow(
        OCCURRENCE_WORKFLOW,
        occurrence.model_copy(update={"scheduled_for": when + timedelta(days=7)}),
        id=f"{schedule_id}-after-refused",
        task_queue=digest.queue,
        result_type=OccurrenceResult,
    )
    assert result.outcome == "submitted" and result.conversation_id == "ops"

    async def completed() -> dict[str, Any] | None:
        turns = await _turns(gateway, "sched_digest", "ops")
        return next((t for t in turns if t["turn_id"] == result.turn_id), None)

    turn = await eventually(completed)
    ended = await eventually(
        lambda: _ended(
            gateway, f"/v1/agents/sched_digest/conversations/ops/turns/{turn['turn_id']}"
        )
    )
    assert ended["status"] == "completed", ended


async def _ended(gateway: httpx.AsyncClient, path: str) -> dict[str, Any] | None:
    found: dict[str, Any] = (await gateway.get(path, headers=KEYS)).json()
    return found if found["status"] not in ("pending", "running") else None


async def test_handler_retries_then_succeeds(digest: Deployment, temporal: Client) -> None:
    schedule_id = ref(digest, "flaky").schedule_id
    result = await temporal.execute_workflow(
        OCCURRENCE_WORKFLOW,
        OccurrenceInput(schedule_id=schedule_id, agent="sched_digest", task="flaky", attempts=3),
        id=f"{schedule_id}-once",
        task_queue=digest.queue,
        result_type=OccurrenceResult,
    )
    assert result.outcome == "handled"
    runs = digest.runs("flaky")
    assert len(runs) == 3 and len({r["idempotency_key"] for r in runs}) == 1


async def test_handler_failure_is_logged_after_its_retries(
    digest: Deployment, temporal: Client, gateway: httpx.AsyncClient
) -> None:
    await temporal.get_schedule_handle(ref(digest, "broken").schedule_id).trigger()

    async def failed() -> str | None:
        found = await gateway.get("/v1/agents/sched_digest/schedules", headers=KEYS)
        broken = next(s for s in found.json()["schedules"] if s["task"] == "broken")
        return broken["last_result"] if broken["last_result"] == "failed" else None

    assert await eventually(failed) == "failed"
    assert len(digest.runs("broken")) == 2  # retry=1: tried twice, then logged
    log = digest.stack.processes[0].log.read_text()
    assert "scheduled task 'broken' of sched_digest failed after 2 attempt(s)" in log
    # The schedule is untouched: its next occurrence still comes.
    desc = await temporal.get_schedule_handle(ref(digest, "broken").schedule_id).describe()
    assert not desc.schedule.state.paused and desc.info.next_action_times


async def test_think_schedules_command(digest: Deployment) -> None:
    status, out, err = await run(
        sys.executable,
        "-m",
        "think",
        "schedules",
        "--agent",
        "sched_digest",
        env=digest.stack.env,
    )
    assert status == 0, err
    lines = out.splitlines()
    assert any(
        line.startswith(f"sched_digest/weekly: {FAR!r} [Europe/London] prompt -> weekly; next ")
        for line in lines
    ), lines
    assert len(lines) == 5


async def test_think_schedules_from_a_second_shell_finds_the_running_agents(
    digest: Deployment, tmp_path: Path
) -> None:
    """Issue 37: with a `think dev` hosting scheduled tasks, `think schedules` from another
    shell said "no scheduled tasks" and `--agent` named only `assistant`: it read THINK_AGENTS
    from that shell. `think dev`'s endpoints file now lends its agents and task queue too."""
    home = tmp_path / ".think"
    home.mkdir()
    running = Settings.from_env(digest.stack.env, find_dev_stack=False)
    _write_endpoints(home, running, digest.stack.api_url, None)  # as `think dev` writes it
    shell = {k: v for k, v in os.environ.items() if not k.startswith(("THINK_", "TEMPORAL_"))}
    shell["THINK_HOME"] = str(home)
    status, out, err = await run(
        sys.executable, "-m", "think", "schedules", "--agent", "sched_digest", env=shell
    )
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 5 and lines[0].startswith("sched_digest/"), lines
    status, out, err = await run(sys.executable, "-m", "think", "schedules", env=shell)
    assert status == 0, err
    assert out == "\n".join(lines) + "\n"  # every agent: the per-conversation one has none yet
    # The shell's own THINK_AGENTS still wins, and a miss says what it read and what to do.
    shell["THINK_AGENTS"] = "examples.assistant:Assistant"
    status, out, err = await run(
        sys.executable, "-m", "think", "schedules", "--agent", "sched_digest", env=shell
    )
    assert status == 2, out
    assert "no agent named 'sched_digest'" in err and "THINK_AGENTS=examples.assistant" in err
    assert "export the deployment's THINK_AGENTS" in err, err


async def test_conversation_scope(
    digest: Deployment, settings: Settings, temporal: Client, gateway: httpx.AsyncClient, cid: str
) -> None:
    conf = settings.model_copy(
        update={"agents": ["tests.schedule_agents:PerConversation"], "task_queue": digest.queue}
    )
    async with await ThinkService.connect(conf) as service:
        conv = service.conversation("sched_per_conversation", cid)
        await conv.configure({"reminder": "Stretch your legs."})
        assert await conv.reconcile_scheduled_tasks() == 1
        schedule_id = ScheduleRef(
            digest.queue, "sched_per_conversation", "reminder", "default", cid
        ).schedule_id
        await temporal.get_schedule_handle(schedule_id).describe()
        url = "/v1/agents/sched_per_conversation/schedules/reminder/trigger"
        triggered = await gateway.post(url, params={"conversation_id": cid}, headers=KEYS)
        assert triggered.status_code == 202
        turns = await eventually(lambda: _completed(gateway, "sched_per_conversation", cid))
        assert len(turns) == 1  # in the conversation itself: its id is the default target
        await conv.configure({})
        assert await conv.reconcile_scheduled_tasks() == 0
    with pytest.raises(RPCError) as gone:
        await temporal.get_schedule_handle(schedule_id).describe()
    assert gone.value.status == RPCStatusCode.NOT_FOUND


async def test_worker_start_reapplies_conversation_tasks(
    digest: Deployment, settings: Settings, temporal: Client, cid: str
) -> None:
    """A deploy that changes what a conversation declares: the next worker re-arms it."""
    conf = settings.model_copy(
        update={"agents": ["tests.schedule_agents:PerConversation"], "task_queue": digest.queue}
    )
    ref = ScheduleRef(digest.queue, "sched_per_conversation", "reminder", "default", cid)
    handle = temporal.get_schedule_handle(ref.schedule_id)
    async with await ThinkService.connect(conf) as service:
        conv = service.conversation("sched_per_conversation", cid)
        await conv.configure({"reminder": "Drink water.", "when": f"{FAR} in UTC"})
        await conv.reconcile_scheduled_tasks()
        await eventually(
            lambda: _listed(temporal, digest.queue, "sched_per_conversation", ref.schedule_id)
        )
        later = FAR.replace("12:00", "15:45")
        await conv.configure({"reminder": "Drink water.", "when": f"{later} in UTC"})
        digest.stack.wait_polling(digest.stack.start_worker())
        calendar = (await handle.describe()).schedule.spec.calendars[0]
        assert [r.start for r in calendar.hour] == [15] and [r.start for r in calendar.minute] == [
            45
        ]
        await conv.configure({})
        await conv.reconcile_scheduled_tasks()


async def _listed(temporal: Client, queue: str, agent: str, schedule_id: str) -> bool:
    return schedule_id in await schedule_ids(temporal, queue, agent)


async def _completed(gateway: httpx.AsyncClient, agent: str, cid: str) -> list[Any] | None:
    turns = await _turns(gateway, agent, cid)
    return turns if turns and all(t["status"] == "completed" for t in turns) else None


async def test_misdeclared_task_stops_the_worker(digest: Deployment) -> None:
    env = {**digest.stack.env, "THINK_AGENTS": "tests.schedule_agents:Misdeclared"}
    status, _, stderr = await run(sys.executable, "-m", "think", "worker", env=env)
    assert status != 0
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1, stderr
    [line] = lines
    assert "scheduled task 'nightly' (schedule 'every night at 3')" in line
    assert "'every <n> minutes'" in line and "'every week on monday,wednesday at HH:mm'" in line


async def test_occurrence_histories_replay_in_the_sandbox(
    digest: Deployment, temporal: Client
) -> None:
    """A delivered and a failed occurrence, made now, replay under the sandbox."""
    histories = []
    for task, attempts in (("ticks", 1), ("broken", 1)):
        schedule_id = ref(digest, task).schedule_id
        handle = await temporal.start_workflow(
            OCCURRENCE_WORKFLOW,
            OccurrenceInput(
                schedule_id=schedule_id, agent="sched_digest", task=task, attempts=attempts
            ),
            id=f"{schedule_id}-replay",
            task_queue=digest.queue,
        )
        with contextlib.suppress(WorkflowFailureError):
            await handle.result()
        histories.append(await handle.fetch_history())
    for history in histories:
        result = await replayer().replay_workflow(history, raise_on_replay_failure=True)
        assert result.replay_failure is None
    assert len(histories[0].events) <= 11  # one activity: the history stays small
    names = ("scheduled-occurrence", "scheduled-occurrence-failed")
    for name, history in zip(names, histories, strict=True):
        # Only new files, as in test_replay.py: tests/histories/ is what running workflows
        # look like, and test_committed_history_replays replays every one of them.
        path = HISTORIES / f"{name}.json"
        if os.environ.get("THINK_RECORD_HISTORIES") and not path.exists():
            path.write_text(history.to_json())
