"""A turn never imports a model provider's SDK on the event loop (think/models/_warm.py): the
first `sdk_ready` imports it in a thread while the loop goes on running (other turns' streams,
their heartbeats); imported on the loop, it held everything for a second or more."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    from think.models._warm import sdk_ready

    async def main() -> None:
        assert "anthropic" not in sys.modules
        ticks = 0
        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1
        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)
        before = ticks
        await sdk_ready("anthropic")
        during = ticks - before
        await sdk_ready("anthropic")  # at once now
        ticker.cancel()
        import anthropic
        print(json.dumps({"during": during, "client": anthropic.AsyncAnthropic.__name__}))

    asyncio.run(main())
    """
)


def test_the_first_turn_to_use_an_sdk_imports_it_while_the_loop_runs() -> None:
    """Ticks of a 5 ms timer go on while Anthropic's SDK is imported: had the import run on
    the loop, none would (it takes a second or more of CPU)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["client"] == "AsyncAnthropic"
    assert found["during"] >= 5, found
