"""`think dev` end to end, as `make dev` runs it: banner, the banner's own curl commands, the
Temporal UI and search attributes, a clean Ctrl-C, and the data still there on the next start.

Runs the real command in a fresh directory with a stripped environment (no model, so the
bundled `assistant` answers through the offline model) on free ports, so it never clashes
with a `think dev` or another test session on the same machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests._stack import ROOT, free_port

BANNER_TIMEOUT = 90.0
"""Seconds for `think dev` to print its banner (Postgres initdb + Temporal + API on a slow box)."""
STOP_TIMEOUT = 45.0
"""Seconds for Ctrl-C to stop everything: STOP_GRACE (15 s) for the children, then services."""

pytestmark = [
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="finds leftover processes by command line"
    ),
    # Every wait below is bounded; this only backs them up (SIGALRM, so `finally` still runs).
    pytest.mark.timeout(2 * (BANNER_TIMEOUT + STOP_TIMEOUT) + 60),
]


def _free_ports(*names: str) -> dict[str, int]:
    """Distinct free ports, one per name."""
    while True:
        ports = {name: free_port() for name in names}
        if len(set(ports.values())) == len(ports):
            return ports


def _clean_env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("THINK_", "TEMPORAL_", "OPENAI_"))
    }
    env.update(THINK_HOME=str(home), PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    return env


class Dev:
    """One `think dev` process, its output collected by a thread so every wait is bounded."""

    def __init__(self, cwd: Path, home: Path, ports: dict[str, int]) -> None:
        self.ports = ports
        self.needles = [str(cwd), *(str(p) for p in ports.values())]
        self.lines: list[str] = []
        self.seen: dict[int, tuple[float, str]] = {}
        """pid -> (create_time, command line) of every process seen running for this run."""
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "think",
                "dev",
                "--port",
                str(ports["api"]),
                "--temporal-port",
                str(ports["temporal"]),
                "--ui-port",
                str(ports["ui"]),
            ],
            cwd=cwd,
            env=_clean_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Its own process group, as under a terminal: Ctrl-C goes to the whole group.
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self, last: int = 60) -> str:
        return "\n".join(self.lines[-last:])

    def wait_banner(self) -> list[str]:
        """The banner's lines, once its last line (where scripts find the stack) is out."""
        deadline = time.monotonic() + BANNER_TIMEOUT
        while not any(line.strip().startswith("export THINK_HOME=") for line in self.lines):
            if self.process.poll() is not None:
                self._reader.join(5)
                pytest.fail(f"think dev exited with {self.process.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no banner within {BANNER_TIMEOUT:.0f} s:\n{self.output()}")
            time.sleep(0.1)
        start = max(i for i, line in enumerate(self.lines) if "Ctrl-C stops everything" in line)
        return list(self.lines[start:])

    def track(self) -> list[str]:
        """Remember everything running for us now, so the check after stopping cannot miss a
        process whose command line names neither our directory nor our ports (the worker,
        postgres's own workers); returns the command lines of all of them."""
        roots = [psutil.Process(self.process.pid), *self.matching()]
        for root in roots:
            with contextlib.suppress(psutil.Error):
                for proc in [root, *root.children(recursive=True)]:
                    self.seen[proc.pid] = (proc.create_time(), " ".join(proc.cmdline()))
        return [command for _, command in self.seen.values()]

    def matching(self) -> list[psutil.Process]:
        """Live processes whose command line names our directory or one of our ports."""
        found = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            if proc.pid == os.getpid() or proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            args = proc.info["cmdline"] or []
            if any(
                needle in arg if os.sep in needle else arg == needle or arg.endswith(":" + needle)
                for arg in args
                for needle in self.needles
            ):
                found.append(proc)
        return found

    def leftovers(self) -> list[str]:
        """Descriptions of processes of this run that are still alive (zombies excluded)."""
        alive: dict[int, psutil.Process] = {p.pid: p for p in self.matching()}
        for pid, (created, _) in self.seen.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    alive[pid] = proc
        described = []
        for pid, proc in sorted(alive.items()):
            try:
                described.append(f"{pid}: {' '.join(proc.cmdline())[:200]}")
            except psutil.Error:
                continue  # gone meanwhile
        return described

    def ctrl_c(self) -> int:
        """SIGINT to the process group, as a terminal's Ctrl-C; returns the exit status."""
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            code = self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"think dev still running {STOP_TIMEOUT:.0f} s after SIGINT:\n{self.output()}"
            )
        self._reader.join(5)
        return code

    def kill_everything(self) -> None:
        """Whatever happened, leave nothing running: the group, then anything of ours (the
        children run in sessions of their own, so killing the group does not reach them)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        procs = list(self.matching())
        for pid, (created, _) in self.seen.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == created:
                    procs.append(proc)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(procs, timeout=10)


def _sh(command: str, timeout: float = 30.0) -> str:
    result = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{command}\nexit {result.returncode}: {result.stderr}"
    return result.stdout


def _after(banner: list[str], heading: str) -> str:
    """The command line printed under `heading`."""
    index = next(i for i, line in enumerate(banner) if line.startswith(heading))
    return banner[index + 1].strip()


def _field(banner: list[str], name: str) -> str:
    line = next((line for line in banner if line.strip().startswith(name)), None)
    assert line is not None, f"no {name!r} in the banner:\n" + "\n".join(banner)
    return line.split(maxsplit=len(name.split()))[-1]


def _stream_text(sse: str) -> tuple[str, list[str]]:
    """The text of a UI message stream and the types of its chunks."""
    text, types = [], []
    for line in sse.splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk: dict[str, Any] = json.loads(line.removeprefix("data: "))
        types.append(chunk["type"])
        if chunk["type"] == "text-delta":
            text.append(chunk["delta"])
    return "".join(text), types


def _assert_listed(temporal_port: int, cid: str, turn_id: str) -> None:
    """`temporal workflow list` finds the turn by its ThinkConversationId search attribute
    (visibility is eventually consistent, hence the short retry)."""
    temporal = shlex.quote(str(Path(sys.executable).parent / "temporal"))
    query = shlex.quote(f"ThinkConversationId='{cid}'")
    command = f"{temporal} workflow list --address 127.0.0.1:{temporal_port} --query {query}"
    deadline = time.monotonic() + 10
    while turn_id not in (listed := _sh(command)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert turn_id in listed, f"{command}\n{listed}"


def _messages_text(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (m["role"], "".join(p.get("text", "") for p in m["parts"] if p.get("type") == "text"))
        for m in messages
    ]


@pytest.mark.usefixtures("sigint_default")
def test_think_dev_serves_the_banner_commands_stops_cleanly_and_keeps_data(
    stack_home: Path,
) -> None:
    home = stack_home / ".think"
    ports = _free_ports("api", "temporal", "ui")
    api = f"http://127.0.0.1:{ports['api']}"

    # ---------------------------------------------------------------- first run
    dev = Dev(stack_home, home, ports)
    try:
        banner = dev.wait_banner()
        running = "\n".join(dev.track())
        # The one process tree: Postgres, the Temporal dev server, the API and one worker.
        for expected in (
            f"postgres -D {home}/pg",
            f"temporal server start-dev --ip 127.0.0.1 --port {ports['temporal']}",
            f"-m think api --host 127.0.0.1 --port {ports['api']}",
            "-m think worker",
        ):
            assert expected in running, f"no {expected!r} among:\n{running}"
        assert running.count("-m think worker") == 1, running
        text = "\n".join(banner)
        assert _field(banner, "API") == api, text
        assert _field(banner, "OpenAPI docs") == f"{api}/docs", text
        ui = _field(banner, "Temporal UI")
        assert ui == f"http://127.0.0.1:{ports['ui']}", text
        assert str(home) in _field(banner, "Data"), text
        # The next steps (issue 19): the venv's tools on PATH, `think chat`, the approval.
        assert f'export PATH="{Path(sys.executable).parent}:$PATH"' in text, text
        assert f"think chat --agent assistant --url {api}" in text, text
        assert "A turn that waits for a person" in text, text
        assert f"export THINK_HOME={home}" in text, text

        submit = _after(banner, "Submit a turn")
        submit_and_stream = _after(banner, "Submit and stream")
        stream = _after(banner, "Stream (or replay)")
        for command in (submit, submit_and_stream, stream):
            assert command.startswith("curl "), text
            # The commands must target the API we asked for (localhost is 127.0.0.1 here).
            urls = [arg for arg in shlex.split(command) if "://" in arg or "/v1/" in arg]
            assert len(urls) == 1, command
            url = urls[0] if "://" in urls[0] else f"http://{urls[0]}"
            assert httpx.URL(url).port == ports["api"], command
            assert httpx.URL(url).host in ("localhost", "127.0.0.1"), command
            assert "/v1/agents/assistant/conversations/" in url, command
        found = re.search(r"/conversations/([^/]+)/turns", submit)
        assert found is not None, submit
        cid = found.group(1)

        # The banner's submit command, exactly as printed.
        turn = json.loads(_sh(submit))
        turn_id = turn["turn_id"]
        assert turn["conversation_id"] == cid and turn["accepted"], turn
        # The banner's stream command with the turn id filled in: it follows the turn to its end.
        sse = _sh(stream.replace("<turn_id>", turn_id))
        streamed, types = _stream_text(sse)
        assert "offline model" in streamed, sse
        assert types[0] == "start" and types[-1] == "finish", types
        done = httpx.get(f"{api}/v1/agents/assistant/conversations/{cid}/turns/{turn_id}")
        assert done.json()["status"] == "completed", done.text
        # And the one-shot submit-and-stream command.
        streamed, types = _stream_text(_sh(submit_and_stream))
        assert "offline model" in streamed and types[-1] == "finish", types

        messages = httpx.get(f"{api}/v1/agents/assistant/conversations/{cid}/messages")
        assert messages.status_code == 200, messages.text
        before = _messages_text(messages.json()["messages"])
        assert [role for role, _ in before] == ["user", "assistant", "user", "assistant"], before
        assert before[0] == ("user", "Hello!") and "offline model" in before[1][1], before

        assert httpx.get(f"{api}/docs").status_code == 200
        assert httpx.get(ui, timeout=10).status_code == 200
        # The chat page, told where the Temporal UI is so it links each turn to its workflow.
        assert _field(banner, "Chat page") == f"{api}/ui", text
        page = httpx.get(f"{api}/ui")
        assert page.status_code == 200, page.text
        assert f'"temporal_ui_url": "{ui}"' in page.text, page.text
        # The turn is visible in Temporal through the project's search attribute.
        _assert_listed(ports["temporal"], cid, turn_id)

        dev.track()
        code = dev.ctrl_c()
        assert code == 0, dev.output()
        assert "think dev: stopped" in dev.output(), dev.output()
        assert dev.leftovers() == [], dev.output()
    finally:
        dev.kill_everything()
    assert not (home / "endpoints.json").exists()

    # ---------------------------------------------------------------- second run, same data
    dev = Dev(stack_home, home, ports)
    try:
        dev.wait_banner()
        dev.track()
        messages = httpx.get(f"{api}/v1/agents/assistant/conversations/{cid}/messages")
        assert messages.status_code == 200, messages.text
        assert _messages_text(messages.json()["messages"]) == before
        _assert_listed(ports["temporal"], cid, turn_id)  # Temporal's history persisted too
        # The banner's command again: same Idempotency-Key, so the same turn, not a new one.
        again = json.loads(_sh(submit))
        assert (again["turn_id"], again["accepted"]) == (turn_id, False), again
        code = dev.ctrl_c()
        assert code == 0, dev.output()
        assert dev.leftovers() == [], dev.output()
    finally:
        dev.kill_everything()


def _think(cwd: Path, home: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """The `think` console script, as `make dev` runs it (not `python -m think`)."""
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "think"), *args],
        cwd=cwd,
        env={**_clean_env(home), **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_a_misspelt_agent_class_is_named_before_anything_starts(tmp_path: Path) -> None:
    """Issue 19: `my_agents:Forcaster` said "not a subclass of think.Think", twice, after
    Postgres and Temporal had started."""
    (tmp_path / "my_agents.py").write_text(
        "from think import Think\n\n\nclass Forecaster(Think):\n    name = 'forecaster'\n"
    )
    home = tmp_path / ".think"
    ports = _free_ports("api", "temporal", "ui")
    flags = [f"--{n}" for n in ("port", "temporal-port", "ui-port")]
    args = [a for flag, port in zip(flags, ports.values(), strict=True) for a in (flag, str(port))]
    dev = _think(tmp_path, home, "dev", *args, THINK_AGENTS="my_agents:Forcaster")
    out, _ = dev.communicate(timeout=60)
    assert dev.returncode == 2, out
    assert out.strip().splitlines() == [
        "think dev: error: THINK_AGENTS entry 'my_agents:Forcaster': module 'my_agents' has no "
        "attribute 'Forcaster'; did you mean my_agents:Forecaster? (its Think subclasses: "
        "Forecaster)"
    ], out
    assert not home.exists()  # nothing started, nothing written


def test_every_busy_port_is_named_with_its_flag_at_once(tmp_path: Path) -> None:
    ports = _free_ports("api", "temporal", "ui")
    held = []
    try:
        for port in ports.values():
            sock = socket.socket()
            sock.bind(("127.0.0.1", port))
            sock.listen()
            held.append(sock)
        dev = _think(
            tmp_path,
            tmp_path / ".think",
            "dev",
            *("--port", str(ports["api"]), "--temporal-port", str(ports["temporal"])),
            *("--ui-port", str(ports["ui"])),
        )
        out, _ = dev.communicate(timeout=60)
    finally:
        for sock in held:
            sock.close()
    assert dev.returncode == 2, out
    assert len(out.strip().splitlines()) == 1, out
    for what, port, flag in (
        ("the API", ports["api"], "THINK_PORT=8001 or --port"),
        ("Temporal gRPC", ports["temporal"], "--temporal-port"),
        ("the Temporal UI", ports["ui"], "--ui-port"),
    ):
        assert f"127.0.0.1:{port} ({what}; move it with {flag}" in out, out
    # `make dev` passes no flags (issue 37): each port says how to move it from make too.
    assert "make dev DEV_ARGS='--temporal-port 7234'" in out, out
    assert not (tmp_path / ".think" / "pg").exists()


def test_think_port_moves_the_api_as_make_dev_can(tmp_path: Path) -> None:
    """`make dev` passes no flags: THINK_PORT is the port it serves the API on (issue 37)."""
    ports = _free_ports("api", "temporal", "ui")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports["api"]))
        sock.listen()
        dev = _think(
            tmp_path,
            tmp_path / ".think",
            "dev",
            *("--temporal-port", str(ports["temporal"]), "--ui-port", str(ports["ui"])),
            THINK_PORT=str(ports["api"]),
        )
        out, _ = dev.communicate(timeout=60)
    assert dev.returncode == 2, out
    assert f"127.0.0.1:{ports['api']} (the API; move it with THINK_PORT=8001" in out, out


def test_a_ctrl_c_while_the_command_line_is_parsed_exits_cleanly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launcher hands SIGINT back once `think.cli` is imported; building the parser (it
    reads the package's metadata) comes next, and a Ctrl-C there printed a traceback of
    `importlib.metadata` (seen once in the test below, at 0.2 s)."""
    import think.cli as cli

    def interrupted() -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_parser", interrupted)
    try:
        status = cli._run(["dev"])
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped the command line, as a traceback")
    assert status == 130


@pytest.mark.parametrize("after", [0.2, 0.8, 1.6])
@pytest.mark.usefixtures("sigint_default")
def test_ctrl_c_while_starting_exits_cleanly(stack_home: Path, after: float) -> None:
    """Issue 19: a Ctrl-C in the first two seconds (while Python imports) printed a 50-78 line
    traceback. Whenever it comes, the answer is a clean exit and nothing left running."""
    ports = _free_ports("api", "temporal", "ui")
    home = stack_home / ".think"
    dev = Dev.__new__(Dev)
    dev.ports, dev.seen = ports, {}
    dev.needles = [str(stack_home), *(str(p) for p in ports.values())]
    dev.process = _think(
        stack_home,
        home,
        "dev",
        *("--port", str(ports["api"]), "--temporal-port", str(ports["temporal"])),
        *("--ui-port", str(ports["ui"])),
    )
    try:
        time.sleep(after)
        with contextlib.suppress(psutil.Error):
            dev.track()
        os.killpg(dev.process.pid, signal.SIGINT)
        out, _ = dev.process.communicate(timeout=STOP_TIMEOUT)
        assert dev.process.returncode in (0, 130), out
        assert "Traceback" not in out, out
        assert len(out.splitlines()) <= 3, out
        assert dev.leftovers() == [], out
    finally:
        dev.kill_everything()
