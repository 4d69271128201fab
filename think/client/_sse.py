"""An incremental Server-Sent Events decoder (the WHATWG "event stream" interpretation).

Fed bytes as they arrive, it returns each event once its terminating blank line has arrived.
An event cut off by a dropped connection is never returned: the client asks for it again with
`Last-Event-ID`, so a half-received chunk can never be taken for a whole one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SSEEvent:
    id: str | None
    """This event's `id:` field; None when it had none (the gateway's `[DONE]`)."""
    data: str
    event: str = "message"


class SSEDecoder:
    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._id: str | None = None
        self._event = ""
        self._first_line = True

    def feed(self, data: bytes) -> list[SSEEvent]:
        """The events completed by `data` (possibly none)."""
        self._buffer += data
        events: list[SSEEvent] = []
        while True:
            line, found = self._next_line()
            if not found:
                return events
            event = self._line(line)
            if event is not None:
                events.append(event)

    def _next_line(self) -> tuple[str, bool]:
        # Lines end with CRLF, LF or CR. A CR at the very end may be the first half of a CRLF
        # whose LF is still in flight, so it waits for the next bytes.
        buffer = self._buffer
        cr, lf = buffer.find(b"\r"), buffer.find(b"\n")
        if cr == -1 and lf == -1:
            return "", False
        if cr == -1 or (lf != -1 and lf < cr):
            end, skip = lf, 1
        elif cr + 1 == len(buffer):
            return "", False
        else:
            end, skip = cr, 2 if buffer[cr + 1 : cr + 2] == b"\n" else 1
        raw, self._buffer = buffer[:end], buffer[end + skip :]
        # Never splits a character: no byte of a multi-byte UTF-8 sequence is CR or LF.
        line = raw.decode("utf-8", errors="replace")
        if self._first_line:
            self._first_line = False
            line = line.removeprefix("\ufeff")
        return line, True

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: the gateway's `: ping` keep-alives
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "id" and "\x00" not in value:
            self._id = value
        elif name == "event":
            self._event = value
        return None  # `retry` and unknown fields: ignored

    def _dispatch(self) -> SSEEvent | None:
        data, event_id, kind = self._data, self._id, self._event or "message"
        self._data, self._id, self._event = [], None, ""
        if not data:
            return None
        return SSEEvent(id=event_id, data="\n".join(data), event=kind)
