"""SKILL.md parsing and the skills catalog, without a worker: the spec's rules, what is kept
as a warning and what is skipped, and which source wins."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from examples.researcher import SKILLS, Researcher
from think import skills
from think.tools.skills import SkillError, load_catalog, parse_skill, render_catalog

SKILLS_DIR = Path(__file__).resolve().parents[1] / "skills"


def test_a_valid_skill_parses_without_warnings() -> None:
    skill = parse_skill(
        "---\nname: pdf-tools\ndescription: Split and merge PDFs.\nlicense: MIT\n"
        "compatibility: needs qpdf\nmetadata:\n  version: 2\nallowed-tools: Bash Read\n"
        "x-team: docs\n---\n\n# PDFs\nUse qpdf.\n",
        directory="pdf-tools",
    )
    assert skill.warnings == []
    assert skill.name == "pdf-tools" and skill.description == "Split and merge PDFs."
    assert skill.instructions == "# PDFs\nUse qpdf."
    assert skill.license == "MIT" and skill.compatibility == "needs qpdf"
    assert skill.metadata == {"version": "2"} and skill.allowed_tools == ["Bash", "Read"]
    assert skill.extra_fields == {"x-team": "docs"}


@pytest.mark.parametrize(
    ("frontmatter", "directory", "warning"),
    [
        ("name: PDF_Tools\ndescription: d", "PDF_Tools", "lowercase letters"),
        ("name: -pdf\ndescription: d", "-pdf", None),  # not a safe segment: skipped below
        ("name: pdf--tools\ndescription: d", "pdf--tools", "single hyphens"),
        ("name: pdf\ndescription: d", "other", "does not match its directory"),
        (f"name: {'a' * 65}\ndescription: d", "a" * 65, "at most 64"),
        (f"name: pdf\ndescription: {'d' * 1025}", "pdf", "at most 1024"),
        ("description: d", "pdf", "no name"),
        ("name: pdf\ndescription: d\nmetadata: [1, 2]", "pdf", "metadata must be a mapping"),
    ],
)
def test_broken_rules_are_warnings(frontmatter: str, directory: str, warning: str | None) -> None:
    text = f"---\n{frontmatter}\n---\nBody"
    if warning is None:
        with pytest.raises(SkillError, match="safe single path segment"):
            parse_skill(text, directory=directory)
        return
    skill = parse_skill(text, directory=directory)
    assert any(warning in w for w in skill.warnings), skill.warnings
    assert skill.instructions == "Body"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("---\nname: pdf\n---\nBody", "no description"),
        ("---\nname: pdf\ndescription: '   '\n---\n", "no description"),
        ("name: pdf\ndescription: d\n", "must start with YAML frontmatter"),
        ("---\nname: pdf\ndescription: d\n", "no closing"),
        ("---\nname: [unclosed\ndescription: d\n---\n", "not YAML"),
        ("---\n- a list\n---\n", "mapping"),
        ("---\nname: ../up\ndescription: d\n---\n", "safe single path segment"),
    ],
)
def test_skills_that_cannot_load(text: str, why: str) -> None:
    with pytest.raises(SkillError, match=why):
        parse_skill(text, directory="pdf")


def test_an_unquoted_colon_is_read_again_quoted() -> None:
    skill = parse_skill(
        "---\nname: pdf\ndescription: Use when: the user sends a PDF\n---\n", directory="pdf"
    )
    assert skill.description == "Use when: the user sends a PDF" and skill.warnings == []


def test_disable_model_invocation_hides_a_skill() -> None:
    skill = parse_skill(
        "---\nname: pdf\ndescription: d\ndisable-model-invocation: true\n---\n", directory="pdf"
    )
    assert skill.disable_model_invocation is True


async def test_the_directory_source_and_its_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="think.skills"):
        catalog = await load_catalog([skills.directory(SKILLS_DIR)])
    assert sorted(catalog.found) == ["Odd_Name", "hidden", "release-notes"]
    assert [f.skill.name for f in catalog.visible()] == ["Odd_Name", "release-notes"]
    notes = catalog.found["release-notes"][0]
    assert notes.resources == ("references/style.md",)
    assert notes.skill.extra_fields == {"audience": "maintainers"}
    logged = caplog.text
    assert "no-description" in logged and "skipped" in logged
    assert "Odd_Name" in logged and "lowercase" in logged
    rendered = render_catalog(catalog)
    assert "- release-notes: Write release notes" in rendered and "hidden" not in rendered


async def test_the_first_source_wins(caplog: pytest.LogCaptureFixture) -> None:
    mine = skills.manifest(
        "mine",
        [
            {
                "name": "release-notes",
                "description": "Ours.",
                "instructions": "Do it our way.",
                "resources": {"a.md": "A"},
            }
        ],
    )
    with caplog.at_level(logging.WARNING, logger="think.skills"):
        catalog = await load_catalog([mine, skills.directory(SKILLS_DIR)])
    found, source = catalog.found["release-notes"]
    assert found.skill.description == "Ours." and found.source == "mine"
    assert await source.resource(found.directory, "a.md") == (b"A", "text/markdown")
    assert "release-notes in directory:" in caplog.text and "provides it first" in caplog.text


async def test_an_empty_catalog_renders_nothing() -> None:
    assert render_catalog(await load_catalog([skills.manifest("none", [])])) == ""


async def test_the_example_agents_skills_are_valid() -> None:
    catalog = await load_catalog([skills.directory(SKILLS)])
    assert [f.skill.warnings for f in catalog.visible()] == [[]]
    names = set(Researcher().tools_by_name())
    assert names == {
        "fetch_url",
        *("read", "ls", "find", "grep", "write", "edit", "delete"),
        *("activate_skill", "read_skill_resource"),
    }
