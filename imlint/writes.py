"""Writes: which in-place writes reach a site's storage after its allocation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.semantic import KERNEL_WRITE, TORCH_WRITE, AllocationSite, FunctionModel, InplaceWrite
from imlint.sites import is_prefix
from imlint.values import FunctionAnalysis, ModuleIndex

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, ProjectIndex, Target


def _allocation_time(site: AllocationSite, write: InplaceWrite) -> bool:
    """Whether a write only runs right after the allocation, under the same mode."""
    if write.function is not site.function:
        return False
    if site.lazy == "cached function":
        return True
    if site.lazy_frame is not None:
        return any(fr is site.lazy_frame for fr in write.frames)
    if site.lazy_exit is not None:
        return write.order > site.lazy_exit.order and is_prefix(site.lazy_exit.frames, write.frames)
    return False


def find_writes(
    site: AllocationSite,
    analyses: dict[int, FunctionAnalysis],
    functions: list[FunctionModel],
    index: ModuleIndex,
    callbacks: dict[str, InplaceWrite],
) -> None:
    store = site.store
    assert store is not None
    f = site.function
    own = analyses[id(f)]
    sid = index.site_ids[id(site.call)]
    wanted = {store.token, f"alloc:{sid}"}
    # An object that holds tensors (IM003): writes reach them through its attributes.
    inside = store.token + "." if site.object_result else None

    def hits(tokens: set[str]) -> bool:
        return bool(tokens & wanted) or (
            inside is not None and any(t.startswith(inside) for t in tokens)
        )

    for w in f.writes:
        if hits(own.tokens(w.handle)) and not _allocation_time(site, w):
            site.writes.append(w)
    # Other functions that can see the same storage.
    kind = own.root_kind(store.root) if store.root is not None else "global"
    others: list[FunctionModel]
    if kind == "self" and f.cls is not None:
        others = [g for g in functions if g.cls is f.cls]
    elif kind == "global" or store.kind == "return":
        others = functions  # module storage: any function of the module may write it
    else:
        # Storage handed in (a parameter, a registry): other functions reach it only
        # through this function's return value (``st = get_ws(reg); st.zero_()``).
        others = [g for g in functions if f.name in g.calls]
    for g in others:
        if g is f:
            continue
        ga = analyses[id(g)]
        for w in g.writes:
            tokens = ga.tokens(w.handle)
            if store.token in tokens or (inside is not None and hits(tokens)):
                site.writes.append(w)
    if site.object_writes is not None:
        kind, how = site.object_writes
        site.writes.append(
            InplaceWrite(
                site.call, how, site.frames, site.order, site.call, f, site.positions, kind
            )
        )
    by_callers = index.returned_writes.get(f.qualname)
    if by_callers is not None and wanted & index.returned(f):
        kind, who = by_callers
        text = f"{who} writes what {f.qualname}() returns"
        site.writes.append(
            InplaceWrite(
                site.call, text, site.frames, site.order, site.call, f, site.positions, kind
            )
        )
    handed = callbacks.get(f.name) if f.parent is None and f.cls is None else None
    if handed is not None and wanted & index.returned(f):
        site.writes.append(handed)  # the function is handed to outside code, with its result
    # Visiting order is source order: the first write is the one a message cites.
    site.writes.sort(key=lambda w: w.order)


# ------------------------------------------------------------------ across the project

#: Write kinds, weakest first: a torch write is the crash path and wins.
_STRENGTH = {KERNEL_WRITE: 1, TORCH_WRITE: 2}


def param_writes(index: ProjectIndex) -> dict[Target, dict[str, str]]:
    """Per project callable: parameter name -> how the callable writes the tensor handed
    there, to a fixed point through the calls that hand parameters on. A parameter handed
    to a Triton launch or to a callable from outside the project may be written by a
    kernel; handed to the project's own code, it is written as that code writes it."""
    out: dict[Target, dict[str, str]] = {}
    passes: list[tuple[Target, str, Target | None, str | None]] = []
    for s in index.summaries:
        for d in s.defs.values():
            me = (s.module, d.qual)
            for param, kind in d.pwrites:
                _join(out.setdefault(me, {}), param, kind)
            for text, key, param in d.passes:
                launch = text.startswith("[]")
                text = text.removeprefix("[]")
                target = index.resolve(s, d, text)
                if target is None and not (launch or index.external_writes(s, text)):
                    continue  # project code the index cannot see into: taken to read
                name = index.param_name(target, key) if target is not None else None
                passes.append((me, param, target, name))
    changed = True
    while changed:
        changed = False
        for me, param, target, name in passes:
            written: str | None = KERNEL_WRITE
            if target is not None:
                written = out.get(target, {}).get(name) if name is not None else None
            if written is not None and _join(out.setdefault(me, {}), param, written):
                changed = True
    return {k: v for k, v in out.items() if v}


def _join(writes: dict[str, str], param: str, kind: str) -> bool:
    """Record the stronger of two write kinds; whether anything changed."""
    if _STRENGTH[kind] > _STRENGTH.get(writes.get(param, ""), 0):
        writes[param] = kind
        return True
    return False


def result_writes(index: ProjectIndex) -> dict[Target, tuple[str, str]]:
    """Per project callable: how its callers write what it returns (``buf = get(n);
    buf.zero_()``, or hand it to code that writes it), strongest first, with where."""
    out: dict[Target, tuple[str, str]] = {}
    for s in index.summaries:
        for d in s.defs.values():
            for text, how in d.rwrites:
                target = index.resolve(s, d, text)
                if target is None:
                    continue
                kind: str | None = how
                if how.startswith("handed:"):
                    _, callee, key = how.split(":", 2)
                    kind = _handed_kind(index, s, d, callee, key)
                if kind is None:
                    continue
                known = out.get(target)
                if known is None or _STRENGTH[kind] > _STRENGTH[known[0]]:
                    out[target] = (kind, f"{d.qual} ({s.path})")
    return out


def _handed_kind(
    index: ProjectIndex, s: FileSummary, d: DefSummary, callee: str, key: str
) -> str | None:
    """How a callee writes an argument handed to it (see :func:`param_writes`)."""
    launch = callee.startswith("[]")
    callee = callee.removeprefix("[]")
    target = index.resolve(s, d, callee)
    if target is None:
        return KERNEL_WRITE if launch or index.external_writes(s, callee) else None
    name = index.param_name(target, key)
    return index.param_writes.get(target, {}).get(name) if name is not None else None
