"""The fetch tools: a conservative, read-only way for the model to read HTTP resources.

    class DocsAgent(Think):
        fetch_tools = FetchTools(
            allowlist=["https://docs.example.com/**"],                     # -> fetch_url
            targets={"docs_api": FetchTarget(base_url="http://docs-api.internal:8080",
                                             allowlist=["/v1/docs/**"])},   # -> fetch_docs_api
        )

`fetch_url` reads public URLs that match the allowlist; it never reaches a private, loopback,
link-local, unique-local, `*.internal` or metadata address, whatever the allowlist says and
however the address is spelled, and it checks the address it connects to, on every redirect
hop (`think.tools._fetch_guard`). A named target (`fetch_<name>`) reads paths of one base URL,
which may be internal by design; it never follows a redirect to another origin, and its fixed
headers (server-side, never seen by the model) are not sent again after any redirect.

Every call answers a structured value, never an exception: `{ok: true, status, final_url,
content_type, bytes, truncated, response, body | json | path}` or `{ok: false, code, message,
status?, final_url?}`, and emits a `tool.fetch` event, refused calls included.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import httpcore
import httpx
from pydantic import BaseModel, ConfigDict, Field

from think import events
from think.exceptions import UserError
from think.tools._fetch_guard import (
    AddressRefused,
    Connector,
    GuardedBackend,
    GuardedTransport,
    Resolver,
    system_resolver,
)
from think.tools._fetch_response import (
    FetchCode,
    FetchFailure,
    ResponseMode,
    read_response,
)
from think.tools._fetch_url import (
    DisallowedURL,
    IPAddress,
    NormalURL,
    Pattern,
    address_refusal,
    host_refusal,
    parse_pattern,
    parse_url,
)
from think.tools._tool import Tool, ToolContext

DEFAULT_ACCEPT = (
    "text/markdown, text/plain;q=0.9, application/json;q=0.8, text/html;q=0.7, */*;q=0.1"
)
"""Markdown first: content-negotiating docs sites answer clean markdown instead of HTML, and
`*/*` keeps a strict server from answering 406."""
MODEL_HEADERS = ("accept", "accept-language", "range")
"""The request headers the model may set."""
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_TARGET_NAME = re.compile(r"^[A-Za-z0-9_]{1,58}$")


class FetchTarget(BaseModel):
    """A named base URL the model reads paths of, through `fetch_<name>`.

    `allowlist` holds path patterns (`/v1/docs/**`; None: every path under `base_url`);
    `headers` are sent on the first request only and never shown to the model;
    `description` tells the model what the target is.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    allowlist: list[str] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class _Policy:
    """What one tool may reach: `allowed(url)` is None or why not; `check` the address check
    of every connection (None: a target, internal by design)."""

    allowed: Callable[[NormalURL], str | None]
    check: Callable[[IPAddress], str | None] | None
    fixed_headers: Mapping[str, str]
    same_origin: str | None
    """A target's origin: a redirect elsewhere is refused."""


class FetchTools:
    """The fetch tools' configuration; `tools()` builds them (`Think.fetch_tools` does that
    for you). `allowlist` (URL patterns) enables `fetch_url`; each of `targets` adds
    `fetch_<name>`. `max_bytes` caps a download (more is `too_large`), `max_model_chars` the
    text the model reads (`truncated: true`); `spill_to_workspace` sends a binary body, or a
    text over `max_model_chars`, to the workspace in `auto` mode instead. `resolver` and
    `connector` replace DNS and the TCP connector (tests)."""

    def __init__(
        self,
        *,
        allowlist: Sequence[str] | None = None,
        targets: Mapping[str, FetchTarget] | None = None,
        max_bytes: int = 1024 * 1024,
        max_model_chars: int = 20_000,
        timeout: float = 30.0,
        follow_redirects: bool = True,
        max_redirects: int = 5,
        default_accept: str = DEFAULT_ACCEPT,
        model_header_allowlist: Sequence[str] = MODEL_HEADERS,
        spill_to_workspace: bool = False,
        resolver: Resolver | None = None,
        connector: Connector | None = None,
    ) -> None:
        for name, value in (("max_bytes", max_bytes), ("max_model_chars", max_model_chars)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"FetchTools: {name}={value!r} must be a positive whole number")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise UserError(f"FetchTools: timeout={timeout!r} must be a positive number of seconds")
        try:
            self.patterns = [parse_pattern(p) for p in (allowlist or [])]
        except ValueError as exc:
            raise UserError(f"FetchTools: {exc}") from None
        self.allowlist = list(allowlist or [])
        self.targets: dict[str, tuple[FetchTarget, NormalURL, list[Pattern] | None]] = {}
        for name, target in (targets or {}).items():
            if not _TARGET_NAME.match(name):
                raise UserError(
                    f"FetchTools: target name {name!r} must be 1 to 58 letters, digits or '_' "
                    f"(its tool is fetch_<name>)"
                )
            try:
                base = parse_url(target.base_url)
                paths = (
                    None
                    if target.allowlist is None
                    else [parse_pattern(p, path_only=True) for p in target.allowlist]
                )
            except (DisallowedURL, ValueError) as exc:
                raise UserError(f"FetchTools: target {name!r}: {exc}") from None
            self.targets[name] = (target, base, paths)
        self.max_bytes = max_bytes
        self.max_model_chars = max_model_chars
        self.timeout = float(timeout)
        self.follow_redirects = follow_redirects
        self.max_redirects = max_redirects
        self.default_accept = default_accept
        self.model_headers = frozenset(h.lower() for h in model_header_allowlist)
        self.spill_to_workspace = spill_to_workspace
        self.resolver: Resolver = resolver or system_resolver
        self.connector: Connector = connector or httpcore.AnyIOBackend()
        self._tools: list[Tool] | None = None

    # -- the tools ----------------------------------------------------------------------------

    def tools(self) -> list[Tool]:
        """`fetch_url` (with an allowlist) and one `fetch_<name>` per target; built once."""
        if self._tools is None:
            built = [self._url_tool()] if self.patterns else []
            built += [self._target_tool(name) for name in self.targets]
            self._tools = built
        return list(self._tools)

    def _url_tool(self) -> Tool:
        fetcher = self

        async def fetch_url(
            url: str,
            response: ResponseMode = "auto",
            headers: dict[str, str] | None = None,
            ctx: ToolContext | None = None,
        ) -> dict[str, Any]:
            """Read a public web page or file (GET only).

            Args:
                url: The http(s) URL; only URLs on the allowlist can be read.
                response: "auto" (text, or parsed JSON), "text", "json", or "workspace" (the
                    body is saved to the workspace and its path returned).
                headers: Only accept, accept-language and range may be set.
            """
            return await fetcher.fetch_url(url, response=response, headers=headers, ctx=ctx)

        allowed = ", ".join(self.allowlist)
        return Tool(
            fetch_url,
            name="fetch_url",
            description=(
                "Read a public web page or file over HTTP(S), GET only. Allowed URLs: "
                f"{allowed}. Returns {{ok, status, final_url, content_type, body | json | path}} "
                "or {ok: false, code, message}."
            ),
            timeout=self.timeout + 30,
        )

    def _target_tool(self, name: str) -> Tool:
        fetcher = self
        target = self.targets[name][0]

        async def fetch_target(
            path: str,
            response: ResponseMode = "auto",
            headers: dict[str, str] | None = None,
            ctx: ToolContext | None = None,
        ) -> dict[str, Any]:
            """Read a path of this service (GET only).

            Args:
                path: The path (and query) to read, e.g. /v1/docs/search?q=limits.
                response: "auto" (text, or parsed JSON), "text", "json", or "workspace" (the
                    body is saved to the workspace and its path returned).
                headers: Only accept, accept-language and range may be set.
            """
            return await fetcher.fetch_target(
                name, path, response=response, headers=headers, ctx=ctx
            )

        paths = ", ".join(target.allowlist) if target.allowlist is not None else "any path"
        return Tool(
            fetch_target,
            name=f"fetch_{name}",
            description=(
                f"{target.description or f'Read the {name} service.'} GET only; allowed "
                f"paths: {paths}."
            ),
            timeout=self.timeout + 30,
        )

    # -- calls ----------------------------------------------------------------------------------

    async def fetch_url(
        self,
        url: str,
        *,
        response: ResponseMode = "auto",
        headers: Mapping[str, str] | None = None,
        ctx: ToolContext | None = None,
    ) -> dict[str, Any]:
        """What the `fetch_url` tool answers for `url` (also usable from Python)."""

        def allowed(candidate: NormalURL) -> str | None:
            if not any(p.matches(candidate) for p in self.patterns):
                return f"{candidate.url} is not on the allowlist ({', '.join(self.allowlist)})"
            return host_refusal(candidate)

        policy = _Policy(allowed=allowed, check=address_refusal, fixed_headers={}, same_origin=None)
        return await self._call(
            "fetch_url", url, lambda: parse_url(url), policy, response, headers, ctx
        )

    async def fetch_target(
        self,
        name: str,
        path: str,
        *,
        response: ResponseMode = "auto",
        headers: Mapping[str, str] | None = None,
        ctx: ToolContext | None = None,
    ) -> dict[str, Any]:
        """What `fetch_<name>` answers for `path`."""
        target, base, patterns = self.targets[name]
        base_path = base.path.rstrip("/")

        def start() -> NormalURL:
            if not isinstance(path, str) or "://" in path.split("?")[0] or path.startswith("//"):
                raise DisallowedURL(f"give a path such as /v1/items, not {path!r}")
            relative = path if path.startswith("/") else "/" + path
            return parse_url(base.origin + base_path + relative)

        def allowed(candidate: NormalURL) -> str | None:
            if candidate.origin != base.origin:
                return f"{candidate.url} is not on {base.origin}"
            if base_path and not (
                candidate.path == base_path or candidate.path.startswith(base_path + "/")
            ):
                return f"{candidate.path} is outside {base_path}/"
            inner = candidate.path[len(base_path) :] or "/"
            if patterns is not None and not any(p.matches_path(inner) for p in patterns):
                return f"{inner} is not on the allowlist ({', '.join(target.allowlist or [])})"
            return None

        policy = _Policy(
            allowed=allowed, check=None, fixed_headers=target.headers, same_origin=base.origin
        )
        shown = f"{base.origin}{base_path}{path if str(path).startswith('/') else '/' + str(path)}"
        return await self._call(f"fetch_{name}", shown, start, policy, response, headers, ctx)

    async def _call(
        self,
        tool_name: str,
        asked: str,
        start: Callable[[], NormalURL],
        policy: _Policy,
        response: ResponseMode,
        headers: Mapping[str, str] | None,
        ctx: ToolContext | None,
    ) -> dict[str, Any]:
        began = time.perf_counter()
        audit: dict[str, Any] = {"redirects": 0, "final_url": None}
        try:
            try:
                async with asyncio.timeout(self.timeout):
                    result = await self._fetch(start, policy, response, headers, ctx, audit)
            except TimeoutError:
                raise FetchFailure(
                    "timeout",
                    f"no complete answer within {self.timeout:g} s",
                    final_url=audit["final_url"],
                ) from None
        except FetchFailure as failure:
            result = failure.result()
        except asyncio.CancelledError:
            await self._audit(tool_name, asked, {"ok": False, "code": "aborted"}, audit, began, ctx)
            raise
        await self._audit(tool_name, asked, result, audit, began, ctx)
        return result

    async def _audit(
        self,
        tool_name: str,
        asked: str,
        result: dict[str, Any],
        audit: dict[str, Any],
        began: float,
        ctx: ToolContext | None,
    ) -> None:
        if ctx is None:
            return
        await events.emit(
            events.ToolFetched(
                agent=ctx.agent,
                conversation_id=ctx.conversation_id,
                turn_id=ctx.turn_id,
                tool_name=tool_name,
                tool_call_id=ctx.tool_call_id,
                url=asked,
                final_url=result.get("final_url") or audit["final_url"],
                ok=bool(result.get("ok")),
                code=result.get("code"),
                status=result.get("status"),
                bytes=int(result.get("bytes", 0)),
                redirects=audit["redirects"],
                duration_ms=int((time.perf_counter() - began) * 1000),
            )
        )

    def _request_headers(self, headers: Mapping[str, str] | None) -> dict[str, str]:
        out = {"accept": self.default_accept} if self.default_accept else {}
        for key, value in (headers or {}).items():
            name = str(key).strip().lower()
            if name not in self.model_headers:
                allowed = ", ".join(sorted(self.model_headers)) or "none"
                raise FetchFailure(
                    "request_failed", f"the header {key!r} may not be set; allowed: {allowed}"
                )
            if not isinstance(value, str) or any(c in value for c in "\r\n\x00"):
                raise FetchFailure("request_failed", f"the value of header {key!r} is not valid")
            out[name] = value
        return out

    async def _fetch(
        self,
        start: Callable[[], NormalURL],
        policy: _Policy,
        response: ResponseMode,
        headers: Mapping[str, str] | None,
        ctx: ToolContext | None,
        audit: dict[str, Any],
    ) -> dict[str, Any]:
        if response not in ("auto", "text", "json", "workspace"):
            raise FetchFailure("request_failed", "response must be auto, text, json or workspace")
        try:
            url = start()
        except DisallowedURL as exc:
            raise FetchFailure("disallowed_url", str(exc)) from None
        reason = policy.allowed(url)
        if reason is not None:
            raise FetchFailure("disallowed_url", reason)
        model_headers = self._request_headers(headers)
        sent = {**model_headers, **{k.lower(): v for k, v in policy.fixed_headers.items()}}
        backend = GuardedBackend(self.resolver, self.connector, policy.check)
        transport = GuardedTransport(backend)
        async with httpx.AsyncClient(
            transport=transport, follow_redirects=False, trust_env=False, timeout=self.timeout
        ) as client:
            while True:
                audit["final_url"] = url.url
                try:
                    async with client.stream("GET", url.url, headers=sent) as answer:
                        if answer.status_code in _REDIRECTS and "location" in answer.headers:
                            if not self.follow_redirects:
                                raise FetchFailure(
                                    "non_2xx",
                                    f"HTTP {answer.status_code}: a redirect, not followed",
                                    status=answer.status_code,
                                    final_url=url.url,
                                )
                            url = self._next_hop(url, answer.headers["location"], policy, audit)
                            sent = dict(model_headers)  # fixed headers never follow a redirect
                            continue
                        return await read_response(
                            answer,
                            url,
                            response,
                            max_bytes=self.max_bytes,
                            max_model_chars=self.max_model_chars,
                            spill_to_workspace=self.spill_to_workspace,
                        )
                except AddressRefused as exc:
                    code: FetchCode = (
                        "disallowed_redirect" if audit["redirects"] else "disallowed_url"
                    )
                    raise FetchFailure(code, str(exc), final_url=url.url) from None
                except (httpx.TimeoutException, httpcore.TimeoutException):
                    raise FetchFailure(
                        "timeout", "the server did not answer in time", final_url=url.url
                    ) from None
                except (
                    httpx.HTTPError,
                    httpcore.ConnectError,
                    httpcore.NetworkError,
                    httpcore.ProtocolError,
                    OSError,
                ) as exc:
                    raise FetchFailure(
                        "request_failed", f"{type(exc).__name__}: {exc}", final_url=url.url
                    ) from None

    def _next_hop(
        self, current: NormalURL, location: str, policy: _Policy, audit: dict[str, Any]
    ) -> NormalURL:
        audit["redirects"] += 1
        if audit["redirects"] > self.max_redirects:
            raise FetchFailure(
                "request_failed", f"more than {self.max_redirects} redirects", final_url=current.url
            )
        try:
            hop = parse_url(urljoin(current.url, location))
        except DisallowedURL as exc:
            raise FetchFailure(
                "disallowed_redirect", f"redirect refused: {exc}", final_url=current.url
            ) from None
        if policy.same_origin is not None and hop.origin != policy.same_origin:
            raise FetchFailure(
                "disallowed_redirect",
                f"redirect to another origin ({hop.origin}) refused",
                final_url=current.url,
            )
        reason = policy.allowed(hop)
        if reason is not None:
            raise FetchFailure(
                "disallowed_redirect", f"redirect refused: {reason}", final_url=current.url
            )
        return hop
