"""Caches that set-up fills first (imlint/warming.py): a constructor calls a getter
that later code calls again with the same, input-free arguments."""

from __future__ import annotations

import ast
import textwrap

from imlint.options import AnalysisOptions
from imlint.project import summarize

from .test_lifetimes import _findings

STAGE = """
import functools
import torch

@functools.cache
def rows(device, n):
    return torch.empty(n, device=device)

class Stage:
    def __init__(self, device, n):
        self.device = device
        self.n = n
        rows(device, n)

    def run(self, x):
        out = rows(self.device, {size})
        out[: x.size(0)].copy_(x)
"""


def test_a_cache_the_constructor_fills_with_the_objects_state_is_set_up(tmp_path):
    # ``run`` asks with what the object set up (its own state): the constructor made
    # that entry, outside inference mode.
    assert _findings(tmp_path, {"pkg/a.py": STAGE.format(size="self.n")}) == []
    # A local bound from the object's state is the object's state too.
    local = STAGE.format(size="n").replace("out = rows", "n = self.n\n        out = rows")
    assert _findings(tmp_path, {"pkg/a.py": local}) == []
    # Sized from the step's input: the step may ask for an entry set-up never made.
    assert _findings(tmp_path, {"pkg/a.py": STAGE.format(size="x.size(0)")}) == [
        ("a.py", 7, "IM001")
    ]
    grown = STAGE.format(size="n").replace("out = rows", "n = x.size(0) * 2\n        out = rows")
    assert _findings(tmp_path, {"pkg/a.py": grown}) == [("a.py", 7, "IM001")]


def test_a_module_function_only_warming_objects_run_is_covered(tmp_path):
    through = STAGE.format(size="self.n").replace(
        "        out = rows(self.device, self.n)\n        out[: x.size(0)].copy_(x)",
        "        step(self, x)",
    ) + textwrap.dedent(
        """
        def step(stage, x):
            out = rows(DEVICE, LIMIT)
            out[: x.size(0)].copy_(x)

        DEVICE = "cpu"
        LIMIT = 4096
        """
    )
    assert _findings(tmp_path, {"pkg/a.py": through}) == []
    # Something else (an entry point nothing calls) may run it before any Stage exists.
    entry = through + "\ndef main(x):\n    step(None, x)\n"
    assert _findings(tmp_path, {"pkg/a.py": entry}) == [("a.py", 7, "IM001")]


def test_a_getter_only_a_warmed_wrapper_calls_is_warmed(tmp_path):
    wrapped = STAGE.format(size="self.n").replace(
        "def rows(device, n):", "def _rows(device, n):"
    ) + textwrap.dedent(
        """
        def rows(device, n):
            return _rows(device, n)
        """
    )
    assert _findings(tmp_path, {"pkg/a.py": wrapped}) == []
    other = wrapped + textwrap.dedent(
        """
        class Other:
            def run(self, x):
                _rows("cpu", 8).copy_(x)
        """
    )
    assert _findings(tmp_path, {"pkg/a.py": other}) == [("a.py", 7, "IM001")]


def _fixed(code: str) -> list[str]:
    code = textwrap.dedent(code)
    summary = summarize("m.py", code, AnalysisOptions(), ast.parse(code))
    return summary.defs["C.f"].fixed


def test_fixed_calls_read_none_of_the_functions_inputs():
    code = """
    import torch
    LIMIT = 8

    class C:
        def f(self, x, *rest):
            a(self.n, LIMIT, len(self.items))
            n = self.n + 1
            b(n)
            m = x.size(0)
            c(m)
            for i in range(4):
                d(i)
            with open("p") as fh:
                e(fh)
            g()
            h(rest)
            k(self.n)
            k(x)
            torch.empty(n)
            self.grow(x.numel())
    """
    # Not: the input's own method, a local sized from it, a loop's name, a name bound
    # by ``with``, a variadic parameter, a call made once with an input.
    assert _fixed(code) == ["a", "b", "g", "torch.empty"]


SLOT = """
import torch

class Backend:
    def __init__(self):
        self._bufs = None

    def _buffers(self, device, n):
        if FILL:
            self._bufs = torch.zeros(n, device=device)
        return self._bufs

    def _metadata(self, batch):
        out = self._buffers(batch.device, batch.n)
        out.fill_(0)
        return out

    def capture(self, batch):
        return self._metadata(batch)

    def replay(self, batch):
        return self._metadata(batch)

class Runner:
    def __init__(self, backend, batch):
        self.backend = backend
        self.backend.capture(batch)

    def step(self, batch):
        return self.backend.replay(batch)
"""


def test_one_slot_filled_only_while_empty_is_warmed_through_any_calls(tmp_path):
    # The runner's constructor fills the one slot (two calls up, through the same
    # metadata code the steps run); whatever a step asks for later, it finds it.
    one = SLOT.replace("FILL", "self._bufs is None")
    assert _findings(tmp_path, {"pkg/a.py": one}) == []
    # Keyed by what each call asks for: a step may ask for an entry set-up never made.
    keyed = (
        SLOT.replace("self._bufs = None", "self._bufs = {}")
        .replace("FILL", "n not in self._bufs")
        .replace("self._bufs = torch.zeros", "self._bufs[n] = torch.zeros")
        .replace("return self._bufs", "return self._bufs[n]")
    )
    assert _findings(tmp_path, {"pkg/a.py": keyed}) == [("a.py", 10, "IM001")]
    # Nothing at set-up reaches it: the first step makes it.
    lazy = one.replace("        self.backend.capture(batch)\n", "")
    assert _findings(tmp_path, {"pkg/a.py": lazy}) == [("a.py", 10, "IM001")]


def test_slots_are_attributes_stored_only_while_empty():
    def slots(body: str) -> list[str]:
        code = "import torch\nclass C:\n    def f(self, n):\n" + textwrap.indent(
            textwrap.dedent(body), "        "
        )
        return summarize("m.py", code, AnalysisOptions()).defs["C.f"].slots

    assert slots("if self.x is None:\n    self.x = torch.zeros(n)") == ["x"]
    assert slots("if not hasattr(self, 'x'):\n    self.x = torch.zeros(n)") == ["x"]
    assert slots("if getattr(self, 'x', None) is None:\n    self.x = torch.zeros(n)") == ["x"]
    assert slots("if n > 0 and self.x is None:\n    self.x = torch.zeros(n)") == ["x"]
    assert slots("if self.x is not None:\n    return self.x\nself.x = torch.zeros(n)") == ["x"]
    assert slots("if self.x:\n    return self.x\nself.x = torch.zeros(n)") == ["x"]
    # Grown, replaced, or filled under a test of something else: not one slot.
    assert slots("if self.x is None or self.x.numel() < n:\n    self.x = torch.zeros(n)") == []
    assert slots("self.x = torch.zeros(n)") == []
    assert slots("if n > 4:\n    self.x = torch.zeros(n)") == []
    assert slots("if self.x is not None:\n    self.x = torch.zeros(n)") == []
    # Stored another way as well: refilled.
    both = "if self.x is None:\n    self.x = torch.zeros(n)\nelse:\n    self.x = None"
    assert slots(both) == []


def test_an_if_s_branches_are_blocks_of_their_own_for_what_reaches_a_write():
    # The walk enters each branch of an ``if`` as a block (as for every other body):
    # after the ``if``, a write sees what either branch bound, not only the last.
    code = textwrap.dedent(
        """
        import torch

        def f(n, x):
            if n > 4:
                buf = first(n)
            else:
                buf = second(n)
            buf.copy_(x)
        """
    )
    rwrites = summarize("m.py", code, AnalysisOptions()).defs["f"].rwrites
    written = {made for made, kind, _key in rwrites if kind == "torch"}
    assert written == {"first", "second"}
