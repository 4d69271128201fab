"""The logs of `think api` and `think worker` (issue 37): expected control flow is one line
with its cause, not a traceback; `THINK_LOG_LEVEL`; full timestamps; `THINK_LOG_FORMAT=json`
writes one JSON object a line, the Temporal core's lines included."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from tests._stack import ROOT, Stack, free_port
from think._settings import Settings
from think.cli._logging import JsonFormatter, TextFormatter
from think.engine._expected_failures import quiet_expected_failures
from think.exceptions import STALE_ATTEMPT, Superseded
from think.streaming import StaleAttempt

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 ")


def _raised(exc: BaseException) -> BaseException:
    """`exc` as caught, with its traceback."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def _stale_activity_error() -> BaseException:
    """What the workflow sees of a step refused as stale: an ActivityError whose cause is our
    ApplicationError, itself raised from the storage's StaleAttempt."""
    try:
        try:
            raise StaleAttempt("another attempt claimed 'turn_x:step:0' first")
        except StaleAttempt as stale:
            raise ApplicationError(str(stale), type=STALE_ATTEMPT, non_retryable=True) from stale
    except ApplicationError as app:
        error = ActivityError(
            "Activity task failed",
            scheduled_event_id=1,
            started_event_id=2,
            identity="w",
            activity_type="think.model_step",
            activity_id="1",
            retry_state=RetryState.NON_RETRYABLE_FAILURE,
        )
        error.__cause__ = app
        return _raised(error)


@pytest.fixture
def sdk_log() -> Iterator[io.StringIO]:
    """The Temporal SDK's two loggers of failures, as a worker has them (filter installed),
    written through the text formatter to a buffer."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    loggers = [
        logging.getLogger(n)
        for n in ("temporalio.activity", "temporalio.worker._workflow_instance")
    ]
    for logger in loggers:
        logger.addHandler(handler)
    quiet_expected_failures()
    try:
        yield out
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (Superseded("a step was cancelled by its worker"), "superseded, a newer attempt"),
        (StaleAttempt("another attempt claimed 'k' first"), "stale attempt"),
        (None, "ThinkStaleAttempt: another attempt claimed"),
        (ApplicationError("503 Overloaded", type="ThinkModelRetry"), "ThinkModelRetry: 503"),
    ],
)
def test_expected_control_flow_is_one_line_with_its_cause(
    sdk_log: io.StringIO, exc: BaseException | None, cause: str
) -> None:
    error = _raised(exc) if exc is not None else _stale_activity_error()
    workflows = logging.getLogger("temporalio.worker._workflow_instance")
    try:
        raise error
    except BaseException:
        # As the SDK logs a failed workflow task.
        workflows.warning("Failed activation on workflow think.ChatTurn with ID t", exc_info=True)
    lines = sdk_log.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0] and cause in lines[0], lines
    assert ISO.match(lines[0]) and " INFO " in lines[0], lines


def test_the_unexpected_keeps_its_traceback(sdk_log: io.StringIO) -> None:
    activities = logging.getLogger("temporalio.activity")
    try:
        raise KeyError("a bug")
    except KeyError:
        activities.warning("Completing activity as failed", exc_info=True)
    text = sdk_log.getvalue()
    assert "Traceback" in text and "KeyError: 'a bug'" in text and " WARNING " in text


def test_a_json_line_holds_the_traceback_and_the_extras() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "think.x", logging.ERROR, "f", 1, "failed %s", ("it",), sys.exc_info()
        )
    record.temporal_workflow = {"workflow_id": "w"}
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "failed it" and entry["level"] == "error"
    assert entry["logger"] == "think.x" and "ValueError: boom" in entry["exc"]
    assert entry["temporal_workflow"] == {"workflow_id": "w"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", entry["ts"])


@pytest.fixture(scope="module")
def json_stack(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("json-logs")
    own = Stack(
        env={
            **stack.env,
            "THINK_LOG_FORMAT": "json",
            "THINK_LOG_LEVEL": "info",
            "THINK_HOME": str(logs),
        },
        logs=logs,
    )
    own.wait_polling(own.start_worker())
    own.start_api()
    try:
        yield own
    finally:
        own.stop()


def test_json_mode_writes_one_json_object_a_line(json_stack: Stack, cid: str) -> None:
    with httpx.Client(base_url=json_stack.api_url, timeout=30) as api:
        body = {"input": "hi", "mode": "wait"}
        turn = api.post(f"/v1/agents/helper/conversations/{cid}/turns", json=body).json()
        assert turn["status"] == "completed", turn
    entries = []
    for proc in json_stack.processes:
        for line in proc.log.read_text().splitlines():
            entry = json.loads(line)  # every line, the access log and Temporal's core too
            assert {"ts", "level", "logger", "message"} <= set(entry), entry
            entries.append(entry)
    loggers = {e["logger"] for e in entries}
    assert "think.worker" in loggers and "uvicorn.access" in loggers, loggers
    assert any("worker polling task queue" in e["message"] for e in entries)


def test_think_worker_without_temporal_says_so_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "THINK_HOME": str(tmp_path),
        "THINK_DATABASE_URL": settings.require_database_url(),
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",  # nothing listens there
    }
    done = subprocess.run(
        [sys.executable, "-m", "think", "worker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "cannot reach Temporal at 127.0.0.1:" in errors[0], done.stderr
    assert "TEMPORAL_ADDRESS" in errors[0]  # the variable to look at


def test_think_api_without_temporal_says_so_in_one_line(settings: Settings, tmp_path: Path) -> None:
    """The gateway's failed start, logged by uvicorn: the cause in one line, no traceback."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "THINK_HOME": str(tmp_path),
        "THINK_DATABASE_URL": settings.require_database_url(),
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",  # nothing listens there
    }
    done = subprocess.run(
        [sys.executable, "-m", "think", "api", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "cannot reach Temporal at 127.0.0.1:" in done.stderr, done.stderr
    assert "TEMPORAL_ADDRESS" in done.stderr  # the variable to look at
