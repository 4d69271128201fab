"""Settings read from the environment (the variables of API.md), declared in one place.

Every variable is one field of `Settings` (`_declaration.py`): its name (`validation_alias`),
type, default, bounds and one line of help (`description`). pydantic-settings reads them
(docs/architecture.md says why that library); `think settings` and the settings table of
docs/operating.md are generated from the same declaration, and a test gives every variable a
bad value. A value that cannot be read is a `ConfigurationError` naming its variable, never a
bare `ValueError` (`_environment.py` words it). `THINK_MODEL_ENDPOINTS`, a JSON document, has
its own parser (`_endpoints.py`).

Every component (CLI, gateway, worker, tests) builds a `Settings` and passes it down; nothing
reads `os.environ` anywhere else, so a test can run several configurations in one process:
`Settings(...)` reads only its arguments, `Settings.from_env(mapping)` only the mapping.
"""

from think._settings._declaration import (
    DEFAULT_AGENTS,
    NATIVE_OUTPUT_VAR,
    EventLoop,
    Settings,
    variables,
)
from think._settings._defaults import (
    DEFAULT_TENANT_WORKSPACE_MAX_BYTES,
    DEFAULT_WORKSPACE_MAX_BYTES,
    DEFAULT_WORKSPACE_MAX_FILE_BYTES,
    DEFAULT_WORKSPACE_MAX_FILES,
)
from think._settings._dev_stack import DEPLOYMENT_FIELDS, ENDPOINTS_FILE, write_endpoints
from think._settings._endpoints import (
    MODEL_ENDPOINTS_VAR,
    Endpoint,
    Prices,
    parse_model_endpoints,
)
from think._settings._environment import Variable
from think._settings._process import LogFormat, LogLevel
from think._settings._temporal import profile_origin as temporal_profile_origin

__all__ = [
    "DEFAULT_AGENTS",
    "DEFAULT_TENANT_WORKSPACE_MAX_BYTES",
    "DEFAULT_WORKSPACE_MAX_BYTES",
    "DEFAULT_WORKSPACE_MAX_FILES",
    "DEFAULT_WORKSPACE_MAX_FILE_BYTES",
    "DEPLOYMENT_FIELDS",
    "ENDPOINTS_FILE",
    "MODEL_ENDPOINTS_VAR",
    "NATIVE_OUTPUT_VAR",
    "Endpoint",
    "EventLoop",
    "LogFormat",
    "LogLevel",
    "Prices",
    "Settings",
    "Variable",
    "parse_model_endpoints",
    "temporal_profile_origin",
    "variables",
    "write_endpoints",
]
