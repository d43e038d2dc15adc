"""A line diff that stays near-linear on generated giants (patience anchoring).

``difflib.SequenceMatcher`` over a whole file is quadratic when many lines repeat (a
generated module of thousands of similar functions). Lines that occur exactly once in
both texts and keep their order (the longest increasing run of them) anchor the diff;
``SequenceMatcher`` only compares the short gaps between anchors.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Sequence

Opcode = tuple[str, int, int, int, int]


def line_opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """``SequenceMatcher(None, a, b).get_opcodes()``-shaped opcodes (equal runs may be
    split at anchors)."""
    anchors = _anchors(a, b)
    out: list[Opcode] = []
    i0 = j0 = 0
    for i, j in [*anchors, (len(a), len(b))]:
        if i > i0 or j > j0:
            matcher = difflib.SequenceMatcher(None, a[i0:i], b[j0:j], autojunk=False)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes():
                out.append((tag, i1 + i0, i2 + i0, j1 + j0, j2 + j0))
        if i < len(a):
            out.append(("equal", i, i + 1, j, j + 1))
        i0, j0 = i + 1, j + 1
    return out


def _anchors(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs (i, j) of lines unique in both texts, the longest run increasing in both."""
    in_a, in_b = Counter(a), Counter(b)
    where_b = {line: j for j, line in enumerate(b) if in_b[line] == 1}
    pairs = [(i, where_b[line]) for i, line in enumerate(a) if in_a[line] == 1 and line in where_b]
    # Longest increasing subsequence of j (pairs are in increasing i), O(n log n).
    tails: list[int] = []  # smallest j ending a run of each length
    tail_at: list[int] = []  # index into pairs of that run's end
    back: list[int] = []
    for k, (_i, j) in enumerate(pairs):
        n = bisect.bisect_left(tails, j)
        if n == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[n] = j
            tail_at[n] = k
        back.append(tail_at[n - 1] if n else -1)
    run: list[tuple[int, int]] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        run.append(pairs[k])
        k = back[k]
    return run[::-1]
