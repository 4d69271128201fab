"""`make lint`'s size check: no module of the framework or the apps over 600 lines.

A module past that does more than one job (docs/architecture.md, "Where things live", says
which module holds what): split it by concern rather than raise the limit.

    python tools/check_module_sizes.py [--max-lines N] [folder ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("think", "api", "workers")
MAX_LINES = 600


def oversized(folders: list[Path], max_lines: int) -> list[tuple[Path, int]]:
    """The Python modules under `folders` longer than `max_lines`, longest first."""
    found = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > max_lines:
                found.append((path, lines))
    return sorted(found, key=lambda item: -item[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-lines", type=int, default=MAX_LINES)
    parser.add_argument("folders", nargs="*", default=list(FOLDERS))
    args = parser.parse_args(argv)
    found = oversized([ROOT / folder for folder in args.folders], args.max_lines)
    for path, lines in found:
        print(
            f"{path.relative_to(ROOT)}: {lines} lines, over {args.max_lines}: split it by concern",
            file=sys.stderr,
        )
    if not found:
        print(f"module sizes: none over {args.max_lines} lines in {', '.join(args.folders)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
