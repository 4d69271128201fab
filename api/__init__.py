"""The HTTP gateway (FastAPI): routes in `routes/`, the SSE stream in `_sse.py`."""
