"""The worker entry point: wiring only. The worker itself (activities, sweeper, reconcile) is
`think.server.run_worker`."""

from think.server import build_worker, run_worker, workflow_runner

__all__ = ["build_worker", "run_worker", "workflow_runner"]
