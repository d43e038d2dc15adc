"""The collecting walk: one pass over a module's LibCST tree records, per function,
bindings, local containers, guards and conditions (frames), stores into storage that
may outlive the call, in-place writes and allocation sites."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import libcst as cst

from imlint.kinds import CONTAINER_METHODS, DERIVED_METHODS
from imlint.names import (
    INFERENCE_MODE_NAMES,
    TENSOR_NEW_METHODS,
    TORCH_ALLOCATORS,
    ImportMap,
    dotted_name,
    expr_text,
    literal_bool,
    name_matches,
    string_value,
)
from imlint.options import AnalysisOptions
from imlint.positions import EMPTY_MODULE, Positions
from imlint.project import NO_FACTS, FileFacts
from imlint.semantic import (
    KERNEL_WRITE,
    TORCH_WRITE,
    AllocationSite,
    ClassModel,
    EarlyExit,
    Frame,
    Frames,
    FunctionModel,
    InplaceWrite,
    Mode,
    Store,
)
from imlint.values import is_container, is_fresh, is_none
from imlint.vocabulary import CACHE_DECORATORS, SIZED_FACTORIES
from imlint.walk import walk


class Collector(cst.CSTVisitor):
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
        self._saved_frames: list[list[Frame]] = []
        self._stmt: list[cst.SimpleStatementLine | cst.SimpleStatementSuite] = []
        self._order = 0
        self.container_texts: set[str] = set()  # names/attributes assigned a dict or list
        #: module functions handed by name to outside code, with the handing call
        self.callbacks: dict[str, InplaceWrite] = {}
        self.blocks: dict[int, tuple[int, int]] = {}

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
        if self.options.extra_guards and name_matches(q, self.options.extra_guards):
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

    def visit_While_body(self, node: cst.While) -> None:
        self._push("while", node, node.test)

    def visit_For_body(self, node: cst.For) -> None:
        self._push("for", node)
        self._bind_target(node.target)

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

    def _bind_target(self, target: cst.BaseExpression) -> None:
        f = self.func
        if f is None:
            return
        if isinstance(target, cst.Name):
            f.other_bound.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._bind_target(el.value)
        elif isinstance(target, cst.StarredElement):
            self._bind_target(target.value)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        f = self.func
        if f is None:
            # Module and class level: remember which names hold dicts and lists.
            if (
                isinstance(target, cst.Name)
                and value is not None
                and is_container(value, self.imports)
            ):
                self.container_texts.add(target.value)
                if self._class[-1] is not None:
                    self.container_texts.add("self." + target.value)
            return
        if isinstance(target, cst.Name):
            name = target.value
            if value is not None:
                f.defs.setdefault(name, []).append(value)
            else:
                f.other_bound.add(name)
            if name in f.globals:
                self._store("global", name, None, target, value)
                if value is not None and is_none(value):
                    f.drops.append((name, self._next()))
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: Iterable[cst.BaseElement | None]
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(
                target.elements
            ):
                values = value.elements
            else:
                values = [None] * len(target.elements)
            for el, v in zip(target.elements, values, strict=False):
                self._assign(el.value, v.value if v is not None else None)
        elif isinstance(target, cst.StarredElement):
            self._assign(target.value, None)
        elif isinstance(target, cst.Attribute):
            text = expr_text(target, f.self_name)
            self._store("attribute", text, None, target.value, value)
            if value is not None and is_none(value):
                f.drops.append((text, self._next()))
            elif value is not None and is_fresh(value, self.imports):
                f.fresh_texts.setdefault(text, self._order)
            if value is not None and is_container(value, self.imports):
                self.container_texts.add(text)
        elif isinstance(target, cst.Subscript):
            text = expr_text(target, f.self_name)
            container = expr_text(target.value, f.self_name)
            self._store("subscript", text, container, target.value, value)
            if not _string_keyed(target):  # ``ws["ci"] = ...`` fills a dict, not a tensor
                self._write(target.value, f"{container}[...] = ...")
            if value is not None and is_none(value):
                f.drops.append((text, self._next()))

    def _store(
        self,
        kind: str,
        target: str,
        container: str | None,
        root: cst.BaseExpression | None,
        value: cst.BaseExpression | None,
    ) -> None:
        f = self.func
        assert f is not None
        stmt = self._stmt[-1] if self._stmt else None
        f.stores.append(
            Store(kind, target, container, root, value, self._snapshot(), self._next(), stmt)
        )

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
        f.writes.append(
            InplaceWrite(
                handle, text, self._snapshot(), self._next(), node, f, self.positions, kind
            )
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._assign(t.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._assign(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        f = self.func
        if f is None:
            return
        target = node.target
        handle = target.value if isinstance(target, cst.Subscript) else target
        op = EMPTY_MODULE.code_for_node(node.operator).strip()
        self._write(handle, f"{expr_text(target, f.self_name)} {op} ...")
        if isinstance(target, cst.Name):
            f.other_bound.add(target.value)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._assign(node.target, node.value)

    def visit_Del(self, node: cst.Del) -> None:
        f = self.func
        if f is None:
            return
        targets = (
            node.target.elements
            if isinstance(node.target, (cst.Tuple, cst.List))
            else [node.target]
        )
        for t in targets:
            expr = t.value if isinstance(t, cst.BaseElement) else t
            f.drops.append((expr_text(expr, f.self_name), self._next()))

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
            allocator, chain, object_result = found
            site = self._add_site(node, allocator, chain, object_result)
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
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method in CONTAINER_METHODS:
                f.container_uses.add(expr_text(receiver, f.self_name))
            args = [a for a in node.args if a.star == ""]
            rtext = expr_text(receiver, f.self_name)
            if method == "append" and len(args) == 1 and not isinstance(receiver, cst.Call):
                # A list kept beyond the call holds what is appended (``self._pool``).
                self._store("append", f"{rtext}[]", rtext, receiver, args[0].value)
            elif method == "setdefault" and len(args) >= 2:
                key = expr_text(args[0].value, f.self_name)
                self._store("setdefault", f"{rtext}[{key}]", rtext, receiver, args[1].value)
            elif method == "__setitem__" and len(args) >= 2:
                key = expr_text(args[0].value, f.self_name)
                self._store("subscript", f"{rtext}[{key}]", rtext, receiver, args[1].value)
            elif method == "update":
                for a in args:
                    if a.keyword is not None:
                        self._store(
                            "update", f"{rtext}['{a.keyword.value}']", rtext, receiver, a.value
                        )
                    elif isinstance(a.value, cst.Dict):
                        for el in a.value.elements:
                            if isinstance(el, cst.DictElement):
                                key = expr_text(el.key, f.self_name)
                                self._store("update", f"{rtext}[{key}]", rtext, receiver, el.value)
            elif method == "register_buffer" and len(args) >= 2:
                name = string_value(args[0].value)
                target = f"{rtext}.{name}" if name else f"{rtext}.<buffer>"
                self._store("register_buffer", target, None, receiver, args[1].value)
            elif method == "pop" and args:
                f.drops.append((f"{rtext}[{expr_text(args[0].value, f.self_name)}]", self._next()))
            elif method == "clear" and not args:
                f.drops.append((f"{rtext}[]", self._next()))
        elif isinstance(func, cst.Name) and func.value == "setattr" and len(node.args) >= 3:
            obj = node.args[0].value
            name = string_value(node.args[1].value)
            otext = expr_text(obj, f.self_name)
            target = f"{otext}.{name}" if name else f"{otext}.<{expr_text(node.args[1].value)}>"
            self._store("setattr", target, None, obj, node.args[2].value)

    def _call_writes(self, node: cst.Call, f: FunctionModel) -> None:
        """The writes a call makes into tensors it is handed (see :class:`InplaceWrite`)."""
        func = node.func
        launch = isinstance(func, cst.Subscript)  # ``kernel[grid](...)``: a Triton launch
        callee = func.value if isinstance(func, cst.Subscript) else func
        q = self.imports.qualify(callee) or ""
        torch_op = q.startswith("torch.") and not q.startswith("torch.ops.")
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out":
                kind = TORCH_WRITE if torch_op or _tensor_method(func) else KERNEL_WRITE
                outs = (
                    arg.value.elements
                    if isinstance(arg.value, (cst.Tuple, cst.List))
                    else [arg.value]
                )
                for o in outs:
                    v = o.value if isinstance(o, cst.BaseElement) else o
                    self._write(v, f"out={expr_text(v, f.self_name)}", at=node, kind=kind)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if is_inplace_method(method):
                receiver = func.value
                text = f"{expr_text(receiver, f.self_name)}.{method}()"
                self._write(receiver, text, at=node)
            if torch_op:
                if is_inplace_method(method) and node.args and node.args[0].keyword is None:
                    first = node.args[0].value  # ``torch.index_put_(x, ...)``
                    self._write(first, f"{q}({expr_text(first, f.self_name)}, ...)", at=node)
                return
        if not torch_op:
            self._raw_pointers(node, f)
        written = self._handed_writes(callee, launch, q)
        if not written:
            return
        if written.get("*") == KERNEL_WRITE:
            self._callbacks(node, f)
        for i, arg in enumerate(a for a in node.args if a.keyword is None and a.star == ""):
            how = written.get(str(i), written.get("*"))
            if how is not None and _is_handle(arg.value):
                text = f"{expr_text(func, f.self_name)}(..., {expr_text(arg.value, f.self_name)})"
                self._write(arg.value, text, at=node, kind=how)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value != "out" and _is_handle(arg.value):
                how = written.get(arg.keyword.value, written.get("*"))
                if how is not None:
                    text = f"{expr_text(func, f.self_name)}({arg.keyword.value}=...)"
                    self._write(arg.value, text, at=node, kind=how)

    def _raw_pointers(self, node: cst.Call, f: FunctionModel) -> None:
        """``op(buf.data_ptr(), n)``: code handed a raw pointer may write through it,
        from a kernel, out of the dispatcher's sight."""
        for arg in node.args:
            v = arg.value
            if (
                isinstance(v, cst.Call)
                and isinstance(v.func, cst.Attribute)
                and v.func.attr.value == "data_ptr"
                and _is_handle(v.func.value)
            ):
                text = f"{expr_text(node.func, f.self_name)}(..., {expr_text(v, f.self_name)})"
                self._write(v.func.value, text, at=node, kind=KERNEL_WRITE)

    def _callbacks(self, node: cst.Call, f: FunctionModel) -> None:
        """Functions handed by name to code outside the project: what they return reaches
        that code, which may write it (``split(kv, get_dst=get_dst_buffer)``)."""
        for arg in node.args:
            value = arg.value
            if isinstance(value, cst.Name) and not f.is_local(value.value):
                text = f"{expr_text(node.func, f.self_name)}(..., {value.value})"
                self._locate(node)
                self.callbacks.setdefault(
                    value.value,
                    InplaceWrite(
                        value, text, self._snapshot(), self._next(), node, f, self.positions,
                        KERNEL_WRITE,
                    ),
                )  # fmt: skip

    def _handed_writes(self, callee: cst.BaseExpression, launch: bool, q: str) -> dict[str, str]:
        """What a call writes of the tensors handed to it: parameter position or name ->
        write kind (``*``: any). Project code says so in the facts; a Triton launch or a
        callable imported from outside the project (``torch.ops`` included) may write any
        of them, from a kernel; anything else is taken to read them."""
        key = self.call_key(callee)
        if key is not None:
            known = self.facts.param_writes.get(key)
            if known is not None:
                return dict(known)
        local = (dotted_name(callee) or "").split(".", 1)[0]
        if launch or q.startswith("torch.ops.") or local in self.facts.external:
            return {"*": KERNEL_WRITE}
        return {}  # project code the index cannot see into, a builtin: taken to read

    def _add_site(
        self,
        node: cst.Call,
        allocator: str,
        chain: str | None,
        object_result: bool,
        report_node: cst.CSTNode | None = None,
        helper: bool = False,
    ) -> AllocationSite:
        f = self.func
        assert f is not None
        stmt = self._stmt[-1] if self._stmt else None
        self._locate(node)
        if report_node is not None:
            self._locate(report_node)
        if stmt is not None:
            self._locate(stmt)
        site = AllocationSite(
            call=node,
            allocator=allocator,
            function=f,
            frames=self._snapshot(),
            stmt=stmt if isinstance(stmt, cst.SimpleStatementLine) else None,
            suite=stmt if isinstance(stmt, cst.SimpleStatementSuite) else None,
            order=self._next(),
            positions=self.positions,
            chain=chain,
            object_result=object_result,
            report_node=report_node,
            helper=helper,
        )
        f.allocations.append(site)
        self.allocations.append(site)
        return site

    def call_key(self, func: cst.BaseExpression) -> str | None:
        """A call's callee as the project index spells it (see ``FileFacts``)."""
        f = self.func
        text = dotted_name(func)
        if text is None or f is None:
            return None
        head, _, rest = text.partition(".")
        if f.self_name is not None and head == f.self_name:
            return f"{f.cls.name}|self.{rest}" if f.cls is not None and rest else None
        return text

    def _allocator(self, node: cst.Call) -> tuple[str, str | None, bool] | None:
        """(allocator, chain, returns an object) for a call that allocates, else None.

        The chain is None for torch's own factories; IM003 reads the others: configured
        allocators and the project's allocating callables.
        """
        if _zero_elements(node):
            return None  # ``torch.empty(0)``: a placeholder, not a buffer
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_NEW_METHODS:
            return f".{func.attr.value}", None, False
        q = self.imports.qualify(func)
        if q is None:
            return None
        head, _, rest = q.partition(".")
        if head == "torch" and rest in TORCH_ALLOCATORS:
            return q, None, False
        if self.options.extra_allocators and name_matches(q, self.options.extra_allocators):
            last = q.rsplit(".", 1)[-1]
            return q, f"`{q}` is a configured allocator (extra-allocators)", last[:1].isupper()
        if self.facts.allocators:
            key = self.call_key(func)
            known = self.facts.allocators.get(key) if key is not None else None
            if known is not None:
                return q, known[0], known[1]
        return None

    def _helper_site(self, node: cst.Call, f: FunctionModel) -> None:
        """A factory handed to a get-or-create helper that keeps what it returns."""
        key = self.call_key(node.func)
        helper = self.facts.helpers.get(key) if key is not None else None
        if helper is None:
            return
        position, param, name, stored = helper
        positional = [a for a in node.args if a.keyword is None and a.star == ""]
        arg: cst.BaseExpression | None = None
        for a in node.args:
            if a.keyword is not None and a.keyword.value == param:
                arg = a.value
        if arg is None and 0 <= position < len(positional):
            arg = positional[position].value
        if arg is None:
            return
        inner, via = self._factory_allocation(arg)
        if via is None:
            return
        chain = (
            f"`{name}` keeps what its factory `{param}` returns in `{stored}`; the factory {via}"
        )
        self._add_site(node, name, chain, False, report_node=inner, helper=True)

    def _factory_allocation(self, arg: cst.BaseExpression) -> tuple[cst.CSTNode | None, str | None]:
        """Where a factory argument allocates, and how (None: it does not)."""
        if isinstance(arg, cst.Lambda):
            for n in walk(arg.body):
                if isinstance(n, cst.Call):
                    found = self._allocator(n)
                    if found is not None:
                        return n, f"allocates via {found[1] or found[0]}"
            return None, None
        if isinstance(arg, cst.Call):
            q = self.imports.qualify(arg.func) or ""
            if q.rsplit(".", 1)[-1] == "partial" and arg.args:
                target = arg.args[0].value
                tq = self.imports.qualify(target) or ""
                head, _, rest = tq.partition(".")
                if head == "torch" and rest in TORCH_ALLOCATORS:
                    return arg, f"is `partial({tq}, ...)`"
                key = self.call_key(target)
                known = self.facts.allocators.get(key) if key is not None else None
                if known is not None:
                    return arg, f"is `partial({key}, ...)`: {known[0]}"
            return None, None
        key = self.call_key(arg)
        known = self.facts.allocators.get(key) if key is not None else None
        if known is not None:
            return None, f"`{key}`: {known[0]}"
        return None, None


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


def _zero_elements(node: cst.Call) -> bool:
    """Whether a sized factory call has a literal 0 in its size: an empty placeholder."""
    func = node.func
    name = (
        func.attr.value
        if isinstance(func, cst.Attribute)
        else func.value
        if isinstance(func, cst.Name)
        else ""
    )
    if name == "tensor" and node.args and node.args[0].keyword is None:
        first = node.args[0].value  # ``torch.tensor([])``: an empty placeholder
        return isinstance(first, (cst.List, cst.Tuple)) and not first.elements
    if (
        name not in SIZED_FACTORIES
        or name.endswith("_like")
        or not node.args
        or node.args[0].keyword is not None
    ):
        return False
    first = node.args[0].value
    dims = (
        [el.value for el in first.elements] if isinstance(first, (cst.Tuple, cst.List)) else [first]
    )
    return any(isinstance(d, cst.Integer) and d.value == "0" for d in dims)


def _string_keyed(target: cst.Subscript) -> bool:
    """``x["key"]``: a tensor cannot be indexed by a string, so ``x`` is a mapping."""
    return len(target.slice) == 1 and isinstance(
        getattr(target.slice[0].slice, "value", None),
        (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString),
    )


def _calls_is_inference(test: cst.BaseExpression) -> bool:
    for node in walk(test):
        if isinstance(node, cst.Call) and isinstance(node.func, (cst.Attribute, cst.Name)):
            name = node.func.attr.value if isinstance(node.func, cst.Attribute) else node.func.value
            if name == "is_inference":
                return True
    return False


def is_inplace_method(method: str) -> bool:
    """``zero_``, ``copy_``: torch's in-place methods end in one underscore."""
    return method.endswith("_") and not method.startswith("_") and len(method) > 1


def _tensor_method(func: cst.BaseExpression) -> bool:
    """``x.add(y, out=z)``: a method (not a module's function) taking ``out=``."""
    return isinstance(func, cst.Attribute) and not isinstance(func.value, cst.Name)


def _is_handle(expr: cst.BaseExpression) -> bool:
    """An argument that can name storage: ``buf``, ``self._buf``, ``ws[k]``, ``buf[:n]``,
    ``buf.view(-1)``."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value not in DERIVED_METHODS:
            return False
        expr = expr.func.value
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript))
