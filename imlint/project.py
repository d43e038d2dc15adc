"""Project-wide analysis: what every checked file defines and calls, across files.

Two things need more than one file at a time:

- **allocating callables** (IM003): a constructor that keeps a tensor on ``self``, a
  helper that returns one, transitively through calls resolved by import and name; and
  get-or-create helpers that store the result of a factory they are handed;
- **reach**: whether an ``inference_mode()`` region can call its way to a site (the site
  is then *armed*), and whether every caller of a site guards it.

Per file, Python's own parser (``ast``: parsing only, nothing is imported or run) gives a
small :class:`FileSummary` (plain data, cached with the per-file results). The parent
process joins the summaries into a :class:`ProjectIndex`, which resolves calls, finds the
allocating callables, and hands every file its :class:`FileFacts`: the call texts in
that file that allocate, the helpers that take factories, and the functions whose every
caller guards them. The LibCST model reads the facts like any other allocator; reach is
answered for findings after the files are checked.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from imlint.guards import local_guards
from imlint.holders import Holders
from imlint.index_allocators import AllocatorFinder
from imlint.index_dispatch import DispatchFinder
from imlint.index_facts import FactsFinder
from imlint.index_members import MemberFinder
from imlint.index_outside import OutsideFinder
from imlint.index_reach import ReachFinder
from imlint.index_regions import RegionFinder
from imlint.index_types import TypeFinder
from imlint.kinds import (
    CM_REGION_PREFIX,
    MODULE_SCOPE,
    SCRIPT_SCOPE,
    THREAD_REGION,
)
from imlint.lifetimes import Lifetimes, construction_only
from imlint.options import AnalysisOptions
from imlint.source import quiet_parse
from imlint.summary_flags import FlagFacts, falsy_defaults
from imlint.summary_members import class_members
from imlint.summary_names import NameFacts, is_main_guard
from imlint.summary_regions import RegionFacts, join_regions
from imlint.summary_stores import StoreFacts
from imlint.summary_types import TypeFacts
from imlint.summary_values import ValueOrigins, fixed_calls
from imlint.summary_writes import BUILTINS as _BUILTINS
from imlint.summary_writes import WriteFacts, declared_mutations
from imlint.summary_writes import dotted as _dotted
from imlint.vocabulary import (
    CACHE_DECORATORS,
    INFERENCE_MODE_NAMES,
    SIZED_FACTORIES,
    TENSOR_DERIVING_METHODS,
    TENSOR_METHOD_NAMES,
    TENSOR_NEW_METHODS,
    TORCH_ALLOCATORS,
    TORCH_FACTORIES,
    name_matches,
)
from imlint.warming import warmed_by_construction
from imlint.writes import param_writes, result_writes

#: Bump when the summary layout or what it records changes (part of the cache key).
SUMMARY_VERSION = 59

_CONSTRUCTORS = ("__init__", "__post_init__", "__new__")


# ------------------------------------------------------------------------------ summaries


@dataclass
class DefSummary:
    """One function, method, class or the module's own code."""

    qual: str  # as the LibCST model names it: ``f``, ``C.m``, ``f.inner``; classes too
    kind: str  # function class module
    cls: str = ""  # the class's qualname, for methods
    mode: str = ""  # inference guarded: from a decorator
    cached: bool = False
    params: tuple[str, ...] = ()  # positional parameters, ``self`` left out; a class: fields
    bases: tuple[str, ...] = ()  # classes: base class texts
    #: (how, what, ref): how is ``returns`` or ``keeps``; ref is ``!torch.empty`` for a
    #: direct allocation or a call text to resolve. No line numbers anywhere: a summary
    #: changes only when what the file defines or calls changes.
    allocs: list[tuple[str, str, str]] = field(default_factory=list)
    #: (call text, region), each once: region is ``inference``, ``guarded`` or "".
    calls: list[tuple[str, str]] = field(default_factory=list)
    #: (parameter, position, stored into): factory parameters whose result is kept.
    factories: list[tuple[str, int, str]] = field(default_factory=list)
    #: local name -> constructor call text (``reg = Registry()``), to resolve ``reg.get``.
    types: dict[str, str] = field(default_factory=dict)
    #: how many direct allocator calls the body makes (where a site can be)
    alloc_calls: int = 0
    #: (parameter, write kind): tensors handed in that the body writes in place
    #: (``torch``), or that a Triton kernel stores to (``kernel``)
    pwrites: list[tuple[str, str]] = field(default_factory=list)
    #: (call text, argument position or keyword, parameter): a parameter handed on
    passes: list[tuple[str, str, str]] = field(default_factory=list)
    #: (call text, what happens to the result): ``kept`` in storage that outlives the
    #: call, ``returned``, ``handed:<callee>:<position or keyword>`` (an argument),
    #: ``dropped`` (every call by the text is a statement of its own: ``prof.step()``);
    #: results only used or held in locals are not listed
    results: list[tuple[str, str]] = field(default_factory=list)
    #: parameters whose value the body keeps (``self.x = x``, ``lst.append(x)``)
    pkept: list[str] = field(default_factory=list)
    kernel: bool = False  # a Triton kernel: ``pwrites`` lists every parameter it stores to
    #: (call text, kind, key): results of calls the body writes in place (``torch``),
    #: hands to a kernel (``kernel``), or hands to ``<callee>:<position or keyword>``;
    #: key is the constant key the result is read at (``get_bufs(n)["out"]``), or ""
    rwrites: list[tuple[str, str, str]] = field(default_factory=list)
    #: (call text, argument position or keyword, holder): which object an argument is,
    #: where that tells how long it lives: ``self``, ``self.<attr>`` (an object kept on
    #: ``self``), ``global`` (a module-level object) or ``param:<name>`` (see
    #: ``imlint/holders.py``); other arguments are not listed
    hands: list[tuple[str, str, str]] = field(default_factory=list)
    #: what the body assigns on ``self``: ``meta`` (``self.meta = ...``), ``reqs[]`` (an
    #: item: ``self.reqs[k] = ...``), ``?``-marked when conditional (a get-or-create)
    sets: list[str] = field(default_factory=list)
    #: the locals of ``types`` bound once, to that constructor call, and never again
    once: list[str] = field(default_factory=list)
    #: keyword-only and variadic parameters (``*``, ``*args``, ``**kwargs``)
    keywords: tuple[str, ...] = ()
    #: texts of calls whose arguments read none of the function's inputs, anywhere in
    #: the body (``summary_values.fixed_calls``)
    fixed: list[str] = field(default_factory=list)
    #: every ``return`` hands back a container the call builds and keeps nowhere (a
    #: dict or list literal, or a local bound only to one): what callers store in the
    #: result lives as long as they keep it
    fresh: bool = False
    #: (parameter, attribute): parameters kept as items of ``self.<attribute>``
    pitems: list[tuple[str, str]] = field(default_factory=list)
    #: attributes of ``self`` whose items the body takes out (``self.jobs.remove(j)``,
    #: ``del self.jobs[k]``, a filtering comprehension stored back)
    drops: list[str] = field(default_factory=list)
    #: variadic parameters: 1 when it takes ``*args``, 2 when ``**kwargs``, 3 both
    star: int = 0
    #: configured as a function a framework calls while it sets up (``setup-functions``)
    setup: bool = False
    #: (call text, positional arguments, keywords): the shape of the method calls on
    #: objects (not on imported modules) by each text, merged (the most positional arguments, -1 when one passes ``*args``; every
    #: keyword, ``**`` when one passes ``**kwargs``): which functions a call by a name
    #: the index cannot resolve may reach (``lifetimes.py``)
    shapes: list[tuple[str, int, tuple[str, ...]]] = field(default_factory=list)
    #: (parameter, attribute): parameters stored as they are on ``self.<attribute>``
    #: (``self.indices = indices``): what the class's methods do to the attribute they
    #: do to what the caller handed in (``writes.param_writes``)
    pattrs: list[tuple[str, str]] = field(default_factory=list)
    #: (call text, parameter): calls made only while that parameter is true (every
    #: call by the text sits under ``if <parameter>:``), see ``summary_flags.py``
    flagged: list[tuple[str, str]] = field(default_factory=list)
    #: (call text, argument position or keyword, "1"/"0"/"?"): what calls hand on that
    #: may set a flag (``summary_flags.FlagFacts._flag_call``)
    flag_args: list[tuple[str, str, str]] = field(default_factory=list)
    #: parameters whose default is a false constant (``in_capture=False``)
    falsy: list[str] = field(default_factory=list)
    #: the modes a context manager enters (``summary_regions.RegionFacts``): the region
    #: at each ``yield``, each mode object returned, or what ``__enter__`` enters
    enters: list[str] = field(default_factory=list)
    #: (call text, argument position or keyword, callable text): functions, methods and
    #: the calls of a ``lambda`` handed to a call that may call them back
    callables: list[tuple[str, str, str]] = field(default_factory=list)
    #: (name, class text): the classes the code declares or makes evident for its
    #: parameters, return value, attributes and aliases (``summary_types.TypeFacts``)
    annots: list[tuple[str, str]] = field(default_factory=list)
    #: attributes of ``self`` the body stores only while they are empty (``if self._ws
    #: is None: self._ws = ...``), never any other way (``summary_values.py``)
    slots: list[str] = field(default_factory=list)
    #: parameters whose truth every allocation waits on (``summary_flags.py``)
    alloc_flags: list[str] = field(default_factory=list)
    #: classes: the names its instances answer to (``summary_members.py``)
    members: tuple[str, ...] = ()
    #: the parameters a custom-op registration declares the function mutates
    #: (``@custom_op(..., mutates_args=["out"])``); None when it declares nothing
    mutates: tuple[str, ...] | None = None

    def to_data(self) -> tuple[object, ...]:
        return (
            self.qual, self.kind, self.cls, self.mode, self.cached, self.params,
            self.bases, self.allocs, self.calls, self.factories, self.types, self.alloc_calls,
            self.pwrites, self.passes, self.results, self.pkept, self.kernel, self.rwrites,
            self.hands, self.sets, self.once, self.keywords, self.fixed, self.fresh,
            self.pitems, self.drops, self.star, self.setup, self.shapes, self.pattrs,
            self.flagged, self.flag_args, self.falsy, self.enters, self.callables,
            self.annots, self.slots, self.alloc_flags, self.members, self.mutates,
        )  # fmt: skip

    @classmethod
    def from_data(cls, data: tuple[object, ...]) -> DefSummary:
        return cls(*data)  # type: ignore[arg-type]


@dataclass
class FileSummary:
    path: str
    module: str
    is_package: bool
    imports: dict[str, str]  # local name -> qualified name (relative imports resolved)
    defs: dict[str, DefSummary]
    instances: dict[str, str] = field(default_factory=dict)  # module var -> constructor text
    error: str | None = None  # Python's syntax error, when the file does not parse
    #: Whether any call could be an allocation as the model sees one (the pre-filter):
    #: a callee whose last name, or the import its name aliases, is an allocator's.
    may_allocate: bool = True
    #: Private names (``_f``, not ``__f__``) the file's code refers to anywhere: a name,
    #: an attribute of something other than ``self``/``cls``, an import, a string that
    #: spells one (``__all__``, ``getattr(mod, "_f")``); see ``ProjectIndex.unused``.
    private_refs: frozenset[str] = frozenset()
    #: The file a code generator made this one from, as its header comment names it
    #: (``# This file was automatically generated from src/pkg/modular_x.py.``); see
    #: ``FactsFinder.templates``.
    generated_from: str = ""
    #: an installed package's file (``installed.py``), not the project's: set by the
    #: index, never stored
    library: bool = False

    def to_data(self) -> tuple[object, ...]:
        return (
            self.path,
            self.module,
            self.is_package,
            self.imports,
            [d.to_data() for d in self.defs.values()],
            self.instances,
            self.error,
            self.may_allocate,
            sorted(self.private_refs),
            self.generated_from,
        )

    @classmethod
    def from_data(cls, data: tuple[object, ...]) -> FileSummary:
        path, module, is_package, imports, defs, instances, error, may_allocate, refs, gen = data
        parsed = [DefSummary.from_data(d) for d in defs]  # type: ignore[attr-defined]
        return cls(
            path,  # type: ignore[arg-type]
            module,  # type: ignore[arg-type]
            is_package,  # type: ignore[arg-type]
            imports,  # type: ignore[arg-type]
            {d.qual: d for d in parsed},
            instances,  # type: ignore[arg-type]
            error,  # type: ignore[arg-type]
            may_allocate,  # type: ignore[arg-type]
            frozenset(refs),  # type: ignore[call-overload]
            gen,  # type: ignore[arg-type]
        )


def module_name(path: str) -> tuple[str, bool]:
    """The dotted module name of a file: its folders up to the first one whose name is
    not an identifier (or the filesystem root), so that namespace packages (folders
    without ``__init__.py``) keep their full name; the index also answers to every
    shorter tail of it (``pkg.mod`` for ``src.pkg.mod``)."""
    path = os.path.abspath(path)
    directory, filename = os.path.split(path)
    stem = filename[:-3] if filename.endswith(".py") else filename
    is_package = stem == "__init__"
    parts = [] if is_package else [stem]
    while True:
        parent, name = os.path.split(directory)
        if not name or not name.isidentifier() or parent == directory:
            break
        parts.append(name)
        directory = parent
    parts.reverse()
    return ".".join(parts) or stem, is_package


@dataclass
class _Scope:
    summary: DefSummary
    self_name: str | None
    params: set[str]
    class_bound: bool = False  # a class method: ``self_name`` is the class (a global)
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)
    #: id of a value in ``assigned`` -> the blocks its plain assignment is in
    #: (``WriteFacts._local_values``)
    assigned_in: dict[int, tuple[tuple[int, str], ...]] = field(default_factory=dict)
    returns: list[tuple[ast.expr, str, int]] = field(default_factory=list)
    keeps: list[tuple[str, ast.expr, str, int]] = field(default_factory=list)
    #: (store text, value, region) of stores into storage that outlives the call
    stores: list[tuple[str, ast.expr, str]] = field(default_factory=list)
    globals: set[str] = field(default_factory=set)
    calls: set[tuple[str, str]] = field(default_factory=set)
    pwrites: set[tuple[str, str]] = field(default_factory=set)
    passes: set[tuple[str, str, str]] = field(default_factory=set)
    #: (value, into) of values stored into objects: into ``self``, ``self[]:<attr>``
    #: (an item of the object's container ``self.<attr>``), ``param:<name>``,
    #: ``other`` (a global, a closure variable: outlives the call) or ``local:<name>``
    #: (an object the function holds in a local: as long as that object lives)
    kept: list[tuple[ast.expr, str]] = field(default_factory=list)
    handed: list[tuple[ast.expr, str]] = field(default_factory=list)  # (argument, how)
    arguments: list[tuple[str, str, ast.expr]] = field(default_factory=list)  # (call, key, arg)
    sets: set[str] = field(default_factory=set)  # ``self.<attr> = ...``
    #: attributes stored only while empty, and those stored any other way
    slots: set[str] = field(default_factory=set)
    refills: set[str] = field(default_factory=set)
    drops: set[str] = field(default_factory=set)  # ``self.<attr>.remove(...)``
    pattrs: set[tuple[str, str]] = field(default_factory=set)  # ``self.<attr> = <param>``
    shapes: dict[str, tuple[int, set[str]]] = field(default_factory=dict)  # of calls
    unpacked: dict[str, list[ast.expr]] = field(default_factory=dict)  # a, b = call()
    rebound: set[str] = field(default_factory=set)  # names bound by a loop or unpacking
    rwrites: set[tuple[str, str, str]] = field(default_factory=set)  # (call, kind, key)
    #: the region at each ``yield``, and what ``__enter__`` enters (``RegionFacts``)
    enters: list[str] = field(default_factory=list)
    entered_modes: list[str] = field(default_factory=list)
    enters_by_hand: bool = False
    callables: set[tuple[str, str, str]] = field(default_factory=set)
    #: tests of ``if`` blocks that end by leaving (``if self._ws: return self._ws``)
    exits: list[ast.expr] = field(default_factory=list)
    #: call text -> the parameters whose truth every call by it waits on
    guards: dict[str, frozenset[str]] = field(default_factory=dict)
    #: the parameters whose truth every allocation call waits on, None before one
    alloc_guard: frozenset[str] | None = None
    flag_args: set[tuple[str, str, str]] = field(default_factory=set)
    #: call text -> whether every call by it is a statement whose result is dropped
    dropped: dict[str, bool] = field(default_factory=dict)
    kernel: bool = False  # a Triton kernel (``@triton.jit``): ``tl.store`` writes
    plain: bool = True  # no decorator that may keep what it returns
    #: (global, value) assigned here: kept for the process unless the function puts
    #: back what the global held (``prev = _ctx; _ctx = Ctx(); ...; _ctx = prev``)
    global_values: list[tuple[str, ast.expr]] = field(default_factory=list)


#: Nodes with nothing below them that the summary needs (names, constants, operators).
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.cmpop, ast.unaryop,
           ast.boolop, ast.alias, ast.Pass, ast.Break, ast.Continue)  # fmt: skip
#: Fields never visited: annotations and type comments hold no calls that run.
_SKIPPED_FIELDS = frozenset({"annotation", "returns", "type_comment", "type_params", "ctx"})


class _FastVisitor:
    """``ast.NodeVisitor`` without its per-node overheads: a dispatch table per class,
    and no descent into leaves or annotations (this walk is over every checked file)."""

    _table: dict[type, str]
    #: the statement lists the walk is in, outermost first: (id(node), field)
    blocks: tuple[tuple[int, str], ...] = ()

    def __init_subclass__(cls) -> None:
        cls._table = {
            getattr(ast, name[6:]): name
            for name in dir(cls)
            if name.startswith("visit_") and hasattr(ast, name[6:])
        }

    def visit(self, node: ast.AST) -> None:
        name = self._table.get(type(node))
        if name is not None:
            getattr(self, name)(node)
        elif not isinstance(node, _LEAVES):
            self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        visit = self.visit
        for field_name in node._fields:
            if field_name in _SKIPPED_FIELDS:
                continue
            value = getattr(node, field_name, None)
            if isinstance(value, list):
                block = bool(value) and isinstance(value[0], ast.stmt)
                if block:  # a body: code in it runs only once the walk's blocks are entered
                    self.blocks = (*self.blocks, (id(node), field_name))
                for item in value:
                    if isinstance(item, ast.AST) and not isinstance(item, _LEAVES):
                        visit(item)
                if block:
                    self.blocks = self.blocks[:-1]
            elif isinstance(value, ast.AST) and not isinstance(value, _LEAVES):
                visit(value)


class _Summarizer(
    StoreFacts,
    WriteFacts,
    ValueOrigins,
    FlagFacts,
    NameFacts,
    RegionFacts,
    TypeFacts,
    _FastVisitor,
):
    """One walk over a module's ``ast`` tree; see :class:`DefSummary` for what it keeps."""

    def __init__(self, module: str, is_package: bool, options: AnalysisOptions) -> None:
        self.module = module
        self.is_package = is_package
        self.options = options
        self.imports: dict[str, str] = {}
        self.defs: dict[str, DefSummary] = {}
        self.instances: dict[str, str] = {}
        top = DefSummary(MODULE_SCOPE, "module")
        self.defs[MODULE_SCOPE] = top
        self.scopes: list[_Scope] = [_Scope(top, None, set())]
        self.classes: list[str | None] = [None]  # the class whose body is being visited
        self.region = ""
        #: the module's own guard helpers (``imlint/guards.py``): ``with`` them is guarded
        self.local_guards: frozenset[str] = frozenset()
        self.cond = 0  # depth of conditional code (if, except, ``or``): lazy stores
        #: the conditions of that code, innermost last (None: an ``except``, which any
        #: failed read may enter): what a conditional store tests (``_sets``)
        self.tests: list[ast.AST | None] = []
        self.flags: list[str] = []  # ``summary_flags.FlagFacts``
        #: the last names of every callable the model treats as an allocator
        self.vocabulary = (
            TORCH_FACTORIES
            | TENSOR_NEW_METHODS
            | {n.rsplit(".", 1)[-1] for n in options.extra_allocators}
        )
        self.may_allocate = False
        #: ids of calls that are statements of their own (their result is dropped)
        self.statements: set[int] = set()
        #: calls whose result a torch function or an in-place method only reads
        self.temporaries: set[int] = set()
        self.name_calls: set[str] = set()
        #: names the module binds at its top level (``_module_names``)
        self.module_names: set[str] = set()
        self.allocating_names: set[str] = set()

    def mode_of(self, expr: ast.expr) -> str:
        """``inference``, ``guarded`` or "" for a ``with`` item or a decorator."""
        func = expr.func if isinstance(expr, ast.Call) else expr
        text = _dotted(func)
        if text is None:
            return ""
        q = self.qualify(text)
        opts = self.options
        if name_matches(q, opts.extra_guards) or q in self.local_guards:
            return "guarded"
        if name_matches(q, opts.inference_mode_regions):
            return "inference"
        if q not in INFERENCE_MODE_NAMES:
            return ""
        if not isinstance(expr, ast.Call):
            return "inference"  # bare ``@torch.inference_mode``
        arg: ast.expr | None = expr.args[0] if expr.args else None
        for kw in expr.keywords:
            if kw.arg == "mode":
                arg = kw.value
        if arg is None:
            return "inference"
        if isinstance(arg, ast.Constant) and isinstance(arg.value, (bool, int)):
            return "inference" if arg.value else "guarded"
        return ""

    def call_text(self, func: ast.expr, scope: _Scope | None = None) -> str:
        """How a call's callee is recorded: a dotted text, ``super().m``, or ``?name``."""
        scope = scope or self.scopes[-1]
        text = _dotted(func)
        if text is not None:
            head, _, rest = text.partition(".")
            if scope.self_name is not None and head == scope.self_name:
                return f"self.{rest}" if rest else "self"
            return text
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
        ):
            return f"super().{func.attr}"
        if isinstance(func, ast.Attribute):
            made = _made_by(func.value)
            if made is not None:  # ``load_module(cfg).run``: a method of what a call made
                inner = self.call_text(made, scope)
                if not inner.startswith("?") and "()" not in inner:
                    return f"{inner}().{func.attr}"
            return "?" + func.attr
        return "?"

    def is_allocator(self, node: ast.Call) -> str | None:
        if _zero_elements(node):
            return None  # ``torch.empty(0)``: a placeholder, as the model sees it
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in TENSOR_NEW_METHODS:
            return "." + func.attr
        text = _dotted(func)
        if text is None:
            return None
        q = self.qualify(text)
        head, _, rest = q.partition(".")
        if head == "torch" and rest in TORCH_ALLOCATORS:
            return q
        if self.options.extra_allocators and name_matches(q, self.options.extra_allocators):
            return q
        return None

    # ---- scopes

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        parent = self.scopes[-1]
        cls = self.classes[-1]
        parent_qual = parent.summary.qual if parent.summary.kind == "function" else ""
        prefix = cls if cls is not None else parent_qual
        qual = f"{prefix}.{node.name}" if prefix else node.name
        mode = ""
        cached = False
        static = classmethod_ = False
        plain = True  # no decorator that may keep what it returns (a memo of its own)
        for dec in node.decorator_list:
            m = self.decorator_region(dec)
            if m and not mode:
                mode = m
            target = _dotted(dec.func if isinstance(dec, ast.Call) else dec) or ""
            q = self.qualify(target)
            last = q.rsplit(".", 1)[-1]
            if (
                q in CACHE_DECORATORS
                or "cache" in last.lower()
                or name_matches(q, self.options.extra_cache_decorators)
            ):
                cached = True
            static = static or last == "staticmethod"
            classmethod_ = classmethod_ or last == "classmethod"
            plain = plain and bool(self.mode_of(dec) or last in ("staticmethod", "classmethod"))
        args = node.args
        positional = [a.arg for a in (*args.posonlyargs, *args.args)]
        self_name = positional[0] if cls is not None and positional and not static else None
        params = positional[1:] if self_name is not None else positional
        summary = DefSummary(qual, "function", cls or "", mode, cached, tuple(params))
        self.defs[qual] = summary
        keywords = [a.arg for a in args.kwonlyargs]
        keywords += [star.arg for star in (args.vararg, args.kwarg) if star is not None]
        summary.keywords = tuple(keywords)
        summary.star = (args.vararg is not None) + 2 * (args.kwarg is not None)
        summary.falsy = falsy_defaults(args)
        summary.mutates = declared_mutations(node)
        setup = self.options.setup_functions
        summary.setup = bool(setup) and name_matches(f"{self.module}.{qual}", setup)
        all_params = set(positional) | set(keywords)
        if cls is None and parent.summary.kind == "function":
            self_name = parent.self_name  # a closure inside a method sees ``self``
        scope = _Scope(summary, self_name, all_params, class_bound=classmethod_, plain=plain)
        self.signature_types(scope, node)
        scope.kernel = any(
            self.qualify(_dotted(d.func if isinstance(d, ast.Call) else d) or "").startswith(
                "triton."
            )
            for d in node.decorator_list
        )
        for dec in node.decorator_list:
            self.visit(dec)
        self._walk_scope(scope, node.body)

    visit_FunctionDef = _def
    visit_AsyncFunctionDef = _def

    def _walk_scope(self, scope: _Scope, body: list[ast.stmt]) -> None:
        """Walk a function's body in its own scope, then finish its summary."""
        self.scopes.append(scope)
        self.classes.append(None)
        saved, self.region = self.region, ""
        flags, self.flags = self.flags, []
        for stmt in body:
            self.visit(stmt)
        self.region, self.flags = saved, flags
        self.classes.pop()
        self.scopes.pop()
        self._finish(scope)

    def visit_If(self, node: ast.If) -> None:
        """``if __name__ == "__main__":`` at module level runs only when the file is run
        as a script (a demo, a tool): its own function, ``<main>``, that nothing calls.
        What it makes lives in that run's locals, not in the module's globals."""
        if len(self.scopes) == 1 and self.classes[-1] is None and is_main_guard(node.test):
            summary = DefSummary(SCRIPT_SCOPE, "function")
            self.defs[SCRIPT_SCOPE] = summary
            self._walk_scope(_Scope(summary, None, set()), node.body)
            for stmt in node.orelse:
                self.visit(stmt)
            return
        super().visit_If(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        parent = self.scopes[-1]
        outer = self.classes[-1]
        parent_qual = parent.summary.qual if parent.summary.kind == "function" else ""
        # Named as the LibCST model names a method's class: the enclosing function, if
        # any, and the class's own name (a class nested in a class drops the outer one).
        qual = f"{parent_qual}.{node.name}" if parent_qual else node.name
        del outer
        bases = tuple(t for t in (_dotted(b) for b in node.bases) if t)
        self.defs[qual] = DefSummary(
            qual, "class", bases=bases, params=_fields(node), members=class_members(node)
        )
        for dec in node.decorator_list:
            self.visit(dec)
        for b in node.bases:
            self.visit(b)
        self.classes.append(qual)
        for stmt in node.body:
            self.visit(stmt)
        self.classes.pop()

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.body)  # calls in a lambda are made by its scope, later

    def visit_Global(self, node: ast.Global) -> None:
        self.scopes[-1].globals.update(node.names)

    visit_Nonlocal = visit_Global

    # ---- regions

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
        saved = self.region
        self.region = join_regions(saved, self.with_region(node.items))
        for stmt in node.body:
            self.visit(stmt)
        self.region = saved

    visit_With = _with
    visit_AsyncWith = _with

    # ---- calls, stores, returns

    def visit_Expr(self, node: ast.Expr) -> None:
        value = node.value.value if isinstance(node.value, ast.Await) else node.value
        if isinstance(value, ast.Call):
            self.statements.add(id(value))  # ``prof.step()``: what it returns is dropped
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        scope = self.scopes[-1]
        launch = isinstance(node.func, ast.Subscript)  # ``kernel[grid](...)``
        callable_ = node.func.value if isinstance(node.func, ast.Subscript) else node.func
        text = self.call_text(callable_)
        statement = id(node) in self.statements
        for callee in self.call_texts(callable_, scope):
            scope.dropped[callee] = scope.dropped.get(callee, True) and statement
            if scope.summary.kind == "function":
                self._param_writes(node, callee, launch, scope)
            self._handed(node, callee, scope)
            self.handed_callables(node, callee, scope)
            head = callee.split(".", 1)[0]
            if "." in callee and head not in self.imports and head not in _BUILTINS:
                _merge_shape(node, callee, scope)  # a method call the index may not resolve
            if head not in _BUILTINS or head in self.imports or head in self.defs:
                scope.calls.add((callee, self.region))
                self._flag_call(node, callee, scope)
        self.entered_by_hand(node, scope)
        self._temporaries(node, text)
        if self.qualify(text) == "threading.Thread":
            # ``Thread(target=self._run)``: the target runs in a new thread, where
            # inference mode is off (it is per thread), whatever mode starts it.
            for kw in node.keywords:
                started = _dotted(kw.value) if kw.arg == "target" else None
                if started is not None:
                    scope.calls.add((started, THREAD_REGION))
        func = node.func
        last = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if last is not None:
            if last in self.vocabulary:
                self.may_allocate = True
                self._guard_allocation(node, scope)
            elif isinstance(func, ast.Attribute) and last in TENSOR_DERIVING_METHODS:
                self.may_allocate = True  # ``x.to(d)``
                self._guard_allocation(node, scope)
            elif isinstance(func, ast.Name):
                self.name_calls.add(last)
        if self.is_allocator(node) is not None:
            scope.summary.alloc_calls += 1
            self._guard_allocation(node, scope)
            self.may_allocate = True  # ``torch.cat(...)``: by its qualified name
        if text in ("setattr",) and len(node.args) >= 3:
            self._store(node.args[0], node.args[2], ".setattr")
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("setdefault", "__setitem__"):
            if len(node.args) >= 2:
                self._store(node.func.value, node.args[1], f".{node.func.attr}")
                get_or_create = node.func.attr == "setdefault"
                self._sets(node.func.value, scope, item=True, get_or_create=get_or_create)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
            if len(node.args) >= 2 and _dotted(node.func.value) == scope.self_name:
                name = node.args[0]
                attr = str(name.value) if isinstance(name, ast.Constant) else "<buffer>"
                scope.keeps.append((f"self.{attr}", node.args[1], self.region, node.lineno))
        self.generic_visit(node)

    # ---- what a scope allocates

    def _finish(self, scope: _Scope) -> None:
        s = scope.summary
        s.calls = sorted(scope.calls)
        s.pwrites = sorted(scope.pwrites)
        s.kernel = scope.kernel
        s.rwrites = sorted(scope.rwrites)
        s.passes = sorted(scope.passes)
        s.sets = sorted(scope.sets)
        s.slots = sorted(scope.slots - scope.refills)
        s.drops = sorted(scope.drops)
        s.pattrs = sorted(scope.pattrs)
        s.flagged = sorted((text, p) for text, ps in scope.guards.items() for p in ps)
        s.flag_args = sorted(scope.flag_args)
        s.shapes = [
            (text, n, tuple(sorted(kws))) for text, (n, kws) in sorted(scope.shapes.items())
        ]
        s.fixed = fixed_calls(scope, self.module_names)
        s.once = sorted(
            name
            for name in s.types
            if "." not in name
            and len(scope.assigned.get(name, ())) == 1
            and name not in scope.unpacked
        )
        s.hands = sorted(
            {
                (text, key, holder)
                for text, key, arg in scope.arguments
                for holder in self.holders(arg, scope)
            }
        )
        s.results = self._results(scope)
        s.fresh = scope.plain and _returns_fresh(scope, self._fresh_call)
        s.pkept, s.pitems = _kept_params(scope)
        s.enters = self.finish_regions(scope)
        s.callables = sorted(scope.callables)
        self.returned_type(scope)
        s.annots = sorted(set(s.annots))
        self._allocations(scope)
        s.alloc_flags = self._alloc_flags(scope)

    def _results(self, scope: _Scope) -> list[tuple[str, str]]:
        """``DefSummary.results``: what happens to what each call makes."""
        results = {(text, "returned") for v, *_ in scope.returns for text in self._made(v, scope)}
        for name, value in scope.global_values:
            if not _restored(name, scope):
                scope.kept.append((value, "other"))
        for value, into in scope.kept:
            intos = [into]
            if into.startswith("local:"):
                # kept on a local object: as long as the objects the local may hold
                holders = self._made(ast.Name(id=into[6:], ctx=ast.Load()), scope)
                intos = [f"made:{h}" for h in sorted(holders)]
            results |= {(text, f"kept:{i}") for text in self._made(value, scope) for i in intos}
        for value, how in scope.handed:
            results |= {(text, how) for text in self._made(value, scope)}
        called = {text for text, _region in scope.calls}  # builtins left out, as there
        results |= {
            (t, "dropped") for t, dropped in scope.dropped.items() if dropped and t in called
        }
        return sorted(results)

    def _allocations(self, scope: _Scope) -> None:
        """``DefSummary.allocs`` (what is returned or kept, made by which allocation or
        call) and ``factories`` (parameters whose result a get-or-create keeps)."""
        s = scope.summary
        unguarded = s.mode != "guarded"
        for value, region, _line in scope.returns:
            if region == "guarded" or not unguarded:
                continue
            for ref in sorted(self.refs(value, scope)):
                if not ref.startswith("#"):
                    s.allocs.append(("returns", "", ref))
        for what, value, region, _line in scope.keeps:
            if region == "guarded" or not unguarded:
                continue
            for ref in sorted(self.refs(value, scope)):
                if not ref.startswith("#"):
                    s.allocs.append(("keeps", what, ref))
        positions = {p: i for i, p in enumerate(s.params)}
        if s.qual.rsplit(".", 1)[-1] in _CONSTRUCTORS:
            return  # construction, not a get-or-create helper
        for text, value, region in scope.stores:
            if region == "guarded" or not unguarded:
                continue
            for ref in sorted(self.refs(value, scope)):
                name = ref[1:]
                if ref.startswith("#") and name != scope.self_name:
                    s.factories.append((name, positions.get(name, -1), text))


def _fields(node: ast.ClassDef) -> tuple[str, ...]:
    """A class's annotated fields in order (``x: int``, ``y: Tensor = None``): the
    parameters a generated constructor takes (a dataclass, a named tuple), for a class
    with no ``__init__`` of its own. ``ClassVar`` fields and ``field(init=False)`` are
    not parameters."""
    out = []
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        if "ClassVar" in ast.unparse(stmt.annotation):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and any(
            kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False
            for kw in value.keywords
        ):
            continue
        out.append(stmt.target.id)
    return tuple(out)


def _kept_params(scope: _Scope) -> tuple[list[str], list[tuple[str, str]]]:
    """``DefSummary.pkept`` (parameters the body keeps) and ``pitems`` (parameters kept
    as items of ``self.<attribute>``)."""
    kept = [(v.id, into) for v, into in scope.kept if isinstance(v, ast.Name)]
    params = [(name, into) for name, into in kept if name in scope.params]
    pkept = sorted({name for name, into in params if not into.startswith("local:")})
    pitems = sorted({(name, into[7:]) for name, into in params if into.startswith("self[]:")})
    return pkept, pitems


def _merge_shape(node: ast.Call, text: str, scope: _Scope) -> None:
    """Merge the call's arguments into ``DefSummary.shapes``."""
    starred = any(isinstance(a, ast.Starred) for a in node.args)
    n = -1 if starred else len(node.args)
    kws = {kw.arg or "**" for kw in node.keywords}
    known = scope.shapes.get(text)
    if known is not None:
        n = -1 if -1 in (n, known[0]) else max(n, known[0])
        kws |= known[1]
    scope.shapes[text] = (n, kws)


_FRESH_LITERALS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _returns_fresh(scope: _Scope, fresh_call: Callable[[ast.expr], bool]) -> bool:
    """Whether every ``return`` hands back a container built by this call that nothing
    else holds (``DefSummary.fresh``): a literal, a new object from a call that builds
    one (``copy.copy(meta)``, ``fresh_call``), or a local bound only to one of those."""
    if not scope.returns:
        return False
    held = {
        v.id
        for v in (
            *(v for v, _into in scope.kept),
            *(v for _t, v, _r in scope.stores),
            *(v for _g, v in scope.global_values),
            *(v for v, _how in scope.handed),
            *(v for _c, _k, v in scope.arguments),
        )
        if isinstance(v, ast.Name)
    }
    for value, _region, _line in scope.returns:
        if isinstance(value, _FRESH_LITERALS) or fresh_call(value):
            continue
        if not isinstance(value, ast.Name) or value.id in scope.params | held | scope.rebound:
            return False
        bound = scope.assigned.get(value.id)
        if not bound or not all(isinstance(v, _FRESH_LITERALS) or fresh_call(v) for v in bound):
            return False
    return True


def _made_by(expr: ast.expr) -> ast.expr | None:
    """The callee of a call to a name or an attribute (``load_module`` of
    ``load_module(cfg)``); ``ProjectIndex.opaque`` judges what it names."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Name, ast.Attribute)):
        return expr.func
    return None


def _restored(name: str, scope: _Scope) -> bool:
    """Whether a function puts back the value a global held: it assigns the global a
    local that it bound to the global (``prev = _ctx; _ctx = Ctx(); ...; _ctx = prev``),
    so what it stored there lives only until then."""
    for global_name, value in scope.global_values:
        if global_name == name and isinstance(value, ast.Name):
            saved = scope.assigned.get(value.id, [])
            if any(isinstance(v, ast.Name) and v.id == name for v in saved):
                return True
    return False


def _zero_elements(node: ast.Call) -> bool:
    """A sized factory with a literal 0 in its size (the model's rule, on ``ast``)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name == "tensor" and node.args:  # ``torch.tensor([])``: an empty placeholder
        first = node.args[0]
        return isinstance(first, (ast.List, ast.Tuple)) and not first.elts
    if name not in SIZED_FACTORIES or name.endswith("_like") or not node.args:
        return False
    first = node.args[0]
    dims = first.elts if isinstance(first, (ast.Tuple, ast.List)) else [first]
    return any(isinstance(d, ast.Constant) and d.value == 0 and d.value is not False for d in dims)


def _module_names(body: list[ast.stmt]) -> set[str]:
    """Names the module binds at its top level (under ``if``/``try`` too), wherever
    they stand: what a function reads of them is module state, not its input."""
    names: set[str] = set()
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.If, ast.Try)):
            stack.extend(node.body)
            stack.extend(node.orelse)
            if isinstance(node, ast.Try):
                stack.extend(node.finalbody)
                for handler in node.handlers:
                    stack.extend(handler.body)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _module_level_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            yield stmt
        elif isinstance(stmt, ast.If):
            yield from _module_level_imports(stmt.body)
            yield from _module_level_imports(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _module_level_imports(stmt.body)
            for h in stmt.handlers:
                yield from _module_level_imports(h.body)
            yield from _module_level_imports(stmt.orelse)


def _tensor_call(text: str) -> bool:
    """Whether a call the index cannot resolve reads as a tensor method's: a name of
    ``vocabulary.TENSOR_METHOD_NAMES`` called on anything but ``self`` or ``cls``."""
    receiver, _, name = text.rpartition(".")
    return bool(receiver) and receiver not in ("self", "cls") and name in TENSOR_METHOD_NAMES


def _keep_callables(defs: dict[str, DefSummary], imports: dict[str, str]) -> None:
    """Of the arguments a file's calls hand over, keep those that may be callables the
    index can resolve: a function or class the file defines (nested ones too) or
    imports, ``mod.f`` of an import, ``self.m``; plain data (``f(x, self.buf)`` is kept
    too, only ``self.<name>`` cannot be told apart) is left out."""
    names = {q.rsplit(".", 1)[-1] for q in defs} | set(imports)
    for d in defs.values():
        if d.callables:
            d.callables = [
                c for c in d.callables if c[2].split(".", 1)[0] in names or c[2].startswith("self.")
            ]


def _enclosing_method(s: FileSummary, d: DefSummary) -> DefSummary | None:
    """The method a closure is nested in (its ``self`` is that method's)."""
    qual = d.qual.rpartition(".")[0]
    while qual:
        outer = s.defs.get(qual)
        if outer is None or outer.kind != "function":
            return None
        if outer.cls:
            return outer
        qual = qual.rpartition(".")[0]
    return None


def _nested_def(s: FileSummary, d: DefSummary, text: str) -> str | None:
    """The function nested in ``d`` (or in a function around it) that a plain name
    calls: ``forward_fn`` defined inside the method that calls or hands it."""
    if d.kind != "function" or "." in text:
        return None
    qual = d.qual
    while True:
        found = s.defs.get(f"{qual}.{text}")
        if found is not None and found.kind == "function":
            return found.qual
        qual = qual.rpartition(".")[0]
        outer = s.defs.get(qual) if qual else None
        if outer is None or outer.kind != "function":
            return None


def summarize(
    path: str, text: str, options: AnalysisOptions, tree: ast.Module | None = None
) -> FileSummary:
    """The summary of one file (``tree``: its ``ast``, when the caller has it already)."""
    module, is_package = module_name(path) if path != "-" else ("__stdin__", False)
    if tree is None:
        try:
            tree = quiet_parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            return FileSummary(path, module, is_package, {}, {}, error=type(exc).__name__)
    s = _Summarizer(module, is_package, options)
    s.module_names = _module_names(tree.body)
    # Module-level imports bind names for every function, wherever they stand; imports
    # inside functions are bound as the walk meets them.
    for node in _module_level_imports(tree.body):
        s.visit(node)
    s.local_guards = local_guards(tree) if "inference_mode" in text else frozenset()
    for stmt in tree.body:
        s.visit(stmt)
    s._finish(s.scopes[0])
    s.resolve_names()
    _keep_callables(s.defs, s.imports)
    may_allocate = s.may_allocate or bool(s.name_calls & s.allocating_names)
    return FileSummary(
        path,
        module,
        is_package,
        s.imports,
        s.defs,
        s.instances,
        may_allocate=may_allocate,
        private_refs=_private_refs(text),
        generated_from=generated_from(text),
    )


#: A generated file's header: ``# This file was automatically generated from <path>.``
_GENERATED_FROM = re.compile(r"^[ \t]*#.*\bgenerated from\s+(\S+?\.py)\b", re.M | re.I)


def generated_from(text: str) -> str:
    """The source file a generated file's header comment names (in its first lines),
    as a dotted path without ``.py`` (``src.pkg.modular_x``), or ""."""
    found = _GENERATED_FROM.search(text, 0, 4000)
    if found is None:
        return ""
    return found.group(1)[:-3].replace("\\", "/").strip("/").replace("/", ".")


#: A line that is only a comment (commented-out code names nothing that runs).
_COMMENT_LINE = re.compile(r"^[ \t]*#.*$", re.M)
#: An identifier that starts with ``_``, not as an attribute of ``self`` or ``cls``, nor
#: the name a ``def`` gives.
_PRIVATE_NAME = re.compile(r"(?<!self\.)(?<!cls\.)(?<!def )\b_\w+")


def _private_refs(text: str) -> frozenset[str]:
    """The private names a module's text spells outside comment lines (see
    ``FileSummary.private_refs``): in code, a string or an end-of-line comment, all
    taken as references (a text search, cheaper than walking the tree; what it
    over-counts only keeps a function from being taken as dead)."""
    return frozenset(
        name
        for name in _PRIVATE_NAME.findall(_COMMENT_LINE.sub("", text))
        if not (name[:2] == "__" and name[-2:] == "__")
    )


# --------------------------------------------------------------------------------- facts


def summary_digest(data: object) -> str:
    """A digest of a summary's data: equal digests, equal project facts. (``repr`` of
    plain data is canonical; ``marshal`` output depends on which equal strings happen
    to be the same object, which differs between a worker and this process.)"""
    return hashlib.blake2b(repr(data).encode(), digest_size=12).hexdigest()


#: A resolved callable: (module, qualname).
Target = tuple[str, str]


class ProjectIndex(
    AllocatorFinder,
    ReachFinder,
    RegionFinder,
    DispatchFinder,
    MemberFinder,
    TypeFinder,
    FactsFinder,
    OutsideFinder,
):
    """All summaries of a run, joined: resolution, allocators (``index_allocators.py``),
    call graph."""

    def __init__(
        self, summaries: Iterable[FileSummary], libraries: Iterable[FileSummary] = ()
    ) -> None:
        self.files: dict[str, FileSummary] = {}
        self.modules: dict[str, FileSummary] = {}
        tails: dict[str, FileSummary | None] = {}
        for s in summaries:
            self.files[s.path] = s
            if s.error is None:
                self.modules.setdefault(s.module, s)
                parts = s.module.split(".")
                for i in range(1, len(parts)):
                    tail = ".".join(parts[i:])
                    # A tail two files share names neither.
                    tails[tail] = s if tail not in tails else None
        # The project's own top-level packages: not the tails below, which only help
        # resolve imports (a tail ``flashinfer`` of ``pkg.backends.flashinfer`` must not
        # make the outside ``flashinfer`` library project code).
        self.roots = {m.split(".", 1)[0] for m in self.modules}
        for tail, owner in tails.items():
            if owner is not None and tail not in self.modules:
                self.modules[tail] = owner
        # Installed packages (``installed.py``): resolvable by their own names, never
        # project code (not roots, no tails), never reported on.
        self.libraries: set[str] = set()
        for s in libraries:
            if s.error is None and s.module not in self.modules:
                s.library = True
                self.modules[s.module] = s
                self.libraries.add(s.module.split(".", 1)[0])
        self.summaries = list({id(s): s for s in self.modules.values()}.values())
        self._alloc: dict[Target, tuple[str, bool, str]] = {}
        self._helpers: dict[Target, tuple[int, str, str]] = {}
        self.callers: dict[Target, list[tuple[Target, str]]] = {}
        #: name -> (caller, call text) of the calls by that name the index cannot resolve
        self.unresolved_sites: dict[str, list[tuple[Target, str]]] = {}
        #: the same, less calls on ``self`` or ``cls`` (they reach methods only)
        self.unresolved_plain: dict[str, list[tuple[Target, str]]] = {}
        #: (caller, callee) -> the class whose object the call builds (``builds``)
        self.building: dict[tuple[Target, Target], Target] = {}
        self.unresolved_total = 0
        self._resolved: dict[tuple[str, str, str], Target | None] = {}
        self._typed: dict[str, dict[tuple[str, str], list[DefSummary]]] = {}
        self._children: dict[Target, set[Target]] | None = None
        self._callers_of: dict[Target, list[tuple[Target, str]]] = {}
        self._grouped: dict[int, dict[str, set[str]]] = {}
        self._private_refs: frozenset[str] | None = None
        self._templates: frozenset[str] | None = None
        self._init_regions()
        self._init_dispatch()
        self._init_members()
        self._init_types()
        self._init_reach()
        self._build()

    # ---- resolution

    def _in_module(self, module: str, parts: list[str], depth: int) -> Target | None:
        s = self.modules.get(module)
        if s is None or not parts or depth > 8:
            return None
        qual = parts[0]
        if qual in s.defs and s.defs[qual].kind != "module":
            for part in parts[1:]:
                nxt = f"{qual}.{part}"
                if nxt in s.defs:
                    qual = nxt
                elif s.defs[qual].kind == "class":
                    found = self._method(module, qual, part, depth + 1)
                    return found
                else:
                    return None
            return (s.module, qual)
        if qual in s.imports:
            return self._dotted(s.imports[qual] + "".join("." + p for p in parts[1:]), depth + 1)
        if qual in s.instances and len(parts) == 2:
            cls = self._resolve_in(s, None, s.instances[qual], depth + 1)
            if cls is not None and self._kind(cls) == "class":
                return self._method(cls[0], cls[1], parts[1], depth + 1)
        return None

    def _dotted(self, full: str, depth: int = 0) -> Target | None:
        parts = full.split(".")
        for i in range(len(parts), 0, -1):
            module = ".".join(parts[:i])
            if module in self.modules:
                return self._in_module(module, parts[i:], depth)
        return None

    def _kind(self, target: Target) -> str:
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        return d.kind if d is not None else ""

    def _method(self, module: str, cls: str, name: str, depth: int = 0) -> Target | None:
        """``cls.name`` looked up in the class and its resolvable bases (in order)."""
        if depth > 8:
            return None
        s = self.modules.get(module)
        if s is None:
            return None
        if f"{cls}.{name}" in s.defs:
            return (s.module, f"{cls}.{name}")
        d = s.defs.get(cls)
        for base in d.bases if d is not None else ():
            b = self._resolve_in(s, None, base, depth + 1)
            if b is not None and self._kind(b) == "class":
                found = self._method(b[0], b[1], name, depth + 1)
                if found is not None:
                    return found
        return None

    def kind_of(self, target: Target) -> str:
        return self._kind(target)

    def unresolved_callers(self, target: Target) -> list[tuple[Target, str]]:
        """The calls by ``target``'s last name that the index cannot resolve, as
        (caller, call text). A call on ``self`` or ``cls`` reaches a method, never a
        module-level function of that name."""
        name = target[1].rsplit(".", 1)[-1]
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        plain = d is not None and not d.cls
        return (self.unresolved_plain if plain else self.unresolved_sites).get(name, [])

    def unresolved_count(self, qual: str) -> int:
        """How many calls the index cannot resolve are by the last name of ``qual``."""
        return len(self.unresolved_sites.get(qual.rsplit(".", 1)[-1], ()))

    def callers_of(self, target: Target) -> list[tuple[Target, str]]:
        """The calls that may reach ``target``: its own callers and, for a method that
        overrides a base class's, the calls through ``self`` to that method (virtual
        dispatch: ``self._init_rope()`` in the base's ``__init__`` runs the override)."""
        known = self._callers_of.get(target)
        if known is not None:
            return known
        found = self._callers_of[target] = list(self.callers.get(target, ()))
        for over in self.overridden(target):
            found.extend(self.callers_of(over))
        return found

    def overridden(self, target: Target) -> list[Target]:
        """The methods of the direct base classes that method ``target`` overrides."""
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if s is None or d is None or not d.cls:
            return []
        name = target[1].rsplit(".", 1)[-1]
        cd = s.defs.get(d.cls)
        out: list[Target] = []
        for base in cd.bases if cd is not None else ():
            b = self._resolve_in(s, None, base)
            if b is None or self._kind(b) != "class":
                continue
            over = self._method(b[0], b[1], name)
            if over is not None and over != target:
                out.append(over)
        return out

    def method_of(self, cls: Target, name: str) -> Target | None:
        """``cls.name``, looked up through the class's bases."""
        return self._method(cls[0], cls[1], name)

    def classes(self) -> list[Target]:
        return [
            (s.module, q) for s in self.summaries for q, d in s.defs.items() if d.kind == "class"
        ]

    def subclasses(self, cls: Target) -> set[Target]:
        """Every class of the project that derives from ``cls``, transitively."""
        if self._children is None:
            self._children = {}
            for s in self.summaries:
                for d in s.defs.values():
                    for base in d.bases if d.kind == "class" else ():
                        b = self._resolve_in(s, None, base)
                        if b is not None:
                            self._children.setdefault(b, set()).add((s.module, d.qual))
        out: set[Target] = set()
        stack = [cls]
        while stack:
            for child in self._children.get(stack.pop(), ()):
                if child not in out:
                    out.add(child)
                    stack.append(child)
        return out

    def qualify_in(self, s: FileSummary, text: str) -> str:
        head, _, rest = text.partition(".")
        target = s.imports.get(head)
        if target is None:
            return text
        return f"{target}.{rest}" if rest else target

    def constructor(self, cls: Target) -> Target | None:
        """What binds the arguments of a call to the class ``cls``: its ``__init__``
        (through its bases), or the class itself when it has none and declares fields
        (a dataclass, a named tuple: ``DefSummary.params``)."""
        init = self._method(cls[0], cls[1], "__init__")
        if init is not None:
            return init
        s = self.modules.get(cls[0])
        d = s.defs.get(cls[1]) if s is not None else None
        return cls if d is not None and d.params else None

    def param_name(self, target: Target, key: str) -> str | None:
        """The parameter of ``target`` an argument binds to (``key``: a position or a
        keyword); a class binds to its constructor (``constructor``)."""
        if self._kind(target) == "class":
            init = self.constructor(target)
            if init is None:
                return None
            target = init
        if not key.isdigit():
            return key
        s = self.modules.get(target[0])
        d = s.defs.get(target[1]) if s is not None else None
        if d is None or int(key) >= len(d.params):
            return None
        return d.params[int(key)]

    def is_external(self, s: FileSummary, text: str) -> bool:
        """Whether a call goes outside the project (an import from elsewhere, a
        builtin)."""
        return self._is_external(s, text)

    def resolve_base(self, s: FileSummary, base: str) -> Target | None:
        """The class a base class text in ``s`` names."""
        return self._resolve_in(s, None, base)

    def _is_external(self, s: FileSummary, text: str) -> bool:
        head = text.split(".", 1)[0]
        if head in s.imports:
            return s.imports[head].split(".", 1)[0] not in self.roots
        return head in _BUILTINS and head not in s.defs

    def _resolve_in(
        self, s: FileSummary, d: DefSummary | None, text: str, depth: int = 0
    ) -> Target | None:
        if text.startswith("?") or depth > 8:
            return None
        if text.startswith("super()."):
            cls = d.cls if d is not None else ""
            cd = s.defs.get(cls)
            for base in cd.bases if cd is not None else ():
                b = self._resolve_in(s, None, base, depth + 1)
                if b is not None:
                    found = self._method(b[0], b[1], text[8:], depth + 1)
                    if found is not None:
                        return found
            return None
        parts = text.split(".")
        if parts[0] == "self" and d is not None and d.cls:
            if len(parts) == 2:
                return self._method(s.module, d.cls, parts[1], depth + 1)
            if len(parts) == 3:
                holder = self._class_of(s, d, f"self.{parts[1]}", depth)
                if holder is not None:
                    return self._method(holder[0], holder[1], parts[2], depth + 1)
            return None
        if d is not None and parts[0] in d.types and len(parts) == 2:
            if d.types[parts[0]] == "self" and d.cls:  # made by ``cls(...)``
                return self._method(s.module, d.cls, parts[1], depth + 1)
            holder = self._resolve_in(s, None, d.types[parts[0]], depth + 1)
            if holder is not None and self._kind(holder) == "class":
                return self._method(holder[0], holder[1], parts[1], depth + 1)
            return None
        if parts[0] in s.defs and s.defs[parts[0]].kind != "module":
            return self._in_module(s.module, parts, depth + 1)
        if parts[0] in s.imports or parts[0] in s.instances:
            return self._in_module(s.module, parts, depth + 1)
        return None

    def _class_of(self, s: FileSummary, d: DefSummary, attr: str, depth: int) -> Target | None:
        """The class of ``self.attr``, from a constructor call stored there in the class."""
        typed = self._typed.get(s.path)
        if typed is None:  # (class, ``self.attr``) -> the methods that store a call there
            typed = self._typed[s.path] = {}
            for other in s.defs.values():
                for name in other.types:
                    typed.setdefault((other.cls, name), []).append(other)
        for other in typed.get((d.cls, attr), ()):
            c = self._resolve_in(s, other, other.types[attr], depth + 1)
            if c is not None and self._kind(c) == "class":
                return c
        return None

    def resolve(self, s: FileSummary, d: DefSummary, text: str) -> Target | None:
        own = text.startswith(("self.", "super()")) or text.split(".", 1)[0] in d.types
        key = (s.path, d.qual if own else "", text)
        if key in self._resolved:
            return self._resolved[key]
        target = self._resolve_in(s, d, text)
        self._resolved[key] = target
        return target

    def resolve_scoped(self, s: FileSummary, d: DefSummary, text: str) -> Target | None:
        """``resolve``, and also what a function nested in another reaches by scope: a
        function defined around the call (``forward_fn()``), ``self.m`` in a closure
        inside a method. Reach follows these (``handed_callers``); set-up and lifetimes
        were measured without them and keep to ``resolve``."""
        nested = _nested_def(s, d, text)
        if nested is not None:
            return (s.module, nested)
        if not d.cls and d.kind == "function" and text.startswith(("self.", "super()")):
            method = _enclosing_method(s, d)
            return self.resolve(s, method, text) if method is not None else None
        return self.resolve(s, d, text)

    # ---- building

    def _build(self) -> None:
        self._find_allocators()
        self._find_helpers()
        for s in self.summaries:
            for d in s.defs.values():
                caller = (s.module, d.qual)
                for text, region in d.calls:
                    target = self.resolve(s, d, text)
                    if target is None:
                        scoped = self.resolve_scoped(s, d, text)
                        typed = scoped is None
                        scoped = self.resolve_typed(s, d, text) if typed else scoped
                        if scoped is not None and self._kind(scoped) == "function":
                            mode = self.call_region(s, d, region)
                            self.handed_callers.setdefault(scoped, []).append((caller, mode))
                            self.note_dispatch(caller, text, scoped, typed)
                        if not self._is_external(s, text) and not _tensor_call(text):
                            name = text.rsplit(".", 1)[-1].lstrip("?")
                            if name:
                                self.unresolved_sites.setdefault(name, []).append((caller, text))
                                modes = self.unresolved_modes.setdefault((caller, text), set())
                                modes.add(self.call_region(s, d, region))
                                if not text.startswith(("self.", "cls.")):
                                    site = (caller, text)
                                    self.unresolved_plain.setdefault(name, []).append(site)
                                self.unresolved_total += 1
                        continue
                    if self._kind(target) == "class":
                        init = self._method(target[0], target[1], "__init__")
                        if init is None:
                            continue
                        target = init
                    mode = self.call_region(s, d, region)
                    self.callers.setdefault(target, []).append((caller, mode))
                    self.note_dispatch(caller, text, target, False)
                    if region.startswith(CM_REGION_PREFIX) and self.region_mode(s, d, region):
                        via = self.region_via(s, d, region)
                        self.edge_notes[(caller, target)] = f"via `{via}`"
                    made = self.builds(caller, text)
                    if made is not None:
                        self.building[(caller, target)] = made
        self._callable_edges()
        # Writes read which functions run only inside inference mode (the call graph).
        self.confined = self.confined_functions()
        self.param_writes = param_writes(self)
        self.result_writes = result_writes(self)
        # Both read the call graph just built.
        # Construction needs to know which objects are made per call (building one is
        # not set-up), and lifetimes what runs in construction: one round each way.
        self.construction = construction_only(self)
        first = Lifetimes(self, self.construction)
        self.construction = construction_only(self, first.per_call)
        self.lifetimes = Lifetimes(self, self.construction, first.origins)
        self.per_call_params = self.lifetimes.params
        self.warmed = warmed_by_construction(self, self.construction, self.lifetimes.per_call)
        self.holders = Holders(self)

    # ---- per-file facts
