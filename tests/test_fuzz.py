"""Fuzzing the rules and the fixer with random mutations of the fixtures.

CI runs a short smoke (IMLINT_FUZZ_EXAMPLES, default 120 mutants). For a longer run:

    IMLINT_FUZZ_EXAMPLES=5000 python -m pytest tests/test_fuzz.py tests/test_fix_properties.py

(the second file's hypothesis budget follows the same variable). Invariants: checking never
raises (other than a clean syntax error), and on every mutant that parses the fix output
compiles, is idempotent and leaves no fixable finding.
"""

from __future__ import annotations

import os
import random

import libcst as cst
import pytest

from imlint.config import load_settings
from imlint.engine import FixError, InvalidSource, Linter

from .conftest import FIXTURES, fixture_text

EXAMPLES = int(os.environ.get("IMLINT_FUZZ_EXAMPLES", "120"))
SEEDS = sorted(p for p in FIXTURES.rglob("*.py") if not p.name.endswith(".fixed.py"))
SNIPPETS = [
    "torch.empty(n)",
    "self._buf",
    "_CACHE[key]",
    "with torch.inference_mode(False):",
    "if buf is None:",
    "buf.zero_()",
    "return torch.arange(n)",
    "@functools.lru_cache",
    "global _G",
    "lambda: torch.zeros(1)",
    "(x := torch.ones(2))",
    "yield buf",
    "await g()",
    "\\",
    '"""',
    "\t",
]


def mutate(text: str, rng: random.Random) -> str:
    lines = text.splitlines(keepends=True) or ["\n"]
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        op = rng.randrange(7)
        if op == 0 and len(lines) > 1:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            lines.insert(i, indent + rng.choice(SNIPPETS) + "\n")
        elif op == 4:
            lines[i] = (
                ("    " if rng.random() < 0.5 else "") + lines[i].lstrip(" ")
                if lines[i].strip()
                else lines[i]
            )
        elif op == 5:
            k = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:k] + rng.choice(SNIPPETS) + lines[i][k:]
        else:
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            lines[i:i] = [
                indent + "if n not in _CACHE:\n",
                indent + "    _CACHE[n] = torch.empty(n)\n",
            ]
    return "".join(lines)


@pytest.fixture(scope="module")
def linter():
    return Linter(load_settings(FIXTURES / "pyproject.toml"))


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@pytest.mark.parametrize("chunk", range(4))
def test_mutated_fixtures_never_crash_and_fixes_hold(linter, chunk):
    rng = random.Random(f"imlint-fuzz-{chunk}")
    parsed = 0
    for n in range(EXAMPLES // 4):
        seed = rng.choice(SEEDS)
        text = mutate(fixture_text(seed), rng)
        where = f"mutant {chunk}:{n} of {seed.name}"
        try:
            linter.check_text("m.py", text)
        except (InvalidSource, cst.ParserSyntaxError, RecursionError):
            continue  # reported as one clean line by the CLI
        parsed += 1
        try:
            report = linter.fix_text("m.py", text)
        except FixError as exc:
            # The only refusal allowed: LibCST cannot reproduce the input byte for byte.
            assert "does not reproduce this file" in str(exc), (where, str(exc))
            assert cst.parse_module(text).code != text, where
            continue
        try:
            compile(text, "m.py", "exec", dont_inherit=True)
        except SyntaxError:
            continue  # e.g. `return` outside a function: the input itself does not compile
        compile(report.text, "m.py", "exec", dont_inherit=True)
        again = linter.fix_text("m.py", report.text)
        assert again.text == report.text, where
        assert not [f for f in again.remaining if f.fixable], where
    assert parsed > 0
