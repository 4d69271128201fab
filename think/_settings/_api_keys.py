"""`THINK_API_KEYS`: bearer keys, each with its tenant and, for a named approver, a name."""

from __future__ import annotations

import re

from think.exceptions import ConfigurationError

_NO_SPACES = re.compile(r"\S+")


def parse_api_keys(
    raw: str, default_tenant: str = "default"
) -> tuple[dict[str, str], dict[str, str]]:
    """`key:tenant[:name]` entries, comma-separated: (key -> tenant, key -> name). A key
    without a tenant is `default_tenant`'s (`THINK_DEFAULT_TENANT`)."""
    keys: dict[str, str] = {}
    names: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in raw.split(","))):
        key, sep, rest = pair.partition(":")
        tenant, _, name = rest.partition(":")
        if not _NO_SPACES.fullmatch(key):
            # The key itself is a secret: say which entry by position, never by its text.
            raise ConfigurationError(
                f"THINK_API_KEYS: entry {len(keys) + 1} has no key, or one with spaces; "
                "expected key:tenant or key:tenant:name, comma-separated"
            )
        keys[key] = tenant if sep and tenant else default_tenant
        if name:
            names[key] = name
    return keys, names
