"""The system under test: embedded services, a worker and the API as real processes.

Started once per session. The worker and the gateway are separate OS processes run through
the real CLI (`python -m think worker|api`), exactly as a deployment runs them, so tests can
also kill them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from think.dev import Services

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""


@dataclass
class Stack:
    env: dict[str, str]
    logs: Path
    api_url: str = ""
    processes: list[Process] = field(default_factory=list)
    services: Services | None = None
    """The embedded Postgres and Temporal it runs against, when its creator started them."""

    @property
    def pids(self) -> dict[str, list[int]]:
        """Process ids by role, for benchmarks that read CPU time from /proc: `worker` and
        `api` (the live ones), and `postgres` (the postmaster; its backends are its children)
        and `temporal` when `services` is set."""
        pids: dict[str, list[int]] = {}
        for proc in self.processes:
            if proc.popen.poll() is None:
                pids.setdefault(proc.name, []).append(proc.pid)
        if self.services is not None:
            pids["postgres"] = [self.services.postgres.pid]
            pids["temporal"] = [self.services.temporal.pid]
        return pids

    def spawn(self, name: str, *args: str) -> Process:
        log = self.logs / f"{name}-{len(self.processes)}.log"
        handle = log.open("wb")
        popen = subprocess.Popen(
            [sys.executable, "-m", "think", *args],
            cwd=ROOT,
            env=self.env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        handle.close()
        proc = Process(name, popen, log)
        self.processes.append(proc)
        return proc

    def start_worker(self) -> Process:
        return self.spawn("worker", "worker")

    def replace_worker(self) -> Process:
        """SIGKILL a live worker, as a crash would, and start another: the replacement picks
        the dead one's activities up once their heartbeats time out."""
        live = [p for p in self.processes if p.name == "worker" and p.popen.poll() is None]
        if not live:
            raise RuntimeError("no live worker to kill")
        live[0].kill()
        return self.start_worker()

    def wait_polling(self, proc: Process, timeout: float = 60.0) -> None:
        """Until the worker says it polls its task queue."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited:\n{proc.log_tail()}")
            if proc.log.exists() and "worker polling task queue" in proc.log.read_text():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{proc.name} not polling in {timeout}s:\n{proc.log_tail()}")

    def start_api(self) -> Process:
        port = free_port()
        proc = self.spawn("api", "api", "--host", "127.0.0.1", "--port", str(port))
        self.api_url = f"http://127.0.0.1:{port}"
        self.wait_ready(proc)
        return proc

    def wait_ready(self, proc: Process, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited:\n{proc.log_tail()}")
            try:
                if httpx.get(f"{self.api_url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{proc.name} not ready in {timeout}s:\n{proc.log_tail()}")

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()


def stack_env(
    *,
    database_url: str,
    temporal_address: str,
    task_queue: str,
    agents: str,
    model_url: str | None,
    home: Path,
) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("THINK_", "OPENAI_", "TEMPORAL_"))
    }
    env.update(
        THINK_DATABASE_URL=database_url,
        TEMPORAL_ADDRESS=temporal_address,
        THINK_TASK_QUEUE=task_queue,
        THINK_AGENTS=agents,
        THINK_HOME=str(home),
        THINK_PENDING_SWEEP_SECONDS="1",
        # The suite submits far faster than any person; test_limits.py tests the limit on a
        # gateway of its own.
        THINK_SUBMISSIONS_PER_MINUTE="0",
        PYTHONUNBUFFERED="1",
    )
    if model_url:
        env.update(OPENAI_BASE_URL=model_url, OPENAI_API_KEY="test-key")
    return env


def in_ci() -> bool:
    """Whether this is a CI run (`.ci/run`, or any CI that sets CI=true or CI=1)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@contextlib.contextmanager
def extra_gateway(env: Mapping[str, str], logs: Path) -> Iterator[str]:
    """One more gateway process on the same services and task queue, configured by `env`
    (the suite stack's, with what the test changes): its URL while the block runs."""
    gateway = Stack(env=dict(env), logs=logs)
    try:
        gateway.start_api()
        yield gateway.api_url
    finally:
        gateway.stop()


@contextlib.contextmanager
def own_stack(env: Mapping[str, str], logs: Path) -> Iterator[Stack]:
    """A worker and a gateway of their own, configured by `env` (an own task queue, say), so
    that a test may kill them and hurt no one."""
    own = Stack(env=dict(env), logs=logs)
    try:
        worker = own.start_worker()
        own.start_api()
        # Listening for the turns its gateway announces: otherwise the first is started a
        # second later by whichever worker sweeps first, maybe another stack's.
        own.wait_polling(worker)
        yield own
    finally:
        own.stop()


def bearer_client(url: str, key: str) -> httpx.AsyncClient:
    """An HTTP client for `url` that sends `key` as its API key."""
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
