"""Targeted behaviour of the analysis model and the core rules."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from imlint.config import Settings
from imlint.engine import Linter
from imlint.model import parse_and_build
from imlint.options import AnalysisOptions
from imlint.semantic import KERNEL_TIER, Mode


def check(
    code: str, select=("IM001", "IM002", "IM003", "IM005"), **options
) -> list[tuple[int, str]]:
    settings = Settings(select=select, options=AnalysisOptions(**options))
    findings = Linter(settings).check_text("t.py", textwrap.dedent(code))
    return [(f.line, f.code) for f in findings]


def messages(code: str) -> list[str]:
    return [f.message for f in Linter(Settings()).check_text("t.py", textwrap.dedent(code))]


SEED_SHAPE = """
import torch

def _split(kv, num_pages, buffers):
    dev = kv.device
    key = ("split", dev)
    buf = buffers.get(key)
    if buf is None or buf.shape[0] < num_pages * 2:
        buf = torch.empty(num_pages * 2, 37440, dtype=torch.uint8, device=dev)
        buffers[key] = buf
    mkey = ("mask", dev)
    mbuf = buffers.get(mkey)
    if mbuf is None or mbuf.shape[0] < num_pages:
        {mask_alloc}
        buffers[mkey] = mbuf
    mask = mbuf[:num_pages]
    mask.zero_()
    _page_split_kernel[(num_pages,)](kv, buf, mask)
    return buf
"""


def test_seed_split_buffer_is_latent_and_guarded_mask_is_not_reported():
    guarded = "with torch.inference_mode(False):\n            mbuf = torch.empty(num_pages, dtype=torch.int8, device=dev)"
    assert check(SEED_SHAPE.format(mask_alloc=guarded)) == [(9, "IM002")]


def test_seed_unguarded_mask_is_an_error_because_of_zero():
    bare = "mbuf = torch.empty(num_pages, dtype=torch.int8, device=dev)"
    assert check(SEED_SHAPE.format(mask_alloc=bare)) == [(9, "IM002"), (14, "IM001")]


def test_finding_points_at_the_allocation_call_not_the_store():
    settings = Settings(extend_select=("IM005",))
    code = "import torch\n_C = {}\ndef f(n):\n    if n not in _C:\n        x = 1; _C[n] = torch.zeros(n)\n"
    (finding,) = Linter(settings).check_text("t.py", code)
    assert (finding.line, finding.col) == (5, 24)
    assert (finding.end_line, finding.end_col) == (5, 38)


def test_message_names_storage_and_the_write():
    (msg,) = messages(SEED_SHAPE.format(mask_alloc="mbuf = torch.empty(num_pages)"))[1:]
    assert "`buffers[mkey]`" in msg and "`mask.zero_()` (line 17)" in msg
    assert "inference_mode(False)" in msg


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        # The module imports torch under another name.
        ("import torch as th\n_C={}\ndef f(n):\n    if n not in _C:\n        _C[n] = th.zeros(n)\n", "IM005"),
        # Blank storage nothing visible writes: filled out of sight (IM002).
        ("from torch import empty as e\n_C={}\ndef f(n):\n    if n not in _C:\n        _C[n] = e(n)\n", "IM002"),
        ("import torch\n_C={}\ndef f(x, n):\n    if n not in _C:\n        _C[n] = x.new_full((n,), 1.0)\n", "IM005"),
        ("import torch\n_C={}\ndef f(n):\n    if n not in _C:\n        _C[n] = torch.empty(n).view(-1, 1)\n", "IM002"),
        ("import torch\n_C={}\ndef f(n):\n    if n not in _C:\n        _C[n] = (torch.empty(n), 1)\n", "IM002"),
    ],
)  # fmt: skip
def test_allocation_spellings(code, expected):
    assert check(code) == [(5, expected)]


def test_unrelated_condition_is_not_lazy_but_is_im004():
    code = "import torch\nclass A:\n    def f(self, n):\n        if n > 3:\n            self.b = torch.empty(n)\n"
    assert check(code) == []
    assert check(code, select=("IM004",)) == [(5, "IM004")]


def test_changed_cache_key_is_lazy():
    code = """
    import torch
    class A:
        def f(self, key, n):
            if key != self._key:
                self._key = key
                self._buf = torch.empty(n)
    """
    assert check(code) == [(7, "IM002")]


def test_flag_variable_is_lazy():
    code = """
    import torch
    _C = {}
    def f(n):
        buf = _C.get(n)
        missing = buf is None
        if missing:
            buf = torch.empty(n)
            _C[n] = buf
        return buf
    """
    assert check(code) == [(8, "IM002")]


def test_write_inside_the_allocating_branch_does_not_make_it_an_error():
    code = """
    import torch
    _C = {}
    def f(n):
        buf = _C.get(n)
        if buf is None:
            buf = torch.empty(n)
            buf.zero_()
            _C[n] = buf
        return buf
    """
    assert check(code) == [(7, "IM005")]


def test_write_in_another_method_of_the_class_makes_it_an_error():
    code = """
    import torch
    class A:
        def get(self, n):
            if self._ws is None:
                self._ws = torch.empty(n)
            return self._ws
        def reset(self):
            ws = self._ws
            ws[:] = 0
    """
    assert check(code) == [(6, "IM001")]


def test_write_to_another_key_of_the_same_dict_does_not_count():
    code = """
    import torch
    def f(buffers, n):
        a = buffers.get("a")
        if a is None:
            a = torch.empty(n)
            buffers["a"] = a
        b = buffers.get("b")
        if b is None:
            with torch.inference_mode(False):
                b = torch.empty(n)
            buffers["b"] = b
        b.zero_()
    """
    assert check(code) == [(6, "IM002")]


@pytest.mark.parametrize(
    "guard",
    [
        "with torch.inference_mode(False):",
        "with torch.inference_mode(mode=False):",
        "with torch.autograd.inference_mode(False):",
        "with torch.no_grad(), torch.inference_mode(False):",
        "with custom.guard():",
    ],
)
def test_guards(guard):
    code = f"""
    import torch
    import custom
    _C = {{}}
    def f(n):
        if n not in _C:
            {guard}
                _C[n] = torch.empty(n)
    """
    assert check(code, extra_guards=frozenset({"custom.guard"})) == []


@pytest.mark.parametrize(
    "not_guard",
    [
        "with torch.no_grad():",
        "with torch.inference_mode():",
        "with torch.inference_mode(True):",
        "with torch.inference_mode(flag):",
        "with torch.enable_grad():",
    ],
)
def test_not_guards(not_guard):
    code = f"""
    import torch
    _C = {{}}
    def f(n, flag):
        if n not in _C:
            {not_guard}
                _C[n] = torch.empty(n)
    """
    assert check(code) == [(7, "IM002")]


def test_guard_around_a_nested_def_does_not_guard_its_body():
    code = """
    import torch
    _C = {}
    def outer(n):
        with torch.inference_mode(False):
            def inner():
                if n not in _C:
                    _C[n] = torch.empty(n)
        return inner
    """
    assert check(code) == [(8, "IM002")]


def test_lambda_body_is_not_guarded_by_enclosing_with():
    code = """
    import torch
    def f(reg, n):
        with torch.inference_mode(False):
            return reg.get("k", lambda: torch.empty(n))
    """
    _module, model = parse_and_build(textwrap.dedent(code), AnalysisOptions())
    (site,) = model.allocations
    assert site.in_lambda and site.store is None


def test_model_records_mode_lazy_reason_and_writes():
    code = textwrap.dedent(SEED_SHAPE.format(mask_alloc="mbuf = torch.empty(num_pages)"))
    _, model = parse_and_build(code, AnalysisOptions())
    split, mask = model.sites
    assert split.store.target == "buffers[key]" and split.lazy == "cache miss"
    assert split.mode is Mode.UNKNOWN and split.torch_writes == []
    # The Triton launch writes both: the split buffer only from a kernel (the latent row).
    assert [w.kind for w in split.writes] == ["handed"]
    assert split.tier == KERNEL_TIER  # blank storage handed to a kernel from elsewhere
    assert mask.store.target == "buffers[mkey]"
    assert [w.text for w in mask.torch_writes] == ["mask.zero_()"]
    assert [w.kind for w in mask.writes] == ["torch", "handed"]


def test_init_attribute_stores_are_construction():
    code = """
    import torch
    class A:
        def __init__(self, n, lazy):
            if lazy is None:
                self.buf = torch.empty(n)
            self.buf.zero_()
    """
    assert check(code) == []


def test_dict_created_earlier_in_the_same_function_is_local():
    code = """
    import torch
    class A:
        def build(self, n):
            self.cache = {}
            if n not in self.cache:
                self.cache[n] = torch.empty(n)
    """
    assert check(code) == []


def test_extra_allocator_bare_and_dotted_names():
    code = """
    from kern import Workspace
    import kern
    _C = {}
    def f(n):
        if n not in _C:
            _C[n] = Workspace(n)
        if -n not in _C:
            _C[-n] = kern.Workspace(n)
    """
    # Nothing writes what the configured allocators return: the read-only tier.
    assert check(code, extra_allocators=frozenset({"kern.Workspace"})) == [
        (7, "IM005"),
        (9, "IM005"),
    ]
    assert check(code, extra_allocators=frozenset({"Workspace"})) == [(7, "IM005"), (9, "IM005")]
    assert check(code) == []


def test_async_and_nested_class_methods():
    code = """
    import torch
    def factory():
        class Cache:
            async def get(self, n):
                if self.t is None:
                    self.t = torch.empty(n)
                return self.t
        return Cache
    """
    assert check(code) == [(7, "IM002")]


def test_module_level_allocations_are_not_lazy():
    assert (
        check("import torch\n_BUF = torch.empty(4)\nclass A:\n    table = torch.zeros(2)\n") == []
    )


def test_write_through_a_getters_return_value_is_an_error():
    code = """
    import torch
    class Backend:
        def _staging(self, n):
            st = self._bufs.get(n)
            if st is None:
                st = torch.empty(n)
                self._bufs[n] = st
            return st

        def forward(self, x):
            st = self._staging(x.numel())
            st[: x.numel()].copy_(x)
    """
    assert check(code) == [(7, "IM001")]


def test_module_getter_return_value_writes_count():
    code = """
    import torch
    _WS = {}
    def workspace(n):
        if n not in _WS:
            _WS[n] = torch.zeros(n)
        return _WS[n]
    def run(n):
        workspace(n).zero_()
    """
    assert check(code) == [(6, "IM001")]


@pytest.mark.parametrize(
    "alloc", ["torch.empty(0)", "torch.empty((0,), dtype=torch.int64)", "x.new_zeros(0)"]
)
def test_zero_element_placeholders_are_not_buffers(alloc):
    code = f"import torch\n_C = {{}}\ndef f(x, n):\n    if n not in _C:\n        _C[n] = {alloc}\n"
    assert check(code) == []


def test_kwargs_is_a_fresh_dict():
    code = "import torch\ndef f(n, **kwargs):\n    if 'q' not in kwargs:\n        kwargs['q'] = torch.ones(n)\n    return kwargs\n"
    assert check(code) == []


def test_arithmetic_on_an_allocation_is_still_that_allocation():
    code = "import functools, torch\n@functools.lru_cache\ndef inv(n):\n    return 1.0 / torch.tensor(n)\n"
    assert check(code) == [(4, "IM005")]


def test_sibling_cache_filled_in_the_same_branch_is_lazy():
    code = """
    import torch
    class A:
        def bufs(self, n):
            if self._a is None:
                self._a = torch.empty(n)
                self._b = torch.empty(n)
    """
    assert check(code) == [(6, "IM002"), (7, "IM002")]


def test_siblings_filled_after_an_early_exit_on_one_cache_are_lazy():
    """``if cap >= n: return`` reads one buffer; everything the function fills after
    it runs only on a miss, not only the buffer the test reads."""
    code = """
    import torch
    class A:
        def grow(self, n):
            cap = 0 if self._a is None else self._a.shape[0]
            if cap >= n:
                return
            self._a = torch.empty(n)
            self._b = torch.empty(n)
        def other(self, n):
            if n > 3:
                return
            self._c = torch.empty(n)
    """
    assert check(code) == [(8, "IM002"), (9, "IM002")]


def test_a_method_another_method_calls_on_a_miss_is_lazy():
    """``_alloc`` fills storage whenever it runs; the constructor's call is set-up, but
    a call under a test of what ``_alloc`` fills (or after an exit on it) is a growth
    path that runs on first use of a larger size."""
    code = """
    import torch
    class A:
        def __init__(self, n):
            self._alloc(n)
        def _alloc(self, n):
            self.cap = n
            self.out = torch.empty(n)
        def grow(self, n):
            {grow}
        def other(self, n):
            if n > 3:
                self._alloc(n)
    """
    assert check(code.replace("{grow}", "if n > self.cap:\n                self._alloc(n)")) == [
        (8, "IM002")
    ]
    exit_first = "if self.cap >= n:\n                return\n            self._alloc(n)"
    assert check(code.replace("{grow}", exit_first)) == [(8, "IM002")]
    # Called only under tests of something else, or from the constructor: not lazy.
    assert check(code.replace("{grow}", "self._alloc(n)")) == []
    # A raise is a precondition: what follows runs on every valid call.
    raise_first = (
        "if self.cap is None:\n                raise ValueError(n)\n            self._alloc(n)"
    )
    assert check(code.replace("{grow}", raise_first)) == []


def test_entries_of_a_container_of_containers_are_storage():
    """``_WS[dev][tag] = t`` fills an entry when ``_WS`` holds lists or dicts; indexing
    into anything else may be a copy into a tensor."""
    code = """
    import torch
    _WS = {made}
    def ws(dev, tag, n):
        buf = _WS[dev][tag]
        if buf is not None and buf.shape[0] >= n:
            return buf
        buf = torch.empty(n)
        _WS[dev][tag] = buf
        return buf
    """
    for made in ("[[None] * 4 for _ in range(16)]", "{d: {} for d in range(8)}", "[[], []]"):
        assert check(code.replace("{made}", made)) == [(8, "IM002")], made
    assert check(code.replace("{made}", "make_table()")) == []


def test_a_local_bound_to_torch_factories_allocates():
    """``factory = torch.zeros if z else torch.empty``, then ``factory(n)``: a site; a
    store that runs before the allocation (and no loop brings it back) does not keep
    it (``self._retired.append(old)`` keeps the outgrown tensor)."""
    code = """
    import torch
    class W:
        def __init__(self):
            self._eager = {}
            self._retired = []
        def tensor(self, name, n, zero=False):
            storage = self._eager.get(name)
            if storage is None or storage.numel() < n:
                if storage is not None:
                    self._retired.append(storage)
                factory = torch.zeros if zero else torch.empty
                storage = factory((n,))
                self._eager[name] = storage
            return storage[:n]
    """
    assert check(code) == [(13, "IM002")]
    assert [m.split(" is ")[0] for m in messages(code)] == ["Lazy buffer `self._eager[name]`"]
    assert check(code.replace("torch.zeros if zero else torch.empty", "make_factory()")) == []
    lam = "lambda *shape: torch.empty(*shape, device='cuda')"
    assert check(code.replace("torch.zeros if zero else torch.empty", lam)) == [(13, "IM002")]


def test_an_entry_store_under_isinstance_list_is_not_a_tensor_write():
    """``lora.w[i] = ...`` in the ``isinstance(lora.w, list)`` branch fills a list; the
    tensor the other branch keeps in ``lora.w`` is not written by it."""
    code = """
    import torch
    class M:
        def __init__(self):
            self.loras = {}
        def add(self, lora):
            if lora.a is None:
                if isinstance(lora.w, {kinds}):
                    for i in range(len(lora.w)):
                        lora.w[i] = lora.w[i].pin_memory()
                else:
                    lora.w = lora.w.pin_memory()
                lora.a = True
            self.loras[0] = lora
    """
    assert check(code.replace("{kinds}", "list")) == [(12, "IM005")]
    assert check(code.replace("{kinds}", "(list, tuple)")) == [(12, "IM005")]
    assert check(code.replace("{kinds}", "torch.Tensor")) == [(12, "IM001")]


def test_a_branch_that_binds_a_missing_value_and_keeps_it_is_lazy():
    """``if table is None: table = ...; self._tables.setdefault(k, []).insert(0, table)``:
    the caller looked the table up in that storage; a ``tuple(...)`` of new tensors
    holds them; ``insert`` and an entry's list keep what they are given."""
    code = """
    import torch
    class S:
        def __init__(self):
            self._tables = {}
        def publish(self, layer, table, fields):
            if table is None:
                table = tuple(torch.empty_like(t) for t in fields)
                {keep}
            return table
    """
    for keep in (
        "self._tables.setdefault(layer, []).insert(0, table)",
        "self._tables.setdefault(layer, []).append(table)",
        "self._all.insert(0, table)",
    ):
        assert check(code.replace("{keep}", keep)) == [(8, "IM002")], keep
    # Kept, but the test is on something else: built on every call, not a miss.
    other = code.replace("if table is None:", "if fields:")
    assert check(other.replace("{keep}", "self._all.insert(0, table)")) == []
    # Not kept: only returned to the caller.
    assert check(code.replace("{keep}", "pass")) == []
    # The branch runs when the name was given: a conversion of the argument, every call.
    given = code.replace("if table is None:", "if table is not None:")
    assert check(given.replace("{keep}", "self._all.insert(0, table)")) == []


def test_an_allocation_after_a_scan_of_the_kept_storage_is_lazy():
    """``for buf in reversed(pool): if fits: return buf`` then allocate and keep: the
    allocation runs only when no kept buffer fits."""
    code = """
    import torch
    _POOL = {}
    def get(n, key):
        pool = _POOL.setdefault(key, [])
        for buf in reversed({scanned}):
            if buf.numel() >= n:
                return buf[:n]
        buf = torch.empty(2 * n)
        pool.append(buf)
        return buf[:n]
    """
    assert check(code.replace("{scanned}", "pool")) == [(9, "IM002")]
    # A loop over something else says nothing about the pool.
    assert check(code.replace("{scanned}", "[torch.ones(1)]")) == []


def test_lazy_positions_equal_libcst_position_provider():
    """The model's on-demand ranges are the ranges LibCST's PositionProvider gives."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from imlint.positions import Positions

    from .conftest import FIXTURES, fixture_text

    checked = 0
    for path in sorted(FIXTURES.rglob("*.py")):
        module = cst.parse_module(fixture_text(path))
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        positions = Positions(module)
        positions.tops.update(positions.top_ids)
        for i, stmt in enumerate(module.body):
            for node in _walk(stmt):
                positions.tops.setdefault(id(node), i)
        for node, rng in expected.items():
            if id(node) in positions.tops:
                assert positions[node] == rng, (path, type(node).__name__)
                checked += 1
    assert checked > 1000


def _walk(node):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


def test_module_level_import_below_the_function_is_seen():
    code = """
    _C = {}
    def f(n):
        if n not in _C:
            with im(False):
                _C[n] = empty(n)
        if -n not in _C:
            _C[-n] = empty(n)
    from torch import empty
    from torch import inference_mode as im
    """
    assert check(code) == [(8, "IM002")]


def test_a_string_keyed_store_fills_a_dict_not_a_tensor():
    code = """
    import torch
    _WS = {}
    def ws_for(q, key, n):
        ws = _WS.get(key)
        if ws is None:
            ws = {"a": q.new_zeros(n)}
            _WS[key] = ws
        ws["meta"] = n
        return ws
    """
    assert check(code) == [(7, "IM005")]
    assert check(code.replace('ws["meta"] = n', 'ws["a"][:n] = 1')) == [(7, "IM001")]


@pytest.mark.parametrize("getter", ["view", "get", "peek"])
def test_a_getter_named_like_a_tensor_or_dict_method_is_the_class_method(getter):
    """``self.view(n).zero_()`` calls the class's own ``view``: the write reaches the
    buffer it returns (a method table lookup, not the tensor's ``view``)."""
    code = f"""
        import torch
        class Pool:
            def _make(self, n):
                if self._buf is None:
                    self._buf = torch.empty(n)
                return self._buf
            def {getter}(self, n):
                return self._make(n)
            def reset(self, n):
                self.{getter}(n).zero_()
        """
    assert check(code) == [(6, "IM001")]


def test_an_object_made_by_dunder_new_is_this_calls_own():
    made = textwrap.dedent(
        """
        import torch

        class Block(torch.nn.Module):
            pass

        @torch.inference_mode()
        def build(n):
            block = {make}
            block.buf = torch.empty(n)
            block.buf.zero_()
            return 1
        """
    )
    settings = Settings(extend_select=("IM004",))
    codes = lambda make: [  # noqa: E731
        f.code for f in Linter(settings).check_text("t.py", made.format(make=make))
    ]
    assert codes("Block.__new__(Block)") == []
    # An object that may be someone else's is still reported (made on every run inside
    # inference mode, its only write filling it right after the allocation, in the
    # same call and mode: IM004's, opt-in).
    assert codes("get_block()") == ["IM004"]


MATCHED = """
import torch

_CACHE = {}


def get(k, n):
    match _CACHE.get(k):
        case None:
            buf = torch.empty(n)
            _CACHE[k] = buf
            return buf
        case found:
            return found


def run(x):
    get(1, 4).zero_()


class Pool:
    def __init__(self):
        self.buf = None
        self.cap = 0

    def step(self, x):
        match self.buf:
            case None:
                self.buf = torch.zeros(8)
        self.buf.copy_(x)

    def _grow(self, n):
        self.cap = n
        self.out = torch.empty(n)

    def ensure(self, n):
        match self.cap:
            case c if c < n:
                self._grow(n)
"""


def test_a_match_on_the_cache_is_a_cache_test():
    """``match cache.get(k): case None: ...`` tests the cache as an ``if`` does: the arm
    runs on a miss. So does an arm that calls a filling method on a match of what it
    fills."""
    assert check(MATCHED) == [(10, "IM001"), (29, "IM001"), (34, "IM002")]
    # A match on something else (the input's kind) is not a cache test.
    other = MATCHED.replace("match _CACHE.get(k):", "match k:").replace(
        "match self.buf:", "match x.dtype:"
    )
    assert check(other) == [(34, "IM002")]


def _rebinding_code(branches: int) -> str:
    """A function that rebinds ``x`` on both arms of many branches, then keeps it: the
    definitions reaching the store double with each branch."""
    body = [
        "def step(self, n, flags):",
        "    if self._buf is not None:",
        "        return self._buf",
    ]
    body.append("    x = torch.empty(n)")
    for i in range(branches):
        body += [
            f"    if flags[{i}]:",
            "        x = x.view(-1)",
            "    else:",
            "        x = x.view(n)",
        ]
    body += ["    self._buf = x", "    return x", "", "def reset(self):", "    self._buf.zero_()"]
    return "import torch\n\nclass C:\n" + textwrap.indent("\n".join(body), "    ") + "\n"


def test_each_definition_is_walked_once_however_many_paths_reach_it(monkeypatch):
    """10 branches give 2**10 paths to the allocation: walking each definition once
    keeps the analysis linear (it used to walk every path: minutes for one function)."""
    from imlint.values import FunctionAnalysis

    walks = {"flow": 0, "tokens": 0}
    flow_of, tokens_of = (
        FunctionAnalysis._flow_of_definition,
        FunctionAnalysis._tokens_of_definition,
    )

    def counted_flow(self, v):
        walks["flow"] += 1
        return flow_of(self, v)

    def counted_tokens(self, v):
        walks["tokens"] += 1
        return tokens_of(self, v)

    monkeypatch.setattr(FunctionAnalysis, "_flow_of_definition", counted_flow)
    monkeypatch.setattr(FunctionAnalysis, "_tokens_of_definition", counted_tokens)
    assert check(_rebinding_code(10)) == [(7, "IM001")]
    definitions = 1 + 2 * 10
    assert 0 < walks["flow"] <= 2 * definitions
    assert 0 < walks["tokens"] <= 2 * definitions


def test_a_loop_that_rebinds_from_itself_still_reaches_the_allocation():
    """A cycle (``x = x + y`` in a loop) is cut where it closes; what is found through
    it is whole: the allocation before the loop is still what the store keeps."""
    code = """
    import torch

    class C:
        def grow(self, n, parts):
            if self._acc is None:
                acc = torch.zeros(n)
                for p in parts:
                    acc = acc.view(-1)
                    acc = acc.view(n)
                self._acc = acc
            return self._acc

        def reset(self):
            self._acc.zero_()
    """
    assert check(code) == [(7, "IM001")]
