"""`make test` on a machine without npm (issue 19): it runs, and says what it skipped; in CI
the same gap is a failure, so a green CI always includes the AI SDK conformance checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests._stack import ROOT


def _env(path: Path, **extra: str) -> dict[str, str]:
    """The environment minus every tool: PATH is an empty directory, so no npm, no node."""
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "CI")}
    return {**env, "PATH": str(path), **extra}


def _make_node(path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    assert make is not None
    return subprocess.run(
        [make, "-s", "node"], cwd=ROOT, env=_env(path, **extra), capture_output=True, text=True
    )


def test_make_without_npm_goes_on_and_says_what_it_skips(tmp_path: Path) -> None:
    done = _make_node(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "npm not found" in done.stdout
    assert "tests/streaming/test_ai_sdk_conformance.py" in done.stdout and "skipped" in done.stdout


def test_make_without_npm_fails_in_ci(tmp_path: Path) -> None:
    for ci in ("true", "1"):
        done = _make_node(tmp_path, CI=ci)
        assert done.returncode != 0, done.stdout
        assert "must run in CI" in done.stderr


def _pytest_without_tools(path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """The AI SDK conformance checks and the browser test modules, in one pytest, on a machine
    with neither node (PATH is an empty directory) nor Chromium (THINK_CHROMIUM names none).
    In CI both refuse at collection: `--continue-on-collection-errors` lets each say so."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            # Plugins these modules do not use: loading them took 3 of the run's 8 s.
            "-p",
            "no:schemathesis",
            "-p",
            "no:hypothesispytest",
            "--continue-on-collection-errors",
            "tests/streaming/test_ai_sdk_conformance.py",
            "tests/ui/test_ui_browser.py",
            "tests/ui/test_temporal_ui.py",
        ],
        cwd=ROOT,
        env=_env(path, THINK_CHROMIUM=str(path / "no-chromium"), **extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_node_or_chromium_their_checks_are_listed_as_not_run(tmp_path: Path) -> None:
    done = _pytest_without_tools(tmp_path)
    assert done.returncode == 0, done.stdout
    assert "checks that did not run" in done.stdout, done.stdout
    assert "AI SDK conformance check skipped: node is not on PATH" in done.stdout, done.stdout
    assert "browser test skipped: no Chromium found" in done.stdout, done.stdout


def test_without_node_or_chromium_their_checks_fail_in_ci(tmp_path: Path) -> None:
    done = _pytest_without_tools(tmp_path, CI="true")
    assert done.returncode != 0, done.stdout
    assert "CI must run the AI SDK conformance checks, but node is not on PATH" in done.stdout
    assert "CI must run the browser tests, but no Chromium found" in done.stdout, done.stdout


def _dry_run(target: str, tmp_path: Path) -> str:
    """What `make TARGET` would run in a fresh clone (a virtualenv that does not exist yet)."""
    make = shutil.which("make")
    assert make is not None
    done = subprocess.run(
        [make, "-n", target, f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_dev_installs_the_runtime_alone_and_make_test_the_tools(tmp_path: Path) -> None:
    """Issue 37: `make dev` installed the whole development toolchain (849 MB, Playwright's
    165 MB of it) to run a server; tests and browsers belong to `make test`."""
    dev = _dry_run("dev", tmp_path)
    assert "pip install --quiet -e .\n" in dev, dev
    assert "[dev]" not in dev and "playwright" not in dev, dev
    assert "think dev" in dev
    for target in ("test", "lint", "install"):
        assert "pip install --quiet -e '.[dev]'" in _dry_run(target, tmp_path), target
    project = (ROOT / "pyproject.toml").read_text()
    runtime = project.split("dependencies = [", 1)[1].split("]\n", 1)[0]
    for tool in ("playwright", "pytest", "ruff", "mypy", "schemathesis"):
        assert f'"{tool}' not in runtime, f"{tool} is a runtime dependency"
