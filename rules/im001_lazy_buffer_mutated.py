"""IM001: a lazy persistent buffer, allocated unguarded and later written in place by torch."""

from __future__ import annotations

from collections.abc import Iterator

from imlint.rule import Invalid, Report, Rule, Severity, Valid
from imlint.semantic import ModuleModel

from ._lazy import GUARD_ADVICE, is_direct, is_unguarded_hazard, subject


class LazyBufferMutated(Rule):
    """Lazily allocated persistent buffer, mutated in place, allocated outside `inference_mode(False)`.

    ## What it does
    Flags a tensor allocation inside a function whose result is kept in storage that
    outlives the call (a module-level dict, `self._buf`, a registry's
    `buffers[key]`, a cached function's return value), that runs lazily (on a cache
    miss or a grow-only resize), is not under `torch.inference_mode(False)`, and whose
    buffer a torch in-place write can reach (`.zero_()`, `.copy_()`, `buf[i] = x`,
    `out=buf` to a torch op, `buf += x`): in the same function, another method of the
    class, a function of the module that gets it from a getter, project code it is
    handed to (across files, through the project index), or a method of the object
    that holds it (an object handed the buffer keeps it as `self.<attr>`, or as a
    dataclass field, and its methods write that attribute). An entry stored under a
    key computed at run time (`self._bufs[n]`) is reached by another function's write
    to an entry under any key (`self._bufs[k].copy_()`, `.get(k)`, loops over
    `.values()`); entries under constant keys are separate buffers. Writes that run
    only right after the allocation, in the same branch, do not count, nor writes
    that every path of their call reaches only after the same call bound the
    attribute anew (`self._begin(ids)` where `_begin` sets `self.ids` on every path,
    then `self.ids[mask] = pad`): they write what that call made, under its mode. One
    made inside `inference_mode()` on every run, not lazily, is reported too when such
    a write reaches it (an inference tensor for sure); without one it is IM004's. A private module-level function that no file of the project names (by call,
    reference, import or string) never runs: it holds no site.

    ## Why is this bad?
    A tensor created while `torch.inference_mode()` is on is an *inference tensor*,
    for as long as it lives. Serving code often reaches these allocations for the
    first time during a warm-up or an autotune that runs under inference mode. The
    buffer is then an inference tensor forever, and the next torch-level in-place
    write outside inference mode (for example during CUDA-graph capture) raises
    `RuntimeError: Inplace update to inference tensor outside InferenceMode is not
    allowed`, taking the server down at boot.

    ## Fix safety
    Safe when the allocating statement only calls torch factories (`torch.empty(n)`,
    `x.new_zeros(n)`, with builtins, `torch`, `math` or size queries in the
    arguments): it is wrapped in `with torch.inference_mode(False):` and makes the
    same tensor, now a normal one; nothing else runs differently.

    Unsafe (applied with `--unsafe-fixes`) when the statement computes from other
    tensors or calls other code (a helper, a constructor, `x.clone()`, `torch.cat`):
    it is wrapped in `with torch.inference_mode(False), torch.no_grad():`
    (`inference_mode(False)` alone would switch grad mode on and give the kept tensor
    a graph), so that code runs outside inference mode and records no graph even when
    called with grad on. Unsafe too when the kept value is computed after the
    allocation: the guard then spans the statements up to the store (if they are not
    one block, the finding is reported unfixable), and when the module imports torch
    only conditionally (the fix would add `import torch` at its top). Either way the
    fix changes the mode
    the tensor is made under, not its contents, shape, caching key or lifetime; review
    code that relied on recording a graph through the kept tensor.

    ## Options
    `extra-allocators`, `extra-guards`, `extra-cache-decorators` in `[tool.imlint]`.
    """

    code = "IM001"
    name = "lazy-buffer-mutated"
    severity = Severity.ERROR

    VALID = [
        Valid(
            """
            import torch

            def split_pages(kv, buffers, n):
                mbuf = buffers.get("mask")
                if mbuf is None or mbuf.shape[0] < n:
                    with torch.inference_mode(False):
                        mbuf = torch.empty(n, dtype=torch.int8, device=kv.device)
                    buffers["mask"] = mbuf
                mask = mbuf[:n]
                mask.zero_()
            """
        ),
        Valid(
            """
            import torch

            def scratch(n):
                local = {}
                buf = local.get("x")
                if buf is None:
                    buf = torch.empty(n)
                    local["x"] = buf
                buf.zero_()
                return buf
            """
        ),
        Valid(
            """
            import torch

            class Layer:
                def __init__(self, n):
                    self.buf = torch.zeros(n)

                def forward(self, x):
                    self.buf.zero_()
                    return x
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            def split_pages(kv, buffers, n):
                mbuf = buffers.get("mask")
                if mbuf is None or mbuf.shape[0] < n:
                    mbuf = torch.empty(n, dtype=torch.int8, device=kv.device)
                    buffers["mask"] = mbuf
                mask = mbuf[:n]
                mask.zero_()
            """,
            line=6,
            fixed="""
            import torch

            def split_pages(kv, buffers, n):
                mbuf = buffers.get("mask")
                if mbuf is None or mbuf.shape[0] < n:
                    with torch.inference_mode(False):
                        mbuf = torch.empty(n, dtype=torch.int8, device=kv.device)
                    buffers["mask"] = mbuf
                mask = mbuf[:n]
                mask.zero_()
            """,
        ),
        Invalid(
            """
            import torch as th

            class Sampler:
                def _workspace(self, n):
                    if self._ws is None or self._ws.numel() < n:
                        self._ws = th.zeros(n)
                    return self._ws

                def forward(self, x):
                    self._ws.copy_(x)
            """,
            line=6,
            fixed="""
            import torch as th

            class Sampler:
                def _workspace(self, n):
                    if self._ws is None or self._ws.numel() < n:
                        with th.inference_mode(False):
                            self._ws = th.zeros(n)
                    return self._ws

                def forward(self, x):
                    self._ws.copy_(x)
            """,
        ),
    ]

    def check(self, model: ModuleModel) -> Iterator[Report]:
        for site in model.sites:
            if is_direct(site) and is_unguarded_hazard(site) and site.torch_writes:
                w = site.torch_writes[0]
                yield Report(
                    site,
                    f"{subject(site)} and written in place by `{w.text}` (line {w.line}); {GUARD_ADVICE}",
                )
