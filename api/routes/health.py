from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field

from api.deps import Res
from think.server import metrics

log = logging.getLogger("think.api")

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up. Says nothing about its dependencies (see /readyz)."""
    return {"status": "ok"}


class Readiness(BaseModel):
    status: str = Field(description="ok, or unavailable")
    checks: dict[str, str] = Field(description="postgres, temporal, listener: ok or why not")


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "A dependency does not answer"}},
)
async def readyz(res: Res) -> JSONResponse:
    """Postgres and Temporal both answer; a load balancer should route here only then."""
    checks: dict[str, str] = {}
    try:
        async with asyncio.timeout(2):
            async with res.store.db.connection() as conn:
                await conn.execute("SELECT 1")
        checks["postgres"] = "ok"
    except Exception as exc:
        checks["postgres"] = f"unavailable: {type(exc).__name__}"
    try:
        ok = await res.temporal.service_client.check_health(timeout=timedelta(seconds=2))
        checks["temporal"] = "ok" if ok else "unavailable"
    except Exception as exc:
        checks["temporal"] = f"unavailable: {type(exc).__name__}"
    checks["listener"] = "ok" if res.listener.connected else "reconnecting"
    ready = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ok" if ready else "unavailable", "checks": checks},
        status_code=200 if ready else 503,
    )


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={200: {"content": {metrics.CONTENT_TYPE: {}}, "description": "Prometheus text"}},
)
async def prometheus_metrics(res: Res) -> Response:
    """Prometheus text format: this gateway's counters, and the turns not ended read from
    Postgres (docs/operating.md says what each metric means)."""
    try:
        async with asyncio.timeout(2):
            await metrics.sample(res.store)
    except Exception:
        # The counters are still worth a scrape when Postgres is away; the gauges keep their
        # last values, and the 503s of the API itself say that Postgres is down.
        log.warning("metrics: could not sample Postgres", exc_info=True)
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)
