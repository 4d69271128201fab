"""The gateway's LISTEN connection: `think.streaming.ChunkListener`, shared with the Python turn
API (`think.ThinkService`), which waits for turns the same way."""

from think.server import ChunkListener

__all__ = ["ChunkListener"]
