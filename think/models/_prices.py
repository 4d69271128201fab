"""What a model step cost, in US dollars: from the endpoint's own price list when it declares
one, otherwise from `genai-prices` (Pydantic's maintained table of providers' published prices,
with their history), and unknown, never zero, when neither knows the model.

`genai-prices` is chosen over a table of our own because prices change every month, by
provider and by date, with cache and reasoning tiers: a package that is released when they
change keeps a deployment's costs right by upgrading one dependency. Its table is the snapshot
shipped in the package: it is never fetched from the network (no `UpdatePrices`).
"""

from __future__ import annotations

from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING

from think._settings import Prices
from think.models._base import Usage

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot

_MILLION = Decimal(1_000_000)


def listed_cost(prices: Prices, usage: Usage) -> Decimal:
    """The cost at an endpoint's own prices."""
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    written = min(usage.cache_write_tokens, usage.input_tokens - cached)
    plain = usage.input_tokens - cached - written
    total = (
        plain * prices.input
        + cached * (prices.input if prices.cached_input is None else prices.cached_input)
        + written * (prices.input if prices.cache_write is None else prices.cache_write)
        + usage.output_tokens * prices.output
    )
    return total / _MILLION


@cache
def _snapshot() -> DataSnapshot:
    """The package's price table, loaded once per process (about 40 ms)."""
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


def warm_price_table() -> None:
    """Load the table now (a worker's start), not in a turn's first step."""
    _snapshot()


def published_cost(
    usage: Usage, model: str, *, base_url: str | None = None, provider: str | None = None
) -> Decimal | None:
    """The cost at the provider's published prices: the provider named (`provider`, such as
    `"openai"` or `"anthropic"`, for a proxy in front of one), else the one whose API lives at
    `base_url`. None when the table does not know the provider or the model: a local server's
    model has no published price."""
    from genai_prices import Usage as PricedUsage

    priced = PricedUsage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cached_input_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    try:
        if provider is not None:
            found = _snapshot().calc(priced, model, provider, None, None, None)
        else:
            found = _snapshot().calc(priced, model, None, base_url, None, None)
    except LookupError:
        return None
    return found.total_price


def cost_of(model: object, usage: Usage) -> Decimal | None:
    """What `usage` cost on `model` (a `ModelClient`): its optional `cost(usage)` member
    answers; a client without one has an unknown cost."""
    cost = getattr(model, "cost", None)
    if not callable(cost):
        return None
    found = cost(usage)
    return found if isinstance(found, Decimal) else None
