"""What the client raises: a gateway's problem document as a typed exception, or a gateway it
could not reach."""

from __future__ import annotations

import json
from typing import Any

import httpx

from think.exceptions import ThinkError


class ThinkAPIError(ThinkError):
    """The gateway answered 4xx or 5xx; `body` is its RFC 9457 problem document.

    `status`, `title` and `detail` come from the document (or from the HTTP response when the
    answer was not one, e.g. from a proxy); `errors` lists `{"field", "message"}` for each
    invalid field of a 422, and `fields` just their names.
    """

    def __init__(
        self,
        status: int,
        body: dict[str, Any],
        *,
        method: str = "",
        url: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.method = method
        self.url = url
        self.retry_after = retry_after
        self.title = str(body.get("title") or httpx.codes.get_reason_phrase(status) or "Error")
        self.detail = str(body.get("detail") or "")
        super().__init__(self._message())

    @property
    def errors(self) -> list[dict[str, Any]]:
        found = self.body.get("errors")
        return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []

    @property
    def fields(self) -> list[str]:
        return [str(e.get("field")) for e in self.errors]

    def _message(self) -> str:
        where = f"{self.method} {self.url}: " if self.method else ""
        text = f"{where}{self.status} {self.title}"
        if self.detail and self.detail != self.title:
            text += f": {self.detail}"
        hint = self._hint()
        return f"{text} ({hint})" if hint else text

    def _hint(self) -> str:
        if self.status == 401:
            return "pass the gateway's API key: api_key=… or `think chat --api-key …`"
        if self.status == 404 and self.detail in ("", "Not Found"):
            return "this gateway has no such endpoint: is the URL right, and the gateway current?"
        if self.status == 503:
            return "the gateway is up but a service behind it is not; retry shortly"
        return ""

    @classmethod
    def from_response(cls, response: httpx.Response) -> ThinkAPIError:
        """The exception for an error response, of the subclass its status calls for.

        The response's body must have been read.
        """
        body: dict[str, Any]
        try:
            parsed = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            parsed = None
        if isinstance(parsed, dict):
            body = parsed
        else:
            # Not a problem document (a proxy's HTML page, say): keep the start of its text.
            snippet = " ".join(response.text.split())[:200]
            body = {"status": response.status_code, "detail": snippet}
        kind = _BY_STATUS.get(response.status_code, ThinkAPIError)
        request = response.request
        return kind(
            response.status_code,
            body,
            method=request.method,
            url=str(request.url),
            retry_after=_retry_after(response),
        )


class AuthenticationError(ThinkAPIError):
    """401: the gateway needs `Authorization: Bearer <key>`, or the key is not one of its."""


class NotFoundError(ThinkAPIError):
    """404: an unknown agent, conversation, turn, message, approval or tool call."""


class ConflictError(ThinkAPIError):
    """409: an Idempotency-Key reused with another body, a message id taken, an approval or a
    tool result already given."""

    @property
    def turn_id(self) -> str | None:
        """The turn an Idempotency-Key already belongs to, when that is the conflict."""
        value = self.body.get("turn_id")
        return value if isinstance(value, str) else None


class InvalidRequestError(ThinkAPIError):
    """400, 413, 415 or 422: the request itself is wrong; `errors` names the fields."""


_BY_STATUS: dict[int, type[ThinkAPIError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    413: InvalidRequestError,
    415: InvalidRequestError,
    422: InvalidRequestError,
}


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # absent, or an HTTP date, which the gateway never sends


class ThinkConnectionError(ThinkError):
    """The gateway could not be reached, or stopped answering, after the retries allowed."""


class ThinkStreamError(ThinkConnectionError):
    """A turn's stream broke and could not be resumed within the retries allowed, or carried
    something that is not a UI message chunk."""
