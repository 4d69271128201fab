"""docs/testing.md shows its complete example as the suite runs it: the file itself."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parent.parent / "docs" / "testing.md"
EXAMPLE = HERE / "test_my_agent.py"


def test_the_guide_shows_the_example_file_as_it_is() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert EXAMPLE.read_text() in blocks, (
        "docs/testing.md's example differs from tests/guide/test_my_agent.py: copy the file "
        "into the doc's python block"
    )
    assert "tests/guide/test_my_agent.py" in DOC.read_text()
