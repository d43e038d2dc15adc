"""The patience-anchored line diff (imlint/linediff.py) against difflib."""

from __future__ import annotations

import random

from imlint.linediff import line_opcodes


def _apply(a: list[str], b: list[str], ops) -> list[str]:
    out: list[str] = []
    for tag, i1, i2, j1, j2 in ops:
        out.extend(a[i1:i2] if tag == "equal" else b[j1:j2])
    return out


def test_opcodes_cover_both_texts_and_rebuild_the_new_one():
    rng = random.Random(7)
    words = ["x = 1\n", "", "def f():\n", "    return 2\n", "pass\n"]
    for _ in range(300):
        a = [rng.choice(words) + str(rng.randrange(6)) for _ in range(rng.randrange(40))]
        b = list(a)
        for _ in range(rng.randrange(6)):
            at = rng.randrange(len(b) + 1)
            if rng.random() < 0.5 and b:
                b[min(at, len(b) - 1)] = "    " + b[min(at, len(b) - 1)]
            else:
                b.insert(at, "with guard:\n")
        ops = line_opcodes(a, b)
        assert _apply(a, b, ops) == b
        # contiguous, in order, over all of a and b
        i = j = 0
        for _tag, i1, i2, j1, j2 in ops:
            assert (i1, j1) == (i, j)
            i, j = i2, j2
        assert (i, j) == (len(a), len(b))
        for tag, i1, i2, j1, j2 in ops:
            if tag == "equal":
                assert a[i1:i2] == b[j1:j2]


def test_a_generated_giant_diffs_fast_and_small():
    a = [f"def get_{i}(n):\n" if k == 0 else "    return n\n" for i in range(4000) for k in (0, 1)]
    b = list(a)
    b.insert(3, "    with guard:\n")
    changed = [op for op in line_opcodes(a, b) if op[0] != "equal"]
    assert changed == [("insert", 3, 3, 3, 4)]
