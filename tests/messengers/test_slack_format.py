"""Markdown to Slack mrkdwn, and long replies split at Slack's limits (no stack: fast)."""

import pytest

from think.messengers._slack_format import SLACK_MESSAGE_LIMIT, split_markdown, to_mrkdwn


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __also__", "*bold* and *also*"),
        ("*italic* and _too_", "_italic_ and _too_"),
        ("~~gone~~", "~gone~"),
        ("[the docs](https://x.io/a?b=1&c=2)", "<https://x.io/a?b=1&amp;c=2|the docs>"),
        ("[**bold** link](https://x.io)", "<https://x.io|*bold* link>"),
        ("<https://auto.link/x>", "<https://auto.link/x>"),
        ("a < b > c & d", "a &lt; b &gt; c &amp; d"),
        ("`a<b & **c**`", "`a&lt;b &amp; **c**`"),
        ("# Title with **bold**", "*Title with bold*"),
        ("- one\n* two\n  - nested", "• one\n• two\n    • nested"),
        ("1. first\n2. second", "1. first\n2. second"),
        ("> quoted *x*", "> quoted _x_"),
        ("snake_case_name stays", "snake_case_name stays"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("---", "──────────"),
    ],
)
def test_markdown_becomes_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_code_blocks_are_kept_verbatim_but_escaped() -> None:
    markdown = '```python\nif a < b and c:\n    print("**not bold** & _x_")\n```\nafter **b**'
    assert to_mrkdwn(markdown) == (
        '```\nif a &lt; b and c:\n    print("**not bold** &amp; _x_")\n```\nafter *b*'
    )


def test_an_unclosed_code_block_is_closed() -> None:
    assert to_mrkdwn("```\nx = 1") == "```\nx = 1\n```"


def test_a_short_reply_is_one_piece_and_nothing_is_none() -> None:
    assert split_markdown("hello") == ["hello"]
    assert split_markdown("  \n") == []


def test_a_long_reply_splits_at_paragraphs_within_the_limit() -> None:
    paragraph = ("word " * 200).strip()
    text = "\n\n".join([paragraph] * 10)
    pieces = split_markdown(text)
    assert len(pieces) > 1
    assert all(len(to_mrkdwn(piece)) <= SLACK_MESSAGE_LIMIT for piece in pieces)
    assert all(piece.startswith("word") and piece.endswith("word") for piece in pieces)
    assert "\n\n".join(pieces) == text


def test_the_limit_counts_the_escapes() -> None:
    pieces = split_markdown("a & b < c " * 800)
    assert len(pieces) > 1
    assert all(len(to_mrkdwn(piece)) <= SLACK_MESSAGE_LIMIT for piece in pieces)
    assert "".join(pieces).replace(" ", "") == ("a&b<c" * 800)


def test_a_code_block_cut_in_two_is_closed_and_reopened() -> None:
    text = "```python\n" + "x = 1\n" * 1000 + "```"
    pieces = split_markdown(text)
    assert len(pieces) >= 2
    for piece in pieces:
        shown = to_mrkdwn(piece)
        assert len(shown) <= SLACK_MESSAGE_LIMIT
        assert shown.startswith("```\n") and shown.endswith("```")
        assert shown.count("```") == 2
    body = "".join(to_mrkdwn(piece)[4:-4] for piece in pieces).replace("\n", "")
    assert body == "x = 1" * 1000


def test_no_cut_inside_a_link() -> None:
    link = "[a link](https://example.com/" + "p" * 60 + ")"
    text = ("x" * 40 + " " + link + " ") * 100
    for piece in split_markdown(text, limit=500):
        shown = to_mrkdwn(piece)
        assert len(shown) <= 500
        assert shown.count("<") == shown.count(">") == shown.count("|a link>")


def test_an_unbroken_run_is_cut_hard() -> None:
    pieces = split_markdown("y" * 7000)
    assert [len(p) for p in pieces] == [3000, 3000, 1000]
