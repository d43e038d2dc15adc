"""The collecting walk: one pass over a module's LibCST tree records, per function,
bindings, local containers, guards and conditions (frames), stores into storage that
may outlive the call, in-place writes and allocation sites."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import libcst as cst

from imlint.allocations import SiteFinder
from imlint.handoffs import CallWrites
from imlint.kinds import CONTAINER_METHODS
from imlint.names import (
    INFERENCE_MODE_NAMES,
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
from imlint.values import ITEMS, holds_containers, is_container, is_fresh, is_none
from imlint.vocabulary import CACHE_DECORATORS
from imlint.walk import walk

#: ``isinstance(x, list)``: the builtin containers a branch can narrow a name to.
_BUILTIN_CONTAINERS = frozenset({"list", "tuple", "dict", "set"})


class Collector(SiteFinder, CallWrites, cst.CSTVisitor):
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
        #: module-level names bound to a call of a bare name (``_POOL = _Pool()``)
        self.instances: dict[str, str] = {}
        #: module functions handed by name to outside code, with the handing call
        self.callbacks: dict[str, InplaceWrite] = {}
        self.blocks: dict[int, tuple[int, int]] = {}
        self.bodies: dict[int, Sequence[cst.CSTNode]] = {}  # id(block) -> its statements

    # ---- helpers

    def _next(self) -> int:
        self._order += 1
        return self._order

    def _list_store(
        self, receiver: cst.BaseExpression, rtext: str, value: cst.BaseExpression
    ) -> None:
        f = self.func
        assert f is not None
        if not isinstance(receiver, cst.Call):
            self._store("append", f"{rtext}[]", rtext, receiver, value)
            return
        func = receiver.func
        args = receiver.args
        if isinstance(func, cst.Attribute) and func.attr.value == "setdefault" and args:
            owner = func.value
            otext = expr_text(owner, f.self_name)
            key = expr_text(args[0].value, f.self_name)
            self._store("append", f"{otext}[{key}][]", otext, owner, value)

    def _known_container(self, text: str) -> bool:
        """Whether the enclosing ``if`` branches test ``isinstance(<text>, list)`` (or
        another builtin container type): then ``<text>`` holds no tensor there."""
        f = self.func
        for frame in self._frames:
            test = frame.test
            if frame.kind != "if_body" or not isinstance(test, cst.Call):
                continue
            if not (isinstance(test.func, cst.Name) and test.func.value == "isinstance"):
                continue
            if len(test.args) != 2:
                continue
            kinds = test.args[1].value
            names = kinds.elements if isinstance(kinds, cst.Tuple) else [kinds]
            if expr_text(test.args[0].value, f.self_name if f else None) == text and all(
                isinstance(n, cst.Name) and n.value in _BUILTIN_CONTAINERS
                for n in (e.value if isinstance(e, cst.Element) else e for e in names)
            ):
                return True
        return False

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
        self._bind_items(node.target, node.iter)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._bind_items(node.target, node.iter, other=False)

    def _bind_items(
        self, target: cst.BaseExpression, items: cst.BaseExpression, other: bool = True
    ) -> None:
        """A loop variable holds an item of the storage it iterates: ``for buf in
        self._bufs`` reads ``self._bufs[...]``, as do ``zip(self._bufs, outs)`` and
        ``enumerate``. Only storage spelled out (an attribute, an entry): a local list
        stays opaque, so a test on its items says nothing about kept storage."""
        f = self.func
        if f is None:
            return
        stored = isinstance(items, (cst.Attribute, cst.Subscript))
        if isinstance(target, cst.Name) and target.value not in f.globals and stored:
            item = cst.Subscript(items, [cst.SubscriptElement(cst.Index(cst.Name("_")))])
            f.defs.setdefault(target.value, []).append(item)
            return
        name = dotted_name(items.func) if isinstance(items, cst.Call) else None
        if isinstance(target, (cst.Tuple, cst.List)) and name in ("zip", "enumerate"):
            assert isinstance(items, cst.Call)
            args = [a.value for a in items.args if a.keyword is None and a.star == ""]
            elements = [el.value for el in target.elements]
            if name == "enumerate" and len(elements) == 2 and args:
                if other:
                    self._bind_target(elements[0])  # the index
                elements, args = elements[1:], args[:1]
            if len(args) == len(elements):
                for el, arg in zip(elements, args, strict=True):
                    self._bind_items(el, arg, other)
                return
        if other:
            self._bind_target(target)  # a comprehension's own names stay as they were

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
                names = [target.value]
                if self._class[-1] is not None:
                    names.append("self." + target.value)
                self.container_texts.update(names)
                if holds_containers(value, self.imports):  # its items are containers too
                    self.container_texts.update(n + ITEMS for n in names)
            elif (
                isinstance(target, cst.Name)
                and self._class[-1] is None
                and isinstance(value, cst.Call)
                and isinstance(value.func, cst.Name)
            ):
                self.instances[target.value] = value.func.value
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
                if holds_containers(value, self.imports):
                    self.container_texts.add(text + ITEMS)
        elif isinstance(target, cst.Subscript):
            text = expr_text(target, f.self_name)
            container = expr_text(target.value, f.self_name)
            self._store("subscript", text, container, target.value, value)
            if not _string_keyed(target) and not self._known_container(container):
                # ``ws["ci"] = ...`` fills a dict, not a tensor; so does ``x[i] = ...``
                # under ``if isinstance(x, list):``
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
        if stmt is not None:
            self._locate(stmt)  # where the value is kept, for the finding's ``kept_line``
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
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            if method in CONTAINER_METHODS:
                f.container_uses.add(expr_text(receiver, f.self_name))
            args = [a for a in node.args if a.star == ""]
            rtext = expr_text(receiver, f.self_name)
            if method in ("append", "insert") and len(args) == (1 if method == "append" else 2):
                # A list kept beyond the call holds what is appended (``self._pool``), or
                # a list kept in an entry (``self._pool.setdefault(k, []).append(t)``).
                self._list_store(receiver, rtext, args[-1].value)
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
