"""What processing one file produced: findings, or the one-line error it gets."""

from __future__ import annotations

from dataclasses import dataclass, field

from imlint.finding import Finding


@dataclass
class Outcome:
    """What processing one file produced (picklable: findings carry no tree)."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    fixed: int = 0  # fix/diff modes: findings fixed (or that would be)
    diff: str = ""  # diff mode: the unified diff
    cached: bool = False
    guarded: list[Finding] = field(default_factory=list)  # not reported: callers guard them
