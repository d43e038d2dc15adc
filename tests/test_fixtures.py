"""Fixtures: before files are flagged exactly at their markers, after files are clean."""

from __future__ import annotations

import pytest

from imlint.config import load_settings
from imlint.engine import Linter

from .conftest import FIXTURES, expected_markers, fixture_text, project_facts

BEFORE = sorted(p for p in FIXTURES.rglob("*.py") if not p.name.endswith(".fixed.py"))
AFTER = sorted(FIXTURES.rglob("*.fixed.py"))


@pytest.fixture(scope="module")
def linter():
    """The fixtures' settings, unsafe fixes on: the .fixed.py files are what
    ``imlint fix --unsafe-fixes`` makes."""
    settings = load_settings(FIXTURES / "pyproject.toml")
    settings.unsafe_fixes = True
    return Linter(settings)


def test_there_are_fixtures():
    assert len(BEFORE) >= 8
    assert any(expected_markers(fixture_text(p)) for p in BEFORE)


@pytest.mark.parametrize("path", BEFORE, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_before_flagged_exactly_at_markers(linter, path):
    text = fixture_text(path)
    findings = linter.check_text(str(path), text, project_facts(linter, path))
    assert [(f.line, f.code) for f in findings] == expected_markers(text)


@pytest.mark.parametrize("path", AFTER, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_after_keeps_only_unfixable_findings(linter, path):
    """After files are clean, except for findings the fix must leave (with a reason)."""
    before = path.with_name(path.name.replace(".fixed.py", ".py"))
    unfixable = [
        (f.line, f.code)
        for f in linter.check_text(str(before), fixture_text(before), project_facts(linter, before))
        if not f.fixable
    ]
    text = fixture_text(path)
    after = linter.check_text(str(before), text, project_facts(linter, before, text))
    assert [(f.line, f.code) for f in after] == unfixable
    assert all(f.unfixable_reason for f in after)


def test_fixture_codes_cover_both_core_rules():
    codes = {code for p in BEFORE for _, code in expected_markers(fixture_text(p))}
    assert {"IM001", "IM002", "IM003"} <= codes
