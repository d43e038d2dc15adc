"""The collecting walk: one pass over a module's LibCST tree records, per function,
bindings, local containers, guards and conditions (frames), stores into storage that
may outlive the call, in-place writes and allocation sites."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst

from imlint.allocations import SiteFinder
from imlint.bindings import Bindings
from imlint.handoffs import CallWrites
from imlint.index_facts import NO_FACTS, FileFacts
from imlint.names import (
    INFERENCE_MODE_NAMES,
    ImportMap,
    dotted_name,
    expr_text,
    literal_bool,
    name_matches,
)
from imlint.options import AnalysisOptions
from imlint.positions import Positions
from imlint.semantic import (
    TORCH_WRITE,
    AllocationSite,
    ClassModel,
    EarlyExit,
    Frame,
    Frames,
    FunctionModel,
    InplaceWrite,
    Mode,
    frames_mode,
    write_kind,
)
from imlint.vocabulary import CACHE_DECORATORS
from imlint.walk import walk


class Collector(SiteFinder, CallWrites, Bindings, cst.CSTVisitor):
    local_guards: frozenset[str] = frozenset()  # the module's own (``imlint/guards.py``)

    def __init__(
        self, options: AnalysisOptions, positions: Positions, facts: FileFacts = NO_FACTS
    ) -> None:
        super().__init__()
        self.facts = facts
        self.positions = positions
        self._top = -1  # index of the module-level statement being visited
        self.options = options
        self.imports = ImportMap()
        self.functions: list[FunctionModel] = []
        self.classes: list[ClassModel] = []
        self.allocations: list[AllocationSite] = []
        self._func: list[FunctionModel] = []
        self._class: list[ClassModel | None] = [None]
        self._frames: list[Frame] = []
        self._subjects: list[cst.BaseExpression] = []  # of the ``match`` statements entered
        self._saved_frames: list[list[Frame]] = []
        self._stmt: list[cst.SimpleStatementLine | cst.SimpleStatementSuite] = []
        self._order = 0
        self.container_texts: set[str] = set()  # names/attributes assigned a dict or list
        #: module-level names bound to a call of a bare name (``_POOL = _Pool()``)
        self.instances: dict[str, str] = {}
        #: module functions handed by name to outside code, with the handing call
        self.callbacks: dict[str, InplaceWrite] = {}
        #: ids of the blocks that run under a mode of their own (``with`` items that set
        #: one, ``is_inference()`` branches): see ``imlint/rebinding.py``
        self.mode_blocks: set[int] = set()
        self.blocks: dict[int, tuple[int, int]] = {}
        self.bodies: dict[int, Sequence[cst.CSTNode]] = {}  # id(block) -> its statements

    # ---- helpers

    def _next(self) -> int:
        self._order += 1
        return self._order

    def _snapshot(self) -> Frames:
        return tuple(self._frames)

    @property
    def func(self) -> FunctionModel | None:
        return self._func[-1] if self._func else None

    def on_visit(self, node: cst.CSTNode) -> bool:
        top = self.positions.top_ids.get(id(node))
        if top is not None:
            self._top = top
        return super().on_visit(node)

    def _locate(self, node: cst.CSTNode) -> None:
        """Remember which module-level statement holds ``node``, to find it later."""
        self.positions.tops[id(node)] = self._top

    def call_mode(self, node: cst.BaseExpression) -> Mode | None:
        """The grad mode a ``with`` item or decorator sets, if it sets one."""
        func = node.func if isinstance(node, cst.Call) else node
        q = self.imports.qualify(func)
        if q is None:
            return None
        if q in self.local_guards or name_matches(q, self.options.extra_guards):
            return Mode.GUARDED
        if q not in INFERENCE_MODE_NAMES:
            return None
        if not isinstance(node, cst.Call):
            return None  # ``@torch.inference_mode`` without a call: enabled by default
        arg: cst.BaseExpression | None = None
        for a in node.args:
            if a.keyword is None and a.star == "":
                arg = a.value
                break
            if a.keyword is not None and a.keyword.value == "mode":
                arg = a.value
                break
        if arg is None:
            return Mode.INFERENCE
        value = literal_bool(arg)
        if value is None:
            return None
        return Mode.INFERENCE if value else Mode.GUARDED

    def _decorator_info(self, node: cst.FunctionDef) -> tuple[Mode | None, bool, bool]:
        mode: Mode | None = None
        cached = False
        static = False
        for dec in node.decorators:
            expr = dec.decorator
            m = self.call_mode(expr)
            if m is None and not isinstance(expr, cst.Call):
                q = self.imports.qualify(expr)
                if q is not None and q in INFERENCE_MODE_NAMES:
                    m = Mode.INFERENCE  # bare @torch.inference_mode
            if m is not None and mode is None:
                mode = m  # the outermost decorator applies last; any explicit mode counts
            target = expr.func if isinstance(expr, cst.Call) else expr
            q = self.imports.qualify(target) or ""
            last = q.rsplit(".", 1)[-1]
            if (
                q in CACHE_DECORATORS
                or "cache" in last.lower()
                or (
                    self.options.extra_cache_decorators
                    and name_matches(q, self.options.extra_cache_decorators)
                )
            ):
                cached = True
            if last == "staticmethod":
                static = True
        return mode, cached, static

    # ---- imports, classes, functions

    def visit_Import(self, node: cst.Import) -> None:
        self.imports.add(node)
        self._bind_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.imports.add(node)
        self._bind_import(node)

    def _bind_import(self, node: cst.Import | cst.ImportFrom) -> None:
        f = self.func
        if f is None or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                f.other_bound.add(alias.asname.name.value)
            else:
                d = dotted_name(alias.name)
                if d:
                    f.other_bound.add(d.split(".", 1)[0])

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        cls = ClassModel(node.name.value, node)
        self.classes.append(cls)
        self._class.append(cls)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._class.pop()

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        parent = self.func
        cls = self._class[-1]
        # A method is a function defined directly in a class body.
        direct_method = cls is not None
        mode, cached, static = self._decorator_info(node)
        params = [p.name.value for p in (*node.params.posonly_params, *node.params.params)]
        all_params = params + [p.name.value for p in node.params.kwonly_params]
        star_params: list[str] = []
        for star in (node.params.star_arg, node.params.star_kwarg):
            if isinstance(star, cst.Param):
                all_params.append(star.name.value)
                star_params.append(star.name.value)
        self_name = params[0] if direct_method and params and not static else None
        qual_parts = [parent.qualname] if parent is not None else []
        if direct_method and cls is not None:
            qual_parts.append(cls.name)
        qualname = ".".join([*qual_parts, node.name.value])
        fm = FunctionModel(
            name=node.name.value,
            qualname=qualname,
            node=node,
            parent=parent,
            cls=cls if direct_method else (parent.cls if parent else None),
            self_name=self_name if direct_method else (parent.self_name if parent else None),
            params=frozenset(all_params),
            star_params=frozenset(star_params),
            decorator_mode=mode,
            cached=cached,
        )
        if direct_method and cls is not None:
            cls.functions.append(fm)
        self.functions.append(fm)
        if parent is not None:
            parent.other_bound.add(node.name.value)
        self._func.append(fm)
        self._saved_frames.append(self._frames)
        self._frames = []
        self._class.append(None)  # a nested def is not a method of the enclosing class

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._func.pop()
        self._frames = self._saved_frames.pop()
        self._class.pop()

    def visit_Global(self, node: cst.Global) -> None:
        if self.func is not None:
            self.func.globals.update(n.name.value for n in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        if self.func is not None:
            self.func.globals.update(n.name.value for n in node.names)
            self.func.nonlocals.update(n.name.value for n in node.names)

    # ---- frames

    def _push(
        self,
        kind: str,
        node: cst.CSTNode,
        test: cst.CSTNode | None = None,
        mode: Mode | None = None,
        attribute: str | None = "body",
    ) -> None:
        """Open a frame; it closes when the visitor leaves ``node`` (or its ``attribute``)."""
        if mode is not None:
            self.mode_blocks.add(id(node))
        self._frames.append(Frame(kind, node, test, mode, (id(node), attribute)))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if self._frames and self._frames[-1].owner == (id(original_node), attribute):
            self._frames.pop()
        super().on_leave_attribute(original_node, attribute)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self._frames and self._frames[-1].owner == (id(original_node), None):
            self._frames.pop()
        super().on_leave(original_node)

    def visit_If(self, node: cst.If) -> None:
        f = self.func
        if f is None:
            return
        body = node.body
        small: Sequence[cst.BaseSmallStatement] = ()
        if isinstance(body, cst.SimpleStatementSuite):
            small = body.body
        elif body.body and isinstance(body.body[-1], cst.SimpleStatementLine):
            small = body.body[-1].body
        returns = any(isinstance(s, cst.Return) for s in small)
        if returns:
            f.early_exits.append(EarlyExit(node.test, self._snapshot(), self._next()))

    def visit_If_body(self, node: cst.If) -> None:
        mode = Mode.GUARDED if _calls_is_inference(node.test) else None
        self._push("if_body", node, node.test, mode)

    def visit_If_orelse(self, node: cst.If) -> None:
        self._push("if_else", node, node.test, attribute="orelse")

    def visit_Match(self, node: cst.Match) -> None:
        self._subjects.append(node.subject)

    def leave_Match(self, original_node: cst.Match) -> None:
        self._subjects.pop()

    def visit_MatchCase_body(self, node: cst.MatchCase) -> None:
        # ``match cache.get(k): case None: ...``: the arm runs on what the subject holds
        self._push("case", node, self._subjects[-1] if self._subjects else None)

    def visit_While_body(self, node: cst.While) -> None:
        self._push("while", node, node.test)

    def visit_For_body(self, node: cst.For) -> None:
        self._push("for", node)
        self._bind_items(node.target, node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_items(node.target, node.iter, other=False)

    def visit_With_body(self, node: cst.With) -> None:
        mode: Mode | None = None
        for item in node.items:
            m = self.call_mode(item.item)
            if m is not None:
                mode = m  # later items are entered inside earlier ones
            if item.asname is not None:
                self._bind_target(item.asname.name)
        self._push("with", node, None, mode)

    def visit_Try_body(self, node: cst.Try) -> None:
        self._push("try", node)

    def visit_ExceptHandler_body(self, node: cst.ExceptHandler) -> None:
        self._push("handler", node)
        if node.name is not None:
            self._bind_target(node.name.name)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._push("lambda", node, attribute=None)

    def _comp(self, node: cst.CSTNode) -> None:
        self._push("comp", node, attribute=None)

    visit_ListComp = _comp
    visit_SetComp = _comp
    visit_DictComp = _comp
    visit_GeneratorExp = _comp

    def visit_IfExp_body(self, node: cst.IfExp) -> None:
        self._push("ifexp_body", node, node.test, attribute="body")

    def visit_IfExp_orelse(self, node: cst.IfExp) -> None:
        self._push("ifexp_else", node, node.test, attribute="orelse")

    def visit_BooleanOperation_right(self, node: cst.BooleanOperation) -> None:
        self._push("boolop", node, node.left, attribute="right")

    def visit_Module(self, node: cst.Module) -> None:
        self._index_block(node, node.body)
        self.positions.tops.update(self.positions.top_ids)
        # Functions run after the whole module has executed: module-level imports are
        # visible in them wherever they stand, even below the function.
        for imp in _module_level_imports(node.body):
            self.imports.add(imp)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._index_block(node, node.body)

    def _index_block(self, block: cst.CSTNode, body: Sequence[cst.CSTNode]) -> None:
        self.bodies[id(block)] = body
        for i, stmt in enumerate(body):
            self.blocks[id(stmt)] = (id(block), i)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._stmt.append(node)

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine) -> None:
        self._stmt.pop()

    def visit_SimpleStatementSuite(self, node: cst.SimpleStatementSuite) -> None:
        self._stmt.append(node)

    def leave_SimpleStatementSuite(self, original_node: cst.SimpleStatementSuite) -> None:
        self._stmt.pop()

    # ---- statements

    def _write(
        self,
        handle: cst.BaseExpression,
        text: str,
        at: cst.CSTNode | None = None,
        kind: str = TORCH_WRITE,
    ) -> None:
        f = self.func
        if f is None:
            return
        node = at if at is not None else handle
        self._locate(node)
        frames = self._snapshot()
        mode = frames_mode(frames, f)
        if (
            mode is Mode.UNKNOWN
            and f.qualname in self.facts.confined
            and not any(fr.kind == "lambda" for fr in frames)
        ):
            mode = Mode.INFERENCE  # every call path to the function runs in inference mode
        kind = write_kind(kind, mode)
        f.writes.append(
            InplaceWrite(handle, text, frames, self._next(), node, f, self.positions, kind)
        )

    def visit_Return(self, node: cst.Return) -> None:
        f = self.func
        if f is None or node.value is None:
            return
        if any(fr.kind == "lambda" for fr in self._frames):
            return
        f.returns.append(node.value)
        if f.cached:
            self._store("return", f"{f.qualname}()", None, None, node.value)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        f = self.func
        if f is None:
            return
        left = node.left
        for target in node.comparisons:
            op = target.operator
            if isinstance(op, (cst.In, cst.NotIn)):
                f.container_uses.add(expr_text(target.comparator, f.self_name))
            elif isinstance(op, (cst.Is, cst.IsNot)) and isinstance(left, cst.Subscript):
                f.container_uses.add(expr_text(left.value, f.self_name))
            left = target.comparator

    def visit_Call(self, node: cst.Call) -> None:
        index = self.positions.call_index
        index[id(node)] = len(index)
        f = self.func
        if f is None:
            return
        found = self._allocator(node)
        if found is not None:
            allocator, chain, object_result, made_content = found
            site = self._add_site(node, allocator, chain, object_result, made_content=made_content)
            if object_result and self.facts.object_writes:
                key = self.call_key(node.func)
                site.object_writes = self.facts.object_writes.get(key) if key else None
        elif self.facts.helpers:
            self._helper_site(node, f)
        func = node.func
        if isinstance(func, cst.Name):
            f.calls.add(func.value)
        elif isinstance(func, cst.Attribute):
            f.calls.add(func.attr.value)
        self._call_writes(node, f)
        self._method_store(node, f)


def _module_level_imports(body: Sequence[cst.CSTNode]) -> Iterator[cst.Import | cst.ImportFrom]:
    """Imports executed at module level, also inside module-level ``if``/``try`` blocks."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    yield small
        elif isinstance(stmt, (cst.If, cst.Try, cst.With)):
            for child in stmt.children:
                if isinstance(child, cst.IndentedBlock):
                    yield from _module_level_imports(child.body)
                elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.Finally, cst.If)):
                    for grandchild in child.children:
                        if isinstance(grandchild, cst.IndentedBlock):
                            yield from _module_level_imports(grandchild.body)


def _calls_is_inference(test: cst.BaseExpression) -> bool:
    for node in walk(test):
        if isinstance(node, cst.Call) and isinstance(node.func, (cst.Attribute, cst.Name)):
            name = node.func.attr.value if isinstance(node.func, cst.Attribute) else node.func.value
            if name == "is_inference":
                return True
    return False
