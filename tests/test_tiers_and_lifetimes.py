"""Write tiers (torch, kernel, none) and lifetimes (construction, per-call objects)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from imlint.config import Settings
from imlint.engine import Linter

from .conftest import run_imlint

LINTER = Linter(Settings(extend_select=("IM005",)))


def codes(code: str) -> list[tuple[int, str]]:
    findings = LINTER.check_text("t.py", textwrap.dedent(code))
    return [(f.line, f.code) for f in findings]


def all_codes(code: str) -> list[tuple[int, str]]:
    """As ``codes``, with the opt-in IM004 on."""
    findings = Linter(Settings(extend_select=("IM004",))).check_text("t.py", textwrap.dedent(code))
    return [(f.line, f.code) for f in findings]


LAZY = """
import torch
import my_ext
_C = {{}}

def get(n, x):
    if n not in _C:
        _C[n] = torch.empty(n)
    buf = _C[n]
    {use}
    return x
"""

#: The same cache, holding a tensor with content (``arange``): what code only reads.
READ = LAZY.replace("torch.empty(n)", "torch.arange(n)")


def test_the_writer_decides_the_tier():
    assert codes(LAZY.format(use="buf.zero_()")) == [(8, "IM001")]
    assert codes(LAZY.format(use="torch.mm(x, x, out=buf)")) == [(8, "IM001")]
    assert codes(LAZY.format(use="_kernel[(n,)](x, buf)")) == [(8, "IM002")]
    assert codes(LAZY.format(use="my_ext.run(x, out=buf)")) == [(8, "IM002")]
    assert codes(LAZY.format(use="my_ext.run(x, buf)")) == [(8, "IM002")]
    assert codes(LAZY.format(use="torch.ops.my.run(x, buf)")) == [(8, "IM002")]
    assert codes(LAZY.format(use="my_ext.fill(buf.data_ptr(), n)")) == [(8, "IM002")]
    # The function form of a view writes through the view to the buffer.
    assert codes(LAZY.format(use="torch.narrow(buf, 0, 0, 2).zero_()")) == [(8, "IM001")]
    strided = "v = torch.as_strided(buf.view(x.dtype), (2,), (1,)); v.copy_(x)"
    assert codes(LAZY.format(use=strided)) == [(8, "IM001")]
    # Reads: torch functions, builtins, methods of other objects.
    assert codes(READ.format(use="y = torch.matmul(x, buf) + len(buf)")) == [(8, "IM005")]
    assert codes(READ.format(use="self_model.forward(buf)")) == [(8, "IM005")]
    assert codes(READ.format(use="z.sub_(buf)")) == [(8, "IM005")]  # an input of an in-place op


def test_what_the_tensor_holds_decides_what_unreadable_code_does_with_it():
    """Handed to code imlint cannot read, blank or zeroed storage is its output or
    workspace; a tensor made with content is its input. Code that shows a write (``out=``,
    a raw pointer) wins; blank storage that nothing visible writes is filled out of sight."""
    handed = LAZY.format(use="my_ext.run(x, buf)")
    for alloc, code in [
        ("torch.empty(n)", "IM002"),
        ("x.new_empty(n)", "IM002"),
        ("torch.zeros(n)", "IM002"),
        ("torch.arange(n)", "IM005"),
        ("torch.ones(n)", "IM005"),
        ("torch.tensor([1, 2])", "IM005"),
        ("torch.cat([x, x])", "IM005"),
    ]:
        assert codes(handed.replace("torch.empty(n)", alloc)) == [(8, code)], alloc
    assert codes(READ.format(use="my_ext.run(x, out=buf)")) == [(8, "IM002")]
    assert codes(READ.format(use="my_ext.fill(buf.data_ptr(), n)")) == [(8, "IM002")]
    assert codes(LAZY.format(use="y = buf.sum()")) == [(8, "IM002")]
    assert codes(LAZY.replace("torch.empty(n)", "torch.zeros(n)").format(use="y = buf.sum()")) == [
        (8, "IM005")
    ]
    filled = """
    import torch
    import my_ext
    _C = {}

    def get(n, x):
        if n not in _C:
            buf = torch.empty(n)
            buf.copy_(x)
            _C[n] = buf
        my_ext.run(x, _C[n])
    """
    assert codes(filled) == [(8, "IM005")]  # filled when made: it has content
    chained = LAZY.replace("torch.empty(n)", "torch.empty(n).copy_(x)")
    assert codes(chained.format(use="my_ext.run(x, buf)")) == [(8, "IM005")]


def test_what_a_helper_returns_holds_decides_the_same_behind_a_call(tmp_path):
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/util.py": """
                import torch

                def to_device(data, device):
                    t = torch.tensor(data, device="cpu")
                    return t.to(device, non_blocking=True)

                def scratch(n):
                    return torch.empty(n)
                """,
            "pkg/use.py": """
                import my_ext
                from pkg.util import scratch, to_device

                _T, _S = {}, {}

                def run(x, n):
                    if n not in _T:
                        _T[n] = to_device([1, 2], x.device)
                    if n not in _S:
                        _S[n] = scratch(n)
                    my_ext.run(x, _T[n], _S[n])
                """,
        },
    )
    found = [(line, code, sev) for name, line, code, sev in _check(tmp_path) if name == "use.py"]
    assert found == [(9, "IM005", "warning"), (11, "IM003", "warning")]


def test_a_torch_write_wins_over_a_kernel_write():
    use = "_kernel[(n,)](x, buf)\n    buf.fill_(0)"
    assert codes(LAZY.format(use=use)) == [(8, "IM001")]


def test_entries_with_constant_keys_are_separate_buffers():
    code = """
    import torch
    _WS = {}

    def ws(n):
        if "w" not in _WS:
            _WS["w"] = torch.ones(n)
            _WS["eye"] = torch.eye(n)
        _WS["eye"][:n].zero_()
        return _WS["w"]
    """
    assert codes(code) == [(7, "IM005"), (8, "IM001")]
    # An augmented assignment to an entry writes that entry: ``d["n"] += 1`` is not a
    # write of the tensor under another key; ``t[i] += 1`` writes the tensor itself.
    counted = code.replace('_WS["eye"][:n].zero_()', '_WS["eye"] += 1')
    assert codes(counted) == [(7, "IM005"), (8, "IM001")]
    other = code.replace('_WS["eye"][:n].zero_()', '_WS["n"] += 1')
    assert codes(other) == [(7, "IM005"), (8, "IM005")]
    sliced = code.replace('_WS["eye"][:n].zero_()', '_WS["w"][0] += 1')
    assert codes(sliced) == [(7, "IM001"), (8, "IM005")]


def test_a_dict_built_by_keywords_keeps_its_entries_apart():
    # ``dict(arr=..., other=...)`` is the literal ``{"arr": ..., "other": ...}``: a write
    # of one entry is not a write of the other.
    code = """
    import torch

    class Layer:
        def __init__(self):
            self._state = {}

        def forward(self, key, n, pin):
            st = self._state.get(key)
            if st is None:
                st = dict(arr=torch.empty(n), other=torch.empty(n))
                self._state[key] = st
            st["arr"].copy_(pin)
            return st
    """
    assert codes(code) == [(11, "IM001"), (11, "IM002")]
    literal = code.replace(
        "dict(arr=torch.empty(n), other=torch.empty(n))",
        '{"arr": torch.empty(n), "other": torch.empty(n)}',
    )
    assert codes(literal) == [(11, "IM001"), (11, "IM002")]


def test_a_test_of_another_key_is_not_a_cache_test():
    code = """
    import torch

    def post(data):
        if "mask" in data:
            data["lengths"] = torch.tensor([1, 2])
        return data
    """
    assert codes(code) == []


def test_an_empty_tensor_is_a_placeholder():
    code = """
    import torch
    class C:
        def teardown(self):
            if self.kv is not None:
                self.kv = torch.tensor([])
    """
    assert codes(code) == []


def test_torch_functions_that_compute_are_allocations_and_views_are_not():
    code = """
    import torch
    class Rope:
        def get(self, t):
            if self._cos is None:
                self._cos = torch.cos(t)
            if self._view is None:
                self._view = t.unsqueeze(0)
            return self._cos
    """
    assert codes(code) == [(6, "IM005")]


def test_conversions_and_tensor_methods_that_compute_make_new_tensors():
    """``x.to(d)``, ``w.float()``, ``t.exp()`` kept lazily may keep a new inference
    tensor; only the innermost fresh tensor of a chain is a site, a module's function
    spelled like a method (``math.exp``) is not one, and a method that computes from a
    local made earlier (``p = p.repeat_interleave(k)``) is a site of its own: kept when
    it runs, its new tensor is what the cache holds."""
    code = """
    import functools
    import math
    import torch

    class Rope:
        def get(self, x):
            if self._cos is None or self._cos.device != x.device:
                self._cos = self._cos.to(x.device)
            if self._w is None:
                self._w = torch.zeros(4).to(x.device).float()
            if self._a is None:
                self._a = -self.a_log.float().exp()
            return self._cos

    @functools.lru_cache
    def bias(t, h):
        return t.detach().reshape(-1).float().contiguous().view(h, -1)

    @functools.lru_cache
    def scale(x):
        return math.exp(x)

    _C = {}

    def positions(x, k):
        if k not in _C:
            p = torch.clamp(x, min=0).to(torch.int64)
            if k > 2:
                p = p.repeat_interleave(k)
            _C[k] = p
        return _C[k]
    """
    assert codes(code) == [
        (9, "IM005"),
        (11, "IM005"),
        (13, "IM005"),
        (18, "IM005"),
        (28, "IM005"),
        (30, "IM005"),
    ]
    assert [c for _, c in codes(code.replace("return self._cos", "self._cos.zero_()"))][:1] == [
        "IM001"
    ]


def test_arithmetic_on_a_tensor_made_before_is_the_site():
    """``(c[:-1] + c[1:]) / 2`` makes new storage from a tensor an earlier statement
    made: the arithmetic is what is kept; an allocation inside the expression stays the
    site (``1.0 / torch.tensor(n)``); numbers, lists and strings are no tensors."""
    code = """
    import torch

    _T = {}

    def midpoints(layer, d):
        if not hasattr(layer, "_mid_ready"):
            c = torch.randn(d).flip(0)
            layer._mid = (c[:-1] + c[1:]) / 2
            layer._mid_ready = True

    def table(n):
        if n not in _T:
            x = torch.arange(n)
            _T[n] = x * 2
        return _T[n]

    def scale(n, k):
        if n not in _T:
            _T[n] = n * k + 1
        return _T[n]

    class B:
        def get(self, n):
            if self._b is None:
                self._b = [None] * n
                self._name = "b" + str(n)
                self._s = 1.0 / torch.tensor(n)
            return self._b
    """
    found = codes(code)
    assert found == [(9, "IM005"), (15, "IM005"), (28, "IM005")]
    assert [
        c
        for _, c in codes(
            code.replace(
                "return _T[n]\n\n    def scale",
                "_T[n].add_(1)\n        return _T[n]\n\n    def scale",
            )
        )
    ] == ["IM005", "IM001", "IM005"]


def test_indexing_with_a_tensor_made_before_is_the_site():
    """``cos[idx]`` and ``x[x > 0]`` gather into new storage when the index holds a
    tensor an earlier statement made: the indexing is what is kept. Numbers, slices,
    ``None`` and indices of unknown origin (a parameter) index a view."""
    code = """
    import torch

    class Rope:
        def __init__(self):
            self._c = {}
            self._m = None
            self._v = None
            self._p = None

        def by_thw(self, k, t, cos):
            if k in self._c:
                return self._c[k]
            idx = torch.arange(t).to(cos.device)
            picked = cos[idx, :, :]
            self._c[k] = picked.flatten(0, 1)
            return self._c[k]

        def masked(self, n):
            if self._m is None:
                x = torch.randn(n)
                self._m = x[x > 0]

        def views(self, cos, rows):
            if self._v is None:
                self._v = cos[1:, None, ...]
            if self._p is None:
                self._p = cos[rows]

        def keep(self, rows):
            if len(rows) == len(self._c):
                return
            # The storage filtered in place of itself: a batch, not a first use.
            self._c = [self._c[i] for i in rows]
            self._v = self._v[torch.tensor(rows)]
    """
    assert codes(code) == [(15, "IM005"), (22, "IM005")]
    # A write in another method reaches the gathered tensor, not ``cos``.
    written = code + "\n        def clear(self, k):\n            self._c[k].zero_()\n"
    assert codes(written)[0] == (15, "IM001")


def test_a_call_kept_beside_an_allocation_is_a_site_too():
    """A tuple that keeps a helper's tensors beside tensors made here keeps all of
    them (``(cos, window)``); a call a torch allocation is only made from
    (``helper(n).new_zeros(n)``) is not kept."""
    code = """
    import torch

    def window(t):
        idx = torch.arange(t)
        return idx, idx + 1

    class Rope:
        def __init__(self):
            self._c = {}
            self._z = None

        def by_t(self, t):
            if t in self._c:
                return self._c[t]
            w, cu = window(t)
            lens = torch.arange(4)
            self._c[t] = (w, cu, lens)
            return self._c[t]

        def zeros(self, n):
            if self._z is None:
                self._z = window(n)[0].new_zeros(n)

        def packed(self, n):
            if self._z is None:
                q = torch.zeros(n)
                q[0:2] = window(2)[1].to(torch.int32)  # copied into ``q``, not kept
                self._z = q
    """
    assert codes(code) == [(16, "IM005"), (17, "IM005"), (23, "IM005"), (27, "IM005")]


def test_sorted_values_of_a_tensor_are_new_storage():
    """``values, _ = t.sort()`` makes new tensors (a list's ``sort()`` returns None):
    arithmetic on them is a site."""
    code = """
    import torch

    def midpoints(layer, centroids):
        if not hasattr(layer, "_mid"):
            c, _ = centroids.sort()
            layer._mid = (c[:-1] + c[1:]) / 2
    """
    assert codes(code) == [(7, "IM005")]


def test_a_cached_empty_sentinel_is_kept_for_good():
    """A cached function's ``torch.empty(0)`` is shared by every caller for good (a
    "not present" slot handed to kernels): not a placeholder that later code replaces.
    With no elements, nothing is left to fill: read-only."""
    code = """
    import functools
    import torch

    @functools.lru_cache(maxsize=None)
    def empty_sentinel(device, dtype):
        return torch.empty(0, dtype=dtype, device=device)

    class M:
        def __init__(self):
            self.buf = None

        def get(self):
            if self.buf is None:
                self.buf = torch.empty(0)
            return self.buf
    """
    assert codes(code) == [(7, "IM005")]


def test_a_rebound_fresh_object_stays_this_calls():
    code = """
    import torch
    from pkg import Inputs, add_indices

    def make(n, ssm):
        inputs = Inputs(n)
        inputs = add_indices(inputs, n)
        if ssm:
            inputs.offsets = torch.arange(n)
        return inputs
    """
    assert codes(code) == []


def test_a_method_reached_only_from_constructors_is_construction():
    code = """
    import torch

    class Layer:
        def __init__(self, n):
            self._init_tables(n)

        def _init_tables(self, n):
            if self._table is None:
                self._table = torch.zeros(n)
            self._table.add_(1)

    class Lazy:
        def forward(self, n):
            self._init(n)

        def _init(self, n):
            if self._table is None:
                self._table = torch.zeros(n)
            self._table.add_(1)
    """
    assert codes(code) == [(19, "IM001")]


def test_memos_on_objects_made_per_call_are_not_persistent():
    code = """
    import torch

    class Batch:
        def __init__(self, ids):
            self.ids = ids
            self.positions = None

        def get_positions(self):
            if self.positions is None:
                self.positions = torch.arange(len(self.ids))
            self.positions.add_(1)
            return self.positions

    class Runner:
        def step(self, ids):
            batch = Batch(ids)
            return batch.get_positions()

    class Server:
        def __init__(self):
            self.runner = Runner()

        def loop(self, requests):
            for ids in requests:
                self.runner.step(ids)
    """
    assert codes(code) == []
    # Kept on the runner: the same memo lives as long as the runner.
    kept = code.replace("batch = Batch(ids)", "batch = self.batch = Batch(ids)")
    assert codes(kept) == [(11, "IM001")]


def test_foreach_in_place_ops_write_every_tensor_of_their_list():
    assert codes(LAZY.format(use="torch._foreach_zero_((x, buf))")) == [(8, "IM001")]
    assert codes(LAZY.format(use="torch._foreach_copy_([buf], [x])")) == [(8, "IM001")]
    # the out-of-place form returns new tensors: the buffer is only read
    zeroed = LAZY.replace("torch.empty(n)", "torch.zeros(n)")
    assert codes(zeroed.format(use="y = torch._foreach_add((buf,), 1)")) == [(8, "IM005")]


def test_callers_write_what_a_nested_getter_returns():
    code = """
    import torch
    import my_ext

    def build(x, workspace):
        def buffer(name, shape):
            value = workspace.get(name)
            if value is None or value.shape != shape:
                value = torch.empty(shape)
                workspace[name] = value
            return value

        parents = buffer("parents", (4, 4))
        {use}
        return parents
    """
    assert codes(code.format(use="parents.fill_(-1)")) == [(9, "IM001")]
    assert codes(code.format(use="my_ext.run(x, parents)")) == [(9, "IM002")]
    assert codes(code.format(use="y = parents.sum()")) == [(9, "IM002")]  # blank: filled unseen


def test_a_method_writes_what_its_nested_getter_returns_through_an_out_tuple():
    """``_ensure`` is nested in a method: ``self._a`` it keeps is what the method's
    ``torch.max(..., out=(m, i))`` writes (the item of the returned tuple it unpacks)."""
    code = """
    import torch

    class W:
        def run(self, x, n):
            def _ensure(k):
                if self._a is None or self._a.shape[0] < k:
                    self._a = torch.empty((k,))
                    self._b = torch.empty((k,), dtype=torch.int64)
                return self._a[:k], self._b[:k]

            m, i = _ensure(n)
            {use}
            return i
    """
    assert codes(code.format(use="torch.max(x, dim=-1, out=(m, i))")) == [
        (8, "IM001"),
        (9, "IM001"),
    ]
    assert codes(code.format(use="torch.max(x, dim=-1, out=(x, i))")) == [
        (8, "IM002"),
        (9, "IM001"),
    ]


def test_what_a_splatted_literal_holds_is_handed_on():
    """``f(*args)``, ``f(**extra)``: the items of the literal a local is bound to may land
    on any parameter of the callee."""
    for use in (
        "args = [x, buf]\n    my_ext.run(*args)",
        "kw = {'out': buf}\n    my_ext.run(**kw)",
    ):
        assert codes(LAZY.format(use=use)) == [(8, "IM002")], use
    # a literal of other values hands nothing of the buffer on
    zeroed = LAZY.replace("torch.empty(n)", "torch.zeros(n)")
    assert codes(zeroed.format(use="args = [x]\n    my_ext.run(*args)")) == [(8, "IM005")]
    assert codes(zeroed.format(use="args = [x, buf]\n    my_ext.run(*args)")) == [(8, "IM002")]


def test_a_getters_result_kept_in_a_local_container_and_splatted_is_handed_on(tmp_path):
    getter = """
    import torch

    _buf = None


    def get_counter(n, device):
        global _buf
        if _buf is None or _buf.numel() < n:
            _buf = torch.zeros(n, device=device)
        return _buf
    """
    for body in (
        "extra = {}\n            extra['counter'] = get_counter(8, q.device)\n"
        "            return decode(q, **extra)",
        "args = [q, get_counter(8, q.device)]\n            return decode(*args)",
        "args = [q]\n            return decode(*args, get_counter(8, q.device))",
    ):
        user = f"""
    from ext import decode
    from pkg.bufs import get_counter


    class Impl:
        def forward(self, q):
            {body}
    """
        _tree(tmp_path, {"pkg/__init__.py": "", "pkg/bufs.py": getter, "pkg/impl.py": user})
        assert _check(tmp_path) == [("bufs.py", 10, "IM002", "warning")], body
    # kept in a local list that is never handed on: nothing writes it
    user = user.replace(
        "return decode(*args, get_counter(8, q.device))", "args.append(get_counter(8, q.device))"
    )
    _tree(tmp_path, {"pkg/impl.py": user})
    assert _check(tmp_path) == [("bufs.py", 10, "IM005", "warning")]


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _check(root: Path) -> list[tuple[str, int, str, str]]:
    r = run_imlint(
        "check",
        "pkg",
        "--no-cache",
        "--output-format",
        "json",
        "--extend-select",
        "IM005",
        cwd=root,
    )
    assert r.code in (0, 1), r.err
    return [(Path(d["path"]).name, d["line"], d["code"], d["severity"]) for d in json.loads(r.out)]


def test_project_functions_write_what_they_are_handed_across_files(tmp_path):
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ops.py": """
                import triton
                import triton.language as tl

                def clear(x):
                    x.zero_()

                def inspect(x):
                    return x.sum()

                def relay(x, y):
                    _store[(1,)](x, y)

                @triton.jit
                def _store(src_ptr, dst_ptr):
                    offs = tl.arange(0, 16)
                    ptrs = dst_ptr + offs
                    tl.store(ptrs, tl.load(src_ptr + offs))
                """,
            "pkg/use.py": """
                import torch
                from pkg.ops import clear, inspect, relay

                _A, _B, _C, _D = {}, {}, {}, {}

                def a(n):
                    if n not in _A:
                        _A[n] = torch.empty(n)
                    clear(_A[n])

                def b(n):
                    if n not in _B:
                        _B[n] = torch.arange(n)
                    inspect(_B[n])

                def c(n):
                    if n not in _C:
                        _C[n] = torch.arange(n)
                    if n not in _D:
                        _D[n] = torch.empty(n)
                    relay(_C[n], _D[n])
                """,
        },
    )
    assert _check(tmp_path) == [
        ("use.py", 9, "IM001", "error"),
        ("use.py", 14, "IM005", "warning"),
        ("use.py", 19, "IM005", "warning"),  # only read by the kernel
        ("use.py", 21, "IM002", "warning"),  # stored to through a local pointer
    ]


def test_an_objects_own_methods_write_its_tensors(tmp_path):
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/plan.py": """
                import torch

                class Plan:
                    def __init__(self, n):
                        self.seq_lens = torch.empty(n, dtype=torch.int32)

                    def plan(self, src, idx):
                        torch.index_select(src, 0, idx, out=self.seq_lens)
                """,
            "pkg/backend.py": """
                from pkg.plan import Plan

                class Backend:
                    def forward(self, n):
                        if self._plan is None:
                            self._plan = Plan(n)
                        return self._plan
                """,
        },
    )
    ((name, line, code, severity),) = _check(tmp_path)
    assert (name, line, code, severity) == ("backend.py", 7, "IM003", "error")


def test_an_object_handed_a_tensor_writes_it_with_its_methods(tmp_path):
    """A tensor handed to a constructor that keeps it on ``self`` (an ``__init__`` that
    stores its parameter, a dataclass field) is written as the object's methods write
    that attribute, through a helper too; a kept attribute no method writes stays
    read-only, and a parameter stored under another name is matched by that name."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/meta.py": """
                from dataclasses import dataclass, field
                from typing import ClassVar

                import torch

                def copy_to(dst, src):
                    part = dst[: src.shape[0]]
                    part.copy_(src)
                    return part

                @dataclass
                class FieldMeta:
                    limit: ClassVar[int] = 8
                    n: int
                    indices: torch.Tensor
                    lens: torch.Tensor
                    cache: dict = field(init=False, default_factory=dict)

                    def build(self, src):
                        return copy_to(self.indices, src)

                class InitMeta:
                    def __init__(self, n, table, lens):
                        self.n = n
                        self._rows = table
                        self.lens = lens

                    def build(self, src):
                        self._rows[: src.shape[0]].copy_(src)
                """,
            "pkg/builder.py": """
                import torch
                from pkg.meta import FieldMeta, InitMeta

                class Builder:
                    def __init__(self):
                        self.a = self.b = self.c = self.d = None

                    def build(self, n, src):
                        if self.a is None:
                            self.a = torch.empty(16, dtype=torch.int32)
                        if self.b is None:
                            self.b = torch.arange(16)
                        if self.c is None:
                            self.c = torch.empty(16, dtype=torch.int32)
                        if self.d is None:
                            self.d = torch.arange(16)
                        FieldMeta(n, indices=self.a, lens=self.b).build(src)
                        return InitMeta(n, self.c, self.d)
                """,
        },
    )
    assert sorted(_check(tmp_path)) == [
        ("builder.py", 11, "IM001", "error"),  # FieldMeta.build copies into it
        ("builder.py", 13, "IM005", "warning"),  # kept as a field nothing writes
        ("builder.py", 15, "IM001", "error"),  # kept as ``_rows``, copied into
        ("builder.py", 17, "IM005", "warning"),
    ]


def test_names_unpacked_from_views_of_a_getters_items_write_those_items(tmp_path):
    """``a, b = (buf[:n] for buf in self._get(dev))`` binds each name to a view of the
    item at its position, in the file and across files; a gather (``buf[idx]``) is a
    copy, not a view, and writing it leaves the item unwritten."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/bufs.py": """
                import torch

                class Bufs:
                    def __init__(self):
                        self._bufs = None

                    def get(self, device):
                        if self._bufs is None:
                            self._bufs = (
                                torch.zeros((8,), device=device),
                                torch.zeros((8,), device=device),
                            )
                        return self._bufs

                    def run(self, x, n):
                        c, d = (buf[:n].view(-1) for buf in self.get(x.device))
                        d.copy_(x)
                        return c

                _TABLES = {}

                def tables(n):
                    if n not in _TABLES:
                        _TABLES[n] = (torch.zeros(n), torch.zeros(n), torch.zeros(n))
                    return _TABLES[n]
                """,
            "pkg/use.py": """
                from pkg.bufs import tables

                def fill(x, n, idx):
                    a, b, c = [t[idx] for t in tables(n)]
                    a.copy_(x)
                    e, f, g = [t[:n] for t in tables(n)]
                    g.zero_()
                """,
        },
    )
    assert sorted(_check(tmp_path)) == [
        ("bufs.py", 11, "IM005", "warning"),  # item 0: only read
        ("bufs.py", 12, "IM001", "error"),  # item 1: d.copy_()
        ("bufs.py", 25, "IM001", "error"),  # g.zero_() on a slice of the third table
        ("bufs.py", 25, "IM005", "warning"),  # the first: only a gathered copy written
        ("bufs.py", 25, "IM005", "warning"),
    ]


def test_names_unpacked_from_views_of_kept_items_write_those_items():
    """``a, b = (t[:n] for t in self._pair)`` iterates kept storage, not a call: each
    name is a view of the item at its position."""
    code = textwrap.dedent(
        """
        import torch

        class P:
            def __init__(self):
                self._pair = None

            def ensure(self, n):
                if self._pair is None:
                    self._pair = (torch.arange(n), torch.arange(n))

            def run(self, x, n):
                a, b = (t[:n] for t in self._pair)
                b.copy_(x)
                return a
        """
    )
    found = Linter(Settings(extend_select=("IM005",))).check_text("t.py", code)
    # item 0 only read, item 1 copied into: both on the line that builds the pair
    assert [(f.line, f.code) for f in sorted(found, key=lambda f: f.col)] == [
        (10, "IM005"),
        (10, "IM001"),
    ]


def test_other_methods_write_entries_under_any_key():
    """An entry stored under a key computed at run time is written by another method
    that writes an entry of the same container under any key, directly or through
    ``.get(k)``; a container nothing writes that way stays read-only. A loop over
    ``.values()`` or ``.items()`` is not followed: its items are not taken for kept
    storage (a test on them would read as a cache test)."""
    code = textwrap.dedent(
        """
        import torch

        class B:
            def __init__(self):
                self._a, self._b, self._c, self._d, self._e = {}, {}, {}, {}, {}

            def prepare(self, n):
                if n not in self._a:
                    self._a[n] = torch.arange(n)
                if n not in self._b:
                    self._b[n] = torch.arange(n)
                if n not in self._c:
                    self._c[n] = torch.arange(n)
                if n not in self._d:
                    self._d[n] = torch.arange(n)
                if n not in self._e:
                    self._e[n] = torch.arange(n)

            def run(self, q, k):
                self._a[k].copy_(q)
                buf = self._b.get(k)
                buf.add_(q)
                for c in self._c.values():
                    c.zero_()
                for key, d in self._d.items():
                    d.fill_(key)
                return self._e[k] + q
        """
    )
    found = Linter(Settings(extend_select=("IM005",))).check_text("t.py", code)
    assert sorted((f.line, f.code) for f in found) == [
        (10, "IM001"),
        (12, "IM001"),
        (14, "IM005"),
        (16, "IM005"),
        (18, "IM005"),
    ]


def test_a_tensor_handed_in_a_branch_of_a_conditional_is_handed(tmp_path):
    """``decode(q, out=buf if want else None)`` hands ``buf`` to what writes ``out``,
    in the file and through a parameter handed on from another file."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ops.py": """
                def decode(q, topk_out=None):
                    if topk_out is not None:
                        topk_out.copy_(q)
                    return q

                def relay(q, out, want):
                    return decode(q, topk_out=out if want else None)
                """,
            "pkg/use.py": """
                import torch
                from pkg.ops import decode, relay

                class B:
                    def __init__(self):
                        self._a = None
                        self._b = None

                    def run(self, q, want):
                        if self._a is None:
                            self._a = torch.arange(8)
                        if self._b is None:
                            self._b = torch.arange(8)
                        decode(q, topk_out=self._a if want else None)
                        return relay(q, self._b, want)
                """,
        },
    )
    assert sorted(_check(tmp_path)) == [
        ("use.py", 12, "IM001", "error"),
        ("use.py", 14, "IM001", "error"),
    ]


def test_filling_an_entry_that_holds_a_dict_writes_no_tensor():
    """``self.recv[name][i] = t`` where ``self.recv[name]`` was stored a dict display
    fills that dict: the tensor the display holds is not written (only read here)."""
    code = textwrap.dedent(
        """
        import torch

        class P:
            def __init__(self):
                self.recv = {}

            def check(self, name, i, shape):
                if self.recv.get(name, None) is None:
                    self.recv[name] = {i: torch.zeros(shape)}
                else:
                    self.recv[name][i] = torch.zeros(shape)
        """
    )
    found = Linter(Settings(extend_select=("IM005",))).check_text("t.py", code)
    assert sorted((f.line, f.code) for f in found) == [(10, "IM005"), (12, "IM005")]


def test_collectives_write_their_outputs_from_a_kernel():
    """``dist.irecv(buf)``, ``dist.all_gather_into_tensor(out, x)`` and
    ``dist.all_gather(parts, x)`` write their output from the backend's kernels (a
    latent write, IM002); the input they read stays read."""
    code = textwrap.dedent(
        """
        import torch
        import torch.distributed as dist

        class P:
            def __init__(self):
                self.recv, self.out, self.parts, self.src = {}, None, None, None

            def get(self, name, shape, src):
                if self.recv.get(name) is None:
                    self.recv[name] = torch.zeros(shape)
                dist.irecv(self.recv[name], src)
                return self.recv[name]

            def gather(self, x, world):
                if self.out is None:
                    self.out = torch.zeros(world * x.numel())
                if self.parts is None:
                    self.parts = [torch.zeros_like(x) for _ in range(world)]
                if self.src is None:
                    self.src = torch.zeros_like(x)
                dist.all_gather_into_tensor(self.out, self.src)
                dist.all_gather(tensor_list=self.parts, tensor=self.src)
                return self.out
        """
    )
    found = Linter(Settings(extend_select=("IM005",))).check_text("t.py", code)
    assert sorted((f.line, f.code) for f in found) == [
        (11, "IM002"),
        (17, "IM002"),
        (19, "IM002"),
        (21, "IM005"),
    ]


def test_a_helper_that_receives_into_its_parameter_writes_it_from_a_kernel(tmp_path):
    """``def _irecv(self, t): return torch.distributed.irecv(t, src=...)``: a tensor
    handed to the helper (across files too) is written from a kernel."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/comm.py": """
                import torch

                def irecv_into(t, src):
                    return torch.distributed.irecv(t, src=src)
                """,
            "pkg/pipe.py": """
                import torch
                from pkg.comm import irecv_into

                class Pipe:
                    def __init__(self):
                        self.recv = {}

                    def _irecv(self, t):
                        return torch.distributed.irecv(t, src=0)

                    def get(self, name, shape):
                        if name not in self.recv:
                            self.recv[name] = {0: torch.zeros(shape), 1: torch.zeros(shape)}
                        self._irecv(self.recv[name][0]).wait()
                        irecv_into(self.recv[name][1], 0).wait()
                        return self.recv[name]
                """,
        },
    )
    assert sorted(_check(tmp_path)) == [
        ("pipe.py", 14, "IM002", "warning"),
        ("pipe.py", 14, "IM002", "warning"),
    ]


def test_a_parameters_name_in_another_function_is_another_object():
    """The entries of a container handed in as a parameter are not reached by another
    function's entries of its own variable of the same name: ``state[name] = t`` in the
    getter is not written by ``_get(state["pools"], ...)`` in its caller."""
    code = textwrap.dedent(
        """
        import torch

        def _get(state, name, n):
            t = state.get(name)
            if t is None:
                t = torch.empty(n)
                state[name] = t
            return t

        def run(state, n):
            pools = state["pools"]
            return _get(pools, "a", n)
        """
    )
    found = Linter(Settings(extend_select=("IM005",))).check_text("t.py", code)
    assert [(f.line, f.code) for f in found] == [(7, "IM002")]


def test_summaries_round_trip_every_field():
    """``DefSummary.to_data`` and ``from_data`` agree on every field and its order (a
    field added out of order would shift the rest when the cache reads it back)."""
    import dataclasses

    from imlint.project import DefSummary

    values: dict[str, object] = {}
    for i, f in enumerate(dataclasses.fields(DefSummary)):
        values[f.name] = {
            "str": f"v{i}",
            "bool": True,
            "int": i + 7,
        }.get(str(f.type), [f"v{i}"])
    d = DefSummary(**values)  # type: ignore[arg-type]
    assert DefSummary.from_data(d.to_data()) == d


def test_callers_write_what_a_getter_returns_across_files(tmp_path):
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/bufs.py": """
                import torch

                _BUFS = {}
                _PAD = {}

                def get_buffers(n):
                    if n not in _BUFS:
                        _BUFS[n] = (torch.empty(n), torch.empty(n))
                    return _BUFS[n]

                def get_pad(n):
                    if n not in _PAD:
                        _PAD[n] = torch.zeros(n)
                    return _PAD[n]
                """,
            "pkg/use.py": """
                import torch
                from pkg.bufs import get_buffers, get_pad

                def run(x, n):
                    a, b = get_buffers(n)
                    _kernel[(n,)](x, a, b)
                    pad = get_pad(n)
                    torch.narrow(pad, 0, 0, n).copy_(x)
                """,
        },
    )
    # Both tensors of the tuple are handed to the kernel; the pad is copied into
    # (through a view made by the function form of ``narrow``).
    assert sorted(_check(tmp_path)) == [
        ("bufs.py", 9, "IM002", "warning"),
        ("bufs.py", 9, "IM002", "warning"),
        ("bufs.py", 14, "IM001", "error"),
    ]


def test_an_override_called_through_self_from_a_constructor_is_construction():
    code = """
    import torch

    _ROPES = {}

    def get_rope(n):
        if n not in _ROPES:
            _ROPES[n] = torch.arange(n)
        _ROPES[n].add_(1)
        return _ROPES[n]

    class Attention:
        def __init__(self, n):
            self._init_rope(n)

        def _init_rope(self, n):
            self.rope = get_rope(n)

    class Variant(Attention):
        def _init_rope(self, n):
            self.rope = get_rope(2 * n)
    """
    assert codes(code) == []
    # Called from a forward pass too: first use, not construction.
    called = code + "\n    def forward(n):\n        return get_rope(n)\n"
    assert codes(called) == [(8, "IM001")]


def test_appending_to_a_kept_list_is_a_store():
    code = """
    import torch

    class Meta:
        def scales(self, values, device):
            if not self.k_scales:
                for v in values:
                    self.k_scales.append(torch.tensor([v], device=device))
            return self.k_scales

    def local(n):
        out = []
        if n:
            out.append(torch.empty(n))
        return out
    """
    assert codes(code) == [(8, "IM005")]


GETTERS = """
import torch
from my_ext import run_ext

_CNT = {}
_WS = {}
_BUFS = {}


def get_counters(device):
    buf = _CNT.get(device)
    if buf is None:
        buf = torch.zeros(3, device=device)
        _CNT[device] = buf
    return buf


def get_ws(device):
    ws = _WS.get(device)
    if ws is None:
        ws = torch.zeros(1024, device=device)
        _WS[device] = ws
    return ws


def get_bufs(n, device):
    bufs = _BUFS.get(device)
    if bufs is None:
        bufs = {
            "staged": torch.empty(n, device=device),
            "partial": torch.empty(n, device=device),
            "table": torch.arange(n, device=device),
        }
        _BUFS[device] = bufs
    return bufs
"""

GETTER_USES = """
def launch(x):
    run_ext(x, get_counters(x.device))


def attn(q):
    workspace = get_ws(q.device)

    def run(rows):
        run_ext(q[rows], workspace_buffer=workspace)

    run(slice(None))


def step(n, x):
    bufs = get_bufs(n, x.device)
    staged = bufs["staged"]
    staged[:n].copy_(x)
    run_ext(x, bufs["partial"])
    return bufs["table"].sum()
"""

#: (line, code) of the getters' sites: counters and workspace are handed to outside
#: code (a kernel write); of the three entries of one dict, one is copied into, one is
#: handed to outside code and one is only read.
GETTER_EXPECTED = [(13, "IM002"), (21, "IM002"), (30, "IM001"), (31, "IM002"), (32, "IM005")]


def test_what_callers_do_with_a_getters_result_in_the_same_module():
    assert sorted(codes(GETTERS + GETTER_USES)) == GETTER_EXPECTED


def test_what_callers_do_with_a_getters_result_across_files(tmp_path):
    uses = "from pkg.bufs import get_bufs, get_counters, get_ws\nfrom my_ext import run_ext\n"
    _tree(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/bufs.py": GETTERS, "pkg/use.py": uses + GETTER_USES},
    )
    found = sorted((line, code) for name, line, code, _ in _check(tmp_path) if name == "bufs.py")
    assert found == GETTER_EXPECTED


def test_methods_of_a_module_level_instance_and_of_a_class_are_resolved():
    code = """
    import torch
    from my_ext import run_ext

    class Pool:
        def __init__(self):
            self._bufs = {}

        def get(self, n):
            if n not in self._bufs:
                self._bufs[n] = {"out": torch.empty(n), "lse": torch.ones(n)}
            return self._bufs[n]

    class Split:
        _cache = {}

        @classmethod
        def buffers(cls, n):
            if n not in cls._cache:
                cls._cache[n] = torch.empty(n)
            return cls._cache[n]

    _POOL = Pool()

    def run(x, n):
        bufs = _POOL.get(n)
        out = bufs["out"]
        out.zero_()
        run_ext(x, Split.buffers(n))
    """
    assert sorted(codes(code)) == [(11, "IM001"), (11, "IM005"), (20, "IM002")]


def test_callables_made_at_run_time_may_write_what_they_are_handed(tmp_path):
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/lazy.py": """
                import importlib

                def lazy_op(module, name):
                    return lambda *a, **k: getattr(importlib.import_module(module), name)(*a, **k)

                decode_op = lazy_op("fastlib.decode", "run")
                """,
            "pkg/use.py": """
                import torch
                from pkg.lazy import decode_op

                _W, _P, _T, _R = {}, {}, {}, {}

                def compile_kernel(n):
                    return object()

                def attend(q, n):
                    if n not in _W:
                        _W[n] = torch.zeros(n)
                    decode_op(q, workspace=_W[n])

                def combine(x, n):
                    if n not in _P:
                        _P[n] = torch.empty(n)
                    launch = compile_kernel(n)
                    launch(x, _P[n])

                def method_of_compiled(x, n):
                    if n not in _T:
                        _T[n] = torch.empty(n)
                    mod = compile_kernel(n)
                    mod.run(x, _T[n])

                def method_of_a_tensor(x, n):
                    if n not in _R:
                        _R[n] = torch.arange(n)
                    y = torch.ones(n)
                    return y.mul(_R[n])
                """,
        },
    )
    found = [(line, code) for name, line, code, _ in _check(tmp_path) if name == "use.py"]
    assert found == [(12, "IM002"), (17, "IM002"), (23, "IM002"), (29, "IM005")]


def test_methods_of_what_a_loader_returns_may_write_what_they_are_handed(tmp_path):
    """``jit_module(n).run(x, ws)``: a method of what a module-level callable returns (a
    loader of compiled code, from the project or imported from outside) may write the
    tensors handed to it; a method of a tensor a local makes (``x.float().mul(w)``) reads."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/jit.py": """
                import functools
                from tvm_ffi import load_module

                @functools.cache
                def jit_module(n):
                    return load_module(f"k{n}.so")
                """,
            "pkg/use.py": """
                import torch
                from pkg.jit import jit_module
                from extlib import compile_op

                _W, _V, _X = {}, {}, {}

                def _workspace(n, device):
                    ws = _W.get(n)
                    if ws is None:
                        ws = torch.zeros(n, device=device)
                        _W[n] = ws
                    return ws

                def gemm(x, n):
                    jit_module(n).run(x, _workspace(n, x.device))

                def gemm2(x, n):
                    if n not in _V:
                        _V[n] = torch.zeros(n)
                    compile_op(n).launch(x, _V[n])

                def scale(x, n):
                    if n not in _X:
                        _X[n] = torch.zeros(n)
                    return x.float().mul(_X[n])
                """,
        },
    )
    found = [(line, code) for name, line, code, _ in _check(tmp_path) if name == "use.py"]
    assert found == [(11, "IM002"), (20, "IM002"), (25, "IM005")]


def test_a_re_exported_triton_is_triton(tmp_path):
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/triton_utils.py": "import triton\nimport triton.language as tl\n",
            "pkg/use.py": """
                import torch
                from pkg.triton_utils import tl, triton

                _A, _B = {}, {}

                @triton.jit
                def _copy(src_ptr, dst_ptr):
                    offs = tl.arange(0, 16)
                    tl.store(dst_ptr + offs, tl.load(src_ptr + offs))

                def run(n):
                    if n not in _A:
                        _A[n] = torch.arange(n)
                    if n not in _B:
                        _B[n] = torch.empty(n)
                    _copy[(1,)](_A[n], _B[n])
                """,
        },
    )
    found = [(line, code) for name, line, code, _ in _check(tmp_path) if name == "use.py"]
    assert found == [(14, "IM005"), (16, "IM002")]  # only the destination is stored to


def test_items_of_a_returned_tuple_are_separate_buffers(tmp_path):
    """``a, b = get(n)`` then ``a.zero_()`` writes the first item only (as dict entries
    with constant keys are separate buffers)."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/bufs.py": """
                import torch

                _CACHE = {}

                def get(n):
                    if n not in _CACHE:
                        a = torch.empty(n)
                        b = torch.empty(n)
                        c = torch.empty(n)
                        _CACHE[n] = (a, b, c)
                    return _CACHE[n]
                """,
            "pkg/use.py": """
                import my_ext
                from pkg.bufs import get

                def run(x, n):
                    a, b, c = get(n)
                    a.zero_()
                    my_ext.run(x, b)
                    get(n)[2].copy_(x)
                """,
        },
    )
    found = sorted((line, code) for name, line, code, _ in _check(tmp_path) if name == "bufs.py")
    assert found == [(8, "IM001"), (9, "IM002"), (10, "IM001")]


def test_a_getter_handed_on_as_a_bound_method_is_written_by_its_callee(tmp_path):
    """``merge(out, self._bufs)``: the callee calls its parameter and writes the first
    item of what it returns; the second item is not written."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/merge.py": """
                def merge(out, get_bufs):
                    send, recv = get_bufs(out, 4)
                    send.copy_(out)
                    return recv
                """,
            "pkg/backend.py": """
                import torch
                from pkg.merge import merge

                class Backend:
                    def _bufs(self, out, n):
                        if getattr(self, "_key", None) != n:
                            self._send = out.new_zeros((n, 8))
                            self._recv = torch.zeros_like(self._send)
                            self._key = n
                        return self._send, self._recv

                    def forward(self, out):
                        return merge(out, self._bufs)
                """,
        },
    )
    found = sorted((line, code) for name, line, code, _ in _check(tmp_path) if name == "backend.py")
    assert found == [(8, "IM001"), (9, "IM005")]


def test_a_loop_variable_writes_the_items_it_iterates():
    code = """
    import torch
    import my_ext

    class Replay:
        def run(self, outs):
            if self._outs is None:
                self._outs = [torch.empty_like(o) for o in outs]
            for buf, out in zip(self._outs, outs):
                buf[: out.shape[0]].copy_(out)

        def clear(self, n):
            if self._bufs is None:
                self._bufs = [torch.empty(n) for _ in range(4)]
            for i, buf in enumerate(self._bufs):
                my_ext.fill(buf, i)

        def replay(self, outs):
            if self._last is None:
                self._last = [torch.empty_like(o) for o in outs]
            return [b[: o.shape[0]].copy_(o) for b, o in zip(self._last, outs)]
    """
    assert codes(code) == [(8, "IM001"), (14, "IM002"), (20, "IM001")]


def test_a_kernel_writes_only_the_pointer_it_stores_through(tmp_path):
    """Offsets computed from other parameters (a loaded start table, a stride, a block
    pointer's shape) do not make those parameters written."""
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/use.py": """
                import torch
                import triton
                import triton.language as tl

                _S, _O, _B = {}, {}, {}

                @triton.jit
                def _gather(starts_ptr, out_ptr, blk_ptr, stride, n):
                    i = tl.program_id(0)
                    start = tl.load(starts_ptr + i)
                    ptrs = out_ptr + (start + tl.arange(0, 16)) * stride
                    tl.store(ptrs.to(tl.pointer_type(tl.float32)), tl.zeros([16], tl.float32))
                    b = tl.make_block_ptr(base=blk_ptr, shape=(n,), strides=(stride,),
                                          offsets=(start,), block_shape=(16,), order=(0,))
                    tl.store(tl.advance(b, (16,)), tl.zeros([16], tl.float32))

                def run(n):
                    if n not in _S:
                        _S[n] = torch.arange(n)
                    if n not in _O:
                        _O[n] = torch.arange(n)
                    if n not in _B:
                        _B[n] = torch.arange(n)
                    _gather[(n,)](_S[n], _O[n], _B[n], 1, n)
                """,
        },
    )
    found = [(line, code) for name, line, code, _ in _check(tmp_path) if name == "use.py"]
    assert found == [(20, "IM005"), (22, "IM002"), (24, "IM002")]


def test_a_helper_that_writes_a_view_of_its_parameter_writes_the_parameter():
    code = """
    import torch

    def copy_into(dst, src):
        sliced = dst[: src.shape[0]]
        sliced.copy_(src)
        return sliced

    class Builder:
        def build(self, x):
            if self._buf is None:
                self._buf = torch.empty(64)
            copy_into(self._buf, x)
    """
    assert codes(code) == [(12, "IM001")]


def test_read_only_lazy_tensors_are_opt_in():
    read_only = READ.format(use="y = buf.sum()")
    assert [f.code for f in Linter(Settings()).check_text("t.py", textwrap.dedent(read_only))] == []
    assert codes(read_only) == [(8, "IM005")]
    written = LAZY.format(use="buf.zero_()")
    assert [f.code for f in Linter(Settings()).check_text("t.py", textwrap.dedent(written))] == [
        "IM001"
    ]


PER_CALL_PARAMS = """
import torch


class Batch:
    def __init__(self, n):
        self.n = n


class Runner:
    def __init__(self):
        self.batch = Batch(4)

    def step(self, n):
        batch = Batch(n)
        self.prepare(batch)
        self.prepare_kept(self.batch)

    def prepare(self, batch):
        fill(batch)

    def prepare_kept(self, b):
        if b.buf is None:
            b.buf = torch.empty(4)
        b.buf.zero_()


def fill(batch):
    if batch.buf is None:
        batch.buf = torch.empty(4)
    batch.buf.zero_()


def serve(runner):
    runner.step(4)
"""


def test_a_memo_on_a_parameter_every_caller_hands_a_per_call_object_is_not_persistent(tmp_path):
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": PER_CALL_PARAMS})
    # fill's batch is always the Batch made for one step (through prepare); prepare_kept
    # is handed self.batch, which the runner's construction made and keeps.
    assert _check(tmp_path) == [("a.py", 24, "IM001", "error")]
    # One caller that hands a long-lived object (a module-level one) is enough.
    extra = PER_CALL_PARAMS + "\n\ndef other():\n    fill(_KEPT)\n\n\n_KEPT = Batch(4)\n"
    _tree(tmp_path, {"pkg/a.py": extra})
    assert _check(tmp_path) == [("a.py", 24, "IM001", "error"), ("a.py", 30, "IM001", "error")]


def test_a_library_named_like_a_project_module_is_outside_code(tmp_path):
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/backends/__init__.py": "",
            "pkg/backends/flashinfer.py": "def plan(x):\n    return x\n",
            "pkg/use.py": """
                import torch
                from flashinfer.decode import run_decode

                _WS = {}

                def decode(q, n):
                    if n not in _WS:
                        _WS[n] = torch.empty(n)
                    run_decode(q, workspace=_WS[n])
                """,
        },
    )
    assert _check(tmp_path) == [("use.py", 9, "IM002", "warning")]


def test_a_nonlocal_is_kept_only_when_the_nested_function_escapes():
    """``nonlocal dec`` names a local of the enclosing call: a helper only called there
    fills that call's output; a closure that is returned keeps it across calls."""
    code = """
    import torch

    def decode(parts):
        dec = None
        def write_part(x):
            nonlocal dec
            if dec is None:
                dec = torch.empty(10)
            dec.copy_(x)
        for p in parts:
            write_part(p)
        return dec

    def make():
        buf = None
        def get(n):
            nonlocal buf
            if buf is None:
                buf = torch.empty(n)
            buf.zero_()
            return buf
        return get
    """
    assert codes(code) == [(20, "IM001")]


def test_a_torch_write_inside_inference_mode_cannot_raise():
    # Allowed on an inference tensor: the hazard stays latent (IM002), however the write
    # is reached: a ``with`` block, a decorated method, a decorated helper it is handed to.
    code = """
    import torch

    class Commit:
        def hook(self, kv):
            if self.kvs is None:
                self.kvs = torch.empty_like(kv)
            with torch.inference_mode():
                self.kvs.copy_(kv)

        @torch.inference_mode()
        def grow(self, n):
            if self.ws is None:
                self.ws = torch.empty(n)
            self.ws.zero_()

        def other(self, n):
            if self.out is None:
                self.out = torch.empty(n)
            _fill(self.out)

    @torch.inference_mode()
    def _fill(b):
        b.add_(1)
    """
    assert codes(code) == [(7, "IM002"), (14, "IM002"), (19, "IM002")]
    # The same writes under ``inference_mode(False)`` raise (``grow`` is guarded now).
    off = code.replace("torch.inference_mode()", "torch.inference_mode(False)")
    assert codes(off) == [(7, "IM001"), (19, "IM001")]
    (finding,) = LINTER.check_text("t.py", textwrap.dedent(code).split("@torch")[0])
    assert "only inside `inference_mode()`" in finding.message


def test_a_callable_handed_in_may_write_what_it_is_handed():
    # ``decode`` is whatever the caller passes (a kernel looked up elsewhere): zeroed
    # storage handed to it is its workspace (IM002), a tensor with content its input.
    code = """
    import torch

    class Backend:
        def run(self, q, decode):
            if self.ws is None:
                self.ws = torch.zeros(1024, dtype=torch.uint8)
            if self.scale is None:
                self.scale = torch.arange(8)
            return decode(q, workspace=self.ws, scale=self.scale)
    """
    assert codes(code) == [(7, "IM002"), (9, "IM005")]


def test_names_unpacked_from_a_call_hold_what_it_returns():
    # ``cos, sin = self.build(pos)``: a kept name flows back to the allocating call
    code = """
    import functools
    import torch

    class Rope:
        def build(self, pos):
            freqs = torch.outer(pos, pos)
            return freqs.cos().float(), freqs.sin().float()

        @functools.lru_cache(maxsize=16)
        def from_grid(self, n, device):
            pos = torch.arange(n, device=device)
            cos, sin = self.build(pos)
            return cos, sin

    _C = {}

    def solve(d):
        return torch.linspace(0, 1, d), 3

    def centroids(d):
        if d not in _C:
            c, _ = solve(d)
            _C[d] = c
        return _C[d]

    def per_call(d):
        c, _ = solve(d)
        return c.sum()
    """
    assert codes(code) == [(13, "IM005"), (23, "IM005")]


def test_a_local_container_the_function_fills_and_keeps_keeps_its_items():
    # ``ws = []; ws.append(t)`` then ``self._ws = tuple(ws)``: the list's items are kept
    code = """
    import torch

    class Copier:
        def copy(self, src):
            if self._ws is None:
                ws = []
                for p in self.pools:
                    ws.append(p.new_empty(p.shape))
                self._ws = tuple(ws)
            if self._named is None:
                named = {}
                named["k"] = torch.empty(8)
                self._named = named
            for w in self._ws:
                torch.index_select(src, 0, src, out=w)
            tmp = []
            tmp.append(torch.empty(4))
            return sum(t.sum() for t in tmp)
    """
    assert codes(code) == [(9, "IM001"), (13, "IM002")]


def test_a_name_unpacked_from_a_getter_writes_only_its_own_item():
    # ``a, s_out, idx = _get_buffers(dev, n); s_out.copy_(init)``: item 1 only
    code = """
    import torch

    _buf_cache = {}

    def _get_buffers(dev, n):
        key = (dev, n)
        if key not in _buf_cache:
            a = torch.zeros(n, device=dev)
            s_out = torch.empty(n, device=dev)
            idx = torch.arange(n, device=dev)
            _buf_cache[key] = (a, s_out, idx)
        return _buf_cache[key]

    def run(x, dev, n, init):
        a, s_out, idx = _get_buffers(dev, n)
        s_out.copy_(init)
        return s_out
    """
    assert codes(code) == [(9, "IM005"), (10, "IM001"), (11, "IM005")]


def test_conditions_follow_definitions_once_per_name(monkeypatch):
    # ``a, b = step(a, b)`` forty times: every name's definitions name two others, so
    # following each path on its own is exponential; each local is read once
    from imlint.values import FunctionAnalysis

    calls = []
    here = FunctionAnalysis._mentions_here

    def counted(self, expr):
        calls.append(expr)
        return here(self, expr)

    monkeypatch.setattr(FunctionAnalysis, "_mentions_here", counted)
    body = "".join("    a, b = step(a, b)\n" for _ in range(40))
    code = (
        "import torch\n_C = {}\n\ndef f(a, b, n):\n"
        + body
        + "    if a is None and n not in _C:\n        _C[n] = torch.empty(n)\n    return _C[n]\n"
    )
    assert [(f.line, f.code) for f in LINTER.check_text("t.py", code)] == [(46, "IM002")]
    assert len(calls) < 400


FILL_AFTER = """
import torch

class Bias:
    def __init__(self, ids):
        self.ids = ids
        self.bias = None

    def __call__(self, logits):
        if self.bias is None:
            self._init(logits)
        return logits + self.bias

    def _init(self, logits):
        self.bias = torch.zeros(logits.shape[-1], device=logits.device)
        for i in self.ids:
            {fill}
"""


def test_a_fill_that_follows_the_allocation_in_the_same_call_is_not_a_later_write():
    # The fill runs right after the allocation, every time and in the same mode: the
    # tensor is only read afterwards.
    assert codes(FILL_AFTER.format(fill="self.bias[i] = -1.0")) == [(15, "IM005")]
    # A ``with`` between them that leaves inference mode writes outside it.
    left = "with torch.inference_mode(False):\n                self.bias[i] = -1.0"
    assert codes(FILL_AFTER.format(fill=left)) == [(15, "IM001")]


CONFINED = """
import torch

class Runner:
    def __init__(self):
        self.buf = None

    def _ensure(self, n):
        if self.buf is None or self.buf.numel() < n:
            self.buf = torch.empty(n)

    def _step(self, x):
        self._ensure(x.numel())
        self.buf[: x.numel()].copy_(x)

    {caller}
"""


def test_a_write_whose_every_call_path_runs_in_inference_mode_is_latent():
    decorated = "@torch.inference_mode()\n    def run(self, x):\n        self._step(x)"
    assert codes(CONFINED.format(caller=decorated)) == [(10, "IM002")]
    block = "def run(self, x):\n        with torch.inference_mode():\n            self._step(x)"
    assert codes(CONFINED.format(caller=block)) == [(10, "IM002")]
    # A caller outside inference mode opens the path: the write can raise.
    both = decorated + "\n\n    def warm(self, x):\n        self._step(x)"
    assert codes(CONFINED.format(caller=both)) == [(10, "IM001")]
    # Nothing in the project calls it: code outside may, in any mode.
    assert codes(CONFINED.format(caller="pass")) == [(10, "IM001")]
    # A helper the tensor is handed to writes it, only ever called from the same path.
    helper = CONFINED.replace("self.buf[: x.numel()].copy_(x)", "fill(self.buf, x)")
    helper += "\n\ndef fill(buf, x):\n    buf[: x.numel()].copy_(x)\n"
    assert codes(helper.format(caller=decorated)) == [(10, "IM002")]
    assert codes(helper.format(caller=both)) == [(10, "IM001")]
    # Turned off on the way (``inference_mode(False)`` inside the decorated caller): the
    # allocation is made outside inference mode on every path, so nothing is reported.
    off = (
        "@torch.inference_mode()\n    def run(self, x):\n"
        "        with torch.inference_mode(False):\n            self._step(x)"
    )
    assert codes(CONFINED.format(caller=off)) == []


OVERRIDE = """
import torch

_BUF = {}


def prepare(x):
    if "b" not in _BUF:
        _BUF["b"] = torch.empty(8)
    _BUF["b"][: x.numel()].copy_(x)


class Runner:
    def _forward(self, x):
        return x

    @torch.inference_mode()
    def run(self, x):
        return self._forward(x)


class FastRunner(Runner):
    def _forward(self, x):
        prepare(x)
        return x
"""


def test_an_override_runs_where_its_bases_method_is_called():
    # ``FastRunner._forward`` runs from the decorated ``run``: the write is latent.
    assert codes(OVERRIDE) == [(9, "IM002")]
    # A caller outside inference mode opens the path.
    warm = OVERRIDE + "\n    def warm(self, x):\n        return self._forward(x)\n"
    assert codes(warm) == [(9, "IM001")]


FRESH_RESULT = """
import torch


class Bagel:
    def prepare(self, n):
        {body}


class Pipeline:
    def __init__(self):
        self.bagel = Bagel()

    @torch.inference_mode()
    def run(self, n):
        lat = self.bagel.prepare(n)
        for k, v in lat.items():
            lat[k] = v.to("cuda")
        return lat
"""


def test_what_callers_store_in_a_container_each_call_builds_is_theirs():
    # ``prepare`` builds a new dict on every call and keeps it nowhere: the caller's
    # stores into it die with the caller's use of it.
    built = 'return {"noise": torch.cat([torch.randn(n), torch.randn(n)])}'
    assert all_codes(FRESH_RESULT.format(body=built)) == []
    local = 'out = {}\n        out["noise"] = torch.randn(n)\n        return out'
    assert all_codes(FRESH_RESULT.format(body=local)) == []
    # A dict the callee keeps (a cache) outlives the call: stores into it persist.
    memo = "import functools\n" + FRESH_RESULT.replace(
        "    def prepare", "    @functools.lru_cache\n    def prepare"
    )
    for code in (
        FRESH_RESULT.format(body="out = {}\n        self.last = out\n        return out"),
        FRESH_RESULT.format(body='return self.__dict__.setdefault("cache", {})'),
        # A memo keeps what it returns: the same dict comes back on the next call.
        memo.format(body=built),
    ):
        line = code.splitlines().index('            lat[k] = v.to("cuda")') + 1
        # made on every run, inside inference mode, never written: IM004's (opt-in)
        assert (line, "IM004") in all_codes(code)


EXTENDED = """
import torch


class Stream:
    def __init__(self):
        self.ids = None

    def begin(self, ids):
        self.ids = ids.clone()

    def feed(self, ids):
        if self.ids is None:
            self.begin(ids)
            return
        self.ids = torch.cat((self.ids, ids), dim=1)

    def accept(self, token):
        if self.ids.shape[0] > 1 and token.shape[0] == 1:
            self.ids = torch.cat([self.ids, token.repeat(self.ids.shape[0], 1)], dim=1)
        else:
            self.ids = torch.cat([self.ids, token], dim=1)
        self.ids[self.ids < 0] = 0
"""


def test_a_tensor_extended_on_every_call_is_not_filled_on_a_miss():
    found = codes(EXTENDED)
    # After ``if self.ids is None: ...; return`` the storage is set: ``cat`` extends it.
    assert (16, "IM001") not in found
    # Both branches of the ``if`` store a new tensor: the test picks how, not whether.
    assert (20, "IM001") not in found and (22, "IM001") not in found
    # A test of the storage with only one branch storing is still a miss.
    one = EXTENDED.replace(
        "        else:\n            self.ids = torch.cat([self.ids, token], dim=1)\n", ""
    )
    assert (20, "IM001") in codes(one)
    # The other branch fills an entry of what this one makes: both are first fills.
    nested = """
import torch
_BUF = {}

def recv(name, i, shape):
    if _BUF.get(name) is None:
        _BUF[name] = {i: torch.zeros(shape)}
    else:
        _BUF[name][i] = torch.zeros(shape)
    _BUF[name][i].zero_()
"""
    assert (7, "IM001") in codes(nested)


REBOUND = """
import torch

class Gen:
    def __init__(self):
        self.ids = None

    def _begin(self, ids):
        self.ids = ids.clone()

    def _reuse(self, ids):
        if self.ids is None:
            self._begin(ids)
            return
        {reuse}

    def feed(self, ids):
        if self.ids is None:
            self.ids = torch.zeros(4)

    def start(self, ids, pad):
        self._reuse(ids)
        self.ids[0] = pad
"""


def test_a_write_after_the_same_call_binds_the_attribute_anew_reaches_that_calls_tensor():
    """``start`` reaches its write only after ``_reuse`` bound ``self.ids`` anew on
    every path (through ``_begin`` or a ``cat``): the write meets the tensor this call
    made, under this call's mode, never ``feed``'s. A path that keeps the old storage (a
    slice of it, or a branch that binds nothing) leaves the write reaching it."""
    assert codes(REBOUND.format(reuse="self.ids = torch.cat((self.ids, ids))")) == [
        (9, "IM005"),
        (19, "IM005"),
    ]
    assert (19, "IM001") in codes(REBOUND.format(reuse="self.ids = self.ids[:4]"))
    branch = "if ids.numel():\n            self._begin(ids)"
    assert codes(REBOUND.format(reuse=branch)) == [(9, "IM001"), (20, "IM001")]
    decorated = REBOUND.replace(
        "    def _begin", "    @torch.inference_mode()\n    def _begin"
    ).format(reuse="self._begin(ids)")
    assert (20, "IM001") in codes(decorated)  # ``_begin`` binds under its own mode
    inside = "with torch.inference_mode():\n            self._begin(ids)"
    assert (20, "IM001") in codes(REBOUND.format(reuse=inside))  # so does this call


def test_a_private_function_nothing_refers_to_holds_no_site(tmp_path):
    """``_scratch`` is named nowhere in the project (its one use is commented out): it
    never runs. ``_table`` is reached through a callback table in another module and
    ``get_out`` is public (code from outside may call it): both stay sites."""
    cache = """
        import torch
        _tl = {{}}

        def {name}(n):
            if n not in _tl:
                _tl[n] = torch.empty(n)
            return _tl[n]
        """
    _tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": cache.format(name="_scratch") + "# out = _scratch(4)\n",
            "pkg/b.py": cache.format(name="_table"),
            "pkg/c.py": cache.format(name="get_out"),
            "pkg/d.py": "from pkg import b\nHANDLERS = {'t': b._table}\n",
        },
    )
    assert sorted(name for name, *_ in _check(tmp_path)) == ["b.py", "c.py"]


def test_a_getters_result_kept_on_self_is_written_by_the_classes_methods(tmp_path):
    """``prepare`` keeps what ``get_workspace`` returns on ``self._ws``; ``forward``
    writes ``self._ws``: that is a write of the getter's buffer, across files (a torch
    write: IM001; handed to an outside kernel: IM002; nothing: IM005)."""
    use = """
        from ext_lib import run_kernel
        from pkg.ws import get_workspace

        class Impl:
            def prepare(self, device):
                if self._ws is None:
                    self._ws = get_workspace(device, 128)

            def forward(self, q):
                {use}
        """
    ws = """
        import torch
        _ws = None

        def get_workspace(device, n):
            global _ws
            if _ws is None or _ws.numel() < n:
                _ws = torch.zeros(n, device=device)
            return _ws
        """
    for body, code in (
        ("self._ws[:4].zero_()", "IM001"),
        ("return run_kernel(q, workspace=self._ws)", "IM002"),
        ("return q + self._ws.sum()", "IM005"),
    ):
        _tree(
            tmp_path,
            {"pkg/__init__.py": "", "pkg/ws.py": ws, "pkg/use.py": use.format(use=body)},
        )
        assert [(name, c) for name, _line, c, _sev in _check(tmp_path)] == [("ws.py", code)]


def test_a_cache_of_a_function_defined_in_each_call_dies_with_the_call():
    """``get_buffer`` is made anew, with a new cache, each time ``rotate`` runs: what it
    caches is per call. Returned (it escapes the call), its cache lives on."""
    code = """
    import functools
    import torch
    import my_ext

    def rotate(pages, device):
        @functools.lru_cache
        def get_buffer(shape):
            return torch.empty(shape, device=device)

        out = get_buffer((4, 4))
        out.zero_()
        my_ext.rotate(pages, out)
        {tail}
    """
    assert codes(code.format(tail="return out")) == []
    assert codes(code.format(tail="return get_buffer")) == [(9, "IM001")]


def test_a_nested_function_fills_its_enclosing_functions_parameter_as_callers_hand_it(tmp_path):
    """``prepare`` fills ``scratch``, a parameter of ``decode``: kept when a caller
    hands a long-lived dict, per call when no caller hands one (the branch never runs
    on storage that outlives the call)."""
    decode = """
        import torch
        import my_ext

        def decode(q, out, scratch=None):
            def prepare(n):
                if scratch is None:
                    return torch.empty(n, device=q.device)
                buf = scratch.get(n)
                if buf is None:
                    buf = scratch[n] = torch.empty(n, device=q.device)
                return buf

            my_ext.run(q, prepare(q.shape[0]), out)
            return out
        """
    attn = """
        from pkg.a import decode

        class Attn:
            def __init__(self):
                self._scratch = {{}}

            def forward(self, q, out):
                return decode(q, out{extra})
        """
    for extra, found in (("", []), (", self._scratch", [("a.py", 11, "IM002", "warning")])):
        _tree(
            tmp_path,
            {"pkg/__init__.py": "", "pkg/a.py": decode, "pkg/b.py": attn.format(extra=extra)},
        )
        assert _check(tmp_path) == found


def test_a_test_of_a_local_this_call_starts_at_none_is_not_a_cache_test():
    """``w_scale = None`` then, in the loop, ``if w_scale is None:``: each call starts
    from ``None`` and allocates on its first pass (the test reads this call's progress,
    not a cache), even when the allocation's arguments come from the stored tensor. A
    local read from the storage stays a cache test."""
    code = """
    import torch

    def layout(layer, w, rows):
        scale = layer.weight_scale_inv.data
        {start}
        for r0 in range(0, w.shape[0], rows):
            part = (w[r0:r0 + rows] * scale[r0:r0 + rows]).float()
            if w_scale is None:
                w_scale = torch.empty((w.shape[0], 4), dtype=part.dtype)
            w_scale[r0:r0 + rows] = part
        layer.weight_scale_inv.data = w_scale.transpose(0, 1)
    """
    assert codes(code.format(start="w_scale = None")) == []
    assert codes(code.format(start="w_scale = layer.cached_scale")) == [(10, "IM001")]


def test_only_new_storage_on_every_returning_path_counts_as_bound_anew():
    """A ``match`` arm that returns before binding, and a value read back from ``self``
    (``self.ids = self._saved``: an old tensor may come back), leave the write reaching
    what ``feed`` made."""
    arm = "match ids.dim():\n            case 0:\n                return\n        self._begin(ids)"
    assert codes(REBOUND.format(reuse=arm)) == [(9, "IM001"), (22, "IM001")]
    saved = "self.ids = self._saved"
    assert codes(REBOUND.format(reuse=saved)) == [(9, "IM001"), (19, "IM001")]


def test_a_library_objects_method_may_write_the_storage_it_is_handed():
    zeroed = textwrap.dedent(LAZY.replace("torch.empty(n)", "torch.zeros(n)")) + "{more}"
    # A method no function of the project defines, on an object from outside (a
    # communication library's buffer), may fill the zeroed mask from a kernel.
    assert codes(zeroed.format(use="x.query_mask(buf)", more="")) == [(8, "IM002")]
    # Well-known methods (a tensor's, a container's, a logger's) do not write it.
    for use in ("x.add(buf)", "x.append(buf)", "x.info('%s', buf)"):
        assert codes(zeroed.format(use=use, more="")) == [(8, "IM005")], use
    # A method the project defines may be that one, which only reads.
    mine = "\nclass Mask:\n    def query_mask(self, m):\n        return m.sum()\n"
    assert codes(zeroed.format(use="x.query_mask(buf)", more=mine)) == [(8, "IM005")]
    # A tensor with content is the library's input, whatever it is handed to.
    full = textwrap.dedent(READ) + "{more}"
    assert codes(full.format(use="x.query_mask(buf)", more="")) == [(8, "IM005")]


COPIED = """
    import torch
    from functools import lru_cache

    @lru_cache(maxsize=None)
    def get_table(n):
        return torch.randn(n, n)
"""


def test_a_conversion_told_to_copy_is_new_storage(tmp_path):
    """``x.to(dtype, copy=True)`` always copies: writes through it do not write ``x``
    (without ``copy=True`` a conversion may return ``x`` itself)."""
    use = """
        import torch
        from pkg.table import get_table

        def scaled(n, dtype, scale):
            had = get_table(n).to(dtype=dtype, copy=True)
            had *= scale
            return had

        def sketch(a, n):
            z = get_table(n).to(a.device, a.dtype, copy=True)
            torch.matmul(a, a, out=z)
            return z
    """
    # In one module (the module model) and across two (the project summaries).
    assert codes(COPIED + use.replace("from pkg.table import get_table", "")) == [(7, "IM005")]
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/table.py": COPIED, "pkg/use.py": use})
    assert _check(tmp_path) == [("table.py", 7, "IM005", "warning")]
    no_copy = use.replace(", copy=True", "")
    assert codes(COPIED + no_copy.replace("from pkg.table import get_table", "")) == [(7, "IM001")]
    _tree(tmp_path, {"pkg/use.py": no_copy})
    assert _check(tmp_path) == [("table.py", 7, "IM001", "error")]


def test_an_object_that_keeps_its_arguments_keeps_a_tensor_made_for_it():
    """``self._slots.append(Slot(tensor=t))`` keeps ``t`` when ``Slot`` keeps what it is
    made with (a dataclass, a named tuple, an ``__init__`` storing a parameter); a class
    that keeps nothing of it does not."""
    pool = """
    import torch
    from dataclasses import dataclass
    from typing import NamedTuple

    @dataclass
    class Slot:
        tensor: torch.Tensor
        free: bool = True

    class Pair(NamedTuple):
        tensor: torch.Tensor
        n: int

    class Held:
        def __init__(self, tensor):
            self.tensor = tensor

    class Sized:
        def __init__(self, tensor):
            self.n = tensor.numel()

    class Pool:
        def __init__(self):
            self._slots = []

        def get(self, out, n):
            for slot in self._slots:
                if slot.free and slot.tensor.numel() >= n:
                    return slot.tensor[:n]
            tensor = out.new_empty(n)
            self._slots.append(WRAP(tensor))
            return tensor

    _POOL = Pool()

    def use(x):
        buf = _POOL.get(x, 4)
        buf.copy_(x)
    """
    for wrap, expected in [
        ("Slot", [(31, "IM001")]),
        ("Pair", [(31, "IM001")]),
        ("Held", [(31, "IM001")]),
        ("Sized", []),
    ]:
        assert codes(pool.replace("WRAP", wrap)) == expected, wrap


def test_a_local_bound_anew_no_longer_names_the_buffer(tmp_path):
    """``z = self._buf.view(n)`` then ``z = shift(z)``: every path to ``z[0] = x`` runs
    the second binding, a new tensor, so the write does not reach the buffer; a binding
    in a branch may not run, so the write may still reach it."""
    rebound = """
        import torch
        from functools import lru_cache

        @lru_cache(maxsize=None)
        def get_table(n):
            return torch.zeros(n, n)

        def shift(values, k):
            return torch.bitwise_right_shift(values, k)

        def use(n, x):
            z = get_table(n).view(-1)
            {bind}
            z[0] = x
    """
    one = textwrap.dedent(rebound)
    branch = "if x:\n                z = shift(z, 2)"
    assert codes(one.format(bind="z = shift(z, 2)")) == [(7, "IM005")]
    assert codes(one.format(bind=branch)) == [(7, "IM001")]
    assert codes(one.format(bind="pass")) == [(7, "IM001")]
    # Across two modules (the project summaries), an item assignment and ``+=`` included.
    table, _, use = one.partition("def shift")
    use = "import torch\nfrom pkg.table import get_table\n\ndef shift" + use
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/table.py": table})
    for bind, write, code in [
        ("z = shift(z, 2)", "z[0] = x", "IM005"),
        (branch, "z[0] = x", "IM001"),
        ("pass", "z[0] = x", "IM001"),
        ("pass", "z += x", "IM001"),
    ]:
        _tree(tmp_path, {"pkg/use.py": use.format(bind=bind).replace("z[0] = x", write)})
        assert [c for _p, _l, c, _s in _check(tmp_path)] == [code], (bind, write)


def test_items_of_a_registry_live_per_request_and_a_caches_for_the_process():
    """Items put into a container on ``self`` under a test of something else (a request
    registry: ``if ids is not None: self.reqs[rid] = Req(ids)``) live until taken out,
    so a tensor made lazily on one is not persistent; under a test of the container (a
    get-or-create cache) or unconditionally by construction, the item lives on."""
    registry = """
        import torch
        from dataclasses import dataclass

        @dataclass
        class _Scores:
            ids: torch.Tensor
            scores: torch.Tensor | None = None

        class Worker:
            def __init__(self):
                self.reqs = {}

            def add_request(self, rid, ids):
                if TEST:
                    self.reqs[rid] = _Scores(ids)

            def step(self, rids, x):
                for rid in rids:
                    req = self.reqs.get(rid)
                    if req.scores is None:
                        req.scores = torch.empty_like(req.ids)
                    req.scores[0] = x

        class Runner:
            def __init__(self):
                self.worker = Worker()

            def add(self, rid, ids):
                self.worker.add_request(rid, ids)

            def run(self, rids, x):
                self.worker.step(rids, x)
    """
    assert codes(registry.replace("TEST", "ids is not None")) == []
    assert codes(registry.replace("TEST", "rid not in self.reqs")) == [(22, "IM001")]
    assert codes(registry.replace("TEST", "self.reqs.get(rid) is None")) == [(22, "IM001")]


def test_callers_write_what_the_only_method_so_named_returns(tmp_path):
    """``backend.acquire_q_buffer(n)`` on an object whose type the index cannot tell
    reaches the one method of the project with that name: its caller's write is a write
    of the buffer it hands back. Two methods so named, and the call reaches neither."""
    backend = """
        import torch

        class Backend:
            def __init__(self):
                self._q_buf = None

            def acquire_q_buffer(self, n, device):
                buf = self._q_buf
                if buf is None or buf.shape[0] < n:
                    buf = torch.zeros((n, 64), device=device)
                    self._q_buf = buf
                return buf[:n]
    """
    use = """
        def forward(layer, batch, q):
            backend = layer.backends.get(batch.mode)
            out = backend.acquire_q_buffer(q.shape[0], q.device)
            out.copy_(q)
            return out
    """
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/backend.py": backend, "pkg/use.py": use})
    assert _check(tmp_path) == [("backend.py", 11, "IM001", "error")]
    other = "class Other:\n    def acquire_q_buffer(self, n, device):\n        return None\n"
    _tree(tmp_path, {"pkg/other.py": other})
    assert _check(tmp_path) == [("backend.py", 11, "IM005", "warning")]


def test_set_up_follows_a_call_made_only_while_a_flag_is_on(tmp_path):
    """``if in_capture: self._init_graph_meta(bs)``: the metadata is made only by the
    callers that turn ``in_capture`` on; when those run only while the graph runner is
    built, it is set-up, not a lazy buffer. A caller that may turn it on while serving
    (a true constant, a value not known, a default that is not false) makes it lazy."""
    backend = """
        import torch

        class Backend:
            def __init__(self):
                self.graph_meta = {}

            def _init_graph_meta(self, bs, device):
                if bs not in self.graph_meta:
                    self.graph_meta[bs] = torch.zeros(bs, device=device)

            def init_meta(self, batch, in_capture=DEFAULT):
                if in_capture:
                    self._init_graph_meta(batch.bs, batch.device)
                self.graph_meta[batch.bs].copy_(batch.seq)
    """
    runner = """
        from pkg.backend import Backend

        class GraphRunner:
            def __init__(self, backend):
                self.backend = backend
                self.capture()

            def capture(self):
                for bs in (1, 2):
                    self.backend.init_meta(make_batch(bs), in_capture=True)

            def replay(self, batch, capturing):
                self.backend.init_meta(REPLAY)

        def make_batch(bs):
            return None

        RUNNER = GraphRunner(Backend())

        def serve(batch):
            RUNNER.replay(batch, SERVE)
    """
    _tree(tmp_path, {"pkg/__init__.py": ""})
    lazy = [("backend.py", 10, "IM001", "error")]
    # A caller that hands on a flag of its own (``in_capture=capturing``) turns it on
    # when its own callers turn that one on.
    for default, replay, serve, expected in [
        ("False", "batch", "False", []),
        ("False", "batch, False", "False", []),
        ("False", "batch, in_capture=False", "False", []),
        ("False", "batch, True", "False", lazy),
        ("False", "batch, in_capture=capturing", "False", []),
        ("False", "batch, in_capture=capturing", "True", lazy),
        ("False", "batch, in_capture=capturing", "batch.flag", lazy),
        ("None", "batch", "False", []),
        ("True", "batch", "False", lazy),
    ]:
        _tree(
            tmp_path,
            {
                "pkg/backend.py": backend.replace("DEFAULT", default),
                "pkg/runner.py": runner.replace("REPLAY", replay).replace("SERVE", serve),
            },
        )
        assert _check(tmp_path) == expected, (default, replay, serve)


def test_set_up_follows_a_function_whose_allocations_wait_on_a_flag(tmp_path):
    """``if in_capture and bs not in self.meta: self.meta[bs] = torch.zeros(bs)``: the
    function runs on every step, but it allocates only while ``in_capture`` is on, so
    set-up follows it along the callers that turn the flag on. A tensor the function
    only reads where it is made (``self.meta[bs].copy_(torch.cumsum(...))``) does not count;
    one it keeps outside the flag does."""
    backend = """
        import torch

        class Backend:
            def __init__(self):
                self.meta = {}

            def init_meta(self, batch, in_capture):
                if in_capture and batch.bs not in self.meta:
                    self.meta[batch.bs] = torch.zeros(batch.bs)
                OTHER
                self.meta[batch.bs].copy_(torch.cumsum(batch.seq, 0))
    """
    runner = """
        from pkg.backend import Backend

        class GraphRunner:
            def __init__(self, backend):
                self.backend = backend
                self.backend.init_meta(make_batch(1), True)

            def replay(self, batch):
                self.backend.init_meta(batch, REPLAY)

        def make_batch(bs):
            return None

        RUNNER = GraphRunner(Backend())

        def serve(batch):
            RUNNER.replay(batch)
    """
    _tree(tmp_path, {"pkg/__init__.py": ""})
    lazy = [("backend.py", 10, "IM001", "error")]
    for other, replay, expected in [
        ("pass", "False", []),
        ("pass", "batch.capturing", lazy),
        ("self.seq = batch.seq.clone()", "False", lazy),
    ]:
        _tree(
            tmp_path,
            {
                "pkg/backend.py": backend.replace("OTHER", other),
                "pkg/runner.py": runner.replace("REPLAY", replay),
            },
        )
        assert _check(tmp_path) == expected, (other, replay)


def test_a_getter_returning_a_local_dict_it_filled_returns_its_tensors():
    """``bufs = dict(); bufs["ids"] = torch.zeros(n); return bufs``: what the getter
    returns holds the tensors it stored into the dict, as ``return {"ids": ...}`` does."""
    getter = """
        import torch

        class Runner:
            def __init__(self):
                self.input_buffers = None

            def make_buffers(self, n):
                BODY

            def capture(self, n):
                if self.input_buffers is None:
                    self.input_buffers = self.make_buffers(n)
    """
    filled = (
        'bufs = dict()\n                bufs["ids"] = torch.zeros(n)\n                return bufs'
    )
    literal = 'return {"ids": torch.zeros(n)}'
    empty = "bufs = dict()\n                return bufs"
    assert codes(getter.replace("BODY", literal)) == [(13, "IM005")]
    assert codes(getter.replace("BODY", filled)) == [(15, "IM005")]
    assert codes(getter.replace("BODY", empty)) == []


def test_a_gradient_filled_lazily_is_not_a_kept_buffer():
    """``p.grad = torch.zeros_like(p)`` fills this step's gradient, which autograd and
    the optimizer own (set back to None or zeroed every step); the optimizer's own state
    made on first use is a kept buffer."""
    optimizer = """
        import torch

        class Opt:
            def __init__(self, params):
                self.params = list(params)
                self.state = {}

            def step(self):
                for p in self.params:
                    if p.grad is None:
                        p.grad = torch.zeros_like(p)
                    p.grad.add_(1)
                    if p not in self.state:
                        self.state[p] = torch.zeros_like(p)
                    self.state[p].mul_(0.9)
    """
    assert codes(optimizer) == [(15, "IM001")]


def test_a_factory_building_the_object_is_set_up_whatever_its_flags():
    """``if use_graph: ws._alloc_meta()`` in a function that makes ``ws`` and returns it
    builds the object: set-up, flag or not; a flag no caller ever turns on never runs
    what it guards."""
    factory = """
        import torch

        class Workspace:
            def __init__(self, n):
                self.n = n
                self.meta = None

            def _alloc_meta(self):
                if self.meta is None:
                    self.meta = torch.empty(self.n)

            def fill(self, x):
                self.meta.copy_(x)

        def build(n, use_graph=False):
            ws = Workspace(n)
            if use_graph:
                ws._alloc_meta()
            return ws

        def serve(x):
            ws = build(4, use_graph=True)
            ws.fill(x)
    """
    assert codes(factory) == []
    # Called from running code under a flag: lazy when a caller turns it on, and not
    # when none does.
    running = factory.replace("ws = Workspace(n)", "ws = n").replace("return ws", "ws.fill(1)")
    running = running.replace(
        "ws = build(4, use_graph=True)\n            ws.fill(x)", "build(x, ON)"
    )
    assert codes(running.replace("ON", "True")) == [(11, "IM001")]
    assert codes(running.replace("ON", "False")) == []


def test_a_write_to_the_whole_of_data_cannot_raise():
    """``x.data.copy_(v)`` on an inference tensor outside inference mode does not raise
    (the check does not see a write through ``.data``), ``x.data[:2].fill_(0)`` and
    ``x.copy_(v)`` do: the first is latent (IM002), the others crash (IM001), also when
    a helper the buffer is handed to makes the write."""
    code = """
    import torch

    def helper(t, v):
        t.data.WRITE

    class Q:
        def set_amax(self, v):
            if self._amax is None:
                self._amax = torch.empty_like(v)
            USE
    """
    for use, expected in [
        ("self._amax.data.copy_(v)", "IM002"),
        ("self._amax.data.zero_()", "IM002"),
        ("self._amax.data[:2].fill_(0)", "IM001"),
        ("self._amax.copy_(v)", "IM001"),
        ("helper(self._amax, v)", "IM002"),
    ]:
        found = codes(code.replace("USE", use).replace("WRITE", "zero_()"))
        assert found == [(10, expected)], use
    sliced = code.replace("USE", "helper(self._amax, v)").replace("WRITE", "zero_()")
    assert codes(sliced.replace("t.data.zero_()", "t.data[0] = 1")) == [(10, "IM001")]


def test_the_function_form_of_a_view_keeps_what_its_argument_made():
    """``torch.view_as_real(table(n))`` keeps the storage ``table`` makes (and
    ``torch.view_as_real(torch.polar(a, b))`` what ``polar`` makes): a view of it."""
    code = """
    import torch

    def table(n):
        f = torch.arange(n).float()
        return torch.polar(torch.ones_like(f), f)

    class Rope:
        def __init__(self):
            self._t = None
            self._u = None

        def cis(self, n):
            if self._t is None:
                self._t = torch.view_as_real(table(n))
            return self._t

        def cis2(self, f):
            if self._u is None:
                self._u = torch.view_as_real(torch.polar(torch.ones_like(f), f))
            return self._u
    """
    assert codes(code) == [(15, "IM005"), (20, "IM005")]
    # a view of a tensor handed in is not new storage
    handed = code.replace("torch.view_as_real(table(n))", "torch.view_as_real(n)")
    assert codes(handed) == [(20, "IM005")]


def test_a_store_the_same_call_replaces_keeps_nothing():
    """``self.m = torch.tensor(0)`` on a first call, then ``self.m = x.max()`` on every
    call after it: the first tensor never outlives the call. A later store that may not
    run (after a ``return``, under its own condition), that reads the target, or that
    fills another entry of a container does not replace it."""
    code = """
    import torch

    class G:
        def reinit(self, x):
            if self.first:
                self.m = torch.tensor(0, device=x.device)
                self.first = False
            with torch.cuda.stream(None):
                self.m = x.max()

        def keep(self, x):
            if self.k is None:
                self.k = torch.zeros(4)
            self.k = self.k.to(x.device)
            return self.k

        def early(self, x):
            if self.e is None:
                self.e = torch.zeros(4)
                if x is None:
                    return
            self.e = x.clone()

        def grow(self, x, n):
            if self.g is None:
                self.g = torch.zeros(4)
            if n > 4:
                self.g = x.new_zeros(n)
            return self.g

        def entries(self, keys, x):
            for k in keys:
                if k not in self.d:
                    self.d[k] = torch.zeros(4)
            self.d[k] = x

        def alias(self, x):
            if self.a is None:
                self.a = torch.zeros(4)
            y = self.a
            self.a = y.to(x.device)
            return self.a
    """
    assert codes(code) == [
        (14, "IM005"),
        (20, "IM005"),
        (27, "IM005"),
        (35, "IM005"),
        (40, "IM005"),
    ]


def test_remaking_what_is_there_is_an_update_not_a_miss():
    """In the branch where the target is already there (``is not None``, the ``else``
    of ``is None``), remaking it from what it holds (append, reorder, device move) runs
    on every call that finds it: not a first fill. A test that asks more than presence
    (a device or size mismatch) is a miss."""
    code = """
    import torch

    class Cache:
        def update(self, k, i):
            if self.key_cache[i] is None:
                self.key_cache[i] = k
            else:
                self.key_cache[i] = torch.cat([self.key_cache[i], k], dim=2)
            self.key_cache[i].zero_()

        def reorder(self, beam):
            for i in range(len(self.key_cache)):
                if self.key_cache[i] is not None:
                    self.key_cache[i] = self.key_cache[i].index_select(0, beam)

        def to(self, device):
            if self.fifo is not None:
                self.fifo = self.fifo.to(device)

        def rope(self, x):
            if self._cos is None or self._cos.device != x.device:
                self._cos = self._cos.to(x.device)
            return self._cos

        def fresh(self, x):
            if self._t is not None:
                self._t = torch.zeros(4)
            return self._t

        def sibling(self, k, v, i):
            if self.keys[i] is None:
                self.keys[i] = k
                self.vals[i] = v
            else:
                self.keys[i] = torch.cat([self.keys[i], k])
                self.vals[i] = torch.cat([self.vals[i], v])

        def empty(self, k, i):
            if self.kc[i].shape[-1] == 0:
                self.kc[i] = k
            else:
                self.kc[i] = torch.cat([self.kc[i], k], dim=2)
            self.kc[i].zero_()

        def typed(self, hyp):
            hyp.seq = hyp.seq.long() if isinstance(hyp.seq, torch.Tensor) else torch.tensor(hyp.seq)
            return hyp

        def listed(self):
            if not isinstance(self._ids, torch.Tensor):
                self._ids = torch.tensor(self._ids)
            return self._ids
    """
    # ``typed``: only the branch that turns a list into a tensor is a first fill
    assert codes(code) == [(23, "IM005"), (28, "IM005"), (47, "IM005"), (52, "IM005")]


def test_names_unpacked_from_kept_storage_hold_its_items():
    """``a, b = self._pair``: ``a`` is item 0 of what is kept, so ``a.zero_()`` writes
    the first tensor (IM001) and not the second (IM005); and remaking the entry from
    its unpacked items where it is there is an update, not a miss."""
    code = """
    import torch

    class P:
        def get(self, n):
            if self._pair is None:
                self._pair = (torch.zeros(n), torch.ones(n))
            a, b = self._pair
            a.zero_()
            return b

        def reorder(self, beam):
            for i in range(len(self.conv)):
                if self.conv[i] is not None:
                    q, k = self.conv[i]
                    self.conv[i] = (q.index_select(0, beam), k.index_select(0, beam))
    """
    assert codes(code) == [(7, "IM001"), (7, "IM005")]


def test_what_new_stores_on_the_instance_it_makes_is_construction():
    """In ``__new__``, a call handed ``cls`` makes the instance: what is stored on it is
    built with it, not kept lazily. Stored on an object ``__new__`` did not make, it is."""
    code = """
    import torch

    class MetaTensor(torch.Tensor):
        _tensor: torch.Tensor

        @staticmethod
        def __new__(cls, elem, device=None):
            r = torch.Tensor._make_wrapper_subclass(cls, elem.size(), device=device)
            r._tensor = elem
            if not r._tensor.is_meta:
                r._tensor = r._tensor.to(torch.device("meta"))
            return r
    """
    assert codes(code) == []
    other = code.replace("_make_wrapper_subclass(cls,", "_make_wrapper_subclass(elem,")
    assert codes(other) == [(12, "IM005")]


def test_a_local_redefined_from_itself_keeps_what_it_held():
    """``x = x.view(-1)`` reads the definition before it: a write through ``x`` writes
    the kept buffer, a cached function returns the first tensor's view, and ``cls.t =
    cls.t.view(n, 4)`` does not replace what it views."""
    code = """
    import functools
    import torch

    class A:
        total = None

        def get(self, n):
            if self._buf is None:
                self._buf = torch.empty(n)
            x = self._buf
            x = x.view(-1)
            x.zero_()
            return x

        @classmethod
        def slots(cls, n):
            if cls.total is None:
                cls.total = torch.arange(n * 4)
                cls.total = cls.total.view(n, 4)
            return cls.total

    @functools.lru_cache
    def shifts(bits):
        s = torch.arange(0, 32, bits)
        s = s.view(2, 4).t().flatten()
        return s
    """
    assert codes(code) == [(10, "IM001"), (19, "IM005"), (25, "IM005")]


def test_a_custom_op_writes_only_the_arguments_it_declares_it_mutates(tmp_path):
    """``@torch.library.custom_op(..., mutates_args=[])``: PyTorch requires the list to
    be exact, so a tensor handed to the op is only read, even though its body hands it
    to a JIT module outside the project."""
    op = """
        import torch
        import somejit

        @torch.library.custom_op("pkg::modulate", mutates_args=MUTATES)
        def _modulate_op(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(x)
            somejit.load("modulate").run(out, x, shift)
            return out

        def modulate(x, shift):
            return _modulate_op(x, shift)
        """
    model = """
        import torch
        from pkg.op import modulate

        _SHIFTS = {}

        def norm_scale(x):
            shift = _SHIFTS.get(x.shape[-1])
            if shift is None:
                shift = torch.zeros(1, x.shape[-1])
                _SHIFTS[x.shape[-1]] = shift
            return modulate(x, shift)
        """
    found = {}
    for mutates in ("[]", '["shift"]', '"unknown"', "MUTATING"):
        files = {"pkg/__init__.py": "", "pkg/op.py": op.replace("MUTATES", mutates)}
        _tree(tmp_path, {**files, "pkg/model.py": model})
        found[mutates] = [code for _name, _line, code, _sev in _check(tmp_path)]
    assert found["[]"] == ["IM005"]  # read-only: the op mutates nothing
    assert found['["shift"]'] == ["IM002"]  # declared mutated: the JIT module writes it
    assert found['"unknown"'] == ["IM002"]  # not a literal list: any argument may be
    assert found["MUTATING"] == ["IM002"]
