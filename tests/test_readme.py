"""The README's examples run: a newcomer copies them first."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

from think import Think

README = (Path(__file__).parent.parent / "README.md").read_text()


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
        from think._registry import load_agent

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
