"""Property tests for the fixer over generated modules (hypothesis)."""

from __future__ import annotations

import os
import re

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imlint.config import Settings
from imlint.engine import Linter

LINTER = Linter(Settings(select=("IM001", "IM005", "IM004")))

ALLOCS = [
    "{t}.empty(n)",
    "{t}.zeros(n, device=d)",
    "{t}.arange(n)",
    "{t}.full((n,), 0.5)",
    "x.new_zeros(n)",
    "{t}.empty(\n{i}    n,\n{i}    dtype={t}.uint8,\n{i})",
]


@st.composite
def block(draw, depth: int, indent: str, unit: str, t: str, counter: list[int]) -> list[str]:
    """Statements at one indentation level."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        counter[0] += 1
        k = counter[0]
        kind = draw(
            st.sampled_from(["lazy", "lazy_local", "plain", "comment", "nest", "guarded", "nograd"])
        )
        alloc = draw(st.sampled_from(ALLOCS)).format(t=t, i=indent + unit)
        trailing = draw(st.sampled_from(["", "  # keep me"]))
        if kind == "lazy":
            lines += [f"{indent}if {k} not in _C:", f"{indent}{unit}_C[{k}] = {alloc}{trailing}"]
        elif kind == "lazy_local":
            lines += [
                f"{indent}buf{k} = _C.get({k})",
                f"{indent}if buf{k} is None:",
                f"{indent}{unit}# allocate once",
                f"{indent}{unit}buf{k} = {alloc}{trailing}",
                f"{indent}{unit}_C[{k}] = buf{k}",
                f"{indent}buf{k}.zero_()" if draw(st.booleans()) else f"{indent}pass",
            ]
        elif kind == "plain":
            lines.append(f"{indent}tmp{k} = {alloc}{trailing}")
        elif kind == "comment":
            lines += [f"{indent}# a comment", "", f"{indent}pass"]
        elif depth < 3:
            header = {
                "nest": f"for _ in range({k}):",
                "guarded": f"with {t}.inference_mode(False):",
                "nograd": f"with {t}.no_grad():",
            }[kind]
            lines.append(indent + header)
            lines += draw(block(depth + 1, indent + unit, unit, t, counter))
        else:
            lines.append(f"{indent}pass")
    return lines


@st.composite
def modules(draw) -> tuple[str, str]:
    unit = draw(st.sampled_from(["    ", "  ", "\t"]))
    t = draw(st.sampled_from(["torch", "th"]))
    header = "import torch\n" if t == "torch" else "import torch as th\n"
    counter = [0]
    parts = [header, "_C = {}\n"]
    for fn in range(draw(st.integers(1, 3))):
        body = draw(block(1, unit, unit, t, counter))
        parts.append(f"\n\ndef f{fn}(n, d, x):\n" + "\n".join(body) + "\n")
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    return "".join(parts).replace("\n", nl), unit


def is_input_plus_guards(before: str, after: str, unit: str) -> bool:
    """Whether ``after`` is ``before`` with guard lines inserted and some lines indented
    by one unit: removing the inserted ``with`` lines and dedenting gives the input back."""
    src, out = before.splitlines(), after.splitlines()
    guard = re.compile(r"[ \t]*with (torch|th)\.inference_mode\(False\):")
    i = j = 0
    while i < len(out):
        line = out[i]
        if j < len(src) and line in (src[j], unit + src[j]):
            i, j = i + 1, j + 1
        elif guard.fullmatch(line):
            i += 1  # an inserted guard
        else:
            return False
    return j == len(src)


@settings(
    max_examples=int(os.environ.get("IMLINT_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(modules())
def test_fix_invariants(module_and_unit):
    source, unit = module_and_unit
    cst.parse_module(source)  # the generator makes valid code
    report = LINTER.fix_text("gen.py", source)
    fixed = report.text
    compile(fixed, "gen.py", "exec", dont_inherit=True)
    assert LINTER.fix_text("gen.py", fixed).text == fixed  # idempotent
    assert not [f for f in LINTER.check_text("gen.py", fixed) if f.fixable]
    assert is_input_plus_guards(source, fixed, unit)
    if "\r\n" in source:
        assert fixed.count("\r\n") == fixed.count("\n")  # no LF-only line was introduced
