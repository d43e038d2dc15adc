"""Findings: what a rule reports, as plain data (no parser needed to read or print them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imlint.semantic import AllocationSite


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
    #: the line of the statement that keeps the tensor (``self._buf = buf`` after ``buf =
    #: torch.empty(n)``), when it is not the reported line's
    kept_line: int | None = None
    site: AllocationSite | None = field(default=None, compare=False, repr=False, hash=False)

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
            "reach": self.reach,
            "kept_line": self.kept_line,
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Finding:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k != "site" and k in d})  # type: ignore[arg-type]
