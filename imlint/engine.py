"""The engine: read a file, parse it once, build the model, run every enabled rule."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from imlint.config import Settings
from imlint.fix import apply_fixes, unfixable_reason, unsafe_reason
from imlint.index_facts import FileFacts
from imlint.model import parse_and_build
from imlint.narrow import narrow
from imlint.outcome import Outcome
from imlint.project import ProjectIndex, summarize
from imlint.rule import Finding, Rule
from imlint.rules import ALL_RULES
from imlint.semantic import AllocationSite, ModuleModel
from imlint.source import (
    InvalidSource,
    Source,
    SourceError,
    python_parse,
    python_syntax_error,
    read_source,
)
from imlint.suppress import is_suppressed
from imlint.writer import WriteError, write_atomic


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # one line, without the path
    #: Sites not reported because every caller of their function guards them.
    guarded: list[Finding] = field(default_factory=list)


@dataclass
class FixReport:
    text: str  # the fixed text (the input when nothing changed)
    fixed: int  # findings fixed
    remaining: list[Finding]  # findings in the fixed text


class FixError(Exception):
    """The fixer failed on a file; nothing is written."""


def enabled_rules(settings: Settings) -> list[Rule]:
    codes = settings.enabled_codes((r.code, r.default_enabled) for r in ALL_RULES)
    return [r() for r in ALL_RULES if r.code in codes]


PARSE_FAILURES = (InvalidSource, cst.ParserSyntaxError, RecursionError)


def parse_failure(exc: BaseException, text: str) -> str:
    """One line for a file that could not be parsed (one of ``PARSE_FAILURES``)."""
    if isinstance(exc, cst.ParserSyntaxError):
        return syntax_error_message(exc, text)
    if isinstance(exc, RecursionError):
        return "too deeply nested to analyse"
    return str(exc)


def syntax_error_message(exc: cst.ParserSyntaxError, text: str) -> str:
    """One line for a file LibCST cannot parse.

    Python's own parser (``ast.parse``: parsing only, nothing runs) gives the more
    precise message; when it accepts the file, LibCST lacks support for the syntax.
    """
    python_error = python_syntax_error(text)
    if python_error is not None and python_error.startswith("syntax error"):
        return python_error
    first = str(exc.message).strip().splitlines()[0] if exc.message else "invalid syntax"
    return f"cannot parse at {exc.raw_line}:{exc.raw_column + 1} (syntax not supported by LibCST): {first}"


class Linter:
    """Checks files with a fixed set of rules and settings."""

    def __init__(self, settings: Settings, rules: list[Rule] | None = None) -> None:
        self.settings = settings
        self.rules = enabled_rules(settings) if rules is None else rules

    # ---- one module

    def facts_for(self, path: str, text: str, tree: ast.Module) -> FileFacts:
        """What the project index says of a file checked on its own: the project is
        that one file (stdin, the API, rule examples)."""
        summary = summarize(path, text, self.settings.options, tree)
        return ProjectIndex([summary]).facts(path)

    def model(
        self, path: str, text: str, facts: FileFacts | None = None, vetted: bool = False
    ) -> tuple[cst.Module, ModuleModel, FileFacts]:
        """Parse and build the model. Python's own parser vets the text first (unless the
        project pass already did: ``vetted``): it is fast, gives the clearest messages,
        and keeps input that CPython rejects (such as thousands of nested brackets)
        away from LibCST's recursive parser. ``facts``: from the project index; None
        makes an index of this file alone."""
        if facts is None:
            facts = self.facts_for(path, text, python_parse(text))
        elif not vetted:
            python_parse(text)
        module, model = parse_and_build(text, self.settings.options, facts)
        return module, model, facts

    def findings(
        self, path: str, text: str, model: ModuleModel, facts: FileFacts | None = None
    ) -> list[Finding]:
        """Every finding, those in functions that every caller guards included (see
        ``split_guarded``)."""
        ignored = self.settings.ignored_for(path) if path != "-" else ()
        lines = text.splitlines()
        out: list[Finding] = []
        seen: set[tuple[int, int, str]] = set()
        for rule in self.rules:
            if rule.code in ignored or any(rule.code.startswith(i) for i in ignored):
                continue
            for report in rule.check(model):
                site = report.site
                rng = site.range
                key = (rng.start.line, rng.start.column, rule.code)
                if key in seen:
                    continue
                seen.add(key)
                if is_suppressed(rule.code, lines, (rng.start.line, rng.end.line)):
                    continue
                reason = unfixable_reason(site, model) if rule.fixable else "the rule has no fix"
                unsafe = unsafe_reason(site, model) if reason is None else None
                out.append(
                    Finding(
                        path=path,
                        line=rng.start.line,
                        col=rng.start.column + 1,
                        end_line=rng.end.line,
                        end_col=rng.end.column + 1,
                        code=rule.code,
                        severity=(report.severity or rule.severity).value,
                        message=report.message,
                        fixable=reason is None and (unsafe is None or self.settings.unsafe_fixes),
                        unfixable_reason=reason,
                        applicability=None if reason else "unsafe" if unsafe else "safe",
                        unsafe_reason=unsafe,
                        function=site.function.qualname,
                        statement=" ".join(lines[rng.start.line - 1].split())
                        if rng.start.line <= len(lines)
                        else "",
                        kept_line=_kept_line(site, rng.start.line),
                        site=site,
                    )
                )
        out.sort(key=Finding.sort_key)
        return out

    def check_text(
        self, path: str, text: str, facts: FileFacts | None = None, vetted: bool = False
    ) -> list[Finding]:
        """Findings for source text (raises ``libcst.ParserSyntaxError``)."""
        return self.check_all(path, text, facts, vetted)[0]

    def check_all(
        self,
        path: str,
        text: str,
        facts: FileFacts | None = None,
        vetted: bool = False,
        narrowed: bool = False,
    ) -> tuple[list[Finding], list[Finding]]:
        """(reported, guarded by every caller) findings for source text.

        ``narrowed``: LibCST sees only the functions a check needs (``imlint.narrow``);
        the findings are the same, positions included."""
        if narrowed and facts is not None:
            view = narrow(text, python_parse(text), self.settings.options, facts)
            if view is None:
                return [], []
            _, model = parse_and_build(view, self.settings.options, facts)
        else:
            _, model, facts = self.model(path, text, facts, vetted)
        return split_guarded(self.findings(path, text, model), facts)

    def fix_text(
        self,
        path: str,
        text: str,
        facts: FileFacts | None = None,
        only: Callable[[Finding], bool] | None = None,
    ) -> FixReport:
        """Fix every fixable finding (or those ``only`` picks among the findings that
        have a fix, unsafe ones included: an editor's quick fix for one finding); the
        result is verified to parse and re-checked.

        Raises ``libcst.ParserSyntaxError`` when the input does not parse.
        """
        module, model, facts = self.model(path, text, facts)
        before, _ = split_guarded(self.findings(path, text, model), facts)
        chosen = (
            [f for f in before if f.fixable]
            if only is None
            else [f for f in before if f.applicability is not None and only(f)]
        )
        sites = [f.site for f in chosen if f.site is not None]
        if sites and module.code != text:
            # Positions come from LibCST's code generation; where it does not reproduce
            # the file exactly (a backslash continuation before a statement, say), an
            # edit could land on the wrong line: refuse rather than guess.
            raise FixError(
                "LibCST does not reproduce this file exactly (e.g. a backslash continuation "
                "before a statement), so its positions cannot be trusted; not fixed"
            )
        outcome = apply_fixes(text, module, model, sites, self.settings.line_length)
        if outcome.text == text:
            return FixReport(text, 0, before)
        try:
            after = self.check_text(path, outcome.text, facts)
        except (cst.ParserSyntaxError, InvalidSource) as exc:  # a bug in the fixer: never write it
            raise FixError(
                f"the fix produced code that does not parse ({str(exc).splitlines()[0]}); file left unchanged"
            ) from None
        return FixReport(outcome.text, len({id(s) for s in outcome.fixed}), after)

    # ---- one file, with every error turned into one line

    def check_source(
        self,
        path: str,
        source: Source,
        facts: FileFacts | None = None,
        vetted: bool = False,
        narrowed: bool = False,
    ) -> FileResult:
        try:
            reported, guarded = self.check_all(path, source.text, facts, vetted, narrowed)
            return FileResult(path, reported, guarded=guarded)
        except PARSE_FAILURES as exc:
            return FileResult(path, error=parse_failure(exc, source.text))


def split_guarded(findings: list[Finding], facts: FileFacts) -> tuple[list[Finding], list[Finding]]:
    """Findings in functions that every resolved caller guards are not reported; they
    come back separately, their message saying why (for ``--explain-reach``)."""
    if not facts.covered:
        return findings, []
    reported: list[Finding] = []
    guarded: list[Finding] = []
    for f in findings:
        why = facts.covered.get(f.function)
        if why is None:
            reported.append(f)
        else:
            guarded.append(dataclasses.replace(f, message=f"not reported: {why}"))
    return reported, guarded


def unified_diff(path: str, before: str, after: str) -> str:
    """The change as a unified diff, both sides named ``path``."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=path,
            tofile=path,
        )
    )


def _detached(findings: list[Finding]) -> list[Finding]:
    """Findings without their link to the tree (to cross process boundaries)."""
    return [dataclasses.replace(f, site=None) for f in findings]


def process_file(
    linter: Linter,
    path: str,
    mode: str,
    pattern: re.Pattern[bytes] | None,
    facts: FileFacts | None = None,
) -> Outcome:
    """Check, fix or diff one file; every failure becomes a one-line error.

    ``pattern``: the pre-filter is on (``None``: parse every file). A file that makes
    no call an allocator could be (``facts.may_allocate``, from Python's parse in the
    project pass) and calls none of the project's allocating callables cannot hold a
    site, so LibCST never sees it; without facts, a file whose bytes do not match
    ``pattern`` (the allocator names) is skipped. ``facts``: from the project pass,
    which has already parsed the file with Python's parser; None: check the file as a
    project of its own.
    """
    try:
        source = read_source(path)
    except SourceError as exc:
        return Outcome(path, error=str(exc))
    vetted = facts is not None
    if pattern is not None and (
        not facts.needs_model() if facts is not None else not pattern.search(source.raw)
    ):
        # No allocation site is possible: skip LibCST, but still report a syntax error,
        # found by Python's own parser (parsing only; nothing is executed).
        return Outcome(path, error=None if vetted else python_syntax_error(source.text))
    if mode == "check":
        result = linter.check_source(path, source, facts, vetted, narrowed=pattern is not None)
        return Outcome(
            path, _detached(result.findings), result.error, guarded=_detached(result.guarded)
        )
    if not source.round_trips():
        reason = (
            f"its encoding ({source.encoding}) does not write back the bytes read; not modified"
        )
        return Outcome(path, _detached(linter.check_text(path, source.text, facts)), reason)
    try:
        report = linter.fix_text(path, source.text, facts)
    except PARSE_FAILURES as exc:
        return Outcome(path, error=parse_failure(exc, source.text))
    except FixError as exc:
        return Outcome(path, _detached(linter.check_text(path, source.text, facts)), str(exc))
    if report.text == source.text:
        return Outcome(path, _detached(report.remaining))
    if mode == "diff":
        diff = unified_diff(path, source.text, report.text)
        # Nothing is written: every finding is still there; the fixable ones would go.
        return Outcome(
            path,
            _detached(linter.check_text(path, source.text, facts)),
            fixed=report.fixed,
            diff=diff,
        )
    try:
        write_atomic(path, source.encode(report.text), expected=source.raw)
    except WriteError as exc:
        return Outcome(path, _detached(linter.check_text(path, source.text, facts)), str(exc))
    return Outcome(path, _detached(report.remaining), fixed=report.fixed)


def _kept_line(site: AllocationSite, reported: int) -> int | None:
    """The first line of the statement that keeps the site's tensor, when another."""
    store = site.store
    if store is None or store.stmt is None:
        return None
    found = site.positions.get(store.stmt)
    if found is None or found.start.line == reported:
        return None
    return found.start.line
