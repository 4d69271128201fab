"""`python -m bench` (`make bench`): every benchmark, one after the other."""

from __future__ import annotations

import subprocess
import sys

BENCHMARKS = [
    ["bench.targets"],
    ["bench.turn_latency"],
    ["bench.turn_latency", "--offline", "--turns", "50"],
    ["bench.throughput"],
    ["bench.history_growth", "--turns", "200"],
    ["bench.chaos", "--turns", "100"],
    ["bench.search"],
    ["bench.context_load"],
    ["bench.on_chunk"],
    ["bench.adapter_overhead"],
    ["bench.turn_breakdown"],
    ["bench.sub_agents"],
    ["bench.workspace_memory"],
    ["bench.workspace_quota"],
    ["bench.shared_limits"],
    ["bench.production"],
    # bench.soak runs for as many minutes as it is told: by hand.
    ["bench.fairness"],
    ["bench.code_execution"],
    ["bench.code_mode"],
]

if __name__ == "__main__":
    for args in BENCHMARKS:
        print(f"\n== python -m {' '.join(args)}", flush=True)
        subprocess.run([sys.executable, "-m", *args], check=True)
