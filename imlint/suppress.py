"""Inline suppressions: ``# imlint: ignore[IM001]``, ``# imlint: ignore``, ``# noqa: IM001``, ``# noqa``."""

from __future__ import annotations

import re

_IMLINT = re.compile(r"#\s*imlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_NOQA = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)


def suppressed_codes(line: str) -> set[str] | None:
    """Codes suppressed on a source line: a set, ``{"*"}`` for all, ``None`` for none."""
    if "#" not in line:
        return None
    out: set[str] = set()
    for regex in (_IMLINT, _NOQA):
        for m in regex.finditer(line):
            codes = m.group("codes")
            if codes is None or not codes.strip():
                out.add("*")
            else:
                out.update(c.upper() for c in re.split(r"[\s,]+", codes.strip()) if c)
    return out or None


def is_suppressed(code: str, lines: list[str], line_numbers: tuple[int, ...]) -> bool:
    for n in line_numbers:
        if 1 <= n <= len(lines):
            codes = suppressed_codes(lines[n - 1])
            if codes and ("*" in codes or code in codes):
                return True
    return False
