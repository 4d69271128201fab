"""The sandbox itself (`think.sandbox.run`), no stack: what a program can do, and the escape
corpus, each contained with a clear result and the host unchanged."""

from __future__ import annotations

import ast
import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from think.sandbox import Limits, SandboxPathError, run

QUICK = Limits(wall_seconds=20, cpu_seconds=10, memory_bytes=256 * 1024 * 1024, processes=16)


async def test_a_program_reads_and_writes_its_files() -> None:
    code = (
        "import csv\n"
        "rows = list(csv.DictReader(open('data.csv')))\n"
        "total = sum(int(r['n']) for r in rows)\n"
        "import os\n"
        "os.makedirs('out')\n"
        "open('out/total.txt', 'w').write(str(total))\n"
        "print('rows', len(rows))\n"
        "os.remove('old.txt')\n"
    )
    files = {"data.csv": b"name,n\na,1\nb,2\n", "old.txt": b"bye", "keep.txt": b"same"}
    result = await run(code, files=files, limits=QUICK)
    assert result.ok, result.stderr
    assert result.stdout == "rows 2\n"
    assert result.files == {
        "data.csv": files["data.csv"],
        "keep.txt": b"same",
        "out/total.txt": b"3",
    }
    changes = {(c.path, c.kind) for c in result.changes}
    assert changes == {("out/total.txt", "created"), ("old.txt", "deleted")}


async def test_bash_and_a_nonzero_exit() -> None:
    result = await run("echo hi; echo oops >&2; exit 3", language="bash", limits=QUICK)
    assert (result.exit_code, result.stdout, result.stderr) == (3, "hi\n", "oops\n")
    assert result.killed is None


async def test_an_input_path_that_leaves_work_is_refused() -> None:
    for bad in ("../x", "/etc/x", ""):
        with pytest.raises(SandboxPathError):
            await run("pass", files={bad: b""})


# -- the escape corpus ----------------------------------------------------------------------------


async def test_the_hosts_files_are_not_there(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    code = (
        "import os\n"
        f"for p in ('/etc/passwd', '/etc/shadow', '/home', '/proc/1/environ', '/var', "
        f"'/work/../etc', {str(secret)!r}):\n"
        "    print(p, os.path.exists(p))\n"
        "print(sorted(os.listdir('/tmp')))\n"
        "print(sorted(os.listdir('/')))\n"
    )
    result = await run(code, limits=QUICK)
    assert result.ok, result.stderr
    lines = result.stdout.splitlines()
    assert all(line.endswith("False") for line in lines[:-2]), result.stdout
    assert lines[-2] == "[]"  # a fresh /tmp, not the host's
    # The root holds the scratch dirs, the system's read-only libraries, and the top of the
    # path to Python's runtime (only that runtime is bound under it).
    runtime_top = PurePosixPath(sys.base_prefix).parts[1]
    allowed = {"bin", "dev", "lib", "lib32", "lib64", "libx32", "run", "sbin", "tmp", "usr"}
    assert set(ast.literal_eval(lines[-1])) <= allowed | {"work", runtime_top}


async def test_no_environment_leaks_in() -> None:
    os.environ["THINK_TEST_CANARY"] = "do-not-leak"
    try:
        result = await run("import os; print(sorted(os.environ))", limits=QUICK)
    finally:
        del os.environ["THINK_TEST_CANARY"]
    assert "THINK_TEST_CANARY" not in result.stdout
    assert "DATABASE" not in result.stdout.upper()


def _exists(path: str) -> bool:
    return os.path.exists(path)


async def test_writing_outside_work_changes_nothing_on_the_host(tmp_path: Path) -> None:
    marker = tmp_path / "host.txt"
    marker.write_text("original")
    code = (
        "import os\n"
        f"targets = [{str(marker)!r}, '/usr/evil', '/run/think/program/main.py', '/evil']\n"
        "for t in targets:\n"
        "    try:\n"
        "        open(t, 'w').write('pwned')\n"
        "        print(t, 'written')\n"
        "    except OSError as e:\n"
        "        print(t, type(e).__name__)\n"
        "open('/tmp/scratch', 'w').write('fine')\n"
    )
    result = await run(code, limits=QUICK)
    assert result.ok, result.stderr
    assert "written" not in result.stdout, result.stdout
    assert marker.read_text() == "original"
    assert not any(map(_exists, ("/usr/evil", "/evil")))
    assert result.files == {}  # /tmp is scratch: only /work comes back


async def test_no_privilege_to_undo_the_walls() -> None:
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('mount', libc.mount(b'none', b'/work', b'tmpfs', 0, None), ctypes.get_errno())\n"
        "print('uid', os.getuid())\n"
        "try:\n"
        "    os.chroot('/tmp')\n"
        "    print('chroot ok')\n"
        "except OSError as e:\n"
        "    print('chroot', e.errno)\n"
    )
    result = await run(code, limits=QUICK)
    assert result.ok, result.stderr
    assert "mount -1 1" in result.stdout  # EPERM
    assert "chroot 1" in result.stdout


@pytest.fixture
async def listener() -> AsyncIterator[tuple[int, list[Any]]]:
    """The test's own TCP server on 127.0.0.1, counting the connections it gets."""
    seen: list[Any] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(writer.get_extra_info("peername"))
        writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, seen
    finally:
        server.close()
        await server.wait_closed()


async def test_no_socket_reaches_anything(listener: tuple[int, list[Any]]) -> None:
    port, seen = listener
    code = (
        "import socket\n"
        f"for host, port in (('127.0.0.1', {port}), ('10.0.0.1', 80), ('1.1.1.1', 443), "
        "('::1', 80)):\n"
        "    family = socket.AF_INET6 if ':' in host else socket.AF_INET\n"
        "    s = socket.socket(family)\n"
        "    s.settimeout(3)\n"
        "    try:\n"
        "        s.connect((host, port))\n"
        "        print(host, 'connected')\n"
        "    except OSError as e:\n"
        "        print(host, e.errno)\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 80)\n"
        "    print('dns resolved')\n"
        "except OSError as e:\n"
        "    print('dns', type(e).__name__)\n"
    )
    result = await run(code, limits=QUICK)
    assert result.ok, result.stderr
    assert "connected" not in result.stdout and "resolved" not in result.stdout, result.stdout
    assert seen == []


async def test_a_fork_bomb_is_contained() -> None:
    python_bomb = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    print('refused after', n, e.errno)\n"
    )
    result = await run(python_bomb, limits=QUICK)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("refused after") and result.stdout.endswith(" 11\n")
    assert int(result.stdout.split()[2]) < QUICK.processes
    bash_bomb = await run(
        "bomb() { bomb | bomb & }; bomb; sleep 60",
        language="bash",
        limits=QUICK.model_copy(update={"wall_seconds": 3}),
    )
    assert bash_bomb.killed == "timeout" or bash_bomb.exit_code != 0


async def test_a_memory_bomb_is_refused() -> None:
    result = await run("x = bytearray(2 * 1024 ** 3)", limits=QUICK)
    assert result.exit_code == 1 and "MemoryError" in result.stderr


async def test_an_infinite_loop_ends_at_the_wall_time() -> None:
    limits = QUICK.model_copy(update={"wall_seconds": 2})
    result = await run("while True: pass", limits=limits)
    assert result.killed == "timeout" and result.timed_out
    assert result.exit_code == -9


async def test_a_cpu_hog_ends_at_the_cpu_limit() -> None:
    limits = QUICK.model_copy(update={"wall_seconds": 30, "cpu_seconds": 1})
    result = await run("while True: pass", limits=limits)
    assert result.killed == "cpu_limit", result


async def test_100_mb_of_output_is_capped() -> None:
    code = "import sys\nfor _ in range(1600):\n    sys.stdout.write('x' * 65536)\n"
    result = await run(code, limits=QUICK)
    assert result.killed == "output_limit"
    assert result.stdout_truncated and len(result.stdout) == QUICK.output_bytes


async def test_a_file_past_the_size_limit_is_cut() -> None:
    limits = QUICK.model_copy(update={"file_bytes": 1024 * 1024})
    result = await run("open('big', 'wb').write(b'x' * 2 * 1024 * 1024)", limits=limits)
    assert "File too large" in result.stderr
    assert len(result.files["big"]) <= 1024 * 1024


async def test_a_symlink_out_of_work_is_never_followed_or_saved() -> None:
    code = (
        "ln -s /etc/passwd passwd; ln -s ../../../ up; mkfifo pipe; mkdir d; ln -s /usr d/usr\n"
        "echo data > real.txt"
    )
    result = await run(code, language="bash", limits=QUICK)
    assert result.ok, result.stderr
    assert result.files == {"real.txt": b"data\n"}
    assert sorted(result.refused) == [
        "d/usr (symlink)",
        "passwd (symlink)",
        "pipe (special file)",
        "up (symlink)",
    ]


# -- the channel ----------------------------------------------------------------------------------


async def test_the_program_asks_the_host_over_its_channel() -> None:
    asked: list[dict[str, Any]] = []

    async def on_request(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        if request.get("op") == "fail":
            raise LookupError("no such thing")
        await asyncio.sleep(0.01)
        return {"double": request["n"] * 2}

    code = (
        "import asyncio, think_host\n"
        "print(think_host.available(), think_host.request({'op': 'x', 'n': 1}))\n"
        "async def main():\n"
        "    return await asyncio.gather(*(think_host.arequest({'op': 'x', 'n': n})"
        " for n in range(5)))\n"
        "print(asyncio.run(main()))\n"
        "try:\n"
        "    think_host.request({'op': 'fail'})\n"
        "except think_host.HostError as e:\n"
        "    print(e.type, e.message)\n"
    )
    result = await run(code, limits=QUICK, on_request=on_request)
    assert result.ok, result.stderr
    assert result.stdout.splitlines() == [
        "True {'double': 2}",
        "[{'double': 0}, {'double': 2}, {'double': 4}, {'double': 6}, {'double': 8}]",
        "LookupError no such thing",
    ]
    assert len(asked) == 7


async def test_without_a_handler_there_is_no_channel() -> None:
    code = (
        "import os, think_host\n"
        "print(think_host.available(), sorted(os.listdir('/proc/self/fd')) "
        "if os.path.exists('/proc') else 'no proc')\n"
    )
    result = await run(code, limits=QUICK)
    assert result.stdout == "False no proc\n"


def _launchers_of_this_process() -> list[int]:
    """Sandbox launchers (`_helper.py`) whose parent is this test process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"_helper.py" in command:
            found.append(int(entry))
    return found


async def test_cancelling_the_caller_kills_the_run() -> None:
    """A cancelled activity takes its program with it: nothing of the run outlives it."""
    asked = asyncio.Event()

    async def on_request(request: dict[str, Any]) -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()  # never answers
        return {}

    code = "import think_host\nthink_host.request({'op': 'wait'})\n"
    running = asyncio.create_task(run(code, limits=QUICK, on_request=on_request))
    await asyncio.wait_for(asked.wait(), 30)
    assert len(_launchers_of_this_process()) == 1
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert _launchers_of_this_process() == []
