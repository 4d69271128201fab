"""A real browser for the chat page's tests: Playwright for Python driving Debian's Chromium.

Playwright's own browser download is not reachable here, so the tests launch the system's
`chromium` (`THINK_CHROMIUM` names another binary). Without one, the browser tests are
skipped with a line in the run's summary that says how to get it; in CI (`.ci/run` installs
the Debian package) a missing Chromium fails them instead.

Screenshots go to `build/screenshots/` (`THINK_SCREENSHOTS` moves them: the ones in
`docs/images/` were taken with `THINK_SCREENSHOTS=docs/images`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests._stack import ROOT, in_ci

# Everything that could reach past 127.0.0.1 is off: updates, sync, QUIC, prefetching.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def find_chromium() -> str | None:
    named = os.environ.get("THINK_CHROMIUM")
    if named:
        return named if Path(named).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _missing() -> str | None:
    if find_chromium() is None:
        return "no Chromium found (`apt-get install chromium`, or set THINK_CHROMIUM)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (`make install`)"
    return None


MISSING = _missing()


def require_browser() -> pytest.MarkDecorator:
    """The mark for a browser test module: skipped (and said so) without Chromium, but a
    failure in CI, where a skip would let the chat page go untested."""
    if MISSING is not None and in_ci():
        pytest.fail(f"CI must run the browser tests, but {MISSING}", pytrace=False)
    return pytest.mark.skipif(MISSING is not None, reason=f"browser test skipped: {MISSING}")


def screenshot_dir() -> Path:
    path = Path(os.environ.get("THINK_SCREENSHOTS") or ROOT / "build" / "screenshots")
    if not path.is_absolute():
        path = ROOT / path
    path.mkdir(parents=True, exist_ok=True)
    return path
