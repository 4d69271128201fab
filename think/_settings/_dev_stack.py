"""What a running `think dev` tells the processes started beside it: `.think/endpoints.json`.

`think dev` writes where its services are (Postgres, Temporal, the API) and the deployment's
own configuration (the agents, workflows and activities it hosts, its task queue), so that a
command run from a second shell (`think schedules`, `think migrate`, a script using
`ThinkService`) acts on the deployment that is running without the user exporting its
variables again. A variable set in that shell still wins over the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the declaration calls this module; only its type is needed here
    from think._settings._declaration import Settings

ENDPOINTS_FILE = "endpoints.json"

DEPLOYMENT_FIELDS = ("agents", "workflows", "activities", "task_queue", "temporal_namespace")
"""The settings a running `think dev` lends a second shell, when that shell does not set them
(`THINK_AGENTS`, `THINK_WORKFLOWS`, `THINK_ACTIVITIES`, `THINK_TASK_QUEUE`, `TEMPORAL_NAMESPACE`):
a command about the deployment must see the deployment's agents, not the default assistant."""


def find_endpoints(home: Path, *, search_parents: bool) -> Path | None:
    """The endpoints file of a running `think dev`: in `home`, or, with `search_parents`
    (THINK_HOME unset, `home` relative), in the `.think` of the nearest directory above the
    current one that has it, as git finds `.git`."""
    path = home / ENDPOINTS_FILE
    if not path.exists() and search_parents and not home.is_absolute():
        above = (d / home / ENDPOINTS_FILE for d in Path.cwd().parents)
        path = next((p for p in above if p.exists()), path)
    return path if path.exists() else None


def read_endpoints(path: Path) -> dict[str, Any]:
    """The file's entries; a `ValueError` if it is not a JSON object."""
    found = json.loads(path.read_text())
    if not isinstance(found, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return found


def write_endpoints(home: Path, data: dict[str, Any]) -> None:
    """Replace the file at once (never half-written for a reader in another shell)."""
    path = home / ENDPOINTS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def lend_dev_stack(settings: Settings, *, search_parents: bool) -> Settings:
    """Fill unset Postgres/Temporal addresses from a running `think dev`, if there is one,
    and with them the deployment's configuration `settings` does not set.

    `think api`, `think worker`, `think schedules` or a script using `ThinkService` then find
    the embedded services, and the agents they host, without the user exporting anything: in
    `settings.home` (THINK_HOME), or, with `search_parents` (THINK_HOME unset), in the `.think`
    of the nearest directory above the current one that has it. Given both addresses, the
    environment describes another deployment and the file is not read.
    """
    if settings.database_url and settings.temporal_address:
        return settings
    path = find_endpoints(settings.home, search_parents=search_parents)
    if path is None:
        return settings
    found = read_endpoints(path)
    update: dict[str, Any] = {
        "database_url": settings.database_url or found.get("database_url"),
        "temporal_address": settings.temporal_address or found.get("temporal_address"),
    }
    lent = {f: found[f] for f in DEPLOYMENT_FIELDS if f in found}
    lent = {f: v for f, v in lent.items() if f not in settings.model_fields_set}
    if lent:  # validated as the variables are (a bad file: a ValidationError, a ValueError)
        checked = type(settings)(**lent)
        update.update({f: getattr(checked, f) for f in lent})
    return settings.model_copy(update=update)
