"""What the model tests share: a fake OpenAI-compatible server of their own (one a module), and
the SDK clients' pool, closed when a module is done with it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from think.models import close_openai_clients
from think.testing import FakeOpenAIServer


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        yield fake


@pytest.fixture(scope="module")
async def pooled_clients() -> AsyncIterator[None]:
    yield
    await close_openai_clients()
