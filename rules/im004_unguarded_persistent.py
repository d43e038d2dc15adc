"""IM004 (opt-in): any persistent allocation outside `inference_mode(False)`, lazy or not."""

from __future__ import annotations

from collections.abc import Iterator

from imlint.rule import Invalid, Report, Rule, Severity, Valid
from imlint.semantic import Mode, ModuleModel

from ._lazy import GUARD_ADVICE, is_direct, is_unguarded_hazard, subject


class UnguardedPersistentAllocation(Rule):
    """Persistent allocation outside `inference_mode(False)` in an ordinary method (opt-in).

    ## What it does
    Flags a tensor allocation stored into storage that outlives the call
    (`self._buf = torch.empty(...)` in a method other than `__init__`, a module-level
    dict, a `global`) when the store is unconditional, so IM001/IM002 do not see it as
    lazy. That includes one made inside `inference_mode()` (a one-shot load or pack step
    decorated with it): an inference tensor for sure, reported by default (IM001) only
    when a torch in-place write outside inference mode reaches it. Off by default: enable it with `extend-select = ["IM004"]` in `[tool.imlint]`
    or `--extend-select IM004` (`select` would turn the other rules off).

    ## Why is this bad?
    Such a method re-allocates on every call, so a call under inference mode leaves an
    inference tensor in the storage until the next call outside it. Whether that
    matters depends on who reads the storage in between; review each site.

    ## Fix safety
    As for IM001: safe for a statement that only calls torch factories (only the mode
    the tensor is made under changes), unsafe for one that computes from other tensors
    or calls other code (applied with `--unsafe-fixes`).

    ## Options
    `extra-allocators`, `extra-guards` in `[tool.imlint]`.
    """

    code = "IM004"
    name = "unguarded-persistent-allocation"
    severity = Severity.WARNING
    default_enabled = False

    VALID = [
        Valid(
            """
            import torch

            class Runner:
                def prepare(self, n):
                    with torch.inference_mode(False):
                        self.positions = torch.arange(n)
            """
        ),
        Valid(
            """
            import torch

            def compute(n):
                tmp = torch.empty(n)
                return tmp.sum()
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Runner:
                def prepare(self, n):
                    self.positions = torch.arange(n)
            """,
            line=5,
            fixed="""
            import torch

            class Runner:
                def prepare(self, n):
                    with torch.inference_mode(False):
                        self.positions = torch.arange(n)
            """,
        ),
    ]

    def check(self, model: ModuleModel) -> Iterator[Report]:
        for site in model.sites:
            if (
                is_direct(site)
                and site.store is not None
                and site.lazy is None
                and site.mode is not Mode.GUARDED
                and not is_unguarded_hazard(site)
            ):
                yield Report(
                    site,
                    f"{subject(site)}; {GUARD_ADVICE}",
                )
