"""The `think` console script's entry point, outside the `think` package on purpose.

Importing `think` takes a second or two on a cold start (SQLAlchemy, Temporal, FastAPI), and
a Ctrl-C in that window would otherwise print a 30-70 line traceback of import machinery.
This module installs a quiet SIGINT handler first, imports the command line, then hands
SIGINT back to Python's default so `think dev` and the others handle Ctrl-C their own way.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

INTERRUPTED = 130
"""The shell's status for a command ended by SIGINT."""


_interrupted = False


def _quiet_exit(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    _interrupted = True
    raise SystemExit(INTERRUPTED)


def _unraisable(hook: sys.UnraisableHookArgs) -> None:
    """The interpreter swallows an exception raised where it cannot propagate (a weakref
    callback of the import machinery, say) and prints it as "Exception ignored in": our
    `SystemExit` landing there is not printed, and `main` exits once the import is done."""
    if not (_interrupted and isinstance(hook.exc_value, SystemExit)):
        sys.__unraisablehook__(hook)


def main() -> int:
    signal.signal(signal.SIGINT, _quiet_exit)
    sys.unraisablehook = _unraisable
    from think.cli import main as run

    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.unraisablehook = sys.__unraisablehook__
    if _interrupted:
        return INTERRUPTED  # the Ctrl-C landed where it was swallowed
    return run()


if __name__ == "__main__":
    sys.exit(main())
