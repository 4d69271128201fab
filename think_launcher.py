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


def _quiet_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(INTERRUPTED)


def main() -> int:
    signal.signal(signal.SIGINT, _quiet_exit)
    from think.cli import main as run

    signal.signal(signal.SIGINT, signal.default_int_handler)
    return run()


if __name__ == "__main__":
    sys.exit(main())
