"""Agent Skills: on-demand instructions, references and scripts, one directory per skill with a
`SKILL.md` (YAML frontmatter, then the instructions in markdown).

    from think import Think, skills

    class Writer(Think):
        def get_skills(self) -> list[skills.SkillSource]:
            return [skills.workspace(), skills.directory("skills/")]

Sources are read in order before every model step that needs them; the first to provide a
name wins, and later duplicates are skipped with a logged warning. Each SKILL.md is checked
against the Agent Skills specification (agentskills.io): a broken rule (a name that is not
1-64 lowercase letters, digits and hyphens, or does not match its directory; a description
over 1024 characters; ...) is kept as a warning and logged, while a skill with no
description, a name that is not a safe single path segment, or frontmatter that is not YAML
is skipped and logged. A value with an unquoted `: ` is read again quoted. Keys the spec does
not define are kept in `extra_fields`; `disable-model-invocation: true` hides a skill from
the model.

The model sees each skill's name and description in a `skills` context block
(`when_changed="remind"`, so an edit mid-conversation reaches the model as a reminder and the
frozen prompt, and its cache, stay as they were) and loads one with `activate_skill`, its
files with `read_skill_resource`.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field

from think.exceptions import ToolError
from think.storage import guess_media_type
from think.tools._tool import Tool
from think.tools._workspace import current_workspace, is_model_media, media_result

log = logging.getLogger("think.skills")

SKILL_FILE = "SKILL.md"
WORKSPACE_ROOT = ".agents/skills"
"""Where `skills.workspace()` looks, relative to the conversation's workspace."""
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SAFE_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SPEC_KEYS = frozenset(
    {
        "name",
        "description",
        "license",
        "compatibility",
        "metadata",
        "allowed-tools",
        "disable-model-invocation",
    }
)


class SkillError(ValueError):
    """A SKILL.md that cannot be loaded at all; the message says why."""


class Skill(BaseModel):
    """One parsed SKILL.md. `warnings` lists the spec's rules it breaks (empty: valid)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    instructions: str
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    allowed_tools: list[str] = Field(default_factory=list)
    disable_model_invocation: bool = False
    extra_fields: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


def _split(markdown: str) -> tuple[str, str]:
    text = markdown.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError("SKILL.md must start with YAML frontmatter between '---' lines")
    for i, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise SkillError("the frontmatter of SKILL.md has no closing '---' line")


_TOP_LEVEL = re.compile(r"^([A-Za-z0-9_-]+):[ \t]+(.*\S)[ \t]*$")


def _quoted(frontmatter: str) -> str:
    """Top-level `key: value` lines whose value holds an unquoted `: `, with it quoted."""
    out = []
    for line in frontmatter.splitlines():
        found = _TOP_LEVEL.match(line)
        if found and ": " in found.group(2) and found.group(2)[0] not in "'\"|>[{":
            value = found.group(2).replace("'", "''")
            line = f"{found.group(1)}: '{value}'"
        out.append(line)
    return "\n".join(out)


def _frontmatter(text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        try:
            data = yaml.safe_load(_quoted(text))
        except yaml.YAMLError as exc:
            raise SkillError(f"the frontmatter is not YAML: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SkillError("the frontmatter must be a YAML mapping of keys to values")
    return {str(k): v for k, v in data.items()}


def parse_skill(markdown: str, *, directory: str | None = None) -> Skill:
    """A SKILL.md parsed and checked; `directory` is the skill's directory name, which the
    spec requires the name to match. Raises `SkillError` for a skill that cannot load."""
    head, body = _split(markdown)
    data = _frontmatter(head)
    warnings: list[str] = []
    raw_name = data.get("name")
    if raw_name is None or raw_name == "":
        if directory is None:
            raise SkillError("the frontmatter has no name")
        warnings.append(f"the frontmatter has no name; using the directory's, {directory!r}")
        raw_name = directory
    name = str(raw_name).strip()
    if not _SAFE_SEGMENT.match(name) or name in (".", ".."):
        raise SkillError(f"the name {name!r} is not a safe single path segment")
    if len(name) > MAX_NAME:
        warnings.append(f"the name is {len(name)} characters; at most {MAX_NAME}")
    if not _NAME.match(name):
        warnings.append(
            f"the name {name!r} must be lowercase letters, digits and single hyphens, "
            "not starting or ending with a hyphen"
        )
    if directory is not None and name != directory:
        warnings.append(f"the name {name!r} does not match its directory {directory!r}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"skill {name!r} has no description")
    description = description.strip()
    if len(description) > MAX_DESCRIPTION:
        warnings.append(
            f"the description is {len(description)} characters; at most {MAX_DESCRIPTION}"
        )
    compatibility = data.get("compatibility")
    if compatibility is not None:
        compatibility = str(compatibility)
        if len(compatibility) > MAX_COMPATIBILITY:
            warnings.append(f"compatibility is over {MAX_COMPATIBILITY} characters")
    metadata: dict[str, str] = {}
    raw_metadata = data.get("metadata")
    if raw_metadata is not None:
        if isinstance(raw_metadata, dict):
            metadata = {str(k): str(v) for k, v in raw_metadata.items()}
        else:
            warnings.append("metadata must be a mapping of strings to strings")
    allowed = data.get("allowed-tools")
    if isinstance(allowed, str):
        allowed_tools = allowed.split()
    elif isinstance(allowed, list):
        allowed_tools = [str(a) for a in allowed]
        warnings.append("allowed-tools should be one space-separated string")
    else:
        allowed_tools = []
    hidden = data.get("disable-model-invocation", False)
    license_value = data.get("license")
    return Skill(
        name=name,
        description=description,
        instructions=body.strip(),
        license=None if license_value is None else str(license_value),
        compatibility=compatibility,
        metadata=metadata,
        allowed_tools=allowed_tools,
        disable_model_invocation=hidden is True or str(hidden).lower() == "true",
        extra_fields={k: v for k, v in data.items() if k not in _SPEC_KEYS},
        warnings=warnings,
    )


# -- sources ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FoundSkill:
    """A skill as a source holds it: where it came from, and its resources' paths."""

    skill: Skill
    source: str
    directory: str
    """The skill's directory name in its source, where its resources are found."""
    resources: tuple[str, ...] = ()


class SkillSource(Protocol):
    """Where skills come from: `directory()`, `workspace()`, `manifest()`, or your own."""

    id: str

    async def skills(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(directory name, SKILL.md text, resource paths) of every skill it holds."""
        ...

    async def resource(self, directory: str, path: str) -> tuple[bytes, str] | None:
        """A resource's bytes and media type, None when there is no such file."""
        ...


def _inside(path: str) -> str:
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts or path.startswith("/") or "\x00" in path:
        raise ToolError(f"{path!r} is not a path inside the skill")
    return "/".join(parts)


@dataclass
class _Directory:
    root: Path
    id: str

    def _scan(self) -> list[tuple[str, str, tuple[str, ...]]]:
        out: list[tuple[str, str, tuple[str, ...]]] = []
        if not self.root.is_dir():
            log.warning("skills directory %s does not exist", self.root)
            return out
        for skill_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            manifest = skill_dir / SKILL_FILE
            if not manifest.is_file():
                continue
            resources = tuple(
                sorted(
                    str(p.relative_to(skill_dir))
                    for p in skill_dir.rglob("*")
                    if p.is_file() and p != manifest
                )
            )
            out.append((skill_dir.name, manifest.read_text(errors="replace"), resources))
        return out

    async def skills(self) -> list[tuple[str, str, tuple[str, ...]]]:
        return await asyncio.to_thread(self._scan)

    async def resource(self, directory: str, path: str) -> tuple[bytes, str] | None:
        base = (self.root / directory).resolve()
        target = (base / _inside(path)).resolve()
        if not target.is_relative_to(base) or not target.is_file():
            return None
        return await asyncio.to_thread(target.read_bytes), guess_media_type(target.name)


@dataclass
class _Workspace:
    root: str
    id: str

    async def skills(self) -> list[tuple[str, str, tuple[str, ...]]]:
        workspace = await current_workspace()
        grouped: dict[str, list[str]] = {}
        for entry in await workspace.list(self.root):
            rest = entry.path[len(self.root) + 1 :] if self.root else entry.path
            head, slash, tail = rest.partition("/")
            if slash:
                grouped.setdefault(head, []).append(tail)
        manifests = {
            name: f"{self.root}/{name}/{SKILL_FILE}".lstrip("/")
            for name, files in grouped.items()
            if SKILL_FILE in files
        }
        texts = await workspace.read_many(list(manifests.values()))
        out = []
        for name, path in sorted(manifests.items()):
            found = texts.get(path)
            if found is None:  # deleted between the listing and the read
                continue
            resources = tuple(sorted(f for f in grouped[name] if f != SKILL_FILE))
            out.append((name, found.text(), resources))
        return out

    async def resource(self, directory: str, path: str) -> tuple[bytes, str] | None:
        workspace = await current_workspace()
        found = await workspace.read(f"{self.root}/{directory}/{_inside(path)}".lstrip("/"))
        return None if found is None else (found.data, found.media_type)


@dataclass
class _Manifest:
    id: str
    entries: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    async def skills(self) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(name, text, tuple(sorted(files))) for name, text, files in self.entries]

    async def resource(self, directory: str, path: str) -> tuple[bytes, str] | None:
        for name, _, files in self.entries:
            if name == directory and _inside(path) in files:
                return files[_inside(path)].encode(), guess_media_type(path)
        return None


def directory(path: str | Path, *, id: str | None = None) -> SkillSource:
    """Skills on the worker's disk: every `<path>/<name>/SKILL.md`."""
    root = Path(path)
    return _Directory(root=root, id=id or f"directory:{root}")


def workspace(root: str = WORKSPACE_ROOT, *, id: str | None = None) -> SkillSource:
    """Skills in the conversation's workspace: every `<root>/<name>/SKILL.md`, by default
    under `.agents/skills`; what the agent, a person or an upload writes there is a skill
    from the next turn on."""
    clean = root.strip("/")
    if clean == "workspace" or clean.startswith("workspace/"):
        clean = clean[len("workspace") :].strip("/")
    return _Workspace(root=clean, id=id or f"workspace:{clean}")


def manifest(id: str, skills: Sequence[Mapping[str, Any] | str]) -> SkillSource:
    """Skills defined in code: each a SKILL.md text, or a mapping with `name`,
    `description`, `instructions` and optional `resources` ({path: text})."""
    entries: list[tuple[str, str, dict[str, str]]] = []
    for item in skills:
        if isinstance(item, str):
            head = _frontmatter(_split(item)[0])
            name = str(head.get("name", ""))
            entries.append((name, item, {}))
            continue
        name = str(item["name"])
        front = yaml.safe_dump(
            {"name": name, "description": item.get("description", "")}, sort_keys=False
        )
        text = f"---\n{front}---\n{item.get('instructions', '')}\n"
        files = {str(k): str(v) for k, v in dict(item.get("resources", {})).items()}
        entries.append((name, text, files))
    return _Manifest(id=id, entries=entries)


# -- the catalog --------------------------------------------------------------------------------


@dataclass
class Catalog:
    """The skills the model may load, by name, and where each came from."""

    found: dict[str, tuple[FoundSkill, SkillSource]] = field(default_factory=dict)

    def visible(self) -> list[FoundSkill]:
        return [f for f, _ in self.found.values() if not f.skill.disable_model_invocation]

    def get(self, name: str) -> tuple[FoundSkill, SkillSource]:
        entry = self.found.get(name)
        if entry is None or entry[0].skill.disable_model_invocation:
            names = ", ".join(repr(f.skill.name) for f in self.visible()) or "none"
            raise ToolError(f"there is no skill {name!r}; the skills are: {names}")
        return entry


async def load_catalog(sources: Sequence[SkillSource]) -> Catalog:
    """Every source's skills, in order; the first to name a skill wins."""
    catalog = Catalog()
    for source in sources:
        for directory_name, text, resources in await source.skills():
            try:
                skill = parse_skill(text, directory=directory_name)
            except SkillError as exc:
                log.warning("skill %s in %s skipped: %s", directory_name, source.id, exc)
                continue
            for warning in skill.warnings:
                log.warning("skill %s in %s: %s", skill.name, source.id, warning)
            if skill.name in catalog.found:
                log.warning(
                    "skill %s in %s skipped: %s provides it first",
                    skill.name,
                    source.id,
                    catalog.found[skill.name][0].source,
                )
                continue
            found = FoundSkill(
                skill=skill, source=source.id, directory=directory_name, resources=resources
            )
            catalog.found[skill.name] = (found, source)
    return catalog


def render_catalog(catalog: Catalog) -> str:
    """The `skills` context block's content: each visible skill's name and description."""
    visible = catalog.visible()
    if not visible:
        return ""
    lines = [
        "Skills hold instructions for particular tasks. When a task matches a skill's "
        "description, call activate_skill with its name before you start, and follow it.",
        "",
    ]
    lines += [f"- {f.skill.name}: {f.skill.description}" for f in visible]
    return "\n".join(lines)


# -- the tools ----------------------------------------------------------------------------------

ACTIVATE_SKILL = "activate_skill"
READ_SKILL_RESOURCE = "read_skill_resource"
MAX_RESOURCE_CHARS = 100_000


def skill_tools(sources: Callable[[], Sequence[SkillSource]]) -> list[Tool]:
    """`activate_skill` and `read_skill_resource` over the sources `sources()` names (the
    agent's `get_skills`), read again at every call, so an edit is seen at once."""

    async def activate_skill(name: str) -> dict[str, Any]:
        """Load a skill: its full instructions and the list of its bundled files.

        Args:
            name: The skill's name, as listed in your skills.
        """
        found, _ = (await load_catalog(sources())).get(name)
        return {
            "name": found.skill.name,
            "instructions": found.skill.instructions,
            "resources": list(found.resources),
        }

    async def read_skill_resource(path: str, name: str | None = None) -> Any:
        """Read a file bundled with a skill (a reference, a template, a script).

        Args:
            path: The file's path inside the skill (e.g. references/style.md), or
                skill-name/path when name is not given.
            name: The skill's name.
        """
        if name is None:
            name, _, path = path.partition("/")
        found, source = (await load_catalog(sources())).get(name)
        relative = _inside(path)
        read = await source.resource(found.directory, relative)
        if read is None:
            listed = ", ".join(found.resources) or "none"
            raise ToolError(f"skill {name!r} has no file {relative!r}; its files: {listed}")
        data, media_type = read
        if is_model_media(media_type):
            return media_result(f"{name}/{relative}", media_type, data)
        text = data.decode("utf-8", errors="replace")
        if len(text) > MAX_RESOURCE_CHARS:
            return (
                text[:MAX_RESOURCE_CHARS] + f"… [{len(text) - MAX_RESOURCE_CHARS} more characters]"
            )
        return text

    return [
        _bound(_TEMPLATES, ACTIVATE_SKILL, activate_skill),
        _bound(_TEMPLATES, READ_SKILL_RESOURCE, read_skill_resource),
    ]


_TEMPLATES: dict[str, Tool] = {}
"""Each skill tool, built once: its schema is the same for every agent, and building one
(a pydantic model and its JSON Schema) costs about as much as a short tool call."""


def _bound(templates: dict[str, Tool], name: str, fn: Callable[..., Any]) -> Tool:
    template = templates.get(name)
    if template is None:
        template = templates[name] = Tool(fn, name=name)
    bound = copy.copy(template)
    bound.fn = fn
    return bound
