"""Markdown → Telegram MarkdownV2, checked against the fake Bot API's parser (what Telegram
refuses, it refuses): any text, even a reply cut off mid-entity while it streams, must parse."""

from __future__ import annotations

import pytest

from tests._fake_telegram import markdown_v2_problem
from think.messengers import split_markdown, to_markdown_v2

CASES = {
    "plain. with (reserved) chars! 1+1=2 #tag {x} a|b ~x > y": (
        "plain\\. with \\(reserved\\) chars\\! 1\\+1\\=2 \\#tag \\{x\\} a\\|b \\~x \\> y"
    ),
    "**bold** and *it* and _it_ and ~~gone~~": "*bold* and _it_ and _it_ and ~gone~",
    "snake_case_name stays": "snake\\_case\\_name stays",
    "`code with * and _` ok": "`code with * and _` ok",
    "[docs](https://e.com/a_b) here.": "[docs](https://e.com/a_b) here\\.",
    "# Title\n- one\n* two\n> quoted.": "*Title*\n• one\n• two\n>quoted\\.",
    "```python\nprint('a\\\\b')\n```": "```python\nprint('a\\\\\\\\b')\n```",
}


@pytest.mark.parametrize("markdown", list(CASES))
def test_markdown_becomes_markdown_v2(markdown: str) -> None:
    out = to_markdown_v2(markdown)
    assert out == CASES[markdown]
    assert markdown_v2_problem(out) is None


@pytest.mark.parametrize(
    "partial",
    ["**half bold", "an `open code", "```py\nunclosed", "[link](http://x", "_open", "a \\", "*"],
)
def test_a_reply_cut_off_anywhere_still_parses(partial: str) -> None:
    assert markdown_v2_problem(to_markdown_v2(partial)) is None


def test_every_prefix_of_a_rich_reply_parses() -> None:
    reply = "# Plan\n\n**Step 1**: run `make lint` (it's fast!).\n\n- [docs](https://e.com/x)\n"
    for end in range(len(reply) + 1):
        assert markdown_v2_problem(to_markdown_v2(reply[:end])) is None, reply[:end]


def test_a_long_reply_is_split_at_paragraphs_within_the_limit() -> None:
    paragraph = "Words, words (and more words). " * 30
    pieces = split_markdown("\n\n".join([paragraph] * 10), 4096, to_markdown_v2)
    assert len(pieces) > 1
    assert all(len(to_markdown_v2(p)) <= 4096 for p in pieces)
    assert "".join(pieces).replace("\n", "") == (paragraph * 10).replace("\n", "")
    word = "x." * 5000
    cut = split_markdown(word, 4096, to_markdown_v2)
    assert "".join(cut) == word and all(len(to_markdown_v2(p)) <= 4096 for p in cut)
