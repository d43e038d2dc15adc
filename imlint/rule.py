"""Rules, findings and examples.

A rule is a small class: its code, name, severity, documentation (the class
docstring, in ruff's sections), its own valid and invalid examples, and a
``check`` method that reads the shared :class:`~imlint.model.ModuleModel`.
The examples run as tests and feed ``imlint rule CODE``.
"""

from __future__ import annotations

import enum
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from imlint.model import AllocationSite, ModuleModel


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


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
    fixable: bool = False
    unfixable_reason: str | None = None
    function: str = ""
    statement: str = ""
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
            "function": self.function,
            "statement": self.statement,
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Finding:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k != "site" and k in d})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Valid:
    """Code the rule must not flag."""

    code: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", textwrap.dedent(self.code).lstrip("\n"))


@dataclass(frozen=True)
class Invalid:
    """Code the rule must flag at ``line`` (1-based, of the dedented code); ``fixed``
    is what ``imlint fix`` must turn it into, when the rule is fixable."""

    code: str
    line: int
    fixed: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", textwrap.dedent(self.code).lstrip("\n"))
        if self.fixed is not None:
            object.__setattr__(self, "fixed", textwrap.dedent(self.fixed).lstrip("\n"))


@dataclass(frozen=True)
class Report:
    """What a rule says about one site: where and why (the engine adds the rest)."""

    site: AllocationSite
    message: str


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    default_enabled: ClassVar[bool] = True
    fixable: ClassVar[bool] = True
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []

    def check(self, model: ModuleModel) -> Iterator[Report]:
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else cls.name
