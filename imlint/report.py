"""Output formats."""

from __future__ import annotations

import bisect
import json
import os
import re
import unicodedata
import urllib.parse
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from imlint import __version__
from imlint.baseline import LineCache, LinesOf, fingerprints, iter_code_chars
from imlint.evidence import observed_text
from imlint.finding import Finding
from imlint.linediff import line_opcodes
from imlint.roots import repository_path, repository_root

if TYPE_CHECKING:  # the rules import LibCST; a cached run never needs them
    from imlint.rule import Rule


def display_path(path: str) -> str:
    """A file name as it may be printed on a terminal or in a log that CI parses:
    control characters (newlines, ANSI escapes) and bytes that are not UTF-8 are
    escaped (``\\n``, ``\\x1b``, ``\\xe9``), so a name cannot forge a line such as a
    GitHub workflow command, or restyle the terminal. Plain names are unchanged."""
    if path.isprintable() and path.isascii():
        return path
    out = []
    for c in path:
        code = ord(c)
        if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogate escape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif not c.isprintable():
            out.append(c.encode("unicode_escape").decode("ascii"))
        else:
            out.append(c)
    return "".join(out)


def _utf8_clean(data: object) -> bool:
    """Whether ``data`` dumps to text that UTF-8 can encode (no name that was not
    UTF-8 on disk); else JSON is written with ``\\u`` escapes."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"


def summary(findings: Sequence[Finding], n_errors: int, n_files: int) -> str:
    if not findings and not n_errors:
        return f"All checks passed ({plural(n_files, 'file')} checked)."
    if findings:
        by_sev = Counter(f.severity for f in findings)
        sev = ", ".join(plural(by_sev[s], s) for s in ("error", "warning") if by_sev[s])
        text = f"Found {plural(len(findings), 'finding')} ({sev}) in {plural(n_files, 'file')}"
        armed = sum(f.armed for f in findings)
        if armed:
            text += f"; {armed} armed (reached from an inference-mode region)"
        maybe = sum(f.tier == "dispatch" for f in findings)
        if maybe:
            text += f"; {maybe} may be armed (through calls by name)"
    else:
        text = f"No findings in {plural(n_files, 'file')}"
    if n_errors:
        text += f"; {plural(n_errors, 'path')} could not be checked"
    return text + "."


def write_text(
    out: TextIO, findings: Sequence[Finding], reasons: bool = False, reach: bool = False
) -> None:
    """``path:line:col: CODE [*] message``; ``[*]`` marks what ``imlint fix`` can fix,
    ``[armed]`` what an inference-mode region reaches; ``reach``: the call path below."""
    for f in findings:
        mark = (" [*]" if f.fixable else "") + f.armed_mark()
        why = ""
        if reasons and f.unfixable_reason:
            why = f" (not fixed: {f.unfixable_reason})"
        elif reasons and f.applicability == "unsafe" and not f.fixable:
            why = f" (unsafe fix not applied, `--unsafe-fixes` applies it: {f.unsafe_reason})"
        out.write(f"{display_path(f.path)}:{f.line}:{f.col}: {f.code}{mark} {f.message}{why}\n")
        seen = observed_text(f)
        if seen:
            out.write(f"    {seen}\n")
        if reach and f.reach:
            out.write(f"    reach: {f.reach}\n")


def write_json(
    out: TextIO,
    findings: Sequence[Finding],
    errors: Sequence[tuple[str, str]],
    original_text_by_path: Mapping[str, str] | None = None,
    fixed_text_by_path: Mapping[str, str] | None = None,
) -> None:
    """A JSON list: one object per finding (see README: stable keys), with the rule's
    documentation ``url`` and its ``fix`` (``applicability``, ``message`` and ``edits``,
    each ``content`` replacing ``location`` up to ``end_location``, rows and columns
    1-based, as ruff writes them; null when there is no fix), then one object per file
    that could not be processed (``code`` null, the error as ``message``)."""
    from imlint.docs import rule_doc_url

    originals = original_text_by_path or {}
    fixed = fixed_text_by_path or {}
    edits: dict[int, list[dict[str, object]]] = {}
    by_path: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_path.setdefault(f.path, []).append(i)
    for path, indices in by_path.items():
        if path in originals and path in fixed:
            group = [findings[i] for i in indices]
            owned = _exact_fixes(group, originals[path], fixed[path], lambda f: f.applicability)
            for k, replacements in owned.items():
                edits[indices[k]] = [_edit(r) for r in replacements]
    items: list[dict[str, object]] = []
    for i, f in enumerate(findings):
        item = f.to_dict()
        item["url"] = rule_doc_url(f.code)
        item["fix"] = (
            {
                "applicability": f.applicability,
                "message": "Wrap the allocating statement in an `inference_mode(False)` guard",
                "edits": edits[i],
            }
            if i in edits
            else None
        )
        items.append(item)
    for path, message in errors:
        items.append(
            {
                "path": path,
                "line": None,
                "col": None,
                "end_line": None,
                "end_col": None,
                "code": None,
                "severity": "error",
                "message": message,
                "fixable": False,
                "url": None,
                "fix": None,
            }
        )
    json.dump(items, out, indent=2)
    out.write("\n")


def _edit(replacement: dict[str, Any]) -> dict[str, object]:
    """A SARIF replacement as a ruff-style edit."""
    region = replacement["deletedRegion"]
    return {
        "content": replacement["insertedContent"]["text"],
        "location": {"row": region["startLine"], "column": region["startColumn"]},
        "end_location": {"row": region["endLine"], "column": region["endColumn"]},
    }


# ---- concise, GitHub, statistics


def write_concise(out: TextIO, findings: Sequence[Finding]) -> None:
    """``path:line:col: CODE [*] message``, one line per finding, no summary."""
    for f in findings:
        mark = " [*]" if f.fixable else ""
        out.write(f"{display_path(f.path)}:{f.line}:{f.col}: {f.code}{mark} {f.message}\n")


def github_escape_data(text: str) -> str:
    """Escape a workflow command's message (``%``, ``\\r``, ``\\n``), as ``@actions/core``."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_escape_property(text: str) -> str:
    """Escape a workflow command's property value: the message escapes plus ``:`` and ``,``."""
    return github_escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write_github(out: TextIO, findings: Sequence[Finding]) -> None:
    """GitHub Actions workflow commands: one annotation per finding.

    ``::error file=...,line=...,col=...,endLine=...,endColumn=...,title=CODE::message``;
    ``::warning`` for warning-severity findings. Paths are relative to the repository
    root (``GITHUB_WORKSPACE``, else the nearest ``.git``), with forward slashes, as
    annotations need: ``pkg/a.py`` even when run from ``pkg/``.
    """
    for f in findings:
        command = "warning" if f.severity == "warning" else "error"
        props = ",".join(
            f"{key}={github_escape_property(str(value))}"
            for key, value in (
                ("file", display_path(repository_path(f.path))),
                ("line", f.line),
                ("col", f.col),
                ("endLine", f.end_line),
                ("endColumn", f.end_col),
                ("title", f.code),
            )
        )
        out.write(f"::{command} {props}::{github_escape_data(f.message)}\n")


def write_statistics(
    out: TextIO, findings: Sequence[Finding], names: Mapping[str, str] | None = None
) -> None:
    """Counts per rule, as ``ruff --statistics``: ``count<TAB>code<TAB>[*] name``.

    Sorted by count (most first), then code. ``[*]`` marks rules with at least one
    finding that ``imlint fix`` can fix, ``[ ]`` the others. Nothing for no findings.
    ``names`` maps codes to rule names; by default it comes from the rule registry
    (which imports LibCST: pass it to keep a cached run parser-free).
    """
    if names is None:
        from imlint.rules import RULES_BY_CODE

        names = {code: rule.name for code, rule in RULES_BY_CODE.items()}
    counts = Counter(f.code for f in findings)
    fixable = {f.code for f in findings if f.fixable}
    if not counts:
        return
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    width = max(len(str(n)) for _, n in rows)
    code_width = max(len(code) for code, _ in rows)
    for code, n in rows:
        name = names.get(code, "")
        mark = "[*]" if code in fixable else "[ ]"
        out.write(f"{n:>{width}}\t{code:<{code_width}}\t{mark} {name}".rstrip() + "\n")


# ---- source snippets

_BOLD = "\x1b[1m"
_RED = "\x1b[31m"
_BOLD_RED = "\x1b[1;31m"
_BLUE = "\x1b[34m"
_RESET = "\x1b[0m"

#: Lines of a multi-line finding shown before the rest is elided.
MAX_SNIPPET_LINES = 8


def want_color(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour output on ``stream``: never when ``NO_COLOR`` is set
    (https://no-color.org), always when ``FORCE_COLOR`` is, else only on a terminal."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _display(text: str) -> str:
    return text.expandtabs(4)


def _width(text: str) -> int:
    """Terminal columns ``text`` takes (wide East Asian characters count two)."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
        for c in text
    )


def write_source(
    out: TextIO,
    findings: Sequence[Finding],
    lines_of: LinesOf,
    color: bool = False,
    reach: bool = False,
) -> None:
    """Each finding's line, then its source with a line-number gutter and a caret underline.

    ::

        src/a.py:6:16: IM001 [*] Lazy buffer ...
          |
        6 |         mbuf = torch.empty(n)
          |                ^^^^^^^^^^^^^^
          |

    The underline covers the reported columns; for a finding over several lines, the
    first line from the column to its end (the following lines are shown, up to
    :data:`MAX_SNIPPET_LINES`). Tabs are shown as four columns. A blank line separates
    findings. ``color`` adds ANSI bold/red; it is off by default (see :func:`want_color`).
    """

    def paint(style: str, text: str) -> str:
        return f"{style}{text}{_RESET}" if color and text else text

    for f in findings:
        mark = (" [*]" if f.fixable else "") + f.armed_mark()
        out.write(
            f"{paint(_BOLD, f'{display_path(f.path)}:{f.line}:{f.col}:')} {paint(_BOLD_RED, f.code)}{mark} "
            f"{f.message}\n"
        )
        seen = observed_text(f)
        if seen:
            out.write(f"    {seen}\n")
        if reach and f.reach:
            out.write(f"    reach: {f.reach}\n")
        lines = lines_of(f.path)
        if lines is not None and 1 <= f.line <= len(lines):
            last = min(f.end_line, len(lines), f.line + MAX_SNIPPET_LINES - 1)
            gutter = len(str(last))
            bar = paint(_BLUE, f"{' ' * gutter} |")
            out.write(bar + "\n")
            for n in range(f.line, last + 1):
                text = lines[n - 1]
                num = paint(_BLUE, f"{n:>{gutter}} |")
                out.write(f"{num} {_display(text)}".rstrip() + "\n")
                if n == f.line:
                    start = min(max(f.col - 1, 0), len(text))
                    stop = f.end_col - 1 if f.end_line == f.line else len(text.rstrip())
                    stop = min(max(stop, start + 1), max(len(text), start + 1))
                    pad = _width(_display(text[:start]))
                    carets = max(_width(_display(text[:stop])) - pad, 1)
                    out.write(f"{bar} {' ' * pad}{paint(_BOLD_RED, '^' * carets)}\n")
            if last < f.end_line:
                out.write(f"{bar} ...\n")
            out.write(bar + "\n")
        out.write("\n")


# ---- SARIF

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
INFORMATION_URI = "https://github.com/imlint/imlint"
FIX_DESCRIPTION = "Wrap the allocation in `with torch.inference_mode(False):`"
#: The key of imlint's baseline fingerprint in ``partialFingerprints``.
FINGERPRINT_KEY = "imlintFingerprint/v1"

_BREAK = re.compile(r"\r\n|\r|\n")
_COMPOUND = re.compile(
    r"(?:async\s+)?(?:if|elif|else|for|while|with|try|except|finally|def|class|match|case)\b"
)


def _level(severity: str) -> str:
    return "warning" if severity == "warning" else "error"


def _srcroot() -> str:
    """``%SRCROOT%``: the repository root of the working folder (see
    :func:`imlint.roots.repository_root`), else the working folder."""
    return repository_root(os.getcwd()) or os.getcwd()


def _artifact(path: str) -> dict[str, str]:
    """A file relative to ``%SRCROOT%`` (so results match the repository's paths from
    any subfolder), or an absolute ``file:`` URI for a file outside it."""
    absolute = os.path.abspath(path)
    root = _srcroot()
    if absolute.startswith(root.rstrip(os.sep) + os.sep):
        rel = os.path.relpath(absolute, root).replace(os.sep, "/")
        raw = rel.encode("utf-8", "surrogateescape")  # a name that is not UTF-8: its bytes
        return {"uri": urllib.parse.quote(raw, safe="/"), "uriBaseId": "%SRCROOT%"}
    return {"uri": Path(absolute).as_uri()}


def _sarif_rule(rule: type[Rule]) -> dict[str, object]:
    from imlint.docs import rule_doc_url, rule_markdown, rule_plain_text, rule_sections

    sections = rule_sections(rule)
    level = _level(rule.severity.value)
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": sections["What it does"]},
        "help": {"text": rule_plain_text(rule), "markdown": rule_markdown(rule)},
        "helpUri": rule_doc_url(rule.code),
        "defaultConfiguration": {"level": level, "enabled": rule.default_enabled},
        "properties": {
            "fixable": rule.fixable,
            "defaultEnabled": rule.default_enabled,
            "problem.severity": rule.severity.value,
            "precision": "high",
            "tags": ["pytorch", "inference-mode", "correctness"],
        },
    }


def _keep_ends(text: str) -> list[str]:
    """Lines with their line endings (``\\r\\n``, ``\\r``, ``\\n``), as LibCST counts them."""
    out, start = [], 0
    for m in _BREAK.finditer(text):
        out.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        out.append(text[start:])
    return out


def _position(lines: list[str], index: int) -> tuple[int, int]:
    """(line, column), 1-based, of the start of ``lines[index]`` (or of the end)."""
    if index < len(lines) or not lines or _BREAK.search(lines[-1][-2:]):
        return index + 1, 1
    return len(lines), len(lines[-1]) + 1


def _replacement(
    lines: list[str], offsets: list[int], i1: int, i2: int, inserted: str
) -> dict[str, object]:
    start_line, start_col = _position(lines, i1)
    end_line, end_col = _position(lines, i2)
    return {
        "deletedRegion": {
            "startLine": start_line,
            "startColumn": start_col,
            "endLine": end_line,
            "endColumn": end_col,
            "charOffset": offsets[i1],
            "charLength": offsets[i2] - offsets[i1],
        },
        "insertedContent": {"text": inserted},
    }


def _offsets(lines: list[str]) -> list[int]:
    out = [0]
    for line in lines:
        out.append(out[-1] + len(line))
    return out


def _exact_fixes(
    findings: Sequence[Finding],
    original: str,
    fixed: str,
    owns: Callable[[Finding], object] = lambda f: f.fixable,
) -> dict[int, list[dict[str, object]]]:
    """Replacements per fixable finding (by index), from a line diff of the fixed text.

    A hunk belongs to the findings whose lines it touches; hunks that touch none (an
    added ``import torch``) belong to every fixed finding of the file, so that each
    fix, applied alone, gives working code.
    """
    old, new = _keep_ends(original), _keep_ends(fixed)
    offsets = _offsets(old)
    hunks = [op for op in line_opcodes(old, new) if op[0] != "equal"]
    spans = sorted((f.line - 1, f.end_line, k) for k, f in enumerate(findings) if owns(f))
    starts = [m[0] for m in spans]
    longest = max((end - start for start, end, _k in spans), default=0)
    owned: dict[int, list[int]] = {}
    orphans = []
    for h, (_, i1, i2, _, _) in enumerate(hunks):
        # Findings whose lines [start, end) the hunk touches (an insertion: where it goes).
        lo = bisect.bisect_left(starts, i1 - longest)
        hi = bisect.bisect_right(starts, max(i1, i2 - 1))
        owners = [
            k
            for start, end, k in spans[lo:hi]
            if (i1 < end and i2 > start if i2 > i1 else start <= i1 < end)
        ]
        for k in owners:
            owned.setdefault(k, []).append(h)
        if not owners:
            orphans.append(h)
    out = {}
    for k, mine in owned.items():
        chosen = sorted({*mine, *orphans})
        out[k] = [
            _replacement(
                old, offsets, hunks[h][1], hunks[h][2], "".join(new[hunks[h][3] : hunks[h][4]])
            )
            for h in chosen
        ]
    return out


def _approximate_fix(f: Finding, lines: list[str]) -> list[dict[str, object]] | None:
    """Wrap the statement on the finding's lines, when its shape is plain enough to be sure.

    Used only without the fixed text: the statement must start the line, not be a
    compound statement's header or share its line with another, its brackets must
    close, it must hold no multi-line string, and the module must import ``torch``
    (under any alias) or ``inference_mode``. Otherwise ``None``.
    """
    if not 1 <= f.line <= len(lines):
        return None
    alias = _torch_alias(lines)
    if alias is None:
        return None
    depth = 0
    for c, in_string in iter_code_chars("\n".join(lines[: f.line - 1]) + "\n"):
        if not in_string:
            depth += (c in "([{") - (c in ")]}")
    head = lines[f.line - 1]
    if (
        depth != 0
        or _COMPOUND.match(head.lstrip())
        or (f.line > 1 and lines[f.line - 2].rstrip().endswith("\\"))
    ):
        return None
    end = f.line - 1
    while True:
        text = lines[end]
        chars = list(iter_code_chars(text + "\n"))
        if any(c == ";" and not s for c, s in chars):
            return None
        depth += sum((c in "([{") - (c in ")]}") for c, s in chars if not s)
        if depth < 0:
            return None
        if depth == 0 and not text.rstrip().endswith("\\"):
            break
        end += 1
        if end >= len(lines) or end - f.line > 200:
            return None
    statement = lines[f.line - 1 : end + 1]
    if any(c == "\n" and inside for c, inside in iter_code_chars("\n".join(statement))):
        return None  # re-indenting would change a multi-line string
    indent = head[: len(head) - len(head.lstrip())]
    unit = "\t" if indent.startswith("\t") else "    "
    body = "".join(f"{unit}{line}\n" if line.strip() else f"{line}\n" for line in statement)
    inserted = f"{indent}with {alias}(False):\n{body}"
    return [
        {
            "deletedRegion": {
                "startLine": f.line,
                "startColumn": 1,
                "endLine": end + 2,
                "endColumn": 1,
            },
            "insertedContent": {"text": inserted},
        }
    ]


_IMPORT_TORCH = re.compile(r"^import\s+torch(?:\s+as\s+(\w+))?\s*(?:#.*)?$")
_FROM_TORCH = re.compile(r"^from\s+torch\s+import\s+.*\binference_mode\b(?:\s+as\s+(\w+))?")


def _torch_alias(lines: list[str]) -> str | None:
    """The guard's callee as the fixer would spell it: ``torch.inference_mode`` under the
    module's torch alias, else an imported ``inference_mode``; ``None`` if neither."""
    for line in lines:
        if m := _IMPORT_TORCH.match(line):
            return f"{m.group(1) or 'torch'}.inference_mode"
    for line in lines:
        if m := _FROM_TORCH.match(line):
            return m.group(1) or "inference_mode"
    return None


def _sarif_result(
    f: Finding,
    fingerprint: str,
    rule_index: int | None,
    fix: tuple[list[dict[str, object]], bool] | None,
) -> dict[str, object]:
    """One SARIF result; ``fix`` is (replacements, whether they are exact)."""
    location: dict[str, object] = {
        "physicalLocation": {
            "artifactLocation": _artifact(f.path),
            "region": {
                "startLine": f.line,
                "startColumn": f.col,
                "endLine": f.end_line,
                "endColumn": f.end_col,
            },
        }
    }
    if f.function:
        location["logicalLocations"] = [{"fullyQualifiedName": f.function, "kind": "function"}]
    properties: dict[str, object] = {"fixable": f.fixable, "function": f.function}
    if f.reach is not None:
        properties["armed"] = f.armed
        properties["tier"] = f.tier
        properties["reach"] = f.reach
    if f.observed is not None:
        properties["observed"] = f.observed
    if f.unfixable_reason:
        properties["unfixableReason"] = f.unfixable_reason
    if f.applicability:
        properties["applicability"] = f.applicability
    if f.unsafe_reason:
        properties["unsafeReason"] = f.unsafe_reason
    result: dict[str, object] = {"ruleId": f.code}
    if rule_index is not None:
        result["ruleIndex"] = rule_index
    result |= {
        "level": _level(f.severity),
        "message": {"text": f.message},
        "locations": [location],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
        "properties": properties,
    }
    if f.kept_line is not None:
        result["relatedLocations"] = [
            {
                "id": 1,
                "message": {"text": "the tensor is kept here"},
                "physicalLocation": {
                    "artifactLocation": _artifact(f.path),
                    "region": {"startLine": f.kept_line},
                },
            }
        ]
    if fix is not None:
        replacements, exact = fix
        result["fixes"] = [
            {
                "description": {"text": FIX_DESCRIPTION},
                "artifactChanges": [
                    {"artifactLocation": _artifact(f.path), "replacements": replacements}
                ],
                "properties": {"exact": exact},
            }
        ]
    return result


def sarif_log(
    findings: Sequence[Finding],
    rules: Sequence[type[Rule]],
    *,
    lines_of: LinesOf | None = None,
    original_text_by_path: Mapping[str, str] | None = None,
    fixed_text_by_path: Mapping[str, str] | None = None,
    errors: Sequence[tuple[str, str]] = (),
) -> dict[str, object]:
    """The SARIF 2.1.0 log that :func:`write_sarif` writes, as a JSON-ready dict."""
    originals = original_text_by_path or {}
    fixed_texts = fixed_text_by_path or {}
    cache = LineCache()
    for path, text in originals.items():
        cache.add(path, text)

    def lines_for(path: str) -> list[str] | None:
        if path in originals or lines_of is None:
            return cache(path)
        return lines_of(path)

    rule_index = {r.code: i for i, r in enumerate(rules)}
    prints = fingerprints(findings, lines_for)
    by_path: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_path.setdefault(f.path, []).append(i)
    fixes: dict[int, tuple[list[dict[str, object]], bool]] = {}
    for path, indices in by_path.items():
        group = [findings[i] for i in indices]
        exact = (
            _exact_fixes(group, originals[path], fixed_texts[path])
            if path in originals and path in fixed_texts
            else {}
        )
        lines = lines_for(path)
        for k, i in enumerate(indices):
            if not group[k].fixable:
                continue
            if k in exact:
                fixes[i] = (exact[k], True)
            elif lines is not None and (approx := _approximate_fix(group[k], lines)):
                fixes[i] = (approx, False)

    results = [
        _sarif_result(f, prints[i], rule_index.get(f.code), fixes.get(i))
        for i, f in enumerate(findings)
    ]
    invocation: dict[str, object] = {"executionSuccessful": not errors}
    if errors:
        invocation["toolExecutionNotifications"] = [
            {
                "level": "error",
                "message": {"text": message},
                "locations": [{"physicalLocation": {"artifactLocation": _artifact(path)}}],
            }
            for path, message in errors
        ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "imlint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": [_sarif_rule(r) for r in rules],
                    }
                },
                "invocations": [invocation],
                "originalUriBaseIds": {
                    "%SRCROOT%": {"uri": Path(_srcroot()).as_uri().rstrip("/") + "/"}
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def write_sarif(
    out: TextIO,
    findings: Sequence[Finding],
    rules: Sequence[type[Rule]],
    *,
    lines_of: LinesOf | None = None,
    original_text_by_path: Mapping[str, str] | None = None,
    fixed_text_by_path: Mapping[str, str] | None = None,
    errors: Sequence[tuple[str, str]] = (),
) -> None:
    """A SARIF 2.1.0 log with one run (GitHub code scanning, IDE viewers).

    ``rules`` (normally ``imlint.rules.ALL_RULES``) become ``tool.driver.rules`` with
    their documentation; each finding a result with its location (a relative URI under
    ``%SRCROOT%``), the baseline fingerprint and, when fixable, a ``fixes`` entry.

    Source text is needed for fingerprints and fixes: ``original_text_by_path`` (the
    text the findings were computed on), else ``lines_of``, else the files are read.
    A fix's replacements are exact (``"exact": true``: a line diff of the original
    against ``fixed_text_by_path[path]``, the fixer's output for the file); without the
    fixed text the statement is wrapped as the fixer would in plain cases
    (``"exact": false``) and the fix is left out where that would be a guess.
    ``errors`` (path, message) become tool execution notifications.
    """
    log = sarif_log(
        findings,
        rules,
        lines_of=lines_of,
        original_text_by_path=original_text_by_path,
        fixed_text_by_path=fixed_text_by_path,
        errors=errors,
    )
    json.dump(log, out, indent=2, ensure_ascii=not _utf8_clean(log))
    out.write("\n")
