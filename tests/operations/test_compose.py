"""docker-compose.yml and the Dockerfile, checked without a Docker engine.

No Docker runs where the suite runs, so these pin the contract instead: which services exist,
what each runs, that Think's services are configured only through the variables of API.md,
the start-up order, and that workers scale.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from think._settings import Settings, variables

ROOT = Path(__file__).resolve().parents[2]
THINK_SERVICES = ("migrate", "api", "worker")
API_MD_VARIABLES = {
    "THINK_DATABASE_URL",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "THINK_TASK_QUEUE",
    "THINK_AGENTS",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "THINK_API_KEYS",
}


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    result: dict[str, dict[str, Any]] = compose["services"]
    return result


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the `- NAME=value` form
        return dict(item.partition("=")[::2] for item in env)
    return {str(k): str(v) for k, v in env.items()}


def _depends(service: dict[str, Any]) -> dict[str, str]:
    depends = service.get("depends_on") or {}
    assert isinstance(depends, dict), "use the long form, so every dependency has a condition"
    return {name: spec["condition"] for name, spec in depends.items()}


def _command(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return command.split() if isinstance(command, str) else list(command)


def test_services_and_images(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == {"postgres", "temporal", "temporal-ui", *THINK_SERVICES}
    assert services["postgres"]["image"] == "postgres:16"
    assert services["temporal"]["image"].startswith("temporalio/auto-setup:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    for name in THINK_SERVICES:
        assert services[name]["build"] == "."
        assert services[name]["image"] == services["api"]["image"], "one image for all"


def test_commands_are_the_think_cli(services: dict[str, dict[str, Any]]) -> None:
    assert _command(services["migrate"]) == ["migrate"]
    api = _command(services["api"])
    assert api[0] == "api" and api[api.index("--host") + 1] == "0.0.0.0"
    assert _command(services["worker"]) == ["worker"]
    assert services["migrate"]["restart"] == "no", "one-shot"


def test_ports(services: dict[str, dict[str, Any]]) -> None:
    assert "8000:8000" in services["api"]["ports"]
    # Temporal's frontend and UI have no authentication: never on every interface (#37).
    assert services["temporal-ui"]["ports"] == ["127.0.0.1:8080:8080"]
    assert services["temporal"]["ports"] == ["127.0.0.1:7233:7233"]
    for name, service in services.items():
        for port in service.get("ports", []):
            assert name == "api" or str(port).startswith("127.0.0.1:"), (name, port)


def test_the_api_refuses_to_start_without_keys(services: dict[str, dict[str, Any]]) -> None:
    """`${VAR:?message}`: compose stops with the message when THINK_API_KEYS is unset or
    empty, rather than serve every tenant's conversations to anyone on the network (#37)."""
    for name in THINK_SERVICES:
        keys = _environment(services[name])["THINK_API_KEYS"]
        assert keys.startswith("${THINK_API_KEYS:?") and "key:tenant" in keys, keys


def test_grace_periods_fit_the_orchestrators(services: dict[str, dict[str, Any]]) -> None:
    """Each process ends its work before compose's SIGKILL: the worker's activities, the
    gateway's open streams."""
    worker = _environment(services["worker"])
    assert float(worker["THINK_WORKER_SHUTDOWN_GRACE_SECONDS"]) < _seconds(
        services["worker"]["stop_grace_period"]
    )
    api = _environment(services["api"])
    api_grace = float(
        api.get("THINK_API_SHUTDOWN_GRACE_SECONDS", Settings().api_shutdown_grace_seconds)
    )
    assert api_grace < _seconds(services["api"]["stop_grace_period"])


def _seconds(duration: str) -> float:
    assert duration.endswith("s"), duration
    return float(duration[:-1])


def test_think_services_use_only_api_md_variables(services: dict[str, dict[str, Any]]) -> None:
    declared = API_MD_VARIABLES | {v.name for v in variables()}
    for name in THINK_SERVICES:
        env = _environment(services[name])
        assert set(env) <= declared, f"{name}: {set(env) - declared}"
        assert env["THINK_DATABASE_URL"].startswith("postgresql://")
        assert "@postgres:5432/think" in env["THINK_DATABASE_URL"]
        assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    # Secrets and choices come from the caller's environment, never hard-coded.
    for variable in ("OPENAI_API_KEY", "THINK_API_KEYS", "OPENAI_BASE_URL"):
        assert _environment(services["api"])[variable].startswith(f"${{{variable}")


def test_temporal_uses_the_postgres_service(services: dict[str, dict[str, Any]]) -> None:
    env = _environment(services["temporal"])
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgres"
    assert env["POSTGRES_USER"] == _environment(services["postgres"])["POSTGRES_USER"]
    assert env["POSTGRES_PWD"] == _environment(services["postgres"])["POSTGRES_PASSWORD"]
    assert _environment(services["temporal-ui"])["TEMPORAL_ADDRESS"] == "temporal:7233"


def test_start_up_order(services: dict[str, dict[str, Any]]) -> None:
    assert _depends(services["temporal"]) == {"postgres": "service_healthy"}
    assert _depends(services["temporal-ui"]) == {"temporal": "service_healthy"}
    assert _depends(services["migrate"]) == {
        "postgres": "service_healthy",
        "temporal": "service_healthy",
    }
    for name in ("api", "worker"):
        assert _depends(services[name]) == {"migrate": "service_completed_successfully"}
    # Every `service_healthy` condition needs a healthcheck on its target.
    for service in services.values():
        for target, condition in _depends(service).items():
            if condition == "service_healthy":
                assert "test" in services[target].get("healthcheck", {}), target
    assert "healthcheck" in services["api"]


def test_worker_scales(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    assert "container_name" not in worker
    assert "ports" not in worker
    for name in THINK_SERVICES:
        assert "container_name" not in services[name]


def test_dockerfile_runs_think() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.M)
    # From the lock, then Think itself with nothing resolved again (#37).
    assert re.search(r"^RUN pip install -r requirements\.lock$", dockerfile, re.M)
    assert re.search(r"^RUN pip install --no-deps \"?\.", dockerfile, re.M)
    assert re.search(r"^USER (?!root\b|0\b)\S+", dockerfile, re.M), "non-root user"
    entry = re.findall(r"^(?:ENTRYPOINT|CMD) (.+)$", dockerfile, re.M)
    assert entry and json.loads(entry[0])[0] == "think", entry
    # What the image copies must exist, or `docker build` fails on a fresh clone.
    copied = set()
    for line in re.findall(r"^COPY (.+) \S+$", dockerfile, re.M):
        for source in line.split():
            assert (ROOT / source).exists(), f"Dockerfile copies missing {source}"
            copied.add(source)
    # And it copies every top-level module the package installs: the `think` script's entry
    # point (think_launcher) lives outside the `think` package.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for module in project["tool"]["setuptools"]["py-modules"]:
        assert f"{module}.py" in copied, f"Dockerfile does not copy {module}.py"


def test_the_lock_pins_every_runtime_dependency_within_pyproject() -> None:
    """requirements.lock (`make lock`) against pyproject.toml: every dependency of the runtime
    and of the `otel` extra pinned, each inside its declared range."""
    done = subprocess.run(
        [sys.executable, "tools/lock.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    pins = [line for line in (ROOT / "requirements.lock").read_text().splitlines() if "==" in line]
    assert len(pins) > 20 and all(re.fullmatch(r"[\w.-]+==[\w.+-]+", p) for p in pins), pins
