"""What a fetch tool makes of an HTTP answer: the body as text, JSON or a file saved in the
conversation's workspace, within the tool's byte and character limits; and the structured
refusal (`FetchFailure`) every call that fails answers with instead of an exception."""

from __future__ import annotations

import hashlib
import json
import mimetypes
import re
from typing import Any, Literal, TypeAlias

import httpx

from think._messages import storable, storable_text
from think.exceptions import UserError
from think.storage import WorkspaceQuotaError
from think.tools._fetch_url import NormalURL
from think.tools._workspace import current_workspace

ResponseMode: TypeAlias = Literal["auto", "text", "json", "workspace"]
FetchCode: TypeAlias = Literal[
    "disallowed_url",
    "disallowed_redirect",
    "timeout",
    "aborted",
    "non_2xx",
    "unsupported_content_type",
    "invalid_json",
    "too_large",
    "request_failed",
]


class FetchFailure(Exception):
    """A call the tool answers with `{ok: false, code, message, ...}` (`result()`)."""

    def __init__(
        self,
        code: FetchCode,
        message: str,
        *,
        status: int | None = None,
        final_url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code: FetchCode = code
        self.status = status
        self.final_url = final_url

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "code": self.code, "message": str(self)}
        if self.status is not None:
            out["status"] = self.status
        if self.final_url is not None:
            out["final_url"] = self.final_url
        return out


def media_kind(media_type: str) -> Literal["json", "text", "binary"]:
    if media_type == "application/json" or media_type.endswith("+json"):
        return "json"
    if (
        media_type.startswith("text/")
        or media_type in ("application/xml", "application/javascript", "application/x-yaml")
        or media_type.endswith("+xml")
    ):
        return "text"
    return "binary"


async def read_response(
    answer: httpx.Response,
    url: NormalURL,
    response: ResponseMode,
    *,
    max_bytes: int,
    max_model_chars: int,
    spill_to_workspace: bool,
) -> dict[str, Any]:
    """The answer as the tool returns it: its body as text, JSON or a workspace file, by
    `response` and the media type; a `FetchFailure` for what the model cannot have."""
    status = answer.status_code
    if not 200 <= status < 300:
        raise FetchFailure(
            "non_2xx", f"HTTP {status} from {url.url}", status=status, final_url=url.url
        )
    declared = answer.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchFailure(
            "too_large",
            f"the body is {declared} bytes, over max_bytes ({max_bytes})",
            status=status,
            final_url=url.url,
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in answer.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise FetchFailure(
                "too_large",
                f"the body is over max_bytes ({max_bytes})",
                status=status,
                final_url=url.url,
            )
        chunks.append(chunk)
    data = b"".join(chunks)
    media_type = answer.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    media_type = media_type or "application/octet-stream"
    kind = media_kind(media_type)
    base: dict[str, Any] = {
        "ok": True,
        "status": status,
        "final_url": url.url,
        "content_type": media_type,
        "bytes": len(data),
        "truncated": False,
    }
    if response == "workspace":
        return {**base, "response": "workspace", "path": await _save(url, media_type, data)}
    if kind == "binary" or (response == "json" and kind != "json" and kind != "text"):
        if response == "auto" and spill_to_workspace:
            return {**base, "response": "workspace", "path": await _save(url, media_type, data)}
        raise FetchFailure(
            "unsupported_content_type",
            f"{media_type} is not text; ask with response='workspace' to save it",
            status=status,
            final_url=url.url,
        )
    try:
        text = data.decode(answer.charset_encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        text = data.decode("utf-8", errors="replace")
    # A page may hold NUL bytes, or escape them (and lone surrogates) in its JSON: the
    # model reads, and the turn stores, the same text with each replaced
    # (`think._messages.storable`).
    text = storable_text(text)
    if response == "json" or (response == "auto" and kind == "json"):
        try:
            parsed = storable(json.loads(text))
        except ValueError as exc:
            raise FetchFailure(
                "invalid_json", f"the body is not JSON: {exc}", status=status, final_url=url.url
            ) from None
        return {**base, "response": "json", "json": parsed}
    if len(text) > max_model_chars:
        if response == "auto" and spill_to_workspace:
            return {**base, "response": "workspace", "path": await _save(url, media_type, data)}
        return {
            **base,
            "response": "text",
            "truncated": True,
            "body": text[:max_model_chars],
        }
    return {**base, "response": "text", "body": text}


async def _save(url: NormalURL, media_type: str, data: bytes) -> str:
    """The body, saved under `fetched/` in the conversation's workspace; the same body is the
    same file, so a retried call writes nothing new."""
    name = url.path.rstrip("/").rsplit("/", 1)[-1] or "index"
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:60]
    if "." not in stem:
        stem += mimetypes.guess_extension(media_type) or ""
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = f"fetched/{url.host}/{digest}-{stem}"
    try:
        workspace = await current_workspace()
    except UserError as exc:
        raise FetchFailure("request_failed", str(exc)) from None
    try:
        await workspace.write(path, data, media_type)
    except WorkspaceQuotaError as exc:
        raise FetchFailure("too_large", str(exc)) from None
    return f"/workspace/{path}"
