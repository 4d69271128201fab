from __future__ import annotations

import asyncio
from datetime import timedelta

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import Res

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up. Says nothing about its dependencies (see /readyz)."""
    return {"status": "ok"}


@router.get("/readyz")
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
