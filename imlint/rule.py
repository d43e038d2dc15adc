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
from dataclasses import dataclass
from typing import ClassVar

from imlint.finding import Finding
from imlint.semantic import AllocationSite, ModuleModel

__all__ = ["Finding", "Invalid", "Report", "Rule", "Severity", "Valid"]


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


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
    severity: Severity | None = None  # None: the rule's own


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity]
    #: when some findings are reported at another severity: e.g. "error when ..."
    severity_note: ClassVar[str] = ""
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
