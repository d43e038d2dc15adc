"""Output formats."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from imlint.rule import Finding


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary(findings: Sequence[Finding], n_errors: int, n_files: int) -> str:
    if not findings and not n_errors:
        return f"All checks passed ({plural(n_files, 'file')} checked)."
    if findings:
        by_sev = Counter(f.severity for f in findings)
        sev = ", ".join(plural(by_sev[s], s) for s in ("error", "warning") if by_sev[s])
        text = f"Found {plural(len(findings), 'finding')} ({sev}) in {plural(n_files, 'file')}"
    else:
        text = f"No findings in {plural(n_files, 'file')}"
    if n_errors:
        text += f"; {plural(n_errors, 'path')} could not be checked"
    return text + "."


def write_text(out: TextIO, findings: Sequence[Finding], reasons: bool = False) -> None:
    """``path:line:col: CODE [*] message``; ``[*]`` marks what ``imlint fix`` can fix."""
    for f in findings:
        mark = " [*]" if f.fixable else ""
        why = f" (not fixed: {f.unfixable_reason})" if reasons and f.unfixable_reason else ""
        out.write(f"{f.path}:{f.line}:{f.col}: {f.code}{mark} {f.message}{why}\n")


def write_json(out: TextIO, findings: Sequence[Finding], errors: Sequence[tuple[str, str]]) -> None:
    """A JSON list of finding objects (see README: stable keys), errors excluded.

    Errors go to stderr as lines in every format, so the JSON stays one list.
    """
    del errors
    json.dump([f.to_dict() for f in findings], out, indent=2)
    out.write("\n")
