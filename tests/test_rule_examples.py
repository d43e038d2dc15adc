"""Every rule's own valid and invalid examples (the same text feeds its docs)."""

from __future__ import annotations

import pytest
from imlint.rules import ALL_RULES

from imlint.config import Settings
from imlint.engine import Linter

CASES = [
    pytest.param(rule, kind, i, id=f"{rule.code}-{kind}-{i}")
    for rule in ALL_RULES
    for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i in range(len(examples))
]


@pytest.mark.parametrize(("rule", "kind", "index"), CASES)
def test_example(rule, kind, index):
    linter = Linter(Settings(select=("ALL",)), [rule()])
    if kind == "valid":
        findings = linter.check_text("example.py", rule.VALID[index].code)
        assert findings == []
    else:
        example = rule.INVALID[index]
        findings = linter.check_text("example.py", example.code)
        assert [(f.line, f.code) for f in findings] == [(example.line, rule.code)]


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_is_documented(rule):
    from imlint.docs import rule_markdown

    doc = rule_markdown(rule)  # "Example"/"Use instead" come from the first invalid example
    for section in (
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
        "## Fix safety",
    ):
        assert section in doc, f"{rule.code} documentation lacks {section!r}"
    assert rule.VALID and rule.INVALID, f"{rule.code} needs valid and invalid examples"


def test_codes_are_unique_and_well_formed():
    codes = [r.code for r in ALL_RULES]
    assert len(codes) == len(set(codes))
    assert all(c.startswith("IM") and c[2:].isdigit() for c in codes)
