"""IM002: a lazy persistent buffer allocated unguarded and written only by kernels."""

from __future__ import annotations

from collections.abc import Iterator

from imlint.rule import Invalid, Report, Rule, Severity, Valid
from imlint.semantic import KERNEL_TIER, AllocationSite, Mode, ModuleModel

from ._lazy import GUARD_ADVICE, is_direct, is_unguarded_hazard, kernel_writer, subject


class LazyBufferLatent(Rule):
    """Lazily allocated persistent buffer written only by kernels, allocated outside `inference_mode(False)` (latent hazard).

    ## What it does
    Flags the same lazy persistent allocations as IM001 when the buffer is written only
    by kernels the dispatcher never sees: a Triton kernel of the project that stores
    through it (`tl.store`, atomics), `out=buf` handed to a non-torch callable, a raw
    pointer (`buf.data_ptr()`) handed out, or project code that hands it on to one of
    these. Code imlint cannot read (an op from outside the project such as `torch.ops`
    or a CUDA extension, a kernel compiled at run time, a method no function of the
    project defines on a library's object, such as a communication buffer's
    `query_mask(mask)`; not a tensor's, a container's or a logger's) may write what it
    is handed or only read it; what the buffer holds when made decides: blank or zeroed storage
    (`empty*`, `zeros*`) is its output, workspace or counter (IM002), a tensor made
    with content (`arange`, `tensor`, `ones`, `full`, a computed value, storage filled
    at creation) is its input (IM005). Blank storage that nothing visible writes is
    filled by code out of sight before anything reads it: IM002 too. A torch in-place
    write that runs only inside `inference_mode()` (a `with torch.inference_mode():`
    block, a function decorated with it, or a function that every call path in the
    project reaches only through one of those) is allowed on an inference tensor, so
    it keeps the hazard latent too. A function nothing in the project calls may be
    called from outside, in any mode. One that torch writes in place anywhere else
    imlint can see is IM001's.

    ## Why is this bad?
    If the first call happens under `torch.inference_mode()` (a warm-up, an autotune,
    a scheduler thread) the buffer becomes an inference tensor and stays one. Raw
    kernel writes bypass the check that raises, so nothing fails today: the hazard
    is latent. The first torch in-place write outside inference mode added later
    (`.zero_()`, `.copy_()`, `buf[i] = x`), anywhere, turns it into a boot failure.

    ## Fix safety
    As for IM001: safe for a statement that only calls torch factories, unsafe for
    one that computes from other tensors or calls other code, or a guard spanning the
    statements that compute the kept value (applied with `--unsafe-fixes`).

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
                _page_split_kernel[(n,)](kv, buf)
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
                _page_split_kernel[(n,)](kv, buf)
                return buf
            """,
        ),
        Invalid(
            """
            import torch
            from my_cuda_ext import ops

            class Sampler:
                def sample(self, logits):
                    if self._ws is None:
                        self._ws = torch.empty(1 << 20, dtype=torch.uint8, device=logits.device)
                    return ops.top_k(logits, workspace=self._ws)
            """,
            line=7,
        ),
        Invalid(
            """
            import torch

            class Commit:
                def hook(self, kv):
                    with torch.inference_mode():
                        if self.kvs is None:
                            self.kvs = torch.empty_like(kv)
                        self.kvs.copy_(kv)
            """,
            line=7,
        ),
    ]

    def check(self, model: ModuleModel) -> Iterator[Report]:
        for site in model.sites:
            if is_direct(site) and is_unguarded_hazard(site) and site.tier == KERNEL_TIER:
                yield Report(
                    site,
                    f"{subject(site)} and {kernel_writer(site)}{_latent(site)}; {GUARD_ADVICE}",
                )


def _latent(site: AllocationSite) -> str:
    if site.mode is Mode.INFERENCE:
        return ""
    return ": a first call under inference mode leaves an inference tensor"
