"""The sandbox's launcher and init, run by the host as `python -I -S _helper.py CONFIG`.

It forks a child that unshares a user, mount, network, pid, IPC and UTS namespace; the
launcher (still on the host's side) writes the child's uid/gid maps (root inside = the caller
outside; when the caller is the host's root, the program's own uid 1000 inside maps to
`nobody` outside, so `RLIMIT_NPROC` binds it: the kernel never counts processes of the real
root). The child forks pid 1 of the fresh pid namespace, which is the init below: root only
inside a user namespace, in a network namespace whose only interface is a down loopback.

Standard library only (it runs before, and outside, the project's import path). It builds
the program's world in a size-limited tmpfs (a read-only bind of the interpreter and of the
system's libraries, a fresh `/work` holding a copy of the input files, a fresh `/tmp`, four
device nodes, no `/etc`, `/home`, `/proc` or host `/tmp`), forks the program into it
(`pivot_root`, every capability dropped, no new privileges, rlimits), reads its output up to
the caps, kills the whole namespace at the wall time, and copies `/work` back out to the host
(regular files only: a symlink or a special file is listed as refused, never followed).

Why a helper at all: the copy back needs a process that still sees the host after the program
has lost it, and pid 1 can end every process of the namespace with one `kill(-1, SIGKILL)`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import resource
import selectors
import shutil
import signal
import stat
import sys
import time
from typing import Any

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECUREBITS = 28
SECUREBITS_LOCKED_NOROOT = 0x3F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS and their locks
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CHANNEL_FD = 3
PROGRAM_UID = 1000
"""The program's uid inside when the host runs as root (mapped to `nobody` outside)."""
NOBODY = 65534

_libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    rc: int = _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(rc, f"mount {source!r} on {target!r}")


def _locked_flags(path: str) -> int:
    """The flags a bind mount inherits and may not lose on remount (the kernel locks them)."""
    st = os.statvfs(path).f_flag
    flags = 0
    for st_bit, ms_bit in (
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME),
        (os.ST_NODIRATIME, MS_NODIRATIME),
        (os.ST_RELATIME, MS_RELATIME),
    ):
        if st & st_bit:
            flags |= ms_bit
    return flags


def _bind_readonly(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb"):
            pass
    _mount(source, target, None, MS_BIND | MS_REC, None)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | _locked_flags(target)
    _mount(None, target, None, flags, None)


def _build_root(config: dict[str, Any]) -> str:
    root: str = config["root"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755")
    for system_dir in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(system_dir):
            os.symlink(os.readlink(system_dir), root + system_dir)
        elif os.path.isdir(system_dir):
            _bind_readonly(system_dir, root + system_dir)
    for inside, outside in config["mounts"].items():
        _bind_readonly(outside, root + inside)
    for device in ("null", "zero", "random", "urandom"):
        _bind_readonly("/dev/" + device, f"{root}/dev/{device}")
    size = int(config["limits"]["disk_bytes"])
    for scratch in ("/work", "/tmp"):
        os.makedirs(root + scratch, exist_ok=True)
        _mount("tmpfs", root + scratch, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=777")
    _copy_tree(config["input"], root + "/work", refused=None)
    if config["as_nobody"]:
        for scratch in ("/work", "/tmp"):
            for dirpath, dirnames, filenames in os.walk(root + scratch):
                for name in [*dirnames, *filenames]:
                    os.lchown(os.path.join(dirpath, name), PROGRAM_UID, PROGRAM_UID)
            os.lchown(root + scratch, PROGRAM_UID, PROGRAM_UID)
    return root


def _copy_tree(source: str, target: str, refused: list[str] | None, prefix: str = "") -> None:
    """Regular files and directories only, never following a link."""
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        rel = prefix + entry.name
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            os.makedirs(os.path.join(target, entry.name), exist_ok=True)
            _copy_tree(entry.path, os.path.join(target, entry.name), refused, rel + "/")
        elif stat.S_ISREG(mode):
            shutil.copyfile(entry.path, os.path.join(target, entry.name), follow_symlinks=False)
        elif refused is not None:
            kind = "symlink" if stat.S_ISLNK(mode) else "special file"
            refused.append(f"{rel} ({kind})")


def _drop_privileges(*, as_nobody: bool) -> None:
    """No capability survives, in any set, and none can come back through an exec."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient caps")
    _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_NOROOT, 0, 0, 0), "securebits")
    if as_nobody:
        os.setgroups([])
        os.setresgid(PROGRAM_UID, PROGRAM_UID, PROGRAM_UID)
        os.setresuid(PROGRAM_UID, PROGRAM_UID, PROGRAM_UID)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def _set_limits(limits: dict[str, Any]) -> None:
    cpu = int(limits["cpu_seconds"])
    for which, soft, hard in (
        (resource.RLIMIT_AS, limits["memory_bytes"], limits["memory_bytes"]),
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_FSIZE, limits["file_bytes"], limits["file_bytes"]),
        (resource.RLIMIT_NPROC, limits["processes"], limits["processes"]),
        (resource.RLIMIT_NOFILE, 256, 256),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(which, (int(soft), int(hard)))


def _child(config: dict[str, Any], root: str, out_w: int, err_w: int, channel: int | None) -> None:
    """In the forked child: enter the root, lose every privilege, become the program."""
    try:
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        null = os.open(root + "/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        if channel is not None:
            os.dup2(channel, CHANNEL_FD)
            os.set_inheritable(CHANNEL_FD, True)
        keep = CHANNEL_FD + 1 if channel is not None else CHANNEL_FD
        os.closerange(keep, 65536)
        # A mount namespace of its own: pivot_root changes the root of every process of the
        # namespace, and the init must keep seeing the host to copy `/work` out.
        _check(_libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
        os.chdir(root)
        number = SYS_PIVOT_ROOT[platform.machine()]
        _check(_libc.syscall(number, b".", b"."), "pivot_root")
        _check(_libc.umount2(b".", MNT_DETACH), "detach the host root")
        os.chdir("/work")
        _drop_privileges(as_nobody=bool(config["as_nobody"]))
        _set_limits(config["limits"])
        argv: list[str] = config["argv"]
        os.execve(argv[0], argv, config["env"])
    except BaseException as exc:
        os.write(2, f"sandbox: could not start the program: {exc}\n".encode())
    os._exit(127)


def _kill_all() -> None:
    """From pid 1: every other process of the pid namespace, at once."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)


def _supervise(config: dict[str, Any], pid: int, out_r: int, err_r: int) -> dict[str, Any]:
    limits = config["limits"]
    cap = int(limits["output_bytes"])
    deadline = time.monotonic() + float(limits["wall_seconds"])
    buffers = {out_r: bytearray(), err_r: bytearray()}
    truncated = {out_r: False, err_r: False}
    selector = selectors.DefaultSelector()
    for fd in buffers:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    pidfd = os.pidfd_open(pid)
    selector.register(pidfd, selectors.EVENT_READ)
    reason: str | None = None
    status: int | None = None
    while status is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            reason = "timeout"
            _kill_all()
            break
        for key, _ in selector.select(remaining):
            fd = int(key.fd)
            if fd == pidfd:
                _, status = os.waitpid(pid, 0)
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                selector.unregister(fd)
                continue
            room = cap - len(buffers[fd])
            buffers[fd] += chunk[: max(room, 0)]
            if len(chunk) > room:
                truncated[fd] = True
                reason = "output_limit"
        if reason == "output_limit":
            _kill_all()
            break
    # Whatever the program left running (a daemon, a fork bomb) ends with it.
    _kill_all()
    if status is None:
        _, status = os.waitpid(pid, 0)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    for fd in buffers:
        os.set_blocking(fd, True)
        while len(buffers[fd]) <= cap and (chunk := os.read(fd, 65536)):
            buffers[fd] += chunk
        if len(buffers[fd]) > cap:
            truncated[fd] = True
            del buffers[fd][cap:]
    if os.WIFSIGNALED(status):
        exit_code = -os.WTERMSIG(status)
        if reason is None and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
            reason = "cpu_limit" if os.WTERMSIG(status) == signal.SIGXCPU else "killed"
    else:
        exit_code = os.WEXITSTATUS(status)
    output: str = config["output"]
    with open(os.path.join(output, "stdout"), "wb") as f:
        f.write(buffers[out_r])
    with open(os.path.join(output, "stderr"), "wb") as f:
        f.write(buffers[err_r])
    return {
        "exit_code": exit_code,
        "reason": reason,
        "stdout_truncated": truncated[out_r],
        "stderr_truncated": truncated[err_r],
    }


def _write_maps(pid: int, *, as_nobody: bool) -> None:
    uid, gid = os.geteuid(), os.getegid()
    if as_nobody:
        uid_map = f"0 {uid} 1\n{PROGRAM_UID} {NOBODY} 1\n"
        gid_map = f"0 {gid} 1\n{PROGRAM_UID} {NOBODY} 1\n"
    else:
        with open(f"/proc/{pid}/setgroups", "w", encoding="ascii") as f:
            f.write("deny")
        uid_map, gid_map = f"0 {uid} 1\n", f"0 {gid} 1\n"
    with open(f"/proc/{pid}/gid_map", "w", encoding="ascii") as f:
        f.write(gid_map)
    with open(f"/proc/{pid}/uid_map", "w", encoding="ascii") as f:
        f.write(uid_map)


def main() -> None:
    """Launcher: fork the child that unshares, map its ids from outside, wait for it."""
    with open(sys.argv[1], encoding="utf-8") as f:
        config: dict[str, Any] = json.load(f)
    config["as_nobody"] = os.geteuid() == 0
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        try:
            flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID
            _check(_libc.unshare(flags | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        except OSError as exc:
            _write_result(config, {"setup_error": str(exc)})
            os._exit(1)
        os.write(ready_w, b"u")
        if os.read(go_r, 1) != b"g":
            os._exit(1)
        init = os.fork()
        if init == 0:
            _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: never outlive us
            _init(config)
            os._exit(0)
        os.waitpid(init, 0)
        os._exit(0)
    os.close(ready_w)
    os.close(go_r)
    if os.read(ready_r, 1) == b"u":
        try:
            _write_maps(pid, as_nobody=bool(config["as_nobody"]))
        except OSError as exc:
            _write_result(config, {"setup_error": f"user namespace maps: {exc}"})
            os.kill(pid, signal.SIGKILL)
        else:
            os.write(go_w, b"g")
    os.waitpid(pid, 0)


def _write_result(config: dict[str, Any], result: dict[str, Any]) -> None:
    with open(os.path.join(config["output"], "result.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)


def _init(config: dict[str, Any]) -> None:
    """Pid 1 of the sandbox's namespaces: build the root, run the program, copy `/work` out."""
    output: str = config["output"]
    try:
        root = _build_root(config)
    except OSError as exc:
        _write_result(config, {"setup_error": str(exc)})
        return
    channel: int | None = config.get("channel_fd")
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        _child(config, root, out_w, err_w, channel)
    os.close(out_w)
    os.close(err_w)
    if channel is not None:
        os.close(channel)
    result = _supervise(config, pid, out_r, err_r)
    refused: list[str] = []
    files_dir = os.path.join(output, "files")
    os.makedirs(files_dir, exist_ok=True)
    _copy_tree(root + "/work", files_dir, refused)
    result["refused"] = refused
    _write_result(config, result)


if __name__ == "__main__":
    main()
