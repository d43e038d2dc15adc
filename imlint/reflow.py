"""Keep fixed code formatter-clean: split a line that the extra indentation pushed past the
line length, the way ruff format (and black) would split it.

Only lines that fitted before the fix and no longer fit are touched, and only when the
split is the formatter's "right-hand split" of the line's last bracket pair:

    value = torch.empty(n_pages, 37440, dtype=torch.uint8, device=dev)  # note

becomes, when too long,

    value = torch.empty(
        n_pages, 37440, dtype=torch.uint8, device=dev
    )  # note

or, when the contents still do not fit on one line, one item per line with a trailing
comma. Anything else (strings, nested structures that would need a deeper split) is left
as it is: the fix stays correct, only the formatter would rewrap it.
"""

from __future__ import annotations

import io
import tokenize

_OPEN = {"(": ")", "[": "]", "{": "}"}


def _tokens(code: str) -> list[tokenize.TokenInfo] | None:
    try:
        return [
            t
            for t in tokenize.generate_tokens(io.StringIO(code).readline)
            if t.type
            not in (
                tokenize.NEWLINE,
                tokenize.NL,
                tokenize.ENDMARKER,
                tokenize.INDENT,
                tokenize.DEDENT,
            )
        ]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def split_long_line(line: str, limit: int, unit: str) -> list[str] | None:
    """``line`` (no line ending) split at its last bracket pair, or None if it cannot be."""
    indent = line[: len(line) - len(line.lstrip())]
    code = line[len(indent) :]
    comment = ""
    toks = _tokens(code)
    if not toks:
        return None
    if toks[-1].type == tokenize.COMMENT:
        comment = "  " + toks[-1].string
        code = code[: toks[-1].start[1]].rstrip()
        toks = toks[:-1]
    if any(t.start[0] != 1 or t.end[0] != 1 for t in toks):
        return None  # multi-line strings and the like
    # The last depth-0 bracket pair, followed by nothing but commas or colons.
    depth, open_tok, close_tok = 0, None, None
    for i, t in enumerate(toks):
        if t.type != tokenize.OP:
            continue
        if t.string in _OPEN:
            if depth == 0:
                open_tok, close_tok = i, None
            depth += 1
        elif t.string in _OPEN.values():
            depth -= 1
            if depth < 0:
                return None  # the line closes a bracket opened above it
            if depth == 0:
                close_tok = i
    if depth != 0 or open_tok is None or close_tok is None:
        return None
    if any(t.string not in (",", ":") for t in toks[close_tok + 1 :]):
        return None
    head = code[: toks[open_tok].end[1]]
    body = code[toks[open_tok].end[1] : toks[close_tok].start[1]].strip()
    tail = code[toks[close_tok].start[1] :] + comment
    inner = indent + unit
    if not body or len(indent + head) > limit:
        return None
    items = _split_items(toks[open_tok + 1 : close_tok], code)
    magic_comma = bool(items) and body.rstrip().endswith(",")
    if not magic_comma and len(inner + body) <= limit:
        return [indent + head, inner + body, indent + tail]
    if items is None or any(len(inner + item + ",") > limit for item in items):
        return None
    return [indent + head, *(inner + item + "," for item in items), indent + tail]


def explode_items(line: str, limit: int) -> list[str] | None:
    """A bracket's contents on their own line (``    a, dtype=t, device=d``, between a line
    ending in ``(`` and one starting with ``)``), one item per line with a trailing comma,
    as the formatter writes contents that no longer fit; None if it cannot be."""
    indent = line[: len(line) - len(line.lstrip())]
    code = line[len(indent) :]
    toks = _tokens(code)
    if not toks or toks[-1].type == tokenize.COMMENT:
        return None
    if any(t.start[0] != 1 or t.end[0] != 1 for t in toks):
        return None
    items = _split_items(toks, code)
    if items is None or any(len(indent + item + ",") > limit for item in items):
        return None
    return [indent + item + "," for item in items]


def _split_items(toks: list[tokenize.TokenInfo], code: str) -> list[str] | None:
    """The depth-0 comma-separated items between a bracket pair."""
    items: list[str] = []
    depth, start = 0, None
    for t in toks:
        if t.type == tokenize.OP and t.string in _OPEN:
            depth += 1
        elif t.type == tokenize.OP and t.string in _OPEN.values():
            depth -= 1
        if t.type == tokenize.OP and t.string == "," and depth == 0:
            if start is None:
                return None
            items.append(code[start : t.start[1]].strip())
            start = None
            continue
        if depth == 0 and t.type == tokenize.NAME and t.string in ("for", "lambda"):
            return None  # a comprehension or lambda: its commas are not item separators
        if start is None:
            start = t.start[1]
    if start is not None:
        last = toks[-1]
        items.append(code[start : last.end[1]].strip())
    return [i for i in items if i] or None
