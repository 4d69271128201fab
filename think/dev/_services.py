"""Embedded Postgres and Temporal together: what `think dev` and the test suite start.

Both services are real servers shipped as wheels, so a laptop, CI and the tests need neither
Docker nor network access. Everything in `think.dev` is synchronous on purpose: callers are the
CLI's supervisor and pytest session fixtures, and a blocking API works from both whether or not
an event loop is running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from think.dev._postgres import EmbeddedPostgres, start_postgres
from think.dev._temporal import TemporalDevServer, launch_temporal, until_ready

if TYPE_CHECKING:
    from think._settings import Settings

__all__ = ["Services", "start_embedded", "start_services"]


@dataclass(frozen=True)
class Services:
    """Embedded Postgres and Temporal, as `start_services` runs them for tests."""

    postgres: EmbeddedPostgres
    temporal: TemporalDevServer
    home: Path

    @property
    def database_url(self) -> str:
        return self.postgres.url

    @property
    def temporal_address(self) -> str:
        return self.temporal.address

    def settings(self, base: Settings | None = None) -> Settings:
        """`base` (default: built-in defaults) pointed at these services."""
        from think._settings import Settings

        return (base or Settings()).model_copy(
            update={
                "database_url": self.database_url,
                "temporal_address": self.temporal_address,
                "temporal_namespace": self.temporal.namespace,
                "home": self.home,
            }
        )


def start_embedded(
    home: Path,
    *,
    postgres: bool = True,
    temporal: bool = True,
    temporal_port: int = 7233,
    ui_port: int | None = 8233,
    namespace: str = "default",
    timeout: float = 30.0,
    fairness: bool = True,
) -> tuple[EmbeddedPostgres | None, TemporalDevServer | None]:
    """Start the requested services under `home`, concurrently; all or nothing.

    Layout: `home/pg` (Postgres data), `home/temporal.db` (+ `temporal.log`). Postgres starts
    in a helper thread while Temporal comes up; if either fails (or the caller is interrupted),
    whatever did start is stopped before the error propagates.
    """
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    server: TemporalDevServer | None = None
    pg_future: Future[EmbeddedPostgres] | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="think-postgres") as pool:
        try:

            def launch() -> TemporalDevServer:
                return launch_temporal(
                    home / "temporal.db",
                    port=temporal_port,
                    ui_port=ui_port,
                    namespace=namespace,
                    fairness=fairness,
                )

            # Spawned here, in the caller's thread, before Postgres's thread exists.
            if temporal:
                server = launch()
            if postgres:
                pg_future = pool.submit(start_postgres, home / "pg")
            if server is not None:
                server = until_ready(server, launch, timeout=timeout)
            return (pg_future.result() if pg_future else None), server
        except BaseException:
            if server is not None:
                server.terminate()
            if pg_future is not None:
                # Postgres may still be starting in the thread: let it finish, then stop it.
                with contextlib.suppress(Exception):
                    pg_future.result().stop()
            if server is not None:
                server.stop(grace=5.0)
            raise


@contextlib.contextmanager
def start_services(
    home: Path,
    *,
    temporal_port: int = 0,
    ui_port: int | None = None,
    namespace: str = "default",
    timeout: float = 30.0,
    fairness: bool = True,
) -> Iterator[Services]:
    """Embedded Postgres and Temporal under `home` for the duration of a `with` block.

    Defaults suit tests: a free Temporal port and no Web UI, so a session can run beside
    `think dev`. Both are stopped, and their processes gone, when the block exits.

        with start_services(tmp_path) as services:
            settings = services.settings()
    """
    pg, server = start_embedded(
        home,
        temporal_port=temporal_port,
        ui_port=ui_port,
        namespace=namespace,
        timeout=timeout,
        fairness=fairness,
    )
    assert pg is not None and server is not None
    try:
        yield Services(postgres=pg, temporal=server, home=home.expanduser().resolve())
    finally:
        server.terminate()  # Temporal takes ~1.5 s to stop; overlap it with Postgres's stop.
        try:
            pg.stop()
        finally:
            server.stop()
