"""The layout holds: `think`'s packages are layered with no import cycle (import-linter's
contracts in pyproject.toml), the apps reach the framework through its public faces only, and
the root of `think` stays small."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_import_contracts_are_kept() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("think"):
            parts = node.module.split(".")
            names = [a.name for a in node.names]
            if any(p.startswith("_") for p in parts) or any(n.startswith("_") for n in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("think") and any(
                    p.startswith("_") for p in alias.name.split(".")
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} import {alias.name}")
    return found


def test_the_apps_use_only_public_faces() -> None:
    files = sorted((ROOT / "api").rglob("*.py")) + sorted((ROOT / "workers").rglob("*.py"))
    assert files
    private = [hit for f in files for hit in _private_imports(f)]
    assert private == []


APP_FACES = {"think.server", "think.exceptions"}
"""All the apps (`api/`, `workers/`) import of the framework: the server face and the
exception tree. What they need from elsewhere in `think` is named in `think.server`."""


def _framework_imports(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "think":
                found += [(f"think.{a.name}", node.lineno) for a in node.names]
            elif node.module.startswith("think."):
                found.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name.startswith("think")]
    return found


def test_the_apps_use_think_server_and_exceptions_only() -> None:
    files = sorted((ROOT / "api").rglob("*.py")) + sorted((ROOT / "workers").rglob("*.py"))
    elsewhere = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in files
        for module, line in _framework_imports(path)
        if module not in APP_FACES
    ]
    assert elsewhere == []


def test_the_agent_names_the_turns_package_only_through_its_protocols() -> None:
    """`agent` sits below `turns`; what it asks of a conversation and of a streamed turn is
    declared in `think/agent/_turn_api.py` (`TurnConversation`, `StreamedTurn`), so not even
    an annotation imports `think.turns` (import-linter lets `TYPE_CHECKING` imports pass)."""
    upward = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "think" / "agent").rglob("*.py"))
        for module, line in _framework_imports(path)
        if module == "think.turns" or module.startswith("think.turns.")
    ]
    assert upward == []


def test_few_modules_at_the_root_of_think() -> None:
    modules = sorted(p.name for p in (ROOT / "think").glob("*.py"))
    assert len(modules) <= 8, modules


def test_a_workflow_module_imports_no_io_library() -> None:
    """`think`'s face loads lazily: the sandbox imports a workflow module (and with it
    `think/__init__.py`) for every workflow run, which must not pull in the I/O stack."""
    probe = (
        "import sys, think.workflows._turn, think.schedules._workflow\n"
        "import think.retention._workflow\n"
        "print(sorted(m for m in ('openai', 'psycopg', 'httpx', 'sqlalchemy', 'fastapi')"
        " if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
