"""IM003: a lazy persistent store of what an allocating call returns, unguarded."""

from __future__ import annotations

from collections.abc import Iterator

from imlint.rule import Invalid, Report, Rule, Severity, Valid
from imlint.semantic import KERNEL_TIER, ModuleModel

from ._lazy import is_unguarded_hazard, kernel_writer, subject

ADVICE = "wrap the call in `with torch.inference_mode(False):`"


class LazyAllocatingCall(Rule):
    """Lazily stored result of a call that allocates tensors, outside `inference_mode(False)`.

    ## What it does
    Flags the lazy persistent stores that IM001 and IM002 flag, when the tensors are
    allocated behind a call rather than at the store: a constructor that keeps a
    tensor on `self` (`self._wrapper = MoEWrapper(...)`), a helper that returns one,
    transitively through calls the project index resolves by import and name across
    the checked files; a factory (`lambda: torch.empty(...)`, `functools.partial(
    torch.zeros, ...)`, a local function) handed to a get-or-create helper that keeps
    its result; and calls to configured allocators (`extra-allocators`), for code
    outside the tree. The message gives the chain that allocates. It is an error when
    the stored object's tensors are written in place by a torch operation (as IM001),
    a warning when only kernels write them (as IM002); when nothing writes them, the
    site is IM005's.

    ## Why is this bad?
    Where the tensor is allocated does not matter, only when: if the first call runs
    under `torch.inference_mode()`, every tensor the constructor or helper allocates
    is an inference tensor for as long as the object is kept, and the next torch
    in-place write to it outside inference mode raises `RuntimeError: Inplace update
    to inference tensor outside InferenceMode is not allowed`.

    ## Fix safety
    Unsafe (applied with `--unsafe-fixes`): the fix wraps the statement that makes the
    call (for a factory, the call to the helper) in
    `with torch.inference_mode(False), torch.no_grad():`, so the whole callee runs
    outside inference mode. Everything the call allocates is then a normal tensor, and
    nothing it computes records a graph (`inference_mode(False)` alone would switch
    grad mode on inside the call, even under the caller's `no_grad()`). A call that
    relied on recording a graph with grad on no longer does: review it. A guard in the
    callee itself (or in every caller of the function) also counts, and the site is
    then not reported.

    ## Options
    `extra-allocators`, `extra-guards`, `extra-cache-decorators`,
    `inference-mode-regions` in `[tool.imlint]`.
    """

    code = "IM003"
    name = "lazy-allocating-call"
    severity = Severity.WARNING
    severity_note = "error when written in place"

    VALID = [
        Valid(
            """
            import torch

            class Workspace:
                def __init__(self, n):
                    self.buf = torch.empty(n)

            class Layer:
                def forward(self, x):
                    if self._ws is None:
                        with torch.inference_mode(False):
                            self._ws = Workspace(x.shape[0])
                    self._ws.buf.zero_()
                    return x
            """
        ),
        Valid(
            """
            import torch

            def make_table(n):
                with torch.inference_mode(False):
                    return torch.zeros(n, 2)

            _TABLES = {}

            def table(n):
                if n not in _TABLES:
                    _TABLES[n] = make_table(n)
                return _TABLES[n]
            """
        ),
        Valid(
            """
            class Config:
                def __init__(self, n):
                    self.n = n

            class Layer:
                def config(self, n):
                    if self._config is None:
                        self._config = Config(n)
                    return self._config
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            import torch

            class Workspace:
                def __init__(self, n):
                    self.buf = torch.empty(n)

            class Layer:
                def forward(self, x):
                    if self._ws is None:
                        self._ws = Workspace(x.shape[0])
                    self._ws.buf.zero_()
                    return x
            """,
            line=10,
            fixed="""
            import torch

            class Workspace:
                def __init__(self, n):
                    self.buf = torch.empty(n)

            class Layer:
                def forward(self, x):
                    if self._ws is None:
                        with torch.inference_mode(False), torch.no_grad():
                            self._ws = Workspace(x.shape[0])
                    self._ws.buf.zero_()
                    return x
            """,
        ),
        Invalid(
            """
            import torch

            def make_table(n):
                return torch.zeros(n, 2)

            _TABLES = {}

            def table(n):
                if n not in _TABLES:
                    _TABLES[n] = make_table(n)
                _fill_kernel[(n,)](_TABLES[n])
                return _TABLES[n]
            """,
            line=10,
            fixed="""
            import torch

            def make_table(n):
                return torch.zeros(n, 2)

            _TABLES = {}

            def table(n):
                if n not in _TABLES:
                    with torch.inference_mode(False), torch.no_grad():
                        _TABLES[n] = make_table(n)
                _fill_kernel[(n,)](_TABLES[n])
                return _TABLES[n]
            """,
        ),
        Invalid(
            """
            import torch

            class Registry:
                def __init__(self):
                    self._buffers = {}

                def get_buffer(self, name, factory):
                    if name not in self._buffers:
                        self._buffers[name] = factory()
                    return self._buffers[name]

            REGISTRY = Registry()

            def split(n):
                buf = REGISTRY.get_buffer("split", lambda: torch.empty(n))
                buf.zero_()
            """,
            line=15,
            fixed="""
            import torch

            class Registry:
                def __init__(self):
                    self._buffers = {}

                def get_buffer(self, name, factory):
                    if name not in self._buffers:
                        self._buffers[name] = factory()
                    return self._buffers[name]

            REGISTRY = Registry()

            def split(n):
                with torch.inference_mode(False), torch.no_grad():
                    buf = REGISTRY.get_buffer("split", lambda: torch.empty(n))
                buf.zero_()
            """,
        ),
    ]

    def check(self, model: ModuleModel) -> Iterator[Report]:
        for site in model.sites:
            if site.chain is None or not is_unguarded_hazard(site):
                continue
            if site.torch_writes:
                w = site.torch_writes[0]
                yield Report(
                    site,
                    f"{subject(site)} ({site.chain}) and written in place by `{w.text}` "
                    f"(line {w.line}); {ADVICE}",
                    severity=Severity.ERROR,
                )
            elif site.tier == KERNEL_TIER:
                yield Report(
                    site, f"{subject(site)} ({site.chain}) and {kernel_writer(site)}; {ADVICE}"
                )
