"""The fix, run: kept tensors stop being inference tensors and keep their grad state.

Each module below keeps a tensor lazily. Its first call runs under ``inference_mode()``
(then under ``no_grad()``, then with grad on); a torch in-place write follows outside
inference mode. Before the fix the kept tensors are inference tensors and the write
raises; after it, nothing kept is an inference tensor, the write works, and every kept
tensor's ``requires_grad`` and ``grad_fn`` are what the unfixed code gives when neither
inference mode nor recording is on (``no_grad()``).
"""

from __future__ import annotations

import textwrap
import types

import pytest

from imlint.config import Settings
from imlint.engine import Linter

torch = pytest.importorskip("torch")

LINTER = Linter(Settings(extend_select=("IM005",)))

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
