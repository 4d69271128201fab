"""The exception tree of Think.

Three families, because callers react to them differently:

- `UserError`: the developer or the client asked for something that can never work (a bad agent
  class, an unknown tool, an invalid request). Never retried.
- `ModelError`: the model provider failed. `retryable` says whether trying again can help; the
  activity turns a non-retryable one into a non-retryable Temporal failure.
- `OutputValidationError`: the model answered, but not in the structured output the turn asked
  for. A run failure rather than misuse: nothing is wrong with the agent or the request.
- `ThinkError`: the common base, so an application can catch everything of ours in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal


class ThinkError(Exception):
    """Base class of every exception Think raises on purpose."""


class UserError(ThinkError):
    """Developer or client misuse that retrying cannot fix."""


class ConfigurationError(UserError):
    """The service is configured in a way that cannot work (missing variable, bad import path)."""


class AgentNotFoundError(UserError):
    def __init__(self, name: str, hosted: Sequence[str] = ()) -> None:
        which = f"; it hosts {', '.join(repr(h) for h in hosted)}" if hosted else ""
        super().__init__(f"no agent named {name!r} is hosted by this deployment{which}")
        self.name = name
        self.hosted = list(hosted)


ModelFailureKind = Literal[
    "connection",
    "dns",
    "tls",
    "timeout",
    "auth",
    "not_found",
    "rate_limit",
    "server",
    "bad_request",
    "stream",
    "refused",
    "other",
]
"""What went wrong with a model request, for logs and metrics (`think_model_request_failures`'s
`kind`): unreachable (`connection`: refused or reset), a failed DNS lookup, a failed TLS
handshake or certificate, a timeout, the key refused (401/403), the model or path unknown
(404), a rate limit (429), the server failing (5xx, Anthropic's 529 overloaded), the request
refused for what it is (other 4xx), a stream broken or ended early, a request refused before
it was sent (a setting the adapter cannot honour), or anything else."""


class ModelError(ThinkError):
    """The model provider failed.

    `status` is the provider's HTTP status when there was one; `retryable` is False for errors
    that will fail the same way again (bad request, authentication, unknown model). `kind` says
    what went wrong (`ModelFailureKind`); unset, it is read from `status` (`failure_kind`).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        kind: ModelFailureKind | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self._kind = kind

    @property
    def kind(self) -> ModelFailureKind:
        if self._kind is not None:
            return self._kind
        status = self.status
        if status is None:
            return "other"
        if status in (401, 403):
            return "auth"
        if status == 404:
            return "not_found"
        if status == 429:
            return "rate_limit"
        if status == 408:
            return "timeout"
        if status >= 500:
            return "server"
        return "bad_request" if 400 <= status < 500 else "other"


class TurnFailed(ThinkError):
    """A turn ended in `error`; the message is what its client is shown."""


class OutputValidationError(ThinkError):
    """The model's final answer is not the structured output that was asked for.

    The message says why in words a client can read ("the answer does not match the schema:
    age: Input should be a valid integer"); `text` is the answer as the model gave it.
    """

    def __init__(self, message: str, *, text: str) -> None:
        super().__init__(message)
        self.text = text


class ToolError(ThinkError):
    """Raised by a tool to fail with a message the model should see, verbatim.

    Never retried, unless its class says `retryable`: a failure that another attempt may not
    meet (an MCP server that cannot be reached) is retried as the tool's policy allows, and
    the model reads its message once the attempts are spent."""

    retryable: bool = False


class ServiceUnreachable(ThinkError):
    """Postgres or Temporal did not answer when a process started; the message names which,
    where (without a password), and the variable that says where. Expected when a process
    starts before its services (a deploy, `docker compose up`): said in one line."""


class TemporalConnectionError(ServiceUnreachable):
    """Temporal could not be reached, or the connection to it failed: refused, a failed TLS
    handshake, credentials refused. The message is one line naming the address and the
    setting to look at (`setting`: `TEMPORAL_TLS_SERVER_CA_CERT_PATH`, say, or where a
    profile gave the value), never a bare transport error.

    A `ServiceUnreachable`: expected when a process starts before its services, said in one
    line (`think.engine`'s log filter). Not a `ConfigurationError`: an unreachable server may
    be a fault of the moment, not of the settings; what settings alone can tell wrong (a
    missing file, an unknown profile) is a `ConfigurationError` raised before any connection
    is tried."""

    def __init__(self, message: str, *, address: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.address = address
        self.setting = setting


class Superseded(ThinkError):
    """A turn's workflow task is stale: a newer attempt of its step runs elsewhere (its worker
    froze past the task's timeout, or is shutting down). Not a Temporal `FailureError`, so it
    fails the workflow task (whose completion the server refuses anyway), never the turn, and
    nothing is recorded from there. Expected control flow: the worker logs it as one line.

    Declared here, outside the workflow modules the sandbox reloads, so that the worker's log
    filter recognises it whichever copy raised it."""


# Names of non-retryable Temporal ApplicationError types, shared by activities and clients.
NON_RETRYABLE_USER_ERROR = "ThinkUserError"
NON_RETRYABLE_MODEL_ERROR = "ThinkModelError"
OUTPUT_VALIDATION_ERROR = "ThinkOutputValidationError"
STALE_ATTEMPT = "ThinkStaleAttempt"
MODEL_RETRY = "ThinkModelRetry"
HOOK_FAILED = "ThinkHookFailed"
NON_TRANSIENT_FAILURE = "ThinkNonTransientFailure"
