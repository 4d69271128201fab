"""Give freed memory back to the system in the long-running processes (`think api`, `think
worker`), on Linux with glibc.

glibc serves a large allocation (above `M_MMAP_THRESHOLD`, 128 KiB at start) with its own
`mmap`, returned at `free`. But each time such a block is freed the threshold rises to its
size (up to 32 MiB), and the heap's trim threshold to twice that: after one 14 MiB value the
next ones of that size came from the heap, whose top is then only given back above 28 MiB. A
worker that once handled a 14 MiB workspace write kept about 50 MB more than with the
thresholds fixed (docs/benchmarks.md, "A large workspace write"). Fixing them (which also turns
off the adjustment) costs an `mmap` and `munmap` per allocation above 128 KiB: a turn makes
few, whereas its value of the size a large write carries comes back at once.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024
TRIM_THRESHOLD_BYTES = 256 * 1024


def return_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds for this process; False where there is no glibc
    (macOS, Windows, musl), which is left as it is."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
