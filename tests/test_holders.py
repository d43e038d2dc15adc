"""Holders handed in (imlint/holders.py): a function that stores a tensor on an object
it is handed fills persistent storage only when a caller hands a long-lived object."""

from __future__ import annotations

from pathlib import Path

from .test_tiers_and_lifetimes import _check, _tree

FILL = """
import torch


def fill(meta, n):
    if meta.buf is None:
        meta.buf = torch.empty(n)
    meta.buf.zero_()
"""


def _findings(root: Path, files: dict[str, str]) -> list[tuple[str, int, str]]:
    _tree(root, {"pkg/__init__.py": "", **files})
    return [(name, line, code) for name, line, code, _severity in _check(root)]


def _caller(hands: str, setup: str = "", extra: str = "") -> str:
    return f"""
from pkg.fill import fill


class Backend:
    def __init__(self):
        self.meta = None
{setup}
    def step(self, batch, n):
        fill({hands}, n)
{extra}

def serve(backend):
    backend.step(object(), 4)
"""


def test_a_holder_made_for_each_step_is_not_persistent(tmp_path):
    # ``self.meta`` is replaced by every call of ``prepare``: a per-step object.
    caller = _caller(
        "self.meta",
        extra="    def prepare(self, n):\n        self.meta = Meta()\n\n\nclass Meta:\n    buf = None\n",
    )
    caller += "    backend.prepare(4)\n"
    assert _findings(tmp_path, {"pkg/fill.py": FILL, "pkg/backend.py": caller}) == []


def test_a_holder_only_construction_assigns_is_long_lived(tmp_path):
    caller = _caller(
        "self.meta",
        setup="        self.meta = Meta()\n",
        extra="\nclass Meta:\n    buf = None\n",
    )
    assert _findings(tmp_path, {"pkg/fill.py": FILL, "pkg/backend.py": caller}) == [
        ("fill.py", 7, "IM001")
    ]


def test_self_a_global_and_a_long_lived_parameter_are_long_lived_holders(tmp_path):
    for hands, extra in (
        ("self", ""),
        ("_META", "\n\n_META = object()\n"),
    ):
        caller = _caller(hands, extra=extra)
        assert _findings(tmp_path, {"pkg/fill.py": FILL, "pkg/backend.py": caller}) == [
            ("fill.py", 7, "IM001")
        ], hands
    # Handed on through a parameter of the caller that holds ``self``.
    relay = """
from pkg.fill import fill


def relay(holder, n):
    fill(holder, n)


class Backend:
    def step(self, n):
        relay(self, n)
"""
    assert _findings(tmp_path, {"pkg/fill.py": FILL, "pkg/backend.py": relay}) == [
        ("fill.py", 7, "IM001")
    ]


def test_a_request_or_a_call_result_is_not_evidence(tmp_path):
    for hands in ("batch", "self.reqs[0]", "make_meta()"):
        caller = _caller(
            hands,
            setup="        self.reqs = []\n",
            extra="    def add(self, req):\n        self.reqs.append(req)\n",
        )
        caller += "    backend.add(object())\n"
        caller = caller.replace("from pkg.fill import fill", "from pkg.fill import fill, make_meta")
        fill = FILL + "\n\ndef make_meta():\n    return object()\n"
        files = {"pkg/fill.py": fill, "pkg/backend.py": caller}
        assert _findings(tmp_path, files) == [], hands


def test_a_function_nothing_calls_is_not_judged(tmp_path):
    # An entry point: whoever calls it from outside may hand a long-lived object.
    assert _findings(tmp_path, {"pkg/fill.py": FILL}) == [("fill.py", 7, "IM001")]
    # Callers in test code are not the served process.
    test = "from pkg.fill import fill\n\n\ndef test_fill():\n    fill(object(), 4)\n"
    files = {"pkg/fill.py": FILL, "pkg/tests/test_fill.py": test}
    assert _findings(tmp_path, files) == [("fill.py", 7, "IM001")]


def test_a_method_called_through_an_unresolved_receiver_takes_its_callers_evidence(tmp_path):
    impl = """
import torch


class Impl:
    def forward(self, layer, n):
        if layer.buf is None:
            layer.buf = torch.empty(n)
        layer.buf.zero_()
"""
    layer = """
class Layer:
    buf = None

    def __init__(self, impl):
        self.impl = impl

    def run(self, n):
        self.impl.forward({hands}, n)
"""
    files = {"pkg/impl.py": impl, "pkg/layer.py": layer.format(hands="self")}
    assert _findings(tmp_path, files) == [("impl.py", 8, "IM001")]
    files["pkg/layer.py"] = layer.format(hands="Layer(None)")
    assert _findings(tmp_path, files) == []


def test_an_item_of_a_get_or_create_cache_is_long_lived_and_of_a_registry_is_not(tmp_path):
    cache = """
from pkg.fill import fill


class Meta:
    buf = None


class Backend:
    def __init__(self):
        self.metas = {{}}

    def add(self, key):
        {store}

    def step(self, key, n):
        fill(self.metas.get(key), n)


def serve(backend):
    backend.add(1)
    backend.step(1, 4)
"""
    got_or_made = "if key not in self.metas:\n            self.metas[key] = Meta()"
    files = {"pkg/fill.py": FILL, "pkg/backend.py": cache.format(store=got_or_made)}
    assert _findings(tmp_path, files) == [("fill.py", 7, "IM001")]
    files["pkg/backend.py"] = cache.format(store="self.metas[key] = Meta()")
    assert _findings(tmp_path, files) == []


def test_a_parameter_the_function_rebinds_is_judged_by_what_it_is_bound_to(tmp_path):
    fill = """
import torch

_SHARED = {}


def fill(meta, n):
    if meta is None:
        meta = _SHARED
    if "buf" not in meta:
        meta["buf"] = torch.empty(n)
    meta["buf"].zero_()


def serve():
    fill({}, 4)
"""
    assert _findings(tmp_path, {"pkg/fill.py": fill}) == [("fill.py", 11, "IM001")]


REPLACED = """
import torch


class Meta:
    buf = None


class Backend:
    def __init__(self):
        self.meta = Meta()

    def prepare(self):
        {prepare}

    def step(self, n):
        {use}
        if m.buf is None:
            m.buf = torch.empty(n)
        m.buf.zero_()


def serve(backend):
    backend.prepare()
    backend.step(4)
"""


def test_a_store_on_an_object_a_running_method_replaces_is_not_persistent(tmp_path):
    each_step = REPLACED.format(prepare="self.meta = Meta()", use="m = self.meta")
    assert _findings(tmp_path, {"pkg/a.py": each_step}) == []
    direct = each_step.replace("m.buf", "self.meta.buf")
    assert _findings(tmp_path, {"pkg/a.py": direct}) == []
    # Made once (construction, or a get-or-create): one object for the backend's life.
    once = REPLACED.format(prepare="pass", use="m = self.meta")
    assert _findings(tmp_path, {"pkg/a.py": once}) == [("a.py", 19, "IM001")]
    lazy = REPLACED.format(
        prepare="if self.meta is None:\n            self.meta = Meta()", use="m = self.meta"
    )
    assert _findings(tmp_path, {"pkg/a.py": lazy}) == [("a.py", 20, "IM001")]


def test_an_override_takes_the_evidence_of_calls_to_the_method_it_overrides(tmp_path):
    impl = """
import torch


class Base:
    def forward(self, layer, n):
        self._ensure(layer, n)
        layer.buf.zero_()

    def _ensure(self, layer, n):
        pass


class Impl(Base):
    def _ensure(self, layer, n):
        if layer.buf is None:
            layer.buf = torch.empty(n)


class Layer:
    buf = None

    def __init__(self):
        self.impl = Impl()

    def run(self, n):
        self.impl.forward({hands}, n)


def serve(layer):
    layer.run(4)
"""
    # ``self._ensure`` in the base runs the override: ``layer`` is the long-lived layer.
    assert _findings(tmp_path, {"pkg/a.py": impl.format(hands="self")}) == [("a.py", 17, "IM001")]
    assert _findings(tmp_path, {"pkg/a.py": impl.format(hands="Layer()")}) == []
