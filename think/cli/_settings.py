"""`think settings`: the variables Think reads, from their one declaration (`think._settings`).

The same rows make the settings tables of docs/operating.md (`think settings --markdown`), and
a test compares the two, so the docs cannot drift from what the code reads.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from pathlib import Path

from think._settings import Settings, Variable, variables

_MiB = 1024 * 1024
_GiB = 1024 * _MiB


def default_text(variable: Variable) -> str:
    """The default as the docs write it: `600`, 16 MiB, none."""
    value = variable.default
    if value is None or value == [] or value == {}:
        return "none"
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    if isinstance(value, int) and variable.name.endswith("_BYTES"):
        for unit, size in (("GiB", _GiB), ("MiB", _MiB)):
            if value >= size and value % size == 0:
                return f"{value // size} {unit}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list):
        value = ",".join(str(item) for item in value)
    return f"`{value}`"


def markdown_row(variable: Variable) -> str:
    return f"| `{variable.name}` | {default_text(variable)} | {variable.description} |"


def markdown_table() -> str:
    """Every variable, as docs/operating.md's "Settings" table has it."""
    rows = [markdown_row(v) for v in variables()]
    return "\n".join(["| variable | default | what |", "| --- | --- | --- |", *rows]) + "\n"


def _cmd_settings(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    if args.check:
        return _check()
    print("Think reads these environment variables (an empty one counts as unset):\n")
    for variable in variables():
        print(f"{variable.name}  (default: {default_text(variable).strip('`')})")
        print(
            textwrap.fill(
                variable.description.replace("`", ""),
                92,
                initial_indent=" " * 4,
                subsequent_indent=" " * 4,
            )
        )
        if variable.examples:
            print(f"    e.g. {variable.name}={variable.examples[0]}")
    print("\n`think settings --check` reads them from this environment and says what it found.")
    return 0


def _check() -> int:
    """Read this environment's variables as `think api` and `think worker` would (a bad value
    is a `ConfigurationError`, exit 2), and show those that are set; secrets only as set."""
    settings = Settings.from_env(find_dev_stack=False)
    found = [v for v in variables() if os.environ.get(v.name, "").strip()]
    for variable in found:
        read = getattr(settings, variable.field)
        value = "(set)" if variable.secret else str(read) if isinstance(read, Path) else repr(read)
        print(f"{variable.name} = {value}")
    print(f"{len(found)} of {len(variables())} variables set; every value reads")
    return 0
