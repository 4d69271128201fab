"""What an `on_chunk` hook costs the stream: chunks per second through a step's emit path,
without a hook, with a trivial one, and with one that does a little bookkeeping.

The hook runs inline for every chunk (it is sync by contract), so its cost is the stream's
cost. Measured on the real `StepStream` and `MessageBuilder`; the chunk writer is replaced
by a list so that Postgres does not drown the figure.

    python -m bench.on_chunk [--chunks 200000]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from typing import Any

from think.engine.activities._step_stream import StepStream
from think.streaming._builder import MessageBuilder


class _ListWriter:
    def __init__(self) -> None:
        self.chunks: list[dict[str, Any]] = []

    def emit(self, chunk: dict[str, Any]) -> None:
        self.chunks.append(chunk)


def run(chunks: int, on_chunk: Any, per_step: int = 500) -> float:
    """Seconds to stream `chunks` text deltas, in steps of `per_step` (an answer's size)."""
    total = 0.0
    for _ in range(chunks // per_step):
        builder = MessageBuilder({"id": "m", "role": "assistant", "parts": []})
        step = StepStream(builder, _ListWriter(), 0, on_chunk=on_chunk)  # type: ignore[arg-type]
        started = time.perf_counter()
        step.emit({"type": "start-step"})
        for _ in range(per_step):
            step.text("word ")
        step.close()
        total += time.perf_counter() - started
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=200_000)
    args = parser.parse_args()
    kinds: Counter[str] = Counter()
    hooks = {
        "no hook": None,
        "trivial hook": lambda chunk: None,
        "counting hook": lambda chunk: kinds.update((chunk["type"],)),
    }
    base = 0.0
    for name, hook in hooks.items():
        seconds = min(run(args.chunks, hook) for _ in range(3))
        per_chunk = seconds / args.chunks * 1e9
        base = base or per_chunk
        print(
            f"{name:14} {args.chunks / seconds:12,.0f} chunks/s  {per_chunk:6.0f} ns/chunk"
            f"  (+{per_chunk - base:4.0f} ns)"
        )


if __name__ == "__main__":
    main()
