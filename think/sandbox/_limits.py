"""What one sandboxed run may spend, and what it answered."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

KillReason = Literal["timeout", "cpu_limit", "output_limit", "killed"]
"""Why the sandbox ended a program before it finished on its own: the wall time passed
(`timeout`), `RLIMIT_CPU` sent SIGXCPU (`cpu_limit`), stdout or stderr passed its cap
(`output_limit`), or a SIGKILL the sandbox did not send itself (`killed`, for example the
kernel's OOM killer)."""


class Limits(BaseModel):
    """The walls of one run. Each is enforced by the kernel or by the sandbox's init, never by
    the program's good will: wall time by pid 1 killing the whole pid namespace, CPU by
    `RLIMIT_CPU`, memory by `RLIMIT_AS` (address space, so a program maps at most this much),
    one file's size by `RLIMIT_FSIZE`, all of `/work` (and, separately, `/tmp`) by the size
    of its tmpfs, processes by `RLIMIT_NPROC`, output by the init reading at most
    `output_bytes` of stdout and as much of stderr and then ending the program."""

    model_config = ConfigDict(frozen=True)

    wall_seconds: float = Field(default=30.0, gt=0, le=3600)
    cpu_seconds: int = Field(default=30, gt=0, le=3600)
    memory_bytes: int = Field(default=512 * 1024 * 1024, ge=64 * 1024 * 1024)
    output_bytes: int = Field(default=64 * 1024, gt=0)
    """The cap of stdout, and the cap of stderr (each)."""
    file_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    """The largest file the program may write."""
    disk_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    """The size of the `/work` tmpfs (the input files count), and of `/tmp`'s."""
    processes: int = Field(default=32, gt=0, le=4096)
    """Processes and threads the program may have at once (a Python with threads counts each)."""


FileChangeKind = Literal["created", "modified", "deleted"]


class FileChange(BaseModel):
    """One path of `/work` that differs after the run from what the run was given."""

    model_config = ConfigDict(frozen=True)

    path: str
    kind: FileChangeKind
    bytes: int = 0
    """The new size (0 for a deletion)."""


class SandboxResult(BaseModel):
    """What a run answered. `files` is the whole of `/work` afterwards (regular files only,
    paths relative to `/work`, `/`-separated); `changes` is its difference from the input;
    `refused` lists what the program left in `/work` that the sandbox does not copy out (a
    symlink, a fifo, a device), each with why."""

    exit_code: int
    """The program's exit status, or minus the signal that ended it."""
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    killed: KillReason | None = None
    files: dict[str, bytes] = Field(default_factory=dict)
    changes: list[FileChange] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list)

    @property
    def timed_out(self) -> bool:
        return self.killed == "timeout"

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed is None
