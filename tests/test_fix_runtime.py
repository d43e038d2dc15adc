"""The fix, run: kept tensors stop being inference tensors and keep their grad state.

Each module below keeps a tensor lazily. Its first call runs under ``inference_mode()``
(then under ``no_grad()``, then with grad on); a torch in-place write follows outside
inference mode. Before the fix the kept tensors are inference tensors and the write
raises; after it, nothing kept is an inference tensor, the write works, and every kept
tensor's ``requires_grad`` and ``grad_fn`` are what the unfixed code gives when neither
inference mode nor recording is on (``no_grad()``).
"""

from __future__ import annotations

import os
import textwrap
import types

import pytest

from imlint.config import Settings
from imlint.engine import Linter

torch = pytest.importorskip("torch")

LINTER = Linter(Settings(extend_select=("IM005",), unsafe_fixes=True))

#: (module source, call that fills the cache, what is kept) per shape
SHAPES = {
    "dict cache": (
        """
        import torch
        _C = {}

        def get(n):
            if n not in _C:
                _C[n] = torch.zeros(n)
            _C[n].add_(1)
            return _C[n]
        """,
        "m.get(4)",
        "list(m._C.values())",
    ),
    "derived from a parameter": (
        """
        import torch

        class Rope:
            def __init__(self):
                self.scale = torch.nn.Parameter(torch.ones(4))
                self._table = None

            def table(self):
                if self._table is None:
                    self._table = torch.arange(4) * self.scale
                return self._table
        """,
        "m.obj.table()",
        "[m.obj._table]",
    ),
    "kept value computed after the allocation": (
        """
        import torch

        class Ids:
            def __init__(self):
                self._cache = {}
                self.w = torch.nn.Parameter(torch.ones(2, 3))

            def get(self, k):
                if k not in self._cache:
                    ids = torch.arange(3).expand(2, 3) * self.w
                    full = torch.cat([ids, ids])
                    self._cache[k] = (full, full.cos())
                self._cache[k][0].zero_()
                return self._cache[k]
        """,
        "m.obj.get(1)",
        "list(m.obj._cache[1])",
    ),
    "attribute getter": (
        """
        import torch

        class Buf:
            def __init__(self):
                self._buf = None

            def get(self, n):
                if self._buf is None:
                    buf = torch.empty(n)
                    self._buf = buf
                self._buf.fill_(0)
                return self._buf
        """,
        "m.obj.get(4)",
        "[m.obj._buf]",
    ),
    "table built in a loop, then converted": (
        """
        import torch
        _C = {}

        def table(device):
            h = _C.get(device)
            if h is None:
                h = torch.ones(1, 1)
                for _ in range(3):
                    h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
                h = (h / 8**0.5).to(device).contiguous()
                _C[device] = h
            return h
        """,
        "m.table('cpu')",
        "list(m._C.values())",
    ),
    "remade by a computing method": (
        """
        import torch

        class Pos:
            def __init__(self):
                self._p = None

            def get(self, n):
                if self._p is None:
                    p = torch.arange(n)
                    p = p.repeat_interleave(2)
                    self._p = p
                return self._p
        """,
        "m.obj.get(4)",
        "[m.obj._p]",
    ),
    "arithmetic on a tensor made before": (
        """
        import torch
        _C = {}

        def table(n):
            if n not in _C:
                x = torch.arange(n)
                _C[n] = (x[1:] + x[:-1]) / 2
            _C[n].mul_(2)
            return _C[n]
        """,
        "m.table(5)",
        "list(m._C.values())",
    ),
    "cached function": (
        """
        import functools
        import torch

        @functools.lru_cache(maxsize=4)
        def positions(n):
            return torch.arange(n).float()
        """,
        "m.positions(4)",
        "[m.positions(4)]",
    ),
}


def _load(source: str) -> types.ModuleType:
    m = types.ModuleType("shape")
    exec(compile(source, "shape.py", "exec"), m.__dict__)
    if "class " in source:
        cls = next(v for v in m.__dict__.values() if isinstance(v, type))
        m.obj = cls()  # type: ignore[attr-defined]
    return m


def _first_call(source: str, call: str, kept: str, mode: str) -> list:
    m = _load(source)
    ctx = {"inference": torch.inference_mode(), "no_grad": torch.no_grad()}.get(mode)
    if ctx is None:
        eval(call, {"m": m})
    else:
        with ctx:
            eval(call, {"m": m})
    return eval(kept, {"m": m})


def _state(tensors: list) -> list[tuple[bool, bool]]:
    return [(t.requires_grad, t.grad_fn is None) for t in tensors]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_fix_leaves_nothing_kept_an_inference_tensor_and_grad_as_it_was(shape):
    source, call, kept = SHAPES[shape]
    source = textwrap.dedent(source)
    assert LINTER.check_text("shape.py", source), "the shape must be reported"
    fixed = LINTER.fix_text("shape.py", source).text
    assert fixed != source
    assert LINTER.check_text("shape.py", fixed) == []

    before = _first_call(source, call, kept, "inference")
    assert any(t.is_inference() for t in before)
    # The reference: the unfixed code's first call without inference mode and without
    # recording (what inference mode also turns off). A kept tensor is built without a
    # graph whatever the caller's mode: the fix never switches recording on.
    expected = _state(_first_call(source, call, kept, "no_grad"))
    for mode in ("inference", "no_grad", "grad"):
        after = _first_call(fixed, call, kept, mode)
        assert not any(t.is_inference() for t in after), mode
        assert _state(after) == expected, mode
        for t in after:
            with torch.no_grad():
                t.add_(1)  # a torch in-place write outside inference mode: no error


def test_without_the_fix_a_torch_write_outside_inference_mode_raises():
    source = SHAPES["dict cache"][0]
    m = _load(textwrap.dedent(source))
    with torch.inference_mode():
        m.get(4)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        m.get(4)


# ---- generated modules (hypothesis): the same properties over many shapes

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: value expressions kept by the cache: factories, and values computed from tensors
VALUES = [
    "torch.zeros(4)",
    "torch.arange(4).float()",
    "P.new_zeros(4)",
    "torch.arange(4) * P",
    "P.clone()",
    "torch.cat([P, P])[:4]",
    "torch.outer(P, P)[0]",
    "torch.full((4,), 2.0, dtype=torch.float32)",
    "torch.ones(4) * P",
    "torch.stack([P, P]).sum(0)",
    "P.new_tensor([1.0, 2.0, 3.0, 4.0])",
]

#: (template, call, kept): {value} is the expression; {pre} an optional statement before
HOLDERS = [
    (
        "_C = {{}}\n\ndef get(k):\n    if k not in _C:\n{pre}        _C[k] = {value}\n"
        "    return _C[k]\n",
        "m.get(1)",
        "list(m._C.values())",
    ),
    (
        "class Holder:\n    def __init__(self):\n        self._t = None\n\n"
        "    def get(self):\n        if self._t is None:\n{pre2}            self._t = {value}\n"
        "        return self._t\n\nobj = Holder()\n",
        "m.obj.get()",
        "[m.obj._t]",
    ),
    (
        "import functools\n\n@functools.lru_cache(maxsize=4)\ndef get(k):\n{pre}    return {value}\n",
        "m.get(1)",
        "[m.get(1)]",
    ),
    (
        "_C = {{}}\n\ndef get(k):\n    t = _C.get(k)\n    if t is None:\n{pre}        t = {value}\n"
        "        _C[k] = t\n    return t\n",
        "m.get(1)",
        "list(m._C.values())",
    ),
]

HEADER = "import torch\n\nP = torch.nn.Parameter(torch.ones(4))\n\n"


@st.composite
def generated(draw):
    template, call, kept = draw(st.sampled_from(HOLDERS))
    value = draw(st.sampled_from(VALUES))
    if "lru_cache" not in template and draw(st.booleans()):
        value = f"({value}, {draw(st.sampled_from(VALUES))})"  # a pair kept together
    computed_after = draw(st.booleans())
    pre = pre2 = ""
    if computed_after:  # the kept value is computed from an allocation made just before
        value = f"base + {value}" if not value.startswith("(") else f"(base, {value})"
        pre = "        base = torch.zeros(4)\n"
        pre2 = "            base = torch.zeros(4)\n"
        if "lru_cache" in template:
            pre = "    base = torch.zeros(4)\n"
    if pre and draw(st.booleans()):  # a comment line in the block, at its indentation
        indent = pre[: len(pre) - len(pre.lstrip())]
        pre = f"{indent}# scratch\n{pre}"
        pre2 = f"            # scratch\n{pre2}"
    source = HEADER + template.format(value=value, pre=pre, pre2=pre2)
    if draw(st.booleans()):  # the module's torch alias
        source = source.replace("import torch\n", "import torch as th\n", 1).replace(
            "torch.", "th."
        )
    return source, call, kept


def _tensors(values: list) -> list:
    out: list = []
    for v in values:
        out.extend(_tensors(list(v)) if isinstance(v, tuple) else [v])
    return out


@settings(
    max_examples=int(os.environ.get("IMLINT_RUNTIME_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(generated())
def test_generated_modules_fixed_keep_nothing_inference_and_record_no_graph(case):
    source, call, kept = case
    findings = LINTER.check_text("gen.py", source)
    assert findings and all(f.fixable for f in findings), (source, findings)
    fixed = LINTER.fix_text("gen.py", source).text
    assert LINTER.check_text("gen.py", fixed) == []
    first = _tensors(_first_call(source, call, kept, "inference"))
    assert any(t.is_inference() for t in first)
    expected = _state(_tensors(_first_call(source, call, kept, "no_grad")))
    for mode in ("inference", "no_grad", "grad"):
        after = _tensors(_first_call(fixed, call, kept, mode))
        assert not any(t.is_inference() for t in after), (mode, fixed)
        assert _state(after) == expected, (mode, fixed)
        for t in after:
            with torch.no_grad():
                t.add_(1)
