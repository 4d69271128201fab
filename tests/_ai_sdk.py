"""The AI SDK's own client code, run by node over SSE bytes the gateway sent (tests/node/).

`reconstruct` hands a stream's body to `reconstruct.mjs`, which parses it with the `ai`
package (`parseJsonEventStream` + `uiMessageChunkSchema` + `readUIMessageStream`) and answers
the message it rebuilds and any errors it met.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).parent / "node"


async def reconstruct(body: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(NODE_DIR / "reconstruct.mjs"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(body.encode())
    assert proc.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    assert result["errors"] == [] or all(e["source"] == "error-chunk" for e in result["errors"])
    return result
