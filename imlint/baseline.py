"""Baselines: record today's findings, report only the new ones from then on.

A baseline is a JSON file (``write_baseline``) listing one entry per finding:

.. code-block:: json

    {
      "version": 1,
      "tool": "imlint",
      "entries": [
        {"fingerprint": "3f1c...", "path": "src/a.py", "code": "IM002",
         "function": "Runner.prepare", "statement": "self.buf = torch.empty(n)"}
      ]
    }

An entry is matched by its *fingerprint*, which is keyed on what identifies a finding
independently of where it sits in the file: the normalised path, the rule code, the
enclosing function's qualified name, the text of the statement (comments and
whitespace dropped) and an occurrence index that tells identical keys in one file
apart. Lines inserted above a finding, or reformatting elsewhere, leave it unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from imlint.finding import Finding
from imlint.roots import repository_path
from imlint.source import SourceError, decode

#: The format of the baseline file; bumped when fingerprints or the layout change.
BASELINE_VERSION = 1

#: Source lines of a path (without line endings), or ``None`` when it cannot be read.
LinesOf = Callable[[str], list[str] | None]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ENTRY_KEYS = ("fingerprint", "path", "code", "function", "statement")


class BaselineError(Exception):
    """A baseline file that cannot be used; the message is one line."""


# ---- source lines


def source_lines(text: str) -> list[str]:
    """Split source text into lines as LibCST numbers them (``\\r\\n``, ``\\r``, ``\\n``).

    ``str.splitlines`` also splits on form feeds and other separators, which would
    shift line numbers against the positions in findings.
    """
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class LineCache:
    """A ``lines_of`` callable: reads and decodes each file once, as the engine does.

    ``add`` seeds it with text already in memory (for example a fixed file not written
    yet), so that fingerprints and snippets describe the text the findings refer to.
    """

    def __init__(self) -> None:
        self._lines: dict[str, list[str] | None] = {}
        self.texts: dict[str, str] = {}  # what ``add`` was given

    def add(self, path: str, text: str) -> None:
        self._lines[path] = source_lines(text)
        self.texts[path] = text

    def __call__(self, path: str) -> list[str] | None:
        if path not in self._lines:
            self._lines[path] = _read_lines(path)
        return self._lines[path]


def _read_lines(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        return source_lines(decode(raw).text)
    except (OSError, SourceError):
        return None


# ---- normalisation


def iter_code_chars(text: str) -> Iterable[tuple[str, bool]]:
    """Yield ``(char, in_string)`` for Python source text with comments removed.

    A small scanner instead of :mod:`tokenize`: it accepts fragments (a statement's
    lines cut out of a file, brackets unbalanced) and behaves the same on every Python
    version, which keeps fingerprints stable across interpreters.
    """
    i, n = 0, len(text)
    quote = ""  # the open string's delimiter: ', ", ''' or """
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < n:
                yield c, True
                yield text[i + 1], True
                i += 2
                continue
            if text.startswith(quote, i):
                for ch in quote:
                    yield ch, True
                i += len(quote)
                quote = ""
                continue
            if c in "\r\n" and len(quote) == 1:  # an unterminated one-line string
                quote = ""
                yield c, False
                i += 1
                continue
            yield c, True
            i += 1
            continue
        if c == "#":
            while i < n and text[i] not in "\r\n":
                i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] in "\r\n":
            yield " ", False  # a line continuation is only whitespace
            i += 1
            continue
        if c in "'\"":
            quote = c * 3 if text.startswith(c * 3, i) else c
            for ch in quote:
                yield ch, True
            i += len(quote)
            continue
        yield c, False
        i += 1


def display_statement(text: str) -> str:
    """Source text without comments, whitespace collapsed: what a baseline shows."""
    return " ".join("".join(c for c, _ in iter_code_chars(text)).split())


def canonical_statement(text: str) -> str:
    """Source text without comments or layout: what a fingerprint hashes.

    Whitespace outside string literals is dropped, except one space where it separates
    two name or number characters (``return x``, ``not y``), so re-wrapping or
    re-spacing the statement itself does not change it either.
    """
    out: list[str] = []
    pending_space = False
    for c, in_string in iter_code_chars(text):
        if not in_string and c.isspace():
            pending_space = True
            continue
        if pending_space and out and _wordy(out[-1]) and _wordy(c):
            out.append(" ")
        pending_space = False
        out.append(c)
    return "".join(out)


def _wordy(c: str) -> bool:
    return c.isalnum() or c == "_"


def statement_text(finding: Finding, lines: Sequence[str] | None) -> str:
    """The source of the reported lines (the allocation's first to last line).

    Falls back to ``finding.statement`` (the first line, whitespace-collapsed) when the
    file's lines are not available or do not reach the finding.
    """
    if lines is not None and 1 <= finding.line <= finding.end_line <= len(lines):
        return "\n".join(lines[finding.line - 1 : finding.end_line])
    return finding.statement


# ---- fingerprints


@dataclass(frozen=True)
class FindingKey:
    """What identifies a finding regardless of its line number."""

    path: str
    code: str
    function: str
    statement: str  # canonical: no comments, no layout

    def digest(self, occurrence: int) -> str:
        payload = json.dumps(
            [BASELINE_VERSION, self.path, self.code, self.function, self.statement, occurrence],
            ensure_ascii=False,
        )
        return hashlib.sha256(payload.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def finding_key(finding: Finding, source_lines: Sequence[str] | None) -> FindingKey:
    """The finding's key: normalised path, code, function and canonical statement."""
    return FindingKey(
        path=repository_path(finding.path),
        code=finding.code,
        function=finding.function,
        statement=canonical_statement(statement_text(finding, source_lines)),
    )


def fingerprint(finding: Finding, source_lines: Sequence[str] | None, occurrence: int = 0) -> str:
    """A hex digest that survives unrelated edits (see the module docstring).

    ``occurrence`` is the index of this finding among those with the same key in its
    file, in file order; :func:`fingerprints` assigns it for a list of findings.
    """
    return finding_key(finding, source_lines).digest(occurrence)


def fingerprints(findings: Sequence[Finding], lines_of: LinesOf) -> list[str]:
    """Fingerprints of ``findings``, in the same order, with occurrence indices assigned.

    Identical keys are numbered in file order (line, column), whatever the order of
    ``findings``.
    """
    keys = [finding_key(f, lines_of(f.path)) for f in findings]
    seen: Counter[FindingKey] = Counter()
    out = [""] * len(findings)
    for i in sorted(range(len(findings)), key=lambda i: findings[i].sort_key()):
        out[i] = keys[i].digest(seen[keys[i]])
        seen[keys[i]] += 1
    return out


# ---- the baseline file


@dataclass(frozen=True)
class BaselineEntry:
    """One recorded finding; all but ``fingerprint`` are there for people reading it."""

    fingerprint: str
    path: str
    code: str
    function: str
    statement: str


@dataclass
class BaselineMatch:
    """What a baseline did to a run's findings."""

    new: list[Finding]  # not in the baseline, in input order
    hidden: int  # findings the baseline holds
    moved: int  # of those, matched after their code moved (another path or function)
    stale: int  # entries no finding matched (fixed, or gone): rewrite the baseline


def _take(budget: Counter[str], fingerprint: str) -> bool:
    """Whether an entry is left over after the fingerprint pass (uses up one)."""
    if budget[fingerprint] > 0:
        budget[fingerprint] -= 1
        return True
    return False


@dataclass
class Baseline:
    """The findings recorded in a baseline file."""

    entries: list[BaselineEntry] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def from_findings(cls, findings: Sequence[Finding], lines_of: LinesOf) -> Baseline:
        entries = [
            BaselineEntry(
                fingerprint=fp,
                path=repository_path(f.path),
                code=f.code,
                function=f.function,
                statement=display_statement(statement_text(f, lines_of(f.path))),
            )
            for f, fp in zip(findings, fingerprints(findings, lines_of), strict=True)
        ]
        entries.sort(key=lambda e: (e.path, e.code, e.function, e.statement, e.fingerprint))
        return cls(entries)

    def filter(self, findings: Sequence[Finding], lines_of: LinesOf) -> list[Finding]:
        """The findings not in the baseline, in their input order (see :meth:`match`)."""
        return self.match(findings, lines_of).new

    def match(self, findings: Sequence[Finding], lines_of: LinesOf) -> BaselineMatch:
        """Which findings the baseline holds. Matching counts occurrences: with two
        recorded entries for a key and three such findings now, one is reported (the
        last in file order).

        First by fingerprint (path, rule, function, statement); then, for code that
        moved, by what is left when the path is dropped (a renamed file), then the
        class too (a method moved to another class: rule, function name, statement),
        then the function too (an extracted function: rule and statement, only where
        one entry and one finding are left with that key)."""
        budget = Counter(e.fingerprint for e in self.entries)
        unmatched: list[int] = []
        for i, fp in enumerate(fingerprints(findings, lines_of)):
            if budget[fp] > 0:
                budget[fp] -= 1
            else:
                unmatched.append(i)
        left = [e for e in self.entries if _take(budget, e.fingerprint)]
        statements = {i: canonical_statement(statement_text(findings[i], lines_of(findings[i].path)))
                      for i in unmatched}  # fmt: skip
        moved = 0
        tiers: list[Callable[[str, str, str], tuple[str, ...]]] = [
            lambda code, function, stmt: (code, function, stmt),
            lambda code, function, stmt: (code, function.rsplit(".", 1)[-1], stmt),
            lambda code, function, stmt: (code, stmt),
        ]
        for tier, key in enumerate(tiers):
            pool = Counter(key(e.code, e.function, canonical_statement(e.statement)) for e in left)
            keys = {
                i: key(findings[i].code, findings[i].function, statements[i]) for i in unmatched
            }
            wanted = Counter(keys.values())
            still: list[int] = []
            for i in unmatched:
                k = keys[i]
                unique = tier < 2 or (pool[k] == 1 and wanted[k] == 1)
                if pool[k] > 0 and unique:
                    pool[k] -= 1
                    moved += 1
                    left.remove(
                        next(
                            e
                            for e in left
                            if key(e.code, e.function, canonical_statement(e.statement)) == k
                        )
                    )
                else:
                    still.append(i)
            unmatched = still
        new = [findings[i] for i in sorted(unmatched)]
        return BaselineMatch(new, hidden=len(findings) - len(new), moved=moved, stale=len(left))

    def to_json(self) -> str:
        data = {
            "version": BASELINE_VERSION,
            "tool": "imlint",
            "entries": [asdict(e) for e in self.entries],
        }
        text = json.dumps(data, indent=2, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a file name that is not UTF-8: escape it
            text = json.dumps(data, indent=2)
        return text + "\n"


def write_baseline(
    path: str | os.PathLike[str], findings: Sequence[Finding], lines_of: LinesOf
) -> Baseline:
    """Record ``findings`` in ``path`` (JSON, UTF-8, sorted, ``\\n`` line endings).

    Raises :class:`BaselineError` when the file cannot be written.
    """
    baseline = Baseline.from_findings(findings, lines_of)
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(baseline.to_json())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise BaselineError(f"{path}: cannot write baseline: {exc.strerror or exc}") from None
    return baseline


def load_baseline(path: str | os.PathLike[str]) -> Baseline:
    """Read a baseline written by :func:`write_baseline`.

    Raises :class:`BaselineError` (one line, naming the file) when it is missing,
    unreadable, not JSON, of another version or malformed.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise BaselineError(f"{path}: baseline file not found") from None
    except UnicodeDecodeError:
        raise BaselineError(f"{path}: baseline file is not UTF-8 text") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{path}: baseline is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise BaselineError(f"{path}: baseline must be a JSON object with a 'version' field")
    version = data.get("version")
    if version != BASELINE_VERSION:
        raise BaselineError(
            f"{path}: unsupported baseline version {version!r} (expected {BASELINE_VERSION}); "
            "regenerate it with --write-baseline"
        )
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list):
        raise BaselineError(f"{path}: baseline has no 'entries' list")
    entries = []
    for i, raw in enumerate(raw_entries):
        if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in _ENTRY_KEYS):
            raise BaselineError(
                f"{path}: baseline entry {i} must be an object with string fields "
                + ", ".join(_ENTRY_KEYS)
            )
        entries.append(BaselineEntry(**{k: raw[k] for k in _ENTRY_KEYS}))
    return Baseline(entries)
