"""Media eviction: an image (or any inline file) the model has already seen leaves its context
once its message is old enough, as a marker naming the workspace file that keeps its bytes.

    [evicted image/png, 812004 bytes; preserved at /workspace/attachments/evicted/m1-0.png]

A screenshot sent again on every later step is pure cost. The model reads the marker and,
when it needs the picture again, `read`s the path: the workspace tools recognise `image/*`
and pass it back as the image. Eviction is visible to the model and lossy on purpose.

It happens when a model step reads its transcript, like read-time truncation
(`think.sessions._truncation`), and never in storage: the stored message, `GET …/messages`
and the client keep the file part as it was. The bytes are written to the conversation's
workspace (raw, with their media type, not as a data URL) the first time a part is evicted.

The cut-off: messages older than the newest `keep_recent_messages` (at least the 4 the model
always reads whole), moving in steps of `Think.truncation_step` like truncation (8 when
truncation is off), so evicting does not rewrite the prompt prefix on the turns where
truncation leaves it alone. Only parts of at least `min_part_bytes` are evicted.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from think._current import BOUND
from think._messages import UIMessage
from think._protocol import PartLike, is_file_part
from think.models import ByIdentity, is_media
from think.sessions._truncation import KEEP_WHOLE
from think.storage import Workspace

EVICTED_DIR = "attachments/evicted"
DEFAULT_STEP = 8
"""The cut-off's step when read-time truncation is off."""
"""Where evicted media is kept, in the conversation's workspace."""


class MediaEviction(BaseModel):
    """`Think.media_eviction`'s settings (True means these defaults, False turns it off)."""

    model_config = ConfigDict(frozen=True)

    keep_recent_messages: int = Field(default=8, ge=1)
    """Messages at the end of the transcript whose media stays (clamped to at least 4)."""
    min_part_bytes: int = Field(default=1024, ge=0)
    """Smaller payloads stay where they are: a marker would save nothing."""


@dataclass(frozen=True)
class Evicted:
    """A payload taken out of the model's context, to keep in the workspace."""

    path: str
    media_type: str
    data: bytes


def eviction_settings(value: object) -> MediaEviction | None:
    if value is False or value is None:
        return None
    if value is True:
        return MediaEviction()
    if isinstance(value, MediaEviction):
        return value
    raise TypeError(f"media_eviction={value!r} must be True, False or a MediaEviction(...)")


def eviction_cutoff(count: int, settings: MediaEviction, step: int | float | None) -> int:
    """How many of the oldest of `count` messages lose their media."""
    keep = max(settings.keep_recent_messages, KEEP_WHOLE)
    if count <= keep:
        return 0
    # Truncation off (None, inf) still evicts, in the default's steps: the prefix then
    # changes once every 8 messages rather than on every turn.
    stride = int(step) if isinstance(step, int) and step >= 1 else DEFAULT_STEP
    return (count - keep) // stride * stride


_DATA_URL = re.compile(r"^data:([^;,]+)?((?:;[^;,]*)*?);base64,(.*)$", re.DOTALL)


def _decoded(url: str) -> tuple[str, bytes] | None:
    found = _DATA_URL.match(url)
    if found is None:
        return None
    try:
        return (found.group(1) or "application/octet-stream"), base64.b64decode(found.group(3))
    except (binascii.Error, ValueError):
        return None


def marker(media_type: str, size: int, path: str) -> str:
    return f"[evicted {media_type}, {size} bytes; preserved at /workspace/{path}]"


def _path(message_id: str, index: int, media_type: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", message_id)[:100] or "message"
    extension = mimetypes.guess_extension(media_type, strict=False) or ".bin"
    return f"{EVICTED_DIR}/{safe}-{index}{extension}"


_evictions: ByIdentity[tuple[UIMessage, list[Evicted]]] = ByIdentity()


def evict_message(message: UIMessage, min_bytes: int) -> tuple[UIMessage, list[Evicted]]:
    cached = _evictions.get(message)
    if cached is not None:
        return cached
    parts: list[PartLike] = []
    evicted: list[Evicted] = []
    for index, part in enumerate(message.parts):
        new, gone = _evict_part(message.id, index, part, min_bytes)
        if gone is not None:
            evicted.append(gone)
        parts.append(new)
    result = (message.model_copy(update={"parts": parts}) if evicted else message, evicted)
    _evictions.put(message, result)
    return result


def _evict_part(
    message_id: str, index: int, part: PartLike, min_bytes: int
) -> tuple[PartLike, Evicted | None]:
    """`part`, or what stands in for its media once evicted, and the media evicted."""
    if is_file_part(part) and isinstance(part.get("url"), str):
        decoded = _decoded(part["url"])
        if decoded is not None and len(decoded[1]) >= min_bytes:
            media_type = str(part.get("mediaType") or decoded[0])
            path = _path(message_id, index, media_type)
            new = {"type": "text", "text": marker(media_type, len(decoded[1]), path)}
            return new, Evicted(path, media_type, decoded[1])
    elif is_media(part.get("output")) and part.get("state") == "output-available":
        decoded = _decoded(part["output"]["url"])
        if decoded is not None and len(decoded[1]) >= min_bytes:
            media_type = str(part["output"]["mediaType"])
            path = _path(message_id, index, media_type)
            new = {**part, "output": marker(media_type, len(decoded[1]), path)}
            return new, Evicted(path, media_type, decoded[1])
    return part, None


def evict(
    messages: list[UIMessage], settings: MediaEviction | None, step: int | float | None
) -> tuple[list[UIMessage], list[Evicted]]:
    """The transcript with the media of its older messages replaced by markers (copies;
    `messages` is not changed), and the payloads to keep. A worker's steps evict only what
    changed (`think.sessions._chat_history`), and must agree with this."""
    if settings is None:
        return messages, []
    cut = eviction_cutoff(len(messages), settings, step)
    if cut == 0:
        return messages, []
    out: list[UIMessage] = []
    kept: list[Evicted] = []
    for message in messages[:cut]:
        copy, evicted = evict_message(message, settings.min_part_bytes)
        out.append(copy)
        kept += evicted
    return out + messages[cut:], kept


_preserved: set[tuple[str, str]] = set()
"""(conversation uid, path) of the files this process knows are in the workspace."""


async def preserve(evicted: list[Evicted]) -> None:
    """Write the evicted payloads to the workspace of the turn being served, once each."""
    binding = BOUND.get()
    if not evicted or binding is None:
        return
    turn = await binding.turn()
    workspace = Workspace(binding.service.store.db, turn.conversation_uid)
    for item in evicted:
        key = (turn.conversation_uid, item.path)
        if key in _preserved:
            continue
        await workspace.write_if_absent(item.path, item.data, item.media_type)
        if len(_preserved) > 100_000:
            _preserved.clear()
        _preserved.add(key)
