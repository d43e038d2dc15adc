"""Narrowing (``imlint.narrow``): LibCST sees only the functions a check needs, and
the findings are exactly those of the whole module."""

from __future__ import annotations

import ast
import dataclasses
import random
import textwrap

import libcst as cst
import pytest
from imlint.rules import ALL_RULES

from imlint.config import Settings, load_settings
from imlint.engine import Linter
from imlint.narrow import narrow

from .conftest import FIXTURES, fixture_text, project_facts

#: Every rule, opt-in ones included (IM004 sees stores that are not lazy).
LINTER = Linter(Settings(), [rule() for rule in ALL_RULES])


def both(code: str, linter: Linter = LINTER, facts=None, path: str = "t.py"):
    """(findings of the whole module, findings of the narrowed one), as plain data."""
    code = textwrap.dedent(code)
    if facts is None:
        facts = linter.facts_for(path, code, ast.parse(code))

    def plain(found):
        return [dataclasses.replace(f, site=None) for f in found]

    full = linter.check_all(path, code, facts)
    narrowed = linter.check_all(path, code, facts, narrowed=True)
    return tuple(map(plain, full)), tuple(map(plain, narrowed))


def view(code: str) -> str | None:
    code = textwrap.dedent(code)
    facts = LINTER.facts_for("t.py", code, ast.parse(code))
    return narrow(code, ast.parse(code), LINTER.settings.options, facts)


@pytest.mark.parametrize(
    "path",
    sorted(p for p in FIXTURES.rglob("*.py") if not p.name.endswith(".fixed.py")),
    ids=lambda p: str(p.relative_to(FIXTURES)),
)
def test_fixtures_narrowed_equal_whole(path):
    linter = Linter(load_settings(FIXTURES / "pyproject.toml"))
    text = fixture_text(path)
    try:
        ast.parse(text)
    except SyntaxError:
        pytest.skip("not Python")
    full, narrowed = both(text, linter, project_facts(linter, path), str(path))
    assert narrowed == full


# Each case keeps what decides a finding in a function that allocates nothing.
CASES = {
    "a method another method calls on a miss": """
        import torch
        class Pool:
            def _alloc(self, n):
                self.cap = n
                self.out = torch.empty(n)
            def unrelated(self):
                return 1
            def grow(self, n):
                if n > self.cap:
                    self._alloc(n)
        """,
    "a write in another method makes it an error": """
        import torch
        class Pool:
            def get(self, n):
                if self._buf is None:
                    self._buf = torch.empty(n)
                return self._buf
            def unrelated(self):
                return 1
            def reset(self):
                self._buf.zero_()
        """,
    "a write through a getter": """
        import torch
        class Pool:
            def _get(self, n):
                if self._buf is None:
                    self._buf = torch.empty(n)
                return self._buf
            def peek(self, n):
                return self._get(n)
            def noise(self):
                print(self)
            def reset(self, n):
                self.peek(n).zero_()
        """,
    "a write through a module-level getter and an alias": """
        import torch
        _BUF = None
        def get_buf(n):
            global _BUF
            if _BUF is None:
                _BUF = torch.empty(n)
            return _BUF
        def noise():
            print("noise")
        def use():
            b = get_buf(4)
            b.add_(1)
        """,
    "the container is a dict because __init__ says so": """
        import torch
        class Cache:
            def __init__(self):
                self._k = {}
            def noise(self, x):
                print(x)
            def get(self, key):
                if self._k.get(key) is None:
                    self._k[key] = torch.zeros(4)
                return self._k[key]
        """,
    "an import inside another function qualifies the allocator": """
        _Z = None
        def setup():
            from torch import zeros as Z
            print(Z)
        def get():
            global _Z
            if _Z is None:
                _Z = Z(3)
            return _Z
        def write():
            _Z.fill_(0)
        """,
    "storage on a handed-in object, written by a caller": """
        import torch
        def ensure(obj, n):
            if obj.buf is None:
                obj.buf = torch.empty(n)
        def noise():
            return 2
        def caller(obj):
            ensure(obj, 3)
            obj.buf.mul_(2)
        """,
    "a cached function, written through its result": """
        import functools
        import torch
        @functools.lru_cache
        def table(n):
            return torch.arange(n)
        def noise(a, b):
            return a + b
        def scale():
            table(3).mul_(2)
        """,
    "functions under a module-level if": """
        import torch
        _B = {}
        if True:
            def get(k):
                if k not in _B:
                    _B[k] = torch.empty(k)
                return _B[k]
        def write(k):
            _B[k].zero_()
        def noise():
            print("noise")
        """,
    "a class with nothing to keep, and one whose stubs import": """
        import torch
        _C = {}
        class Empty:
            def a(self):
                return 1
            @property
            def b(self):
                return 2
        class Imports:
            def a(self):
                from torch import zeros as Z
                return Z
            def b(self):
                print(self)
        def get(k):
            if k not in _C:
                _C[k] = Z(k)
            return _C[k]
        """,
    "a decorated, multi-line stub and a one-line function": """
        import torch
        _C = {}
        def one(x): return x
        @staticmethod
        def many(
            a,
            b,
        ):
            '''Docs.'''
            return a
        def get(k):
            if k not in _C:
                _C[k] = torch.ones(k)
            return _C[k]
        """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cross_function_cases(name):
    full, narrowed = both(CASES[name])
    assert full[0], "the case must produce a finding"
    assert narrowed == full
    stubbed = view(CASES[name])
    assert stubbed is not None and stubbed != textwrap.dedent(CASES[name]), "nothing narrowed"


def test_writes_elsewhere_decide_the_rule():
    """The cross-function cases are real: without the writer, the finding changes."""
    full, _ = both(CASES["a write in another method makes it an error"])
    assert [f.code for f in full[0]] == ["IM001"]
    without = CASES["a write in another method makes it an error"].rsplit("def reset", 1)[0]
    # Blank storage with no visible writer: filled out of sight (IM002), not a crash.
    assert [f.code for f in both(without)[0][0]] == ["IM002"]


def test_lines_and_columns_are_kept():
    code = textwrap.dedent(CASES["a decorated, multi-line stub and a one-line function"])
    narrowed = view(code)
    assert narrowed is not None
    assert narrowed.count("\n") == code.count("\n")
    for before, after in zip(code.splitlines(), narrowed.splitlines(), strict=True):
        assert after == before or not after.strip()
    assert "def one" not in narrowed and "def many" not in narrowed  # no imports: gone
    ast.parse(narrowed)


def test_nothing_to_check_without_an_allocating_call():
    assert view("import torch\ndef f(x):\n    return torch.relu(x)\n# torch.empty(3)\n") is None


def test_crlf_and_lone_carriage_returns():
    code = "import torch\r\n_C = {}\r\ndef n():\r\n    pass\r\ndef g(k):\r\n    if k not in _C:\r\n        _C[k] = torch.empty(k)\r\n"
    full, narrowed = both(code)
    assert full[0] and narrowed == full
    lone = code.replace("\r\n", "\r", 1)
    assert view(lone) == lone  # not narrowed: line numbering is left to the full parse
    # A form feed is not a line end to Python: lines must not shift.
    feed = "import torch\n\x0c\ndef n():\n    x = 1\x0c\n    return x\n_C = {}\ndef g(k):\n    if k not in _C:\n        _C[k] = torch.empty(k)\n"
    full, narrowed = both(feed)
    assert full[0] and narrowed == full
    assert view(feed).count("\n") == feed.count("\n")


# ----------------------------------------------------------------------------- random


METHODS = [
    "def get(self, n):\n    if self._buf is None:\n        self._buf = torch.empty(n)\n    return self._buf",
    "def reset(self):\n    self._buf.zero_()",
    "def via_get(self, n):\n    self.get(n).zero_()",
    "def cached(self, key):\n    if key not in self._k:\n        self._k[key] = torch.zeros(4)\n    return self._k[key]",
    "def fill(self, key):\n    self._k[key].fill_(1)",
    "def alias(self):\n    b = self._buf\n    b.copy_(b)",
    "def setup(self):\n    self._m = {}",
    "def put(self, k):\n    if self._m.get(k) is None:\n        self._m[k] = torch.ones(2)",
    "def noise(self):\n    return 1",
    "def sub(self, i):\n    self._w[i] = 0",
    "def lazy_w(self, n):\n    if self._w is None:\n        self._w = self._buf.new_zeros(n)",
    "@property\ndef w(self):\n    return self._w",
    "def imp(self):\n    import numpy as torch2\n    return torch2",
    "def conv(self, x):\n    if self._c is None or self._c.device != x.device:\n        self._c = self._c.to(x.device)",
    "def conv_local(self, x):\n    if self._d is None:\n        a = x.float()\n        b = a\n        self._d = b",
    "def conv_write(self):\n    self._c.zero_()\n    self._d.mul_(2)",
    "def fwd(self, x):\n    h = x.to(self._k)\n    return h.exp()",
    "def by_name(self, n, z):\n    f = torch.zeros if z else torch.empty\n    if self._f is None:\n        self._f = f(n)",
    "def pub(self, t):\n    if t is None:\n        t = tuple(torch.empty(2) for _ in range(2))\n        self._k.setdefault(1, []).insert(0, t)",
    "def _alloc(self, n):\n    self.cap = n\n    self._g = torch.empty(n)",
    "def grow(self, n):\n    if n > self.cap:\n        self._alloc(n)",
    "def grow_exit(self, n):\n    if self._g.numel() >= n:\n        return\n    self._alloc(n)",
]
FUNCTIONS = [
    "def get_buf(n):\n    global _BUF\n    if _BUF is None:\n        _BUF = torch.empty(n)\n    return _BUF",
    "def use_buf():\n    get_buf(4).add_(1)",
    "def pool_get(n):\n    pool = _CACHE.setdefault(n, [])\n    for b in pool:\n        if b.numel() >= n:\n            return b\n    b = torch.empty(n)\n    pool.append(b)\n    return b",
    "def use_buf2():\n    _BUF.zero_()",
    "def cache_get(k):\n    if k not in _CACHE:\n        _CACHE[k] = torch.empty(k)\n    return _CACHE[k]",
    "def cache_write(k):\n    _CACHE[k].fill_(0)",
    "@lru_cache\ndef table(n):\n    return torch.arange(n)",
    "def table_write():\n    table(3).zero_()",
    "def handed(obj, n):\n    if obj.buf is None:\n        obj.buf = torch.empty(n)",
    "def caller(obj):\n    handed(obj, 3)\n    obj.buf.mul_(2)",
    "def lazy_import():\n    from torch import zeros as Z\n    return None",
    "def z_get():\n    global _Z\n    if _Z is None:\n        _Z = Z(3)",
    "def z_write():\n    _Z += 1",
    "def noise(x):\n    return [y for y in x]",
    "def out_write(a):\n    torch.add(a, a, out=_BUF)",
    "def regs():\n    _REG.setdefault('k', torch.empty(1))",
    "def reg_write():\n    _REG['k'].zero_()",
    "def big(k):\n    if k not in _BIG:\n        _BIG[k] = torch.empty(1)",
    "def big_write(k):\n    _BIG[k].zero_()",
    "def dd(k):\n    if _DD.get(k) is None:\n        _DD[k] = torch.zeros(k)",
    "def dd_write(k):\n    _DD[k] += 1",
    "def table_of(reg, k):\n    if reg.tables.get(k) is None:\n        reg.tables[k] = torch.ones(k)",
    "def table_use(reg, k):\n    reg.tables[k].mul_(2)",
    "def table_use2(r, k):\n    r.tables[k].mul_(2)",
    "def decl(reg):\n    reg.tables = {}",
    "def slot(reg, k):\n    if not reg.slots[k]:\n        reg.slots[k] = torch.ones(k)",
    "def decl_slots(reg):\n    reg.slots = {}",
    "def not_dict(k):\n    global _FLAG\n    if _FLAG:\n        _NOT[k] = torch.empty(1)",
    "@lru_cache\ndef bias(t):\n    b = t.float().contiguous()\n    return b",
    "def bias_write(t):\n    bias(t).zero_()",
    "def to_global(x):\n    global _BUF\n    if _BUF is None:\n        _BUF = x.to(torch.float32)",
    "def to_pool(x):\n    for y in x:\n        if y not in _CACHE:\n            _CACHE[y] = y.half()",
]


def _module(rng: random.Random) -> str:
    methods = rng.sample(METHODS, rng.randint(1, len(METHODS)))
    functions = rng.sample(FUNCTIONS, rng.randint(1, len(FUNCTIONS)))
    parts = [
        '"""A module\n\nwith a docstring."""',
        "import torch",
        "from functools import lru_cache",
        "from collections import defaultdict",
        "_CACHE = {}",
        "_BIG = {\n    'a': 1,\n    'b': [1,\n          2],\n}",
        "_DD = defaultdict(\n    dict,\n)",
        "_NOT = (\n    1,\n)",
        "_REG = {}",
        "_BUF = None",
        "_Z = None",
        "class Pool:",
        '    """Docs\n    over lines."""',
        "    _TABLE = [\n        1,\n    ]",
        "    def __init__(self):\n        self._k = {}\n        self._buf = None\n        self._w = None\n        self._c = self._d = None",
    ]
    parts += [textwrap.indent(m, "    ") for m in methods]
    parts += functions
    return "\n".join(parts) + "\n"


def test_random_modules_narrowed_equal_whole():
    rng = random.Random(20261202)
    stubbed = errors = 0
    for _ in range(150):
        code = _module(rng)
        full, narrowed = both(code)
        assert narrowed == full, code
        errors += sum(f.severity == "error" for f in full[0])
        stubbed += view(code) != code
    assert stubbed > 50 and errors > 50  # the comparison saw narrowing and errors


# ----------------------------------------------------------------------------- positions

TRICKY_CALLS = """
import torch
@deco(1)
def f(x=g(), *, y=(h(2))):
    s = f"{x.shape()} {len(x)!r:>{w(3)}} é {k('é')}"
    t = ( torch.empty(
        3,
    ) )
    u = a.b(c).d(e)(f2())
    v = [m(i) for i in r(4) if p(i)]
    return lambda q=n(): o(q), "ü", t2(s)
"""


def test_call_ranges_from_python_match_code_generation():
    """Positions of calls come from Python's parser (no code generation); they are the
    ranges LibCST's PositionProvider gives, f-strings and parentheses included."""
    from libcst import MetadataWrapper
    from libcst.metadata import PositionProvider

    from imlint.model import build_model
    from imlint.positions import Positions

    sources = [TRICKY_CALLS]
    sources += [fixture_text(p) for p in sorted(FIXTURES.rglob("*.py"))]
    sources += [_module(random.Random(seed)) for seed in range(5)]
    checked = 0
    for source in sources:
        try:
            ast.parse(source)
        except SyntaxError:
            continue
        module = cst.parse_module(source)
        model = build_model(module, LINTER.settings.options, text=source)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        positions: Positions = model.positions
        for node in cst_calls(module):
            found = positions._call_range(node)
            assert found == expected[node], cst.Module([]).code_for_node(node)
            checked += 1
    assert checked > 100


def cst_calls(module):
    from imlint.walk import walk

    return [n for n in walk(module) if isinstance(n, cst.Call)]


def test_match_statements_narrowed_equal_whole():
    from .test_analysis import MATCHED

    full, narrowed = both(MATCHED)
    assert full == narrowed
    assert {f.code for f in full[0]} == {"IM001", "IM002"}
