"""The providers' SDKs are imported off the event loop, never by a turn on it.

They are imported lazily (the gateway and the CLI never call a model), and an import runs on
the thread that asks for it: in a worker, the event loop. `import anthropic` takes about 1.5 s
of CPU on an idle host and several on a busy one, `import openai` about 1 s, and for all of
that time the loop ran nothing else: not the other turns' streams, not their heartbeats, not
the eager start of the turn that asked (its gateway then started it itself, and the step begun
beside the eager start was dropped, a model request made for nothing).

So each adapter awaits `sdk_ready(name)` before it touches its SDK: the first call imports it
in a thread (and what its client loads on first use), later ones return at once. A worker
begins OpenAI's in the background as it starts (`warm_model_sdks`): most deployments use it,
and the first turn finds it ready. The start does not wait for it: awaited before polling, the
import took a worker's start from 1.3 s to 4 s; beside the start, it takes 2.1 s. Anthropic's
is imported by the first turn to use it, off the loop.
"""

from __future__ import annotations

import asyncio
import importlib
import logging

log = logging.getLogger("think.models")

WARM_API_KEY = "not-a-key"
"""What the throwaway clients are built with: they never send a request."""

_ready: set[str] = set()
"""The SDKs imported whole (a module is in `sys.modules` from its import's start)."""
_loading: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Task[None]] = {}


def _load(name: str) -> None:
    """Import SDK `name` and what its client loads on first use (its resources, the HTTP
    transport), by building a client that opens no connection."""
    module = importlib.import_module(name)
    if name == "openai":
        chat = module.OpenAI(api_key=WARM_API_KEY, max_retries=0)
        _ = chat.chat.completions, chat.responses
        chat.close()
    elif name == "anthropic":
        messages = module.Anthropic(api_key=WARM_API_KEY, max_retries=0)
        _ = messages.messages
        messages.close()
    _ready.add(name)


def _loading_task(name: str) -> asyncio.Task[None]:
    loop = asyncio.get_running_loop()
    task = _loading.get((loop, name))
    if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
        task = loop.create_task(asyncio.to_thread(_load, name), name=f"import {name}")
        _loading[(loop, name)] = task
    return task


async def sdk_ready(name: str) -> None:
    """Return once SDK `name` is imported, importing it in a thread if need be. Raises what
    the import raised (a broken install); the next call tries again."""
    if name in _ready:
        return
    await asyncio.shield(_loading_task(name))


def warm_model_sdks(names: tuple[str, ...] = ("openai",)) -> None:
    """Begin importing `names` in the background, on this event loop's thread pool."""
    for name in names:
        if name not in _ready:
            _loading_task(name).add_done_callback(_logged)


def _logged(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not import %s", task.get_name(), exc_info=task.exception())
