"""`python -m workers`: one worker, configured from the environment."""

import asyncio
import logging

from think.server import Settings, run_worker

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(run_worker(Settings.from_env()))
