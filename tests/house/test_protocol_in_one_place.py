"""Chunk and part types are built and read in one place, `think/_protocol` (its queries:
`tool_name`, `tool_part`, `is_data_chunk`, ...): no other module of the framework or the apps
makes or cuts a `tool-…` or `data-…` type by hand, which is how a copy once misnamed
`dynamic-tool` parts."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = ("tool-", "data-")


def _by_hand(path: Path, root: Path = ROOT) -> list[str]:
    found = []
    tree = ast.parse(path.read_text(), str(path))
    in_fstrings = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    name = path.relative_to(root)
    for node in ast.walk(tree):
        # "tool-" alone is only ever a prefix: to build a type from, or to cut or test one by.
        if (
            isinstance(node, ast.Constant)
            and node.value in PREFIXES
            and id(node) not in in_fstrings
        ):
            found.append(f"{name}:{node.lineno} uses {node.value!r}")
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if isinstance(head, ast.Constant) and str(head.value).startswith(PREFIXES):
                found.append(f"{name}:{node.lineno} builds {head.value!r}…")
    return sorted(found)


def test_no_module_outside_the_protocol_makes_or_cuts_a_type_by_its_prefix() -> None:
    files = [
        path
        for package in ("think", "api", "workers")
        for path in sorted((ROOT / package).rglob("*.py"))
        if "_protocol" not in path.relative_to(ROOT).parts
    ]
    assert len(files) > 100
    assert [hit for path in files for hit in _by_hand(path)] == []


def test_the_check_finds_a_type_cut_by_hand(tmp_path: Path) -> None:
    sample = tmp_path / "by_hand.py"
    sample.write_text('name = part["type"].removeprefix("tool-")\nkind = f"data-{name}"\n')
    assert _by_hand(sample, tmp_path) == [
        "by_hand.py:1 uses 'tool-'",
        "by_hand.py:2 builds 'data-'…",
    ]
