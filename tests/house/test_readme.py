"""The README's examples run: a newcomer copies them first."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

from tests._stack import Stack
from think import Think
from think._settings import Settings

README = (Path(__file__).parents[2] / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, re.S)


def test_the_20_line_agent_defines_a_working_agent() -> None:
    agent_block = next(b for b in python_blocks() if "class Forecaster" in b)
    assert len(agent_block.strip().splitlines()) <= 22
    module = types.ModuleType("my_agents")
    sys.modules["my_agents"] = module
    try:
        exec(compile(agent_block, "README.md", "exec"), module.__dict__)
        agent_class = module.Forecaster
        assert issubclass(agent_class, Think) and agent_class.name == "forecaster"
        (tool,) = agent_class().get_tools()
        assert tool.spec.parameters == {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        }
        from think.agent._registry import load_agent

        assert load_agent("my_agents:Forecaster") is agent_class
    finally:
        del sys.modules["my_agents"]


def test_the_testing_example_runs() -> None:
    block = next(b for b in python_blocks() if "FakeOpenAIServer" in b)
    exec(compile(block, "README.md", "exec"), {})


def test_curl_session_uses_the_api_paths() -> None:
    from api.app import create_app
    from think._settings import Settings

    paths = set(create_app(Settings(agents=["examples.assistant:Assistant"])).openapi()["paths"])
    for url in re.findall(r"localhost:8000(/v1/[^\s'\"]+)", README):
        template = re.sub(r"/agents/[^/]+", "/agents/{agent}", url)
        template = re.sub(r"/conversations/[^/]+", "/conversations/{cid}", template)
        template = re.sub(r"/turns/[^/]+", "/turns/{turn_id}", template)
        template = re.sub(r"/approvals/[^/]+", "/approvals/{approval_id}", template)
        assert template in paths, url


def test_the_submitting_turns_script_runs_as_pasted_from_below_the_clone(
    stack: Stack, settings: Settings, tmp_path: Path
) -> None:
    """Issue 19: the example defined `main()` and never called it, and found the dev stack
    only from the directory `make dev` ran in. Here it runs as a file, two directories below
    a `.think/` (as `make dev` leaves it), with no THINK_* variable but the task queue."""
    block = next(b for b in python_blocks() if "ThinkService" in b and "asyncio.run" in b)
    assert block.startswith("# submit_turns.py\n")
    home = tmp_path / ".think"
    home.mkdir()
    (home / "endpoints.json").write_text(
        json.dumps(
            {"database_url": settings.database_url, "temporal_address": settings.temporal_address}
        )
    )
    where = tmp_path / "app" / "jobs"
    where.mkdir(parents=True)
    (where / "submit_turns.py").write_text(block)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("THINK_", "TEMPORAL_", "OPENAI_"))
    }
    env["THINK_TASK_QUEUE"] = settings.task_queue
    done = subprocess.run(
        [sys.executable, "submit_turns.py"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("completed "), done.stdout
    turn_id, status = lines[1].split()
    assert turn_id.startswith("turn_") and status in ("pending", "running", "completed")
    assert "start" in lines and "finish" in lines, done.stdout


def test_every_relative_link_resolves_in_a_clone() -> None:
    """Issue 19: the README linked the contract as `../shared/API.md`, outside the clone."""
    root = Path(__file__).parents[2]
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert "docs/api.md" in links
    for link in links:
        assert (root / link).resolve().is_relative_to(root), link
        assert (root / link).exists(), link
