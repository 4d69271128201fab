"""The chat page's committed build (api/ui/) is what its sources (ui/) build to.

Two checks: every source's SHA-256 against the one the build recorded in api/ui/build.json
(no Node needed, so a forgotten `make ui` fails on any machine), and, where Node and the
page's npm packages are installed, a rebuild into a temporary directory compared byte for
byte (CI always runs it: a skip there fails instead).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from tests._stack import ROOT, in_ci

UI = ROOT / "ui"
BUILT = ROOT / "api" / "ui"


def test_the_recorded_sources_are_the_sources() -> None:
    manifest = json.loads((BUILT / "build.json").read_text())
    sources = sorted(
        str(p.relative_to(UI))
        for p in [*UI.glob("*"), *UI.glob("src/*")]
        if p.is_file() and p.name != ".npmrc"
    )
    assert sorted(manifest["sources"]) == sources, "a source was added or removed: `make ui`"
    stale = [
        name
        for name, digest in manifest["sources"].items()
        if hashlib.sha256((UI / name).read_bytes()).hexdigest() != digest
    ]
    assert stale == [], f"api/ui/ is older than {stale}: run `make ui` and commit api/ui/"
    locked = json.loads((UI / "package-lock.json").read_text())["packages"]
    for name, version in manifest["versions"].items():
        assert locked[f"node_modules/{name}"]["version"] == version, name


def test_the_build_ships_in_the_package() -> None:
    """Every built file is package data of `api` (so a wheel carries it)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["api"]
    built = [str(p.relative_to(ROOT / "api")) for p in BUILT.iterdir()]
    assert {"ui/index.html", "ui/app.js", "ui/app.css", "ui/build.json"} <= set(built)
    assert [f for f in built if not any(fnmatch(f, p) for p in patterns)] == []


def _why_no_rebuild() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH (install Node >= 22 with npm, then `make test`)"
    if not (UI / "node_modules" / "esbuild").exists():
        return "ui/ has no node_modules (`make test` runs `npm ci` when npm is on PATH)"
    return None


def test_a_rebuild_equals_the_committed_build(tmp_path: Path) -> None:
    missing = _why_no_rebuild()
    if missing is not None:
        if in_ci():
            pytest.fail(f"CI must rebuild the chat page, but {missing}")
        pytest.skip(f"chat page rebuild check skipped: {missing}")
    done = subprocess.run(
        ["node", str(UI / "build.mjs"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for built in sorted(BUILT.iterdir()):
        rebuilt = tmp_path / built.name
        assert rebuilt.read_bytes() == built.read_bytes(), f"{built.name}: run `make ui`"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in BUILT.iterdir())


def test_the_page_never_hands_html_to_the_browser() -> None:
    """React escapes every text child; these are the ways around it, none of which the page's
    own code may use (a model's answer is rendered from its mdast tree, ui/src/markdown.jsx)."""
    for source in sorted((UI / "src").iterdir()):
        code = source.read_text(encoding="utf-8")
        for way in ("dangerouslySetInnerHTML", "innerHTML", "outerHTML", "insertAdjacentHTML"):
            assert way not in code, f"{source.name} uses {way}"
