"""Calls that leave the project: imported callables from outside it that may write the
tensors handed to them, and callables made at run time (a parameter, what a loader of
compiled code returned), whose code the index cannot read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imlint.kinds import READER_MODULES, external_writer
from imlint.known_methods import BUILTIN_METHODS, TENSOR_METHODS

if TYPE_CHECKING:
    from imlint.project import DefSummary, FileSummary, Target


class OutsideFinder:
    """The part of :class:`imlint.project.ProjectIndex` that tells project code from
    code outside it (a mixin: the index owns the state and the resolution methods)."""

    modules: dict[str, FileSummary]
    roots: set[str]
    summaries: list[FileSummary]
    _alloc: dict[Target, tuple[str, bool, str]]
    _def_names: frozenset[str] | None = None

    if TYPE_CHECKING:

        def _dotted(self, full: str, depth: int = 0) -> Target | None: ...

        def _kind(self, target: Target) -> str: ...

        def _resolve_in(
            self, s: FileSummary, d: DefSummary | None, text: str, depth: int = 0
        ) -> Target | None: ...

        def _is_external(self, s: FileSummary, text: str) -> bool: ...

        def qualify_in(self, s: FileSummary, text: str) -> str: ...

    def external_writes(self, s: FileSummary, text: str) -> bool:
        """Whether a call goes to an imported callable from outside the project that
        may write the tensors handed to it (see ``kinds.external_writer``)."""
        head = text.split(".", 1)[0]
        if head not in s.imports:
            return False
        return self._outside(self.qualify_in(s, text))

    def foreign(self, s: FileSummary, text: str) -> bool:
        """Whether ``text`` calls a method by a name that no function of the project
        defines and no well-known API has (``known_methods``: torch's tensors and
        modules, Python's containers, strings, queues and loggers), on an object that
        is not this one and not an imported module: a method of an object from a
        library outside (``buf.low_latency_query_mask_buffer(mask)``, a communication
        library's buffer), which may write what it is handed from a kernel."""
        head, dot, rest = text.partition(".")
        if not dot or head in ("self", "cls", "super()") or head in s.imports or "?" in text:
            return False
        name = rest.rsplit(".", 1)[-1]
        if name in TENSOR_METHODS or name in BUILTIN_METHODS or name.startswith("__"):
            return False
        if self._def_names is None:
            self._def_names = frozenset(
                d.qual.rsplit(".", 1)[-1] for m in self.summaries for d in m.defs.values()
            )
        return name not in self._def_names

    def _outside(self, qualified: str) -> bool:
        """An imported name from outside the project: not under one of its packages,
        and not found in it through a shorter module name (``pkg.ops.f`` when the
        files are ``src.pkg.ops``); a library that shares a module's last name
        (``flashinfer`` next to ``pkg.backends.flashinfer``) stays outside."""
        return external_writer(qualified, self.roots) and self._dotted(qualified) is None

    def opaque(self, s: FileSummary, d: DefSummary | None, text: str) -> bool:
        """Whether ``text`` calls a callable made at run time: a parameter (whatever the
        caller hands in), a name bound to what a call
        returned (``launch = get_kernel(cfg)``, ``op = lazy_import("lib", "op")``), in the
        function, the module, or the module it is imported from, unless that call builds
        an instance of a project class; or a method of such an object that no torch or
        project allocator made (``mod = load_jit(cfg); mod.run(x, out)``). Such code (a
        compiled kernel, an op looked up in another library) may write the tensors handed
        to it, from a kernel."""
        if "()." in text:
            return self._made_opaque(s, d, text)
        head, dot, rest = text.partition(".")
        if "." in rest:
            return False
        if dot:
            if d is None or head not in d.types:
                return False
            maker = d.types[head]
            if self.qualify_in(s, maker).split(".", 1)[0] in READER_MODULES:
                return False  # a tensor (or a value) from torch or the standard library
            made = self._resolve_in(s, d, maker)
            return made is None or (self._kind(made) != "class" and made not in self._alloc)
        if d is not None and (text in d.params or text in d.keywords):
            return True  # a callable the caller hands in (``def run(x, op): op(x, out)``)
        ctor: str | None = None
        home: FileSummary | None = s
        if d is not None and text in d.types:
            ctor = d.types[text]
        elif text in s.instances:
            ctor = s.instances[text]
        elif text in s.imports:
            module, _, name = s.imports[text].rpartition(".")
            home = self.modules.get(module)
            ctor = home.instances.get(name) if home is not None else None
            d = None
        if ctor is None or home is None:
            return False
        made = self._resolve_in(home, d, ctor)
        return made is None or self._kind(made) != "class"

    def _made_opaque(self, s: FileSummary, d: DefSummary | None, text: str) -> bool:
        """``load_module(cfg).run``: a method of what a module-level callable returns,
        when that callable is imported from outside the project (not torch or the
        standard library), or is a project function that returns what such a callable
        returned (a loader of compiled code: ``return load_module(path)``, ``_loader``)."""
        maker, _, method = text.rpartition("().")
        head = maker.split(".", 1)[0]
        if "." in method or "()" in maker or (head not in s.imports and head not in s.defs):
            return False
        if self.qualify_in(s, maker).split(".", 1)[0] in READER_MODULES:
            return False
        made = self._resolve_in(s, d, maker)
        if made is None:
            return head in s.imports and self._is_external(s, maker)
        return self._loader(made)

    def _loader(self, target: Target, depth: int = 0) -> bool:
        """A project function that returns what code from outside the project returned
        (``return load_module(path)``), or what another such function returned."""
        ms = self.modules.get(target[0])
        md = ms.defs.get(target[1]) if ms is not None else None
        if ms is None or md is None or md.kind != "function" or target in self._alloc:
            return False
        for text, how in md.results:
            if how != "returned":
                continue
            if text.split(".", 1)[0] in ms.imports and self._is_external(ms, text):
                return True
            inner = self._resolve_in(ms, md, text) if depth < 3 else None
            if inner is not None and self._loader(inner, depth + 1):
                return True
        return False
