"""The fake payments API the actions tests' agents pay through (`tests.actions._payments`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.actions._payments import FakePayments


@pytest.fixture(scope="module")
def payments() -> Iterator[FakePayments]:
    with FakePayments() as fake:
        yield fake
