"""Every error the gateway returns is an RFC 9457 problem document; this module is the only
place that turns exceptions into HTTP answers."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from think.exceptions import AgentNotFoundError, UserError
from think.server import (
    ConversationBusy,
    IdempotencyConflict,
    MessageIdConflict,
    MessageNotFound,
    NotRegenerable,
    ParentNotFound,
    ScheduleNotFound,
    SubmissionConflict,
    TurnNotFound,
    TurnNotSteerable,
    TurnStillActive,
    metrics,
)

log = logging.getLogger("think.api")

PROBLEM = "application/problem+json"
_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Problem(Exception):
    """Raise from a route to answer with a problem document."""

    def __init__(
        self, status: int, detail: str, *, headers: dict[str, str] | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra


class BadBody(StarletteHTTPException):
    """A request body refused while it is read (`api._unique_keys`): an HTTPException, because
    FastAPI turns any other error met while reading the body into 400 "There was an error
    parsing the body", while this one it re-raises to the app's handler; `extra` are the
    problem's members beyond the standard ones (`errors`)."""

    def __init__(self, status: int, detail: str, **extra: Any) -> None:
        super().__init__(status, detail)
        self.extra = extra


def problem_response(status: int, detail: str, **extra: Any) -> JSONResponse:
    body = {
        "type": "about:blank",
        "title": _TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        **extra,
    }
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    # Not "body": that is also the name of a field of the turn body.
    return ".".join(parts) or "(request body)"


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            why = err.get("ctx", {}).get("error") or err.get("msg", "")
            where = _field(err["loc"])
            at = f"character {where}" if where.isdigit() else where
            return problem_response(400, f"the body is not valid JSON: {why} (at {at})")
        if tuple(err.get("loc", ())) == ("body",) and isinstance(err.get("input"), bytes):
            # FastAPI hands over the raw bytes when the Content-Type is not JSON; "body: Input
            # should be a valid dictionary" would blame the `body` field instead. A body that
            # is not JSON is a 400 (API.md), whatever it is instead.
            declared = request.headers.get("content-type")
            given = f"Content-Type {declared!r}" if declared else "no Content-Type"
            return problem_response(
                400,
                f"the body is not JSON ({given}): send a JSON object with "
                "Content-Type: application/json",
            )
        errors.append({"field": _field(err.get("loc", ())), "message": err.get("msg", "")})
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "invalid request"
    return problem_response(422, detail, errors=errors)


_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path. Starlette's 405 names only the methods
    of the first route whose path matched, and FastAPI has one route per method, so `Allow`
    would say `POST` on a path that also has GET and DELETE. Each method is tried against
    the route table (routes of included routers are nested, so they are asked, not read)."""
    routes: list[BaseRoute] = request.app.router.routes
    allowed = {
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes
        )
    }
    if "GET" in allowed:
        allowed.add("HEAD")  # api.app.HeadAsGet answers it on every GET route
    return sorted(allowed)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    extra = exc.extra if isinstance(exc, BadBody) else {}
    response = problem_response(exc.status_code, str(exc.detail), **extra)
    # Keep the exception's headers: a 405 must say `Allow` (RFC 9110, 15.5.6), and say all
    # of the path's methods.
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:
        response.headers["Allow"] = ", ".join(allowed_methods(request))
    return response


async def _problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    response = problem_response(exc.status, exc.detail, **exc.extra)
    response.headers.update(exc.headers)
    return response


async def _user_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, AgentNotFoundError):
        return problem_response(404, str(exc), agents=exc.hosted)
    if isinstance(exc, ScheduleNotFound):
        return problem_response(404, str(exc))
    if isinstance(exc, IdempotencyConflict | SubmissionConflict | ConversationBusy):
        metrics.ADMISSION_CONFLICTS.labels(_CONFLICT[type(exc)]).inc()
        return problem_response(409, str(exc), turn_id=exc.turn_id)
    if isinstance(exc, TurnStillActive | TurnNotSteerable):
        return problem_response(409, str(exc), turn_id=exc.turn_id, turn_status=exc.status)
    if isinstance(exc, TurnNotFound):
        return problem_response(404, str(exc))
    if isinstance(exc, MessageIdConflict):
        return problem_response(409, str(exc), errors=[{"field": exc.field, "message": str(exc)}])
    if isinstance(exc, MessageNotFound):
        return problem_response(404, str(exc), errors=[{"field": exc.field, "message": str(exc)}])
    if isinstance(exc, NotRegenerable):
        return problem_response(
            422, str(exc), errors=[{"field": "message_id", "message": str(exc)}]
        )
    if isinstance(exc, ParentNotFound):
        return problem_response(422, str(exc), errors=[{"field": "parent_id", "message": str(exc)}])
    return problem_response(400, str(exc))


_CONFLICT: dict[type[Exception], str] = {
    IdempotencyConflict: "idempotency",
    SubmissionConflict: "submission",
    ConversationBusy: "busy",
}


async def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """Postgres is down or restarting: a pooled connection it closed, or none within the pool's
    timeout (`PoolTimeout` is an `OperationalError` too). 503 with `Retry-After`, not 500,
    because retrying is exactly right: the gateway reconnects by itself once Postgres is back,
    and a submission retried with its Idempotency-Key is admitted at most once."""
    log.warning("Postgres unavailable on %s %s: %s", request.method, request.url.path, exc)
    response = problem_response(503, "the database is unavailable for the moment; retry shortly")
    response.headers["Retry-After"] = "1"
    return response


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return problem_response(500, "internal error; the server log has the details")


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Problem, _problem)
    app.add_exception_handler(UserError, _user_error)
    app.add_exception_handler(psycopg.OperationalError, _database_unavailable)
    app.add_exception_handler(Exception, _unexpected)
