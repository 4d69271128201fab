"""Markdown (what models write) to Slack's mrkdwn, and long replies split at Slack's limits.

Slack does not render CommonMark: bold is `*x*`, italics `_x_`, strikethrough `~x~`, a link
`<url|text>`, headings and tables do not exist, and `&`, `<` and `>` must be sent as `&amp;`,
`&lt;` and `&gt;` (Slack reads a bare `<` as the start of a link or mention, so a model's
`a < b` would vanish). A blockquote keeps its leading `>`, which Slack reads as a quote.

Splitting: Slack truncates a message's `text` past 40,000 characters, and its guidelines keep
a section of text to 3,000 characters for readability (the limit of a Block Kit section). A
reply is split into messages whose mrkdwn is at most `SLACK_MESSAGE_LIMIT` (3,000) characters,
at a paragraph break where one falls in the second half of the window, else at a line break,
else at a space; never inside a link; a code block cut in two is closed at the end of one
message and reopened at the start of the next. The cut is made in the Markdown (so a piece is
formatted like any other text, and an entity is never cut in half).
"""

import re

SLACK_MESSAGE_LIMIT = 3000
"""The longest message text a reply is split into (characters of mrkdwn, entities counted)."""

SLACK_TEXT_HARD_LIMIT = 40_000
"""Slack truncates a message's `text` past this many characters."""

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK = re.compile(r"!?\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^>\s]+)>")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1", re.DOTALL)
_ITALIC_STAR = re.compile(r"(?<![*\w])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HOLE = re.compile("\x00(\\d+)\x00")
_BOLD_MARK = "\x01"


def escape(text: str) -> str:
    """Slack's three control characters as the entities Slack decodes (and only those)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _inline(text: str) -> str:
    """One line's (or one link text's) inline Markdown as mrkdwn."""
    holes: list[str] = []

    def hold(value: str) -> str:
        holes.append(value)
        return f"\x00{len(holes) - 1}\x00"

    text = _CODE_SPAN.sub(lambda m: hold(f"`{escape(m.group(2).strip())}`"), text)
    text = _LINK.sub(lambda m: hold(_link(m.group(2), _inline(m.group(1)))), text)
    text = _AUTOLINK.sub(lambda m: hold(f"<{escape(m.group(1))}>"), text)
    text = escape(text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC_STAR.sub(lambda m: f"_{m.group(1)}_", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = text.replace(_BOLD_MARK, "*")
    while _HOLE.search(text):
        text = _HOLE.sub(lambda m: holes[int(m.group(1))], text)
    return text


def _link(url: str, label: str) -> str:
    """`<url|label>`; the label may not hold `|` or `>`, which would end it early."""
    target = escape(url)
    label = label.replace("|", "¦")
    if not label or label == target:
        return f"<{target}>"
    return f"<{target}|{label}>"


def to_mrkdwn(markdown: str) -> str:
    """A model's Markdown as Slack mrkdwn: block by block, code blocks kept verbatim (escaped)."""
    out: list[str] = []
    fence: str | None = None
    for line in markdown.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1) == fence and not line.strip()[3:].strip():
                out.append("```")
                fence = None
            else:
                out.append(escape(line))
            continue
        if opened:
            fence = opened.group(1)
            out.append("```")
            continue
        out.append(_block_line(line))
    if fence is not None:
        out.append("```")
    return "\n".join(out)


def _block_line(line: str) -> str:
    """One line outside a code block: heading, rule, quote, bullet or plain text."""
    if heading := _HEADING.match(line):
        title = _inline(heading.group(1).replace("**", "").replace("__", ""))
        return f"*{title}*" if title else ""
    if _RULE.match(line):
        return "──────────"
    if quote := _QUOTE.match(line):
        return f"> {_inline(quote.group(1))}".rstrip()
    if bullet := _BULLET.match(line):
        indent = " " * (len(bullet.group(1).expandtabs(4)) // 2 * 4)
        return f"{indent}• {_inline(bullet.group(2))}"
    return _inline(line)


def split_markdown(markdown: str, limit: int = SLACK_MESSAGE_LIMIT) -> list[str]:
    """`markdown` as pieces whose mrkdwn (`to_mrkdwn`) is at most `limit` characters each.

    Cut where the source reads well (a paragraph break in the second half of the window, else
    a line break, else a space), never inside a link; a code block cut in two is closed at the
    end of one piece and reopened at the start of the next. Returns Markdown: each piece is
    formatted when sent. An empty text is no piece at all.
    """
    if limit < 64:
        raise ValueError(f"a Slack message limit of {limit!r} characters leaves no room to split")
    pieces: list[str] = []
    rest = markdown
    while rest.strip():
        if len(to_mrkdwn(rest)) <= limit:
            pieces.append(rest)
            break
        window = limit
        while True:
            cut = _cut(rest, window)
            piece, tail = rest[:cut].rstrip(), rest[cut:].lstrip("\n")
            if _open_fence(piece):
                piece, tail = piece + "\n```", "```\n" + tail
            if len(to_mrkdwn(piece)) <= limit or window <= 32:
                break
            window = int(window * 0.8)  # escapes grew it past the limit: a shorter window
        pieces.append(piece)
        rest = tail
    return [piece for piece in pieces if piece.strip()]


def _open_fence(markdown: str) -> bool:
    """Whether `markdown` ends inside a fenced code block."""
    return sum(1 for line in markdown.splitlines() if _FENCE.match(line)) % 2 == 1


def _cut(text: str, window: int) -> int:
    """Where to end the next piece: the nicest break within `window` characters."""
    head = text[:window]
    cut = -1
    for sep in ("\n\n", "\n", " "):
        at = head.rfind(sep)
        if at >= window // 2:
            cut = at + len(sep)
            break
    if cut <= 0:
        cut = window
    for link in _LINK.finditer(text, max(0, cut - 2 * window), min(len(text), cut + window)):
        if link.start() < cut < link.end() and link.start() > 0:
            return link.start()
    return cut
