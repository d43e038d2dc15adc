"""Findings: what a rule reports, as plain data (no parser needed to read or print them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imlint.semantic import AllocationSite


_TIER_RANK = {"observed": 0, "exact": 1, "dispatch": 2}


@dataclass(frozen=True)
class Finding:
    """One reported problem. ``site`` links back to the model for the fixer."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    code: str
    severity: str
    message: str
    #: whether ``imlint fix`` applies a fix under the run's settings (``[*]``)
    fixable: bool = False
    unfixable_reason: str | None = None
    #: ``safe`` or ``unsafe`` when the rule can fix the site (``--unsafe-fixes`` applies
    #: unsafe ones too), None when it cannot; ``unsafe_reason`` says why it is unsafe
    applicability: str | None = None
    unsafe_reason: str | None = None
    function: str = ""
    statement: str = ""
    #: Reach (filled in by the project pass): the call path from an inference-mode
    #: region, or why none was found; ``armed`` when a path exists.
    reach: str | None = None
    armed: bool = False
    #: how strong the evidence of a path is: ``observed`` (a probe run saw the site
    #: allocated under inference mode), ``exact`` (every call on the path resolved),
    #: ``dispatch`` (through calls by name: *may be* armed), or "" (none found)
    tier: str = ""
    #: what ``imlint probe`` saw at the site (``imlint check --probe``): the counts of
    #: ``evidence.Observation``, or None
    observed: dict[str, object] | None = None
    #: the line of the statement that keeps the tensor (``self._buf = buf`` after ``buf =
    #: torch.empty(n)``), when it is not the reported line's
    kept_line: int | None = None
    site: AllocationSite | None = field(default=None, compare=False, repr=False, hash=False)

    def armed_rank(self) -> int:
        """Report order by the evidence of a path: observed, exact, dispatch, none."""
        return _TIER_RANK.get(self.tier, 1 if self.armed else 3)

    def armed_mark(self) -> str:
        """`` [armed]``, `` [armed (observed)]``, `` [may be armed]`` or ""."""
        if self.tier == "observed":
            return " [armed (observed)]"
        if self.tier == "dispatch":
            return " [may be armed]"
        return " [armed]" if self.armed else ""

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.code)

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "fixable": self.fixable,
            "unfixable_reason": self.unfixable_reason,
            "applicability": self.applicability,
            "unsafe_reason": self.unsafe_reason,
            "function": self.function,
            "statement": self.statement,
            "armed": self.armed,
            "tier": self.tier,
            "observed": self.observed,
            "reach": self.reach,
            "kept_line": self.kept_line,
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Finding:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k != "site" and k in d})  # type: ignore[arg-type]
