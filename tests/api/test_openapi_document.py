"""The gateway's OpenAPI document, as served at `/openapi.json`, is the one committed in
docs/openapi.json, byte for byte.

Clients and checks are generated from the document, so a change to it must be deliberate: a
refactor (a rename, a module moved) leaves it as it is, and this test says so. A change meant
to reach clients rewrites the file in the same commit:

    .venv/bin/python -m tests.api.test_openapi_document
"""

from __future__ import annotations

import json
from pathlib import Path

from api.app import create_app
from think.server import Settings

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def served_document() -> str:
    """The document the app serves with the default settings, as the committed file holds it."""
    return json.dumps(create_app(Settings()).openapi(), indent=1) + "\n"


def test_the_openapi_document_is_the_committed_one() -> None:
    assert served_document() == DOCUMENT.read_text(), (
        "the OpenAPI document changed; if that is meant, rewrite docs/openapi.json with "
        "`.venv/bin/python -m tests.api.test_openapi_document` in the same commit"
    )


if __name__ == "__main__":
    DOCUMENT.write_text(served_document())
    print(f"wrote {DOCUMENT.relative_to(Path.cwd())}")
