"""IM002: a lazy persistent buffer allocated unguarded, with no visible torch in-place write."""

from __future__ import annotations

from collections.abc import Iterator

from imlint.model import AllocationSite, Mode, ModuleModel
from imlint.rule import Invalid, Report, Rule, Severity, Valid

from ._lazy import GUARD_ADVICE, is_direct, is_unguarded_hazard, subject


class LazyBufferLatent(Rule):
    """Lazily allocated persistent buffer allocated outside `inference_mode(False)` (latent hazard).

    ## What it does
    Flags the same lazy persistent allocations as IM001 when no torch-level in-place
    write to the buffer is visible in the same function or class: for example a
    buffer written only by a Triton or CUDA kernel.

    ## Why is this bad?
    If the first call happens under `torch.inference_mode()` (a warm-up, an autotune,
    a scheduler thread) the buffer becomes an inference tensor and stays one. Raw
    kernel writes bypass the check that raises, so nothing fails today: the hazard
    is latent. The first torch in-place write outside inference mode added later
    (`.zero_()`, `.copy_()`, `buf[i] = x`), anywhere, turns it into a boot failure.

    ## Fix safety
    Safe, as for IM001: only the mode the tensor is created under changes.

    ## Options
    `extra-allocators`, `extra-guards`, `extra-cache-decorators` in `[tool.imlint]`.
    """

    code = "IM002"
    name = "lazy-buffer-latent"
    severity = Severity.WARNING

    VALID = [
        Valid(
            """
            import torch

            _BUFFERS = {}

            def page_split(kv, n):
                buf = _BUFFERS.get(kv.device)
                if buf is None or buf.shape[0] < n:
                    with torch.inference_mode(False):
                        buf = torch.empty(n, 37440, dtype=torch.uint8, device=kv.device)
                    _BUFFERS[kv.device] = buf
                return buf
            """
        ),
        Valid(
            """
            import torch

            class Runner:
                def step(self, n):
                    self.out = torch.empty(n)
                    return self.out
            """
        ),
        Valid(
            """
            import torch

            _CACHE = {}

            def get(n):
                if n not in _CACHE:
                    with torch.no_grad():
                        with torch.inference_mode(False):
                            _CACHE[n] = torch.arange(n)
                return _CACHE[n]
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            _BUFFERS = {}

            def page_split(kv, n):
                buf = _BUFFERS.get(kv.device)
                if buf is None or buf.shape[0] < n:
                    buf = torch.empty(n, 37440, dtype=torch.uint8, device=kv.device)
                    _BUFFERS[kv.device] = buf
                return buf
            """,
            line=8,
            fixed="""
            import torch

            _BUFFERS = {}

            def page_split(kv, n):
                buf = _BUFFERS.get(kv.device)
                if buf is None or buf.shape[0] < n:
                    with torch.inference_mode(False):
                        buf = torch.empty(n, 37440, dtype=torch.uint8, device=kv.device)
                    _BUFFERS[kv.device] = buf
                return buf
            """,
        ),
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
    ]

    def check(self, model: ModuleModel) -> Iterator[Report]:
        for site in model.sites:
            if is_direct(site) and is_unguarded_hazard(site) and not site.writes:
                yield Report(
                    site,
                    f"{subject(site)}{_latent(site)}; {GUARD_ADVICE}",
                )


def _latent(site: AllocationSite) -> str:
    if site.mode is Mode.INFERENCE:
        return ""
    return "; a first call under inference mode leaves an inference tensor"
