"""A worker's start loads what a turn's first model step would otherwise load on the event loop.

The providers' SDKs are imported lazily (the gateway and the CLI never call a model), and an
import runs on the thread that asks for it: in a worker, the event loop. `import anthropic`
takes about 1.5 s of CPU on an idle host and several on a busy one, and for all of that time
the loop runs nothing else: not the other turns' streams, not their heartbeats, not the eager
start of the turn that asked (its gateway then starts it itself, and the step begun beside the
eager start is dropped, a model request made for nothing). So a worker imports them at its
start, in a thread beside the start's network round trips, and says it polls only after.
"""

from __future__ import annotations

import logging

log = logging.getLogger("think.models")

WARM_API_KEY = "not-a-key"
"""What the throwaway clients are built with: they never send a request."""


def warm_model_sdks() -> None:
    """Import the OpenAI and Anthropic SDKs and what their clients load on first use (their
    resources, the HTTP transport). Builds clients to do that, which open no connection."""
    import anthropic
    import openai

    chat = openai.OpenAI(api_key=WARM_API_KEY, max_retries=0)
    _ = chat.chat.completions, chat.responses
    messages = anthropic.Anthropic(api_key=WARM_API_KEY, max_retries=0)
    _ = messages.messages
    chat.close()
    messages.close()
