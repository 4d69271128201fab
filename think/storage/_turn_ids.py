"""Turn ids, and the names clients give turns (`submission_id`).

A turn's id (`turns.id`) is global: workflows, activities, streams and answers name a turn by
it alone. A client that chooses its turn's id (`submission_id`) chooses a name within its
tenant, though, so the id stored for it carries the tenant: `<submission_id>~<tenant tag>`.
Two tenants' turns of the same name are then two rows that never conflict, and a tenant's
admission never looks at another tenant's ids (no 409, no timing, to learn from). The client
sees only its name: every door shows `public_turn_id`, and every lookup of a name a client
gave (`turn_id_candidates`) is scoped to its conversation, so it finds its own turn only.

Ids the service generates (`turn_<hex>`) are global already and stored as they are. So are
the submission ids of turns recorded before this scheme: their row id is the name as given,
which `turn_id_candidates` still finds, within their own conversation (and, on admission,
their own tenant) only.
"""

from __future__ import annotations

import hashlib

SCOPE_MARK = "~"
"""Between a client's name and its tenant's tag: a character no client id can hold
(`think._messages.ID`) and no generated id does, so the name is what comes before it."""


def tenant_tag(tenant: str) -> str:
    """A short, fixed-alphabet tag of the tenant: tenant names are the operator's, any text,
    and a turn id goes into workflow ids, NOTIFY payloads and log lines as it is."""
    return hashlib.sha256(tenant.encode()).hexdigest()[:16]


def tenant_turn_id(tenant: str, submission_id: str) -> str:
    """The id stored for the turn `tenant` named `submission_id`."""
    return f"{submission_id}{SCOPE_MARK}{tenant_tag(tenant)}"


def public_turn_id(turn_id: str) -> str:
    """What clients see of a turn id: the name they gave it, or the generated id."""
    return turn_id.partition(SCOPE_MARK)[0]


def public_turn_id_or_none(turn_id: str | None) -> str | None:
    return None if turn_id is None else public_turn_id(turn_id)


def turn_id_candidates(tenant: str, turn_id: str) -> list[str]:
    """The stored ids a turn id a client gave may be, in `tenant`: its scoped form, and the
    id as given (a generated id, or a name recorded before names were scoped). An id that
    is stored already (scoped) is only itself. Always looked up within one conversation or
    one tenant, which rules out another tenant's row of the same stored id."""
    if SCOPE_MARK in turn_id:
        return [turn_id]
    return [turn_id, tenant_turn_id(tenant, turn_id)]
