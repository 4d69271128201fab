"""An example agent with the built-in tools: it reads the Python docs (and only them), keeps its
notes in the conversation's workspace, and follows Agent Skills.

    THINK_AGENTS=examples.researcher:Researcher make dev

Skills come from the conversation's workspace first (`.agents/skills/<name>/SKILL.md`, which
the agent or a person may write mid-conversation), then from `examples/skills/` on the
worker's disk. docs/built-in-tools.md describes each tool.
"""

from pathlib import Path

from think import FetchTools, Think, skills

SKILLS = Path(__file__).resolve().parent / "skills"


class Researcher(Think):
    """Answers Python questions from the official docs, with notes and sources."""

    name = "researcher"
    max_steps = 12
    fetch_tools = FetchTools(
        allowlist=["https://docs.python.org/3/**", "https://peps.python.org/**"],
        max_bytes=512 * 1024,
        max_model_chars=20_000,
    )
    workspace_tools = True  # read, ls, find, grep, write, edit, delete

    def get_model(self) -> str:
        return "gpt-4o-mini"

    def get_system_prompt(self) -> str:
        return (
            "You answer questions about Python from its documentation. Fetch the pages you "
            "need, keep notes in your workspace, and say where each fact comes from."
        )

    def get_skills(self) -> list[skills.SkillSource]:
        return [skills.workspace(), skills.directory(SKILLS)]
