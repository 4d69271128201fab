"""The MCP example of docs/tools.md runs as written, against the SDK's real server, and
prints what its comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


def test_the_mcp_example_runs(tmp_path: Path) -> None:
    section = DOC.read_text().split("## MCP servers", 1)[1].split("\n## ", 1)[0]
    server, agent = re.findall(r"```python\n(.*?)```", section, re.S)
    (tmp_path / "weather_server.py").write_text(server)
    (tmp_path / "forecaster.py").write_text(agent)
    done = subprocess.run(
        [sys.executable, "forecaster.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("THINK_")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "weather_forecast ['city']",
        "{'result': 'Oslo: sunny for 2 day(s)'}",
    ]
