"""The engine: read a file, parse it once, build the model, run every enabled rule."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import os
import re
import stat
from dataclasses import dataclass, field

import libcst as cst

from imlint.config import Settings
from imlint.fix import apply_fixes, unfixable_reason
from imlint.model import ModuleModel, parse_and_build
from imlint.rule import Finding, Rule
from imlint.rules import ALL_RULES
from imlint.runner import Outcome
from imlint.source import Source, SourceError, decode
from imlint.suppress import is_suppressed
from imlint.writer import WriteError, write_atomic


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # one line, without the path


@dataclass
class FixReport:
    text: str  # the fixed text (the input when nothing changed)
    fixed: int  # findings fixed
    remaining: list[Finding]  # findings in the fixed text


class InvalidSource(Exception):
    """Python itself rejects the source; the message is one line."""


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


def python_syntax_error(text: str) -> str | None:
    """Python's own syntax error for ``text`` as one line, or None if it parses."""
    try:
        ast.parse(text)
    except SyntaxError as err:
        return f"syntax error at {err.lineno}:{err.offset}: {err.msg}"
    except (ValueError, RecursionError, MemoryError) as err:
        return f"cannot parse: {type(err).__name__}"
    return None


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

    def model(self, text: str) -> tuple[cst.Module, ModuleModel]:
        """Parse and build the model. Python's own parser vets the text first: it is
        fast, gives the clearest messages, and keeps input that CPython rejects (such as
        thousands of nested brackets) away from LibCST's recursive parser."""
        error = python_syntax_error(text)
        if error is not None:
            raise InvalidSource(error)
        return parse_and_build(text, self.settings.options)

    def findings(self, path: str, text: str, model: ModuleModel) -> list[Finding]:
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
                reason = unfixable_reason(site) if rule.fixable else "the rule has no fix"
                out.append(
                    Finding(
                        path=path,
                        line=rng.start.line,
                        col=rng.start.column + 1,
                        end_line=rng.end.line,
                        end_col=rng.end.column + 1,
                        code=rule.code,
                        severity=rule.severity.value,
                        message=report.message,
                        fixable=reason is None,
                        unfixable_reason=reason,
                        function=site.function.qualname,
                        statement=" ".join(lines[rng.start.line - 1].split())
                        if rng.start.line <= len(lines)
                        else "",
                        site=site,
                    )
                )
        out.sort(key=Finding.sort_key)
        return out

    def check_text(self, path: str, text: str) -> list[Finding]:
        """Findings for source text (raises ``libcst.ParserSyntaxError``)."""
        _, model = self.model(text)
        return self.findings(path, text, model)

    def fix_text(self, path: str, text: str) -> FixReport:
        """Fix every fixable finding; the result is verified to parse and re-checked.

        Raises ``libcst.ParserSyntaxError`` when the input does not parse.
        """
        module, model = self.model(text)
        before = self.findings(path, text, model)
        sites = [f.site for f in before if f.fixable and f.site is not None]
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
            after = self.check_text(path, outcome.text)
        except (cst.ParserSyntaxError, InvalidSource) as exc:  # a bug in the fixer: never write it
            raise FixError(
                f"the fix produced code that does not parse ({str(exc).splitlines()[0]}); file left unchanged"
            ) from None
        return FixReport(outcome.text, len({id(s) for s in outcome.fixed}), after)

    # ---- one file, with every error turned into one line

    def check_source(self, path: str, source: Source) -> FileResult:
        try:
            return FileResult(path, self.check_text(path, source.text))
        except PARSE_FAILURES as exc:
            return FileResult(path, error=parse_failure(exc, source.text))


def read_source(path: str) -> Source:
    """Read and decode a file, turning every failure into a one-line SourceError."""
    try:
        if os.path.isdir(path):
            raise SourceError("is a directory, not a Python file")
        if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
            raise SourceError("not a regular file (a FIFO, socket or device)")  # never block
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError("dangling symbolic link") from None
        raise SourceError("no such file") from None
    except PermissionError:
        raise SourceError("permission denied") from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise SourceError("symbolic link loop") from None
        raise SourceError(f"cannot read: {exc.strerror or exc}") from None
    return decode(raw)


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
    linter: Linter, path: str, mode: str, pattern: re.Pattern[bytes] | None
) -> Outcome:
    """Check, fix or diff one file; every failure becomes a one-line error.

    ``pattern``: the pre-filter; a file whose bytes do not match it cannot hold an
    allocation site, so it is not parsed (``None``: parse every file).
    """
    try:
        source = read_source(path)
    except SourceError as exc:
        return Outcome(path, error=str(exc))
    if pattern is not None and not pattern.search(source.raw):
        # No allocation site is possible: skip LibCST, but still report a syntax error,
        # found by Python's own parser (parsing only; nothing is executed).
        return Outcome(path, error=python_syntax_error(source.text))
    if mode == "check":
        result = linter.check_source(path, source)
        return Outcome(path, _detached(result.findings), result.error)
    try:
        report = linter.fix_text(path, source.text)
    except PARSE_FAILURES as exc:
        return Outcome(path, error=parse_failure(exc, source.text))
    except FixError as exc:
        return Outcome(path, _detached(linter.check_text(path, source.text)), str(exc))
    if report.text == source.text:
        return Outcome(path, _detached(report.remaining))
    if mode == "diff":
        diff = unified_diff(path, source.text, report.text)
        # Nothing is written: every finding is still there; the fixable ones would go.
        return Outcome(
            path, _detached(linter.check_text(path, source.text)), fixed=report.fixed, diff=diff
        )
    try:
        write_atomic(path, source.encode(report.text), expected=source.raw)
    except WriteError as exc:
        return Outcome(path, _detached(linter.check_text(path, source.text)), str(exc))
    return Outcome(path, _detached(report.remaining), fixed=report.fixed)
