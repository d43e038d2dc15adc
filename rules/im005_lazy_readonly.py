"""IM005: a lazy persistent tensor, allocated unguarded, that nothing writes."""

from __future__ import annotations

from collections.abc import Iterator

from imlint.rule import Invalid, Report, Rule, Severity, Valid
from imlint.semantic import HANDED_WRITE, READ_ONLY_TIER, AllocationSite, ModuleModel

from ._lazy import GUARD_ADVICE, is_unguarded_hazard, subject


class LazyReadOnlyTensor(Rule):
    """Lazily created persistent tensor, never written, created outside `inference_mode(False)`.

    ## What it does
    Flags the lazy persistent allocations of IM001, IM002 and IM003 (a cache miss, a
    grow-only resize, a cached function, a get-or-create helper, an object built on
    first use) when nothing writes the tensor after it is created: no torch in-place
    write and no kernel write that code shows. A tensor made with content (`arange`,
    `tensor`, `ones`, `full`, `zeros` nothing else touches, a computed value) and only
    handed to code imlint cannot read (an op from another library) is taken as that
    code's input; blank storage is not (IM002: something out of sight fills it).
    Typical: cos/sin tables, index and pointer tables, masks, constants kept per device.

    Off by default (opt-in, like IM004): a server that only runs inference cannot hit
    it, and a CI gate on by default should report what can take the server down (IM001,
    IM003 errors) or stay latent in it (IM002). Projects that run autograd in the same
    process as cached tensors (training or fine-tuning next to serving, RL weight
    sync, gradient checks) enable it with `extend-select = ["IM005"]` in
    `[tool.imlint]` or `--extend-select IM005`.

    ## Why is this bad?
    If the first call runs under `torch.inference_mode()`, the cached tensor is an
    inference tensor for as long as the cache lives. Serving code that only reads it
    never notices. Code that uses it with autograd later (a training or fine-tuning
    step, a gradient check, `torch.func`) fails with `RuntimeError: Inference tensors
    cannot be saved for backward`, far from where the tensor was made. flash-attention's
    rotary cos/sin cache hit this and was fixed upstream by rebuilding the cache when
    it `is_inference()`. A server that never runs autograd cannot hit it.

    ## Fix safety
    As for IM001: safe for a statement that only calls torch factories, unsafe for one
    that computes from other tensors or calls other code, or a guard spanning the
    statements that compute the kept value (applied with `--unsafe-fixes`).

    ## Options
    `extra-allocators`, `extra-guards`, `extra-cache-decorators` in `[tool.imlint]`.
    """

    code = "IM005"
    name = "lazy-readonly-tensor"
    severity = Severity.WARNING
    default_enabled = False

    VALID = [
        Valid(
            """
            import functools
            import torch

            @functools.lru_cache(maxsize=8)
            def positions(n, device):
                with torch.inference_mode(False):
                    return torch.arange(n, device=device)
            """
        ),
        Valid(
            """
            import torch

            _TABLES = {}

            def table(n):
                t = _TABLES.get(n)
                if t is None:
                    t = torch.arange(n)
                    _TABLES[n] = t
                t.zero_()
                return t
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import functools
            import torch

            @functools.lru_cache(maxsize=8)
            def positions(n, device):
                return torch.arange(n, device=device)
            """,
            line=6,
            fixed="""
            import functools
            import torch

            @functools.lru_cache(maxsize=8)
            def positions(n, device):
                with torch.inference_mode(False):
                    return torch.arange(n, device=device)
            """,
        ),
        Invalid(
            """
            import torch

            class Rotary:
                def cos_sin(self, n, device):
                    if self._cos is None or self._cos.shape[0] < n:
                        t = torch.arange(n, device=device, dtype=torch.float32)
                        self._cos = torch.cos(t)
                    return self._cos[:n]
            """,
            line=7,
        ),
    ]

    def check(self, model: ModuleModel) -> Iterator[Report]:
        for site in model.sites:
            if is_unguarded_hazard(site) and site.tier == READ_ONLY_TIER:
                via = f" ({site.chain})" if site.chain is not None else ""
                yield Report(
                    site,
                    f"{subject(site)}{via} and {_unwritten(site)}: an inference tensor fails "
                    "when it is later used with autograd; " + GUARD_ADVICE,
                )


def _unwritten(site: AllocationSite) -> str:
    handed = [w for w in site.writes if w.kind == HANDED_WRITE]
    if not handed:
        return "never written in place"
    w = handed[0]
    return (
        f"made with content, then only handed to code imlint cannot read "
        f"(`{w.text}`, line {w.line}), taken as an input"
    )
