"""Agents with code execution (tests/code_execution/): `exec` over the workspace, and a skill
whose script `run_skill_script` runs."""

from __future__ import annotations

from pathlib import Path

from tests.agents import Helper
from think.tools import Tool, skills

SKILLS_DIR = Path(__file__).resolve().parent / "code_execution" / "skills"


class Executor(Helper):
    """The workspace tools and `exec`."""

    name = "executor"
    max_steps = 8
    workspace_tools = True
    exec_tools = True

    def get_tools(self) -> list[Tool]:
        return []


class ScriptRunner(Executor):
    """`exec`, and `run_skill_script` over tests/code_execution/skills."""

    name = "script-runner"

    def get_skills(self) -> list[skills.SkillSource]:
        return [skills.directory(SKILLS_DIR)]
