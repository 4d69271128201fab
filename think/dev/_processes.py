"""Child processes and local ports, as the dev services need them.

Each embedded service is a child (or, for Postgres, a daemon) that must not outlive `think dev`,
must not steal its terminal's Ctrl-C, and, when it fails, must say why from its log: the helpers
here do that once for both services and for the CLI's supervisor, which spawns the API and the
worker the same way.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from think.exceptions import ThinkError

__all__ = [
    "EmbeddedServiceError",
    "free_port",
    "log_tail_of",
    "pid_alive",
    "port_is_free",
    "port_open",
    "spawn",
]


class EmbeddedServiceError(ThinkError):
    """An embedded service could not start or stop; the message carries the end of its log."""


def spawn(
    command: list[str], *, stdout: IO[bytes] | None = None, **kwargs: Any
) -> subprocess.Popen[bytes]:
    """Start a child in its own session, tied to our life where the OS allows.

    Its own session keeps a terminal's Ctrl-C from reaching it directly, so the parent can
    stop children in order (API and worker first, then Temporal). The parent-death signal
    means that a parent killed with SIGKILL does not leave servers behind.
    """
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.STDOUT if stdout is not None else None,
        start_new_session=True,
        preexec_fn=_child_preexec(),
        **kwargs,
    )


_PR_SET_PDEATHSIG = 1


def _child_preexec() -> Callable[[], None] | None:
    """A pre-exec hook that makes Linux send SIGTERM to the child when its parent dies.

    Linux ties the parent-death signal to the *thread* that forked, not the process, so it
    is only set up for children spawned from the main thread; a child spawned from a thread
    pool would otherwise be killed as soon as that pool thread exits.
    """
    if sys.platform != "linux" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _family(ip: str) -> socket.AddressFamily:
    """IPv6 for an IPv6 literal (`::`, `::1`: `think dev --host`), else IPv4."""
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def free_port(ip: str) -> int:
    with socket.socket(_family(ip), socket.SOCK_STREAM) as sock:
        sock.bind((ip, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_free(ip: str, port: int) -> bool:
    with socket.socket(_family(ip), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((ip, port))
        except OSError:
            return False
        return True


def port_open(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=0.5):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether `pid` is a live process; a zombie counts as gone.

    The postmaster is not our child (pg_ctl daemonizes it), so when it exits it may linger as
    a zombie until init reaps it; in some containers init never does.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no procfs (macOS): the kill probe above is all we have
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def log_tail_of(path: Path, offset: int, lines: int = 30) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return f"({path} is not readable)"
    return "\n".join(text.splitlines()[-lines:]) or "(the log is empty)"
