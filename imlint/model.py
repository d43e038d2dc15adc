"""The shared analysis model.

One walk over a module's LibCST tree collects, for every function, the facts the
rules need: which names hold which values, which containers are local, which
statements sit under which guards and conditions, which stores outlive the call,
and which in-place writes touch which buffers. :func:`build_model` then resolves
those facts into :class:`AllocationSite` records; every rule reads the same
records instead of walking the tree again.
"""

from __future__ import annotations

import contextlib

import libcst as cst

from imlint.collect import Collector
from imlint.guards import local_guards
from imlint.index_facts import NO_FACTS, FileFacts
from imlint.names import dotted_name, torch_alias
from imlint.options import AnalysisOptions
from imlint.positions import Positions
from imlint.semantic import AllocationSite, FunctionModel, ModuleModel, Store
from imlint.sites import (
    dropped,
    literal_key,
    persistent,
    reads_target,
    related,
    replaced,
    resolve_caller_laziness,
    resolve_laziness,
    site_mode,
    stored_before,
)
from imlint.source import quiet_parse
from imlint.values import FunctionAnalysis, ModuleIndex
from imlint.walk import visit_readonly
from imlint.writes import WriteIndex, find_writes


def _members(collector: Collector) -> dict[tuple[str, str], FunctionModel]:
    """``(receiver, method)`` -> the method ``receiver.method(...)`` calls, for a receiver
    that is a class of the module (``Pool.get_buffers``) or a module-level instance of
    one (``_POOL = Pool()``, then ``_POOL.get(...)``)."""
    by_class = {c.name: c for c in collector.classes}
    receivers = {name: name for name in by_class}
    for name, made in collector.instances.items():
        if made in by_class:
            receivers[name] = made
    out: dict[tuple[str, str], FunctionModel] = {}
    for receiver, cls_name in receivers.items():
        for f in by_class[cls_name].functions:
            out[(receiver, f.name)] = f
    return out


def build_model(
    module: cst.Module,
    options: AnalysisOptions,
    facts: FileFacts = NO_FACTS,
    text: str | None = None,
) -> ModuleModel:
    """Walk a module once and resolve the facts every rule reads (``facts``: what the
    project index knows about this file's calls)."""
    positions = Positions(module, text)
    collector = Collector(options, positions, facts)
    code = text if text is not None else module.code
    if "inference_mode" in code:
        # A text Python cannot parse has no summary either: no guard helpers there.
        with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
            collector.local_guards = local_guards(quiet_parse(code))
    visit_readonly(module, collector)
    allocations = collector.allocations
    index = _module_index(collector, facts)
    analyses = {id(f): FunctionAnalysis(f, index) for f in collector.functions}
    index.analyses = analyses

    # A private function nothing in the project refers to never runs: no site in it.
    dead = (
        {id(f) for f in collector.functions if _outermost(f).qualname in facts.unused}
        if facts.unused
        else set()
    )
    # A factory handed to a get-or-create helper: the helper keeps what it returns.
    for site in allocations:
        if site.helper and id(site.function) not in dead:
            site.store = Store(
                "helper", f"{site.allocator}(...)", None, None, site.call, site.frames,
                site.order, site.stmt,
            )  # fmt: skip
            site.mode = site_mode(site)
            f = site.function
            built = (
                f.is_constructor and f.cls is not None and f.cls.name not in index.per_call_classes
            )
            if not index.filled_at_setup(f.qualname) and not built:
                site.lazy = "get-or-create helper"  # not while a long-lived object is built

    fills: dict[int, set[str]] = {}  # id(function) -> the persistent storage it fills
    for f in collector.functions:
        if id(f) not in dead:
            fills[id(f)] = _resolve_stores(f, analyses[id(f)], allocations, index)

    for site in allocations:
        if site.store is not None and site.lazy is None:
            resolve_caller_laziness(site, fills.get(id(site.function), set()), analyses)

    # In-place writes, per scope: the function, its class, or the module.
    windex = WriteIndex(collector.functions, analyses, collector.mode_blocks)
    for site in allocations:
        if site.store is not None:
            find_writes(site, analyses, windex, index, collector.callbacks)

    return ModuleModel(
        collector.imports,
        collector.functions,
        collector.classes,
        allocations,
        options,
        positions,
        collector.blocks,
        collector.bodies,
        torch_imported_at_top=_torch_imported_at_top(module),
        torch_bound_conditionally=_torch_bound_conditionally(module),
    )


def _resolve_stores(
    f: FunctionModel, fa: FunctionAnalysis, allocations: list[AllocationSite], index: ModuleIndex
) -> set[str]:
    """Give each allocation of ``f`` the persistent store its tensor reaches first, its
    mode and laziness; returns the storage ``f`` fills, by text."""
    persistent_stores = [
        s for s in f.stores if persistent(s, fa) and not dropped(s, f) and not replaced(s, fa)
    ]
    # Storage each persistent store fills, by text: a condition that tests storage
    # filled in its own branch is a cache test for everything that branch allocates.
    keys: dict[str, list[Store]] = {}
    for s in persistent_stores:
        keys.setdefault(s.target, []).append(s)
        if s.container is not None and not literal_key(s):
            keys.setdefault(s.container, []).append(s)
    flows: dict[int, Store] = {}
    for store in persistent_stores:
        if store.value is not None:
            for sid in _reaching(store, fa, allocations, index):
                flows.setdefault(sid, store)
    for sid, store in flows.items():
        site = allocations[sid]
        if site.function is not f or site.store is not None:
            continue
        site.store = store
        site.mode = site_mode(site)
        resolve_laziness(site, fa, related(store, f), keys)
    return set(keys)


def _reaching(
    store: Store, fa: FunctionAnalysis, allocations: list[AllocationSite], index: ModuleIndex
) -> set[int]:
    """The allocation sites whose tensor a store keeps."""
    assert store.value is not None
    # ``p = torch.arange(n); p = p.repeat_interleave(k); self._p = p``: the definitions
    # of ``p`` that reach the store, so the storage kept is the second call's.
    made = fa.flow(store.value, at=(store.order, store.frames))
    reaching = {sid for sid in made if not stored_before(store, allocations[sid])}
    # ``x = convert(x)``: a call handed the stored value replaces what is there
    # (a conversion, a copy to the host), it does not fill storage on first use; nor
    # does ``x = x[keep]`` (a batch filtered or reordered).
    return {sid for sid in reaching if not _converts_target(allocations[sid], store, fa)}


def _converts_target(site: AllocationSite, store: Store, fa: FunctionAnalysis) -> bool:
    """A call behind a chain (IM003) that is handed the stored value itself, or
    indexing of the stored value itself."""
    call = site.call
    if isinstance(call, cst.Subscript):
        return store.target in fa.mentions(call.value)
    return (
        site.chain is not None
        and isinstance(call, cst.Call)
        and reads_target(call, store.target, fa)
    )


def _module_index(collector: Collector, facts: FileFacts) -> ModuleIndex:
    """The module's lookups the value analysis reads: functions, methods, sites, and
    what the project index says of them (``facts``)."""
    allocations = collector.allocations
    return ModuleIndex(
        collector.imports,
        {id(site.call): i for i, site in enumerate(allocations)},
        {f.name: f for f in collector.functions if f.parent is None and f.cls is None},
        {
            (id(f.cls), f.name): f
            for f in collector.functions
            if f.cls is not None and f.self_name and f.parent is None
        },
        collector.container_texts,
        frozenset(q.rsplit(".", 1)[-1] for q in facts.per_call_classes),
        facts.construction,
        facts.returned_writes,
        members=_members(collector),
        per_call_params=facts.per_call_params,
        unheld_params=facts.unheld_params,
        replaced_attrs=facts.replaced_attrs,
        warmed=facts.warmed,
        fresh_results=facts.fresh_results,
        derived=frozenset(i for i, site in enumerate(allocations) if site.derived),
        nested={(id(f.parent), f.name): f for f in collector.functions if f.parent is not None},
        records=_record_classes(collector),
    )


def _record_classes(collector: Collector) -> frozenset[str]:
    """Module-level classes whose instances keep what they are made with, as the project
    summary reads constructors (``project._fields``, ``DefSummary.pattrs``): an ``__init__``
    that stores a parameter on ``self`` as it is, or no ``__init__`` and annotated fields
    (a generated constructor: a dataclass, a named tuple). ``Slot(tensor=t)`` kept in a
    list keeps ``t``."""
    out: set[str] = set()
    for c in collector.classes:
        init = next((f for f in c.functions if f.name == "__init__"), None)
        if init is None:
            keeps = any(
                isinstance(line, cst.SimpleStatementLine)
                and any(isinstance(small, cst.AnnAssign) for small in line.body)
                for line in c.node.body.body
            )
        else:
            keeps = any(
                s.kind == "attribute"
                and isinstance(s.value, cst.Name)
                and s.value.value in init.params
                and s.target.startswith("self.")
                for s in init.stores
            )
        if keeps:
            out.add(c.name)
    return frozenset(out)


def _outermost(f: FunctionModel) -> FunctionModel:
    while f.parent is not None:
        f = f.parent
    return f


def _torch_imported_at_top(module: cst.Module) -> bool:
    """Whether the module imports torch unconditionally, at its top level (``import
    torch``, ``import torch as th``, ``import torch.nn``, ``from torch import ...``):
    then the fix's guard can name it, or ``import torch`` next to it changes nothing."""
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if isinstance(small, cst.Import) and any(
                (dotted_name(a.name) or "").split(".")[0] == "torch" for a in small.names
            ):
                return True
            if (
                isinstance(small, cst.ImportFrom)
                and small.module is not None
                and not small.relative
            ):
                if (dotted_name(small.module) or "").split(".")[0] == "torch":
                    return True
    return False


def _torch_bound_conditionally(module: cst.Module) -> str | None:
    """The name a module-level ``import torch`` under ``if``/``try`` binds when the
    branch runs (an ``if TYPE_CHECKING:`` body never does at run time)."""
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in node.body:
                if isinstance(small, cst.Import) and (name := torch_alias(small)) is not None:
                    return name
        elif isinstance(node, cst.IndentedBlock):
            stack.extend(node.body)
        elif isinstance(node, cst.If):
            if dotted_name(node.test) not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                stack.append(node.body)
            if node.orelse is not None:
                stack.append(node.orelse)
        elif isinstance(node, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler)):
            stack.append(node.body)
        elif isinstance(node, (cst.Try, cst.TryStar)):
            stack.append(node.body)
            stack.extend(node.handlers)
            if node.orelse is not None:
                stack.append(node.orelse)
    return None


def parse_and_build(
    source: str, options: AnalysisOptions, facts: FileFacts = NO_FACTS
) -> tuple[cst.Module, ModuleModel]:
    """Parse a module and build its model (raises ``libcst.ParserSyntaxError``)."""
    module = parse_module(source)
    return module, build_model(module, options, facts, source)


def _unvalidated(self: cst.CSTNode) -> None:
    pass


def parse_module(source: str) -> cst.Module:
    """``libcst.parse_module`` without node validation. Every node LibCST builds runs
    ``_validate`` (``CSTNode.__post_init__``), a third of the parse; nodes that its own
    parser builds from source are valid by construction (LibCST's own note on
    ``__post_init__`` says as much). Nodes built later (the fixer's) are validated."""
    validate = cst.CSTNode.__post_init__
    cst.CSTNode.__post_init__ = _unvalidated  # type: ignore[method-assign]
    try:
        return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = validate  # type: ignore[method-assign]
