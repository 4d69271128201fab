"""`make lock`: write requirements.lock, the exact versions of Think's runtime (its
dependencies and the `otel` extra, and theirs, for Linux) as installed in this virtualenv,
the one the tests ran against. The Dockerfile installs from it, so an image built next month
runs what was tested, not whatever was newest that day.

    python tools/lock.py [--check]

`--check` exits 1 when the lock misses a runtime dependency or pins one outside the range
pyproject.toml allows (tests/operations/test_compose.py runs the same check).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
EXTRAS = ("otel",)
HEADER = """\
# Think's runtime, pinned: written by `make lock` (tools/lock.py) from the virtualenv the tests
# ran against. The Dockerfile installs it, then Think itself without resolving again.
"""


def _wanted(requirement: Requirement, extras: tuple[str, ...]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": e}) for e in extras or ("",))


def runtime(extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """Every distribution Think's runtime needs, by canonical name, with its installed version."""
    found: dict[str, str] = {}
    pending: list[tuple[str, tuple[str, ...]]] = [("think", extras)]
    while pending:
        name, wanted_extras = pending.pop()
        dist = distribution(name)
        for raw in dist.requires or []:
            requirement = Requirement(raw)
            if not _wanted(requirement, wanted_extras):
                continue
            child = canonicalize_name(requirement.name)
            if child == "think":  # think[otel] inside think[dev]
                continue
            try:
                version = distribution(child).version
            except PackageNotFoundError:
                raise SystemExit(f"{child} is not installed: run `make install` first") from None
            if child not in found:
                pending.append((child, tuple(requirement.extras)))
            found[child] = version
    return dict(sorted(found.items()))


def read_lock(path: Path = LOCK) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.split(";")[0].strip()
    return pins


def problems(path: Path = LOCK) -> list[str]:
    """What is wrong with the lock against pyproject.toml: a runtime dependency (or one of
    the `otel` extra) missing, or pinned outside the range pyproject.toml allows."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"])
    for extra in EXTRAS:
        declared += project["optional-dependencies"][extra]
    pins = read_lock(path)
    found = []
    for raw in declared:
        requirement = Requirement(raw)
        name = canonicalize_name(requirement.name)
        if name == "think" or (requirement.marker and not requirement.marker.evaluate()):
            continue
        if name not in pins:
            found.append(f"{requirement.name} is not pinned (run `make lock`)")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            found.append(f"{name}=={pins[name]} is outside {requirement.specifier}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="check the lock, write nothing")
    args = parser.parse_args()
    if args.check:
        found = problems()
        for problem in found:
            print(f"requirements.lock: {problem}", file=sys.stderr)
        return 1 if found else 0
    pins = runtime()
    LOCK.write_text(HEADER + "".join(f"{name}=={version}\n" for name, version in pins.items()))
    print(f"requirements.lock: {len(pins)} distributions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
