"""Narrow a module to the functions a check needs, before LibCST sees it.

LibCST is what a check spends its time on, and most functions of a file that
allocates somewhere cannot matter to any finding. A site lives in a function that
calls an allocator (torch's factories, configured allocators, this file's allocating
callables and get-or-create helpers from the project index) and keeps something: in
``self``, a global, a known dict or list, a handed-in object, a cache. Everything else
the model reads about a site is reached by name:

- writes in other functions spell the stored text (``self._buf``, ``_CACHE[key]``,
  ``getattr(self, "_buf")``), or call a function or method that returns it
  (``self.get().zero_()``);
- whether ``self.x[k] = v`` fills a dict depends on where ``self.x = {}`` is assigned;
- the import map is per module, and imports inside functions count.

So a check keeps, verbatim: every statement that is not a function (at module level
or directly in a module-level class), every function that calls an allocator's name
and keeps something, and, to a fixed point, every function that spells what a kept
function stores and writes in place or returns a value, every method of the same
class that spells a ``self`` attribute stored, every function that assigns a dict or
list to a stored container, and every function that calls a kept function returning a
value. The other functions become stubs, line for line: ``def name():``, the imports
they make, ``pass``. Statements outside functions shrink to what the model reads of
them (``NAME = {}`` stays a dict, a docstring becomes ``...``). Every kept line keeps
its number and columns, so positions, and therefore findings, are those of the whole
module: ``tests/test_narrow.py`` compares both on fixtures and random modules, and the
speed benchmark on sglang.

Texts are matched as words, comments and strings included: a word found where it is
not code only keeps more.
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from imlint.guards import local_guards
from imlint.index_facts import FileFacts
from imlint.kinds import (
    CONSTRUCTORS,
    CONTAINER_CALLS,
    CONTAINER_METHODS,
    CONTAINER_STORE_KINDS,
    STORE_METHODS,
)
from imlint.options import AnalysisOptions
from imlint.vocabulary import (
    DERIVING_CALL,
    TENSOR_DERIVING_METHODS,
    TENSOR_NEW_METHODS,
    TORCH_ALLOCATORS,
    TORCH_COMPUTE,
    TORCH_FACTORIES,
)

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TESTS = frozenset({"if", "while", "match"})  # what opens a test (sites._miss_calling)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_WORD = re.compile(r"\w+")
_DEF = re.compile(r"\bdef\s+(\w+)")
_AS = re.compile(r"\bas\b")
_FROM_TORCH = re.compile(r"\bfrom\s+torch\b")
_LINES = re.compile(r"(?<=\n)")
#: Calls that fill storage (the model's ``setdefault``/``update``/``__setitem__``/
#: ``register_buffer``/``setattr`` stores) and ``:=``: expressions to look inside.
_STORE_CALLS = frozenset(STORE_METHODS)
_KEEPING_CALLS = frozenset(STORE_METHODS) | {"setattr", "append", "extend", "insert"}
_TRIGGER = re.compile("|".join(sorted(STORE_METHODS)) + r"|setattr|:=")


@dataclass(eq=False)
class _Unit:
    node: ast.stmt
    start: int  # first line (decorators included), 1-based
    end: int  # last line
    function: bool  # a module-level function or a method: may become a stub
    owner: int | None = None  # for a member of a class: id() of the class node
    words: set[str] = field(default_factory=set)


@dataclass
class _Scan:
    """What a kept function stores into, as writes elsewhere would have to spell it."""

    #: Every word of the stored text, which a write elsewhere must spell too
    #: (``batch.latents``, ``_CACHE[key]``), or name through a getter.
    writes: set[frozenset[str]] = field(default_factory=set)
    class_writes: set[str] = field(default_factory=set)  # ``self``'s: its class only
    containers: set[str] = field(default_factory=set)  # ``x`` of ``x[k] = v``
    cached: bool = False  # a function with a cache decorator: it keeps its result


@functools.lru_cache(maxsize=64)
def _calls_pattern(names: frozenset[str]) -> re.Pattern[str]:
    """A call of any of ``names`` (most files share one set: compile it once)."""
    return re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, names))) + r")\s*\(")


#: A call of one of torch's computing functions through an attribute (``torch.cat(``).
_COMPUTE_CALL = re.compile(r"\.\s*(?:" + "|".join(sorted(TORCH_COMPUTE)) + r")\s*\(")
#: A torch factory named without a call, as a value (``= torch.empty``, ``else torch.empty``).
_FACTORY_NAMED = re.compile(
    r"(?:=|\belse)\s*torch\s*\.\s*(?:" + "|".join(sorted(TORCH_FACTORIES)) + r")\b(?!\s*[.(])"
)
#: A tensor method that makes a new tensor from its receiver (``x.to(``).
_DERIVING_CALL = re.compile(DERIVING_CALL)


def allocator_names(
    text: str, tree: ast.Module, options: AnalysisOptions, facts: FileFacts
) -> set[str]:
    """Last names of every call that could allocate in this file: torch's factories and
    ``new_*`` methods, configured allocators, the project's allocating callables and
    get-or-create helpers (as this file spells them), and local names imported as any of
    these (``from torch import empty as e``)."""
    names = set(TORCH_ALLOCATORS) | set(TENSOR_NEW_METHODS)
    if not _FROM_TORCH.search(text):
        # torch's computing functions (``cat``, ``where``) allocate only when called
        # through torch (``torch.cat(...)``): a bare ``round(x)`` is not one.
        names -= TORCH_COMPUTE - TORCH_FACTORIES - TENSOR_NEW_METHODS
    names |= {n.rsplit(".", 1)[-1] for n in options.extra_allocators}
    for key in (*facts.allocators, *facts.helpers):
        names.add(key.rsplit(".", 1)[-1].rsplit("|", 1)[-1])
    aliases: set[str] = set()
    if not _AS.search(text):
        return names  # no import renames anything
    for node in _statements(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname and alias.name.rsplit(".", 1)[-1] in names:
                    aliases.add(alias.asname)
    return names | aliases


@dataclass
class _Needs:
    """What makes a function that does not allocate matter to a check."""

    #: it mentions one of these, or all the words of one group, or (a method) one of
    #: its class's names
    needed: set[str] = field(default_factory=set)
    groups: set[frozenset[str]] = field(default_factory=set)
    needed_in: dict[int, set[str]] = field(default_factory=dict)
    #: containers: where a dict or list is assigned matters
    declared: set[str] = field(default_factory=set)
    #: a class's kept methods: a method testing something and calling one matters
    grown_in: dict[int, set[str]] = field(default_factory=dict)

    def need_name(self, unit: _Unit) -> None:
        """A function returns a value: calls of it in the module may lead to storage (a
        method is called as ``self.m()``, by its class's other methods)."""
        name = unit.node.name  # type: ignore[attr-defined]
        if unit.owner is None:
            self.needed.add(name)
        else:
            self.needed_in.setdefault(unit.owner, set()).add(name)

    def add_scan(self, unit: _Unit, scan: _Scan) -> None:
        for group in scan.writes:
            if len(group) == 1:
                self.needed |= group
            else:
                self.groups.add(group)
        if scan.class_writes:
            key = unit.owner if unit.owner is not None else -1
            self.needed_in.setdefault(key, set()).update(scan.class_writes)
        self.declared |= scan.containers

    def matters(self, unit: _Unit, source: str, writers: set[str]) -> bool:
        words = unit.words
        in_class = self.needed_in.get(unit.owner, set()) if unit.owner is not None else set()
        writer = (
            bool(words & self.needed or words & in_class or "*" in in_class)
            or any(group <= words for group in self.groups)
        ) and _writes_or_returns(unit, source, writers)
        grows = unit.owner is not None and bool(
            words & self.grown_in.get(unit.owner, set()) and words & _TESTS
        )  # ``if n > self.cap: self._alloc(n)`` (sites.resolve_caller_laziness)
        return writer or grows or bool(words & self.declared and _declares(unit, self.declared))


def narrow(text: str, tree: ast.Module, options: AnalysisOptions, facts: FileFacts) -> str | None:
    """The text LibCST needs to see for a check of this module (see the module doc);
    None when no function can hold a site."""
    if "\r" in text.replace("\r\n", ""):
        return text  # lone carriage returns: Python and LibCST may count lines apart
    lines = _LINES.split(text)  # as Python counts them: a form feed is not a line end
    units = list(_units(tree))
    allocating = allocator_names(text, tree, options, facts)
    calls = _calls_pattern(frozenset(allocating))
    triggers = _trigger_lines(text)
    containers = _Containers(tree)
    kept: set[int] = set()
    needs = _Needs()
    skeletons: list[_Unit] = []
    any_site = False
    helpers = {k.rsplit(".", 1)[-1].rsplit("|", 1)[-1] for k in facts.helpers}
    cache_names = {n.rsplit(".", 1)[-1] for n in options.extra_cache_decorators}
    for i, unit in enumerate(units):
        source = _text(lines, unit)
        unit.words = _word_set(source)
        calls_allocator = _allocates(unit, source, allocating, calls, cache_names)
        if unit.function and not calls_allocator:
            continue
        if unit.function:
            scan = _scan(unit, triggers, containers, cache_names)
            if not (scan.writes or scan.class_writes or scan.containers or scan.cached) and not (
                unit.words & helpers
            ):
                continue  # allocates, but keeps nothing: no site (a writer, perhaps)
            kept.add(i)
            if "return" in unit.words:
                needs.need_name(unit)
            if unit.owner is not None:  # its class's methods may call it on a miss
                needs.grown_in.setdefault(unit.owner, set()).add(unit.node.name)  # type: ignore[attr-defined]
        else:
            kept.add(i)
            # Any other statement is kept. Only a function can hold a site: one it
            # defines (under ``if``/``try``, in a nested class) may be one, or be called.
            defined = _DEF.search(source) is not None
            if defined and unit.owner is None:
                needs.needed |= _module_functions(unit.node)
            if not (calls_allocator and defined):
                if not defined:
                    skeletons.append(unit)
                continue
            scan = _scan(unit, triggers, containers, cache_names)
        any_site = True
        # A helper's site is reached through the helper's name.
        needs.needed |= unit.words & helpers
        needs.add_scan(unit, scan)
    if not any_site:
        return None
    # A guard helper of the module (``imlint/guards.py``) is read from its body.
    guards = local_guards(tree) if "inference_mode" in text else frozenset()
    for i, unit in enumerate(units):
        if unit.function and unit.owner is None and getattr(unit.node, "name", "") in guards:
            kept.add(i)
    _keep_what_matters(units, lines, kept, needs, _writer_names(facts))
    return _stubbed(units, lines, kept, skeletons, text)


def _keep_what_matters(
    units: list[_Unit], lines: list[str], kept: set[int], needs: _Needs, writers: set[str]
) -> None:
    """Keep, to a fixed point, every function that matters to what is kept."""
    changed = True
    while changed:
        changed = False
        for i, unit in enumerate(units):
            if i not in kept and needs.matters(unit, _text(lines, unit), writers):
                kept.add(i)
                changed = True
                if "return" in unit.words:
                    needs.need_name(unit)


def _stubbed(
    units: list[_Unit], lines: list[str], kept: set[int], skeletons: list[_Unit], text: str
) -> str:
    """The module with every function not kept made a stub (``lines`` is changed)."""
    stubs = [u for i, u in enumerate(units) if i not in kept]
    # A class whose members all go keeps one stub: its body cannot be empty.
    occupied = {u.owner for i, u in enumerate(units) if i in kept and u.owner is not None}
    for unit in stubs:
        if unit.owner is None:
            _stub(lines, unit, needed_def=False)
        else:
            _stub(lines, unit, needed_def=unit.owner not in occupied)
            occupied.add(unit.owner)
    for unit in skeletons:
        _skeleton(lines, unit)
    return "".join(lines) if stubs or skeletons else text


# --------------------------------------------------------------------------- units


def _units(tree: ast.Module) -> Iterator[_Unit]:
    """Module-level statements, with each module-level class split into its members."""
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            header_end = stmt.body[0].lineno - 1
            yield _Unit(stmt, _first_line(stmt), max(header_end, stmt.lineno), False)
            for member in stmt.body:
                unit = _Unit(member, _first_line(member), _last_line(member), _is_function(member))
                unit.owner = id(stmt)
                yield unit
        else:
            yield _Unit(stmt, _first_line(stmt), _last_line(stmt), _is_function(stmt))


#: In-place writes as the model sees them, by their text: a method ending in ``_``
#: (``x.zero_()``), ``out=``, an augmented assignment; subscript stores are found in
#: the statements.
_WRITE = re.compile(
    r"\.\s*[A-Za-z]\w*_\s*\(|\bout\s*=(?!=)|(?:[-+*/%&|^@]|<<|>>|\*\*|//)="
    # kernel writes: a Triton launch, a raw pointer handed on, a custom op
    r"|\]\s*\(|\bdata_ptr\s*\(|\bops\s*\."
)


def _writes_or_returns(unit: _Unit, text: str, writers: set[str]) -> bool:
    """Whether a function that mentions the storage can change a site: it writes in
    place, hands something to code that may write it (``writers``: names of project
    functions that write what they are handed, names imported from outside the project;
    a Triton launch), or returns a value (a getter of the storage). Mentions alone
    cannot."""
    if "return" in unit.words or unit.words & writers or _WRITE.search(text):
        return True
    for stmt in _statements([unit.node]):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(n, ast.Subscript) for t in targets for n in _target_nodes(t)):
                return True  # ``x[i] = v``: an in-place write
    return False


def _writer_names(facts: FileFacts) -> set[str]:
    """Names whose call may write a tensor handed to it (the model's ``_handed_writes``,
    as words): the project's functions that write their arguments, and names imported
    from outside the project (``sgl_kernel``, ``flashinfer``)."""
    out = {k.rsplit(".", 1)[-1].rsplit("|", 1)[-1] for k in facts.param_writes}
    return out | facts.external


def _declares(unit: _Unit, containers: set[str]) -> bool:
    """Whether a function assigns a dict or list to one of ``containers`` (which makes
    ``x[k] = v`` a store there)."""
    for stmt in _statements([unit.node]):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                for n in _target_nodes(t):
                    if _last_names(n) & containers and (
                        is_container(stmt.value) or isinstance(t, (ast.Tuple, ast.List))
                    ):
                        return True
    return False


def _target_nodes(target: ast.expr) -> Iterator[ast.expr]:
    """An assignment target and, for a tuple or list, its elements (``a[0], b = ...``)."""
    yield target
    if isinstance(target, (ast.Tuple, ast.List)):
        for el in target.elts:
            yield from _target_nodes(el)
    elif isinstance(target, ast.Starred):
        yield from _target_nodes(target.value)


def _module_functions(stmt: ast.stmt) -> set[str]:
    """Functions a module-level statement defines (``if``/``try`` branches), not
    methods of the classes it defines."""
    out: set[str] = set()
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, _FUNCTIONS):
            out.add(node.name)
            continue
        if not isinstance(node, ast.ClassDef):
            stack.extend(_children(node))
    return out


def _is_function(node: ast.stmt) -> bool:
    return isinstance(node, _FUNCTIONS)


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", ())
    return min([node.lineno, *(d.lineno for d in decorators)])


def _last_line(node: ast.stmt) -> int:
    return node.end_lineno or node.lineno


def _word_set(source: str) -> set[str]:
    """The words of a text, spelled as Python reads identifiers (NFKC)."""
    words = set(_WORD.findall(source))
    if not source.isascii():
        words |= {unicodedata.normalize("NFKC", w) for w in words}
    return words


def _text(lines: list[str], unit: _Unit) -> str:
    return "".join(lines[unit.start - 1 : unit.end])


def _trigger_lines(text: str) -> set[int]:
    starts = [0]
    starts.extend(m.end() for m in re.finditer("\n", text))
    return {bisect.bisect_right(starts, m.start()) for m in _TRIGGER.finditer(text)}


def _allocates(
    unit: _Unit, source: str, names: set[str], calls: re.Pattern[str], cache_names: set[str]
) -> bool:
    """Whether a unit calls something that makes a tensor: a name in ``names`` (torch's
    factories, the project's allocating callables), torch's computing functions through
    an attribute, or a deriving method whose tensor can be what the unit keeps."""
    if unit.words & names and calls.search(source):
        return True
    if unit.words & TORCH_COMPUTE and _COMPUTE_CALL.search(source):
        return True
    if unit.words & names and _FACTORY_NAMED.search(source):
        return True  # ``factory = torch.zeros if z else torch.empty``, then ``factory(n)``
    return (
        bool(unit.words & TENSOR_DERIVING_METHODS)
        and bool(_DERIVING_CALL.search(source))
        and _keeps_derived(unit.node, cache_names)
    )


def _keeps_derived(node: ast.stmt, cache_names: set[str]) -> bool:
    """Whether a tensor a method derives (``x.to(d)``, ``w.float()``) can be what the
    unit keeps: the call is in a statement that stores into an attribute, an entry, a
    container or a global, or returns from a cached function, or in the value of a local
    that such a statement reads (``a = x.to(d); b = a``, to a fixed point). Most
    conversions are neither (``h = x.to(dtype)`` in a forward), and the unit then cannot
    hold a site made that way."""
    statements = list(_statements([node]))
    cached = any(isinstance(s, _FUNCTIONS) and _cache_decorated(s, cache_names) for s in statements)
    declared = {n for s in statements if isinstance(s, (ast.Global, ast.Nonlocal)) for n in s.names}
    stores: list[ast.AST] = []
    bound: list[tuple[set[str], ast.AST]] = []  # (local names bound, the value they get)
    for stmt in statements:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            nodes = [n for t in targets for n in _target_nodes(t)]
            names = {n.id for n in nodes if isinstance(n, ast.Name)}
            if names & declared or any(
                isinstance(n, (ast.Attribute, ast.Subscript)) for n in nodes
            ):
                stores.append(stmt)
            value = stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) else stmt.value
            if value is not None:
                bound.append((names, value))
        elif (cached and isinstance(stmt, ast.Return)) or (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and _last_names(stmt.value.func) & _KEEPING_CALLS
        ):
            stores.append(stmt)
    derived = {n for names, v in bound if _derives(v) for n in names}
    grown = bool(derived)
    while grown:
        grown = False
        for names, v in bound:
            if not names <= derived and _reads(v, derived):
                derived |= names
                grown = True
    return any(_derives(s) or _reads(s, derived) for s in stores)


def _reads(tree: ast.AST, names: set[str]) -> bool:
    return bool(names) and any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(tree))


def _cache_decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, cache_names: set[str]) -> bool:
    """A cached function keeps what it returns (the model: "cache" in the decorator's
    last name, or a configured cache decorator)."""
    for d in node.decorator_list:
        names = _last_names(d.func if isinstance(d, ast.Call) else d)
        if any("cache" in n.lower() or n in cache_names for n in names):
            return True
    return False


def _derives(tree: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in TENSOR_DERIVING_METHODS
        for n in ast.walk(tree)
    )


def _statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body``, nested ones included (expressions are not entered)."""
    stack = list(reversed(list(body)))
    while stack:
        stmt = stack.pop()
        yield stmt
        stack.extend(reversed(_children(stmt)))


def _children(stmt: ast.stmt) -> list[ast.stmt]:
    """The statements directly inside a compound statement, in source order."""
    children: list[ast.stmt] = []
    for name in ("body", "orelse", "finalbody"):
        children.extend(getattr(stmt, name, ()))
    for handler in getattr(stmt, "handlers", ()):
        children.extend(handler.body)
    for case in getattr(stmt, "cases", ()):
        children.extend(case.body)
    return children


def _scan(unit: _Unit, triggers: set[int], containers: _Containers, cache_names: set[str]) -> _Scan:
    """What a unit that makes an allocating call stores into."""
    scan = _Scan()
    node = unit.node
    self_name: str | None = None
    constructor_body: set[int] = set()
    if unit.function and isinstance(node, _FUNCTIONS):
        args = [*node.args.posonlyargs, *node.args.args]
        static = any(_root(d) == "staticmethod" for d in node.decorator_list)
        if args and unit.owner is not None and not static:
            self_name = args[0].arg  # ``cls`` too: the model reads both as ``self``
        if node.name in CONSTRUCTORS and self_name is not None:
            # Attribute stores at the constructor's own level are construction.
            constructor_body = {id(s) for s in _own_statements(node)}
    targets: list[tuple[ast.expr, bool]] = []  # (target, in the constructor's own body)
    #: (object or container, the attribute stored into, the key stored under)
    roots: list[tuple[ast.expr, str | None, ast.expr | None]] = []
    declared: set[str] = set()
    for stmt in _statements([node]):
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            own = id(stmt) in constructor_body
            for t in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                targets.append((t, own))
        elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
            declared.update(stmt.names)
        elif isinstance(stmt, _FUNCTIONS) and not scan.cached:
            scan.cached = _cache_decorated(stmt, cache_names)
        if _touches(stmt, triggers):
            # ``setattr``/``register_buffer`` at the constructor's own level: construction.
            own = id(stmt) in constructor_body
            for expr in _header_expressions(stmt):
                for sub in ast.walk(expr):
                    if isinstance(sub, ast.NamedExpr):
                        targets.append((sub.target, False))
                    elif isinstance(sub, ast.Call):
                        stored = _call_root(sub, containers, node, own)
                        if stored is not None:
                            roots.append(stored)
    while targets:
        t, own = targets.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            targets.extend((e, own) for e in t.elts)
        elif isinstance(t, ast.Starred):
            targets.append((t.value, own))
        elif isinstance(t, ast.Name):
            if t.id in declared:
                scan.writes.add(frozenset({t.id}))
        elif isinstance(t, ast.Attribute):
            if not own:
                roots.append((t.value, t.attr, None))
        elif isinstance(t, ast.Subscript):
            # ``x[k] = v`` copies into a tensor unless ``x`` is known to be a dict or a
            # list (the model's test): only then is it storage.
            if not _slice_store(t) and containers.known(t.value, node):
                roots.append((t.value, None, t.slice))
    # Texts are compared with the method's first parameter spelled ``self``.
    unspelled = {"self", self_name}
    for expr, attr, _key in roots:
        root = _root(expr)
        if attr is None:
            scan.containers |= _last_names(expr)
        if root is not None and root == self_name:
            # Written through ``self``: only the class's methods can reach it (``self``
            # itself, as a container: whatever they call their first parameter).
            scan.class_writes |= {attr} if attr is not None else _last_names(expr) or {"*"}
            continue
        # Not the key's names: under a key computed at run time, a write to an entry
        # of the container under any key may reach it (``writes.find_writes``).
        words = _words(expr) | ({attr} if attr is not None else set())
        scan.writes.add(frozenset(words - unspelled))
    return scan


def _call_root(
    call: ast.Call, containers: _Containers, node: ast.stmt, own: bool
) -> tuple[ast.expr, str | None, ast.expr | None] | None:
    """(object or container, attribute, key) a store call fills, by the kind the model
    gives its method (``kinds.STORE_METHODS``): an entry of a container, or a named
    attribute (``register_buffer``, ``setattr``; at a constructor's own level, ``own``,
    construction). A computed ``setattr`` name is a text no write can spell: skipped."""
    func = call.func
    if isinstance(func, ast.Name):
        if func.id != "setattr" or own or len(call.args) < 2:
            return None
        name = _string(call.args[1])
        return (call.args[0], name, None) if name is not None else None
    if not isinstance(func, ast.Attribute) or func.attr not in _STORE_CALLS:
        return None
    kind = STORE_METHODS[func.attr]
    key = call.args[0] if call.args else None
    if kind == "subscript":
        return (func.value, None, key) if containers.known(func.value, node) else None
    if kind == "update":
        return (func.value, None, None)
    if kind in CONTAINER_STORE_KINDS:
        return (func.value, None, key)  # ``setdefault``, ``append``, ``insert``
    name = _string(key) if key is not None else None
    return (func.value, name, None) if name is not None and not own else None


def _words(expr: ast.AST) -> set[str]:
    """The words of an expression's text that any spelling of it contains (names and
    attributes: a string's value can be spelled with escapes)."""
    out: set[str] = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
    return out


class _Containers:
    """Which storage the model knows to be a dict or a list (over-approximated by the
    name it ends in): names assigned one anywhere in the module (``_K = {}``,
    ``self._k = defaultdict(...)``), or used like one in the storing function."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self._module: set[str] | None = None
        self._uses: dict[int, set[str]] = {}

    def known(self, container: ast.expr, func: ast.stmt) -> bool:
        names = _last_names(container)
        if not names or "__dict__" in names:
            return True
        if self._module is None:
            self._module = set()
            for stmt in _statements(self.tree.body):
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    for t in targets:
                        self._assigned(t, stmt.value)
        if names & self._module:
            return True
        uses = self._uses.get(id(func))
        if uses is None:
            uses = self._uses[id(func)] = _container_uses(func)
        return bool(names & (uses | self._module))

    def _assigned(self, target: ast.expr, value: ast.expr) -> None:
        assert self._module is not None
        if isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            for i, el in enumerate(target.elts):
                if values is None or len(values) != len(target.elts):
                    self._module |= _last_names(el)  # unknown values: assume a container
                else:
                    self._assigned(el, values[i])
        elif is_container(value):
            self._module |= _last_names(target)


_CONTAINER_NAMES = frozenset(c.rsplit(".", 1)[-1] for c in CONTAINER_CALLS)


def is_container(value: ast.expr) -> bool:
    """The model's ``is_container``, by last name (a superset)."""
    if isinstance(value, (ast.Dict, ast.List, ast.DictComp, ast.ListComp)):
        return True
    if isinstance(value, ast.BinOp):
        return isinstance(value.left, ast.List) or isinstance(value.right, ast.List)
    if isinstance(value, ast.Call):
        return bool(_last_names(value.func) & _CONTAINER_NAMES)
    return False


def _container_uses(func: ast.stmt) -> set[str]:
    """Names of what a function uses like a dict or list: ``k in x``, ``x[k] is None``,
    ``x.get(k)``."""
    out: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=False):
                if isinstance(op, (ast.In, ast.NotIn)):
                    out |= _last_names(right)
                elif isinstance(op, (ast.Is, ast.IsNot)) and isinstance(left, ast.Subscript):
                    out |= _last_names(left.value)
                left = right
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in CONTAINER_METHODS:
                out |= _last_names(node.func.value)
    return out


def _slice_store(target: ast.Subscript) -> bool:
    """``x[a:b] = v``, ``x[..., i] = v``: the model's slice test, where it is sure to
    hold (no brackets inside the index)."""
    index = target.slice
    inside = list(ast.walk(index))
    if any(
        isinstance(n, (ast.Subscript, ast.List, ast.ListComp, ast.Dict, ast.Lambda)) for n in inside
    ):
        return False
    return any(
        isinstance(n, ast.Slice) or (isinstance(n, ast.Constant) and n.value is Ellipsis)
        for n in inside
    )


def _own_statements(func: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.stmt]:
    """A function's statements, not those of functions or classes nested in it."""
    stack = list(func.body)
    while stack:
        stmt = stack.pop()
        yield stmt
        if not isinstance(stmt, _DEFINITIONS):
            stack.extend(_children(stmt))


def _touches(stmt: ast.stmt, triggers: set[int]) -> bool:
    """Whether a statement's own lines (a compound statement's header) hold a trigger."""
    if not triggers:
        return False
    body = getattr(stmt, "body", None)
    last = body[0].lineno if body else (stmt.end_lineno or stmt.lineno)
    return any(line in triggers for line in range(stmt.lineno, last + 1))


def _header_expressions(stmt: ast.stmt) -> Iterator[ast.AST]:
    """A statement's expressions, not its nested statements."""
    for _, value in ast.iter_fields(stmt):
        if isinstance(value, ast.AST) and not isinstance(value, ast.stmt):
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST) and not isinstance(item, ast.stmt):
                    yield item


def _root(expr: ast.expr) -> str | None:
    """The name an attribute/subscript chain starts from (None: a call, a literal)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _last_names(expr: ast.expr) -> set[str]:
    """The name a storage expression ends in: ``X`` for ``X[k]``, ``_b`` for ``self._b``."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Attribute):
        return {expr.attr}
    if isinstance(expr, ast.Name):
        return {expr.id}
    return set()


def _string(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    return None


# --------------------------------------------------------------------------- stubs


def _alone(lines: list[str], node: ast.stmt) -> bool:
    """Whether a statement starts its line (nothing but indentation before it)."""
    return not lines[node.lineno - 1].encode()[: node.col_offset].strip()


def _shares_end(lines: list[str], node: ast.stmt) -> bool:
    """Whether code follows a statement on its last line (``import a; x = 1``)."""
    end_line = (node.end_lineno or node.lineno) - 1
    rest = lines[end_line].encode()[node.end_col_offset or 0 :].decode().strip()
    return bool(rest) and not rest.startswith("#")


def _stub(lines: list[str], unit: _Unit, needed_def: bool) -> None:
    """Replace a function, line for line, with ``def name():`` and the imports it makes
    (the import map is the module's, in visiting order); without imports, with nothing
    at all, unless its class needs a statement (``needed_def``: then ``pass``). Nothing
    reads a stub's decorators, signature or body."""
    node = unit.node
    assert isinstance(node, _FUNCTIONS)
    first = node.body[0]
    imports = [s for s in _statements(node.body) if isinstance(s, (ast.Import, ast.ImportFrom))]
    if not imports and not needed_def:
        for k in range(unit.start - 1, unit.end):
            lines[k] = _newline(lines[k])
        return
    if not _alone(lines, first) or any(
        not _alone(lines, imp) or _shares_end(lines, imp) for imp in imports
    ):
        return  # a body on the header's line, or an import sharing a line: keep it all
    def_line = lines[node.lineno - 1]
    header = def_line.encode()[: node.col_offset].decode() + f"def {node.name}():"
    indent = lines[first.lineno - 1].encode()[: first.col_offset].decode()
    keep: dict[int, str] = {node.lineno - 1: header + _newline(def_line)}
    for imp in imports:
        start = imp.lineno - 1
        keep[start] = indent + lines[start].lstrip(" \t\f")
        for k in range(start + 1, imp.end_lineno or imp.lineno):
            keep[k] = lines[k]  # continuation lines: inside brackets or after a backslash
    if first.lineno - 1 not in keep:
        keep[first.lineno - 1] = indent + "pass" + _newline(lines[first.lineno - 1])
    for k in range(unit.start - 1, unit.end):
        lines[k] = keep.get(k, _newline(lines[k]))


def _skeleton(lines: list[str], unit: _Unit) -> None:
    """Reduce a statement that holds no function to what the model reads of it, line
    for line: a module- or class-level ``NAME = <dict or list>`` makes ``NAME[k] = v``
    a store; anything else outside a function (a docstring, a table, a call) is not
    read. Only where the model's answer is certain; else the statement stays."""
    node = unit.node
    end = node.end_lineno or node.lineno
    if end == node.lineno or not _alone(lines, node) or _shares_end(lines, node):
        return
    if ":=" in _text(lines, unit):
        return  # ``(x := {})`` binds a name
    if isinstance(node, ast.Expr):
        replacement = "..."
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not all(isinstance(t, ast.Name) for t in targets):
            return
        names = " = ".join(t.id for t in targets)  # type: ignore[attr-defined]
        value = node.value
        if value is None:
            replacement = "..."
        elif isinstance(value, (ast.Dict, ast.List, ast.DictComp, ast.ListComp)) or (
            isinstance(value, ast.BinOp)
            and (isinstance(value.left, ast.List) or isinstance(value.right, ast.List))
        ):
            replacement = names + " = {}"
        elif isinstance(value, ast.Call) and _last_names(value.func) & _CONTAINER_NAMES:
            return  # a container or not, depending on imports: leave it to the model
        else:
            replacement = names + " = None"
    else:
        return
    indent = lines[node.lineno - 1].encode()[: node.col_offset].decode()
    lines[node.lineno - 1] = indent + replacement + _newline(lines[node.lineno - 1])
    for k in range(node.lineno, end):
        lines[k] = _newline(lines[k])


def _newline(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""
