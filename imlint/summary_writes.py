"""What a function's summary records about writes (``imlint/project.py``): what a call
does with the tensors the function was handed (its parameters), keeps on ``self`` or got
back from a call: writes them in place (torch), stores to them from a Triton kernel, or
hands them on to another callable."""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING

from imlint.kinds import collective_output, derives_receiver, is_inplace_name
from imlint.names import VIEW_METHODS

if TYPE_CHECKING:
    from imlint.project import DefSummary, _Scope

BUILTINS = frozenset(dir(builtins))

#: Triton calls whose first argument (``base=``) is the pointer they carry on.
_POINTER_CARRIERS = frozenset({"make_block_ptr", "advance", "make_tensor_descriptor"})


def declared_mutations(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...] | None:
    """The parameters a decorator that registers the function as a custom op declares
    it mutates (``@torch.library.custom_op("ns::op", mutates_args=("out",))``, or a
    project's wrapper taking the same argument): PyTorch requires the list to be exact,
    so the others are only read, whatever the body hands them to. None when no
    decorator declares a literal list (``mutates_args="unknown"``: any may be)."""
    for dec in node.decorator_list:
        if not isinstance(dec, ast.Call):
            continue
        for kw in dec.keywords:
            value = kw.value
            if kw.arg != "mutates_args" or not isinstance(value, (ast.List, ast.Tuple)):
                continue
            names = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            texts = [n for n in names if isinstance(n, str)]
            if len(texts) == len(value.elts):
                return tuple(texts)
    return None


class WriteFacts:
    """A mixin of the project summarizer (``imlint.project._Summarizer``)."""

    defs: dict[str, DefSummary]
    scopes: list[_Scope]
    blocks: tuple[tuple[int, str], ...]
    region: str  # ``inference``, ``guarded`` or "": the ``with`` block the walk is in

    if TYPE_CHECKING:

        def qualify(self, text: str) -> str: ...

        def call_text(self, func: ast.expr, scope: _Scope | None = None) -> str: ...

        def call_texts(self, func: ast.expr, scope: _Scope | None = None) -> list[str]: ...

    def _param_writes(self, node: ast.Call, text: str, launch: bool, scope: _Scope) -> None:
        """What a call does with the tensors a function was handed (its parameters), keeps
        on ``self``, or got back from a call: writes them in place, stores to them from a
        Triton kernel, or hands them on (see ``imlint/writes.py``)."""
        func = node.func
        q = self.qualify(text)
        torch_op = q.startswith("torch.") and not q.startswith("torch.ops.")
        if isinstance(func, ast.Attribute) and not launch and is_inplace_name(func.attr):
            # ``x.data.copy_(y)``: a write the inference-tensor check does not see
            # (``semantic.DATA_WRITE``)
            data = isinstance(func.value, ast.Attribute) and func.value.attr == "data"
            self._wrote(func.value, "data" if data else "torch", scope)
            if not torch_op:
                return  # ``z.sub_(mean)``: the other arguments are inputs
        if not node.args and not node.keywords:
            return
        for kw in node.keywords:
            if kw.arg == "out":
                outside = not torch_op and not isinstance(func, ast.Attribute)
                self._wrote(kw.value, "kernel" if outside else "torch", scope)
        if scope.kernel and q.startswith("triton.language.") and node.args:
            if q.rsplit(".", 1)[-1] in _TRITON_STORES:
                for name in _pointer_bases(node.args[0], scope.assigned):
                    if name in scope.params:
                        scope.pwrites.add((name, "kernel"))
            return
        if torch_op:
            collective = collective_output(q)
            if collective is not None:  # ``dist.irecv(buf)``: the backend writes it
                position, keyword = collective
                named = [kw.value for kw in node.keywords if kw.arg == keyword]
                positional = [a for a in node.args if not isinstance(a, ast.Starred)]
                if not named and len(positional) > position:
                    named = [positional[position]]
                for arg in named:
                    for item in arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]:
                        self._wrote(item, "kernel", scope)
                return
            if node.args and is_inplace_name(q.rsplit(".", 1)[-1]):
                first = node.args[0]  # ``torch._foreach_zero_((a, b))``: each item
                for item in first.elts if isinstance(first, (ast.Tuple, ast.List)) else [first]:
                    self._wrote(item, "torch", scope)
            return
        callee = ("[]" if launch else "") + text
        for i, arg in enumerate(node.args):
            if _is_raw_pointer(arg):
                self._wrote(arg.func.value, "kernel", scope)  # type: ignore[attr-defined]
            else:
                # ``f(*args)``: what the list holds may land on any parameter
                self._handed_on(arg, callee, "*" if isinstance(arg, ast.Starred) else str(i), scope)
        for kw in node.keywords:
            if kw.arg != "out":
                self._handed_on(kw.value, callee, kw.arg or "*", scope)  # ``f(**kwargs)``

    def torch_write(self, scope: _Scope) -> str:
        """The kind of a torch in-place write here: ``inference`` inside an
        ``inference_mode()`` block or a function decorated with it, where it cannot raise
        (``semantic.INFERENCE_WRITE``)."""
        region = self.region or scope.summary.mode
        return "inference" if region == "inference" else "torch"

    def _wrote(self, expr: ast.expr, kind: str, scope: _Scope) -> None:
        """A write into what ``expr`` names: a parameter, a tensor on ``self``, or the
        result of a call (``buf = get_buffer(n); buf.zero_()``)."""
        if kind == "torch":
            kind = self.torch_write(scope)
        owner = _owner(expr, scope)
        if owner is not None:
            scope.pwrites.add((owner, kind))
        for made, key in self._results_in(expr, scope):
            scope.rwrites.add((made, kind, key))

    def _handed_on(self, expr: ast.expr, callee: str, key: str, scope: _Scope) -> None:
        if isinstance(expr, ast.IfExp):  # ``out=buf if want else None``: either branch
            self._handed_on(expr.body, callee, key, scope)
            self._handed_on(expr.orelse, callee, key, scope)
            return
        owner = _owner(expr, scope)
        if owner is not None:
            scope.passes.add((callee, key, owner))
        for made, rkey in self._results_in(expr, scope):
            scope.rwrites.add((made, f"handed:{callee}:{key}", rkey))

    def _results_in(self, expr: ast.expr, scope: _Scope) -> set[tuple[str, str]]:
        """(call text, key): results of calls a handle names, directly (``get(n)[:m]``)
        or through locals, an enclosing function's included (``buf = get(n)``, then
        ``buf[:m]``, ``x = bufs["out"]``); key is the constant key the result is read at
        (``get_bufs(n)["out"]``; ``#1`` for the item at 1, ``a, b = get_bufs(n)``), "" for
        the whole result. Computed values name none."""
        out: set[tuple[str, str]] = set()
        pending: list[tuple[ast.expr, str, frozenset[str]]] = [(expr, "", frozenset())]
        while pending:
            e, key, seen = pending.pop()
            while True:
                if isinstance(e, ast.Subscript):
                    k = e.slice
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        key = k.value  # the entry of a returned mapping
                    elif isinstance(k, ast.Constant) and type(k.value) is int:
                        key = f"#{k.value}"  # the item of a returned tuple
                    e = e.value
                elif isinstance(e, (ast.Attribute, ast.Starred)):
                    e = e.value
                elif isinstance(e, (ast.List, ast.Tuple, ast.Set)) and not key:
                    # ``args = [q, get(n)]``, handed on as ``f(*args)``
                    pending.extend((x, "", seen) for x in e.elts)
                    break
                elif isinstance(e, ast.Dict) and not key:
                    pending.extend((x, "", seen) for x in e.values)
                    break
                elif (
                    isinstance(e, ast.Call)
                    and isinstance(e.func, ast.Attribute)
                    and derives_receiver(e.func.attr, copies(e))
                ):
                    e = derived_from(e)
                else:
                    break
            if isinstance(e, ast.Call):
                text = dotted(e.func)
                head = (text or "").split(".", 1)[0]
                if text is not None and (head not in BUILTINS or head in self.defs):
                    out.update((callee, key) for callee in self.call_texts(e.func))
            elif isinstance(e, ast.Name) and e.id not in seen:
                for value in self._local_values(e.id, scope):
                    pending.append((value, key, seen | {e.id}))
        return out

    def _local_values(self, name: str, scope: _Scope) -> list[ast.expr]:
        """What a name is bound to in this function, else in an enclosing one (a
        closure); nothing for a parameter, a global or module code."""
        for sc in reversed(self.scopes):
            if sc is not scope and sc.summary.kind != "function":
                break
            if name in sc.params or name in sc.globals:
                return []
            values = [*self._reaching(sc, name), *sc.unpacked.get(name, ())]
            # what is stored into a local container: ``extra["c"] = get(n)``
            values += [v for v, into in sc.kept if into == f"local:{name}"]
            if values:
                return values
        return []

    def _reaching(self, scope: _Scope, name: str) -> list[ast.expr]:
        """The values of ``name`` bound so far that reach the walk's current place: the
        last plain assignment in a block that holds this place (every path here runs
        it) and any after it; all of them in an enclosing function (a closure runs
        later)."""
        values = scope.assigned.get(name, [])
        if len(values) < 2 or scope is not self.scopes[-1]:
            return values
        here = self.blocks
        for i in range(len(values) - 1, -1, -1):
            blocks = scope.assigned_in.get(id(values[i]))
            if blocks is not None and here[: len(blocks)] == blocks:
                return values[i:]
        return values


def dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _pointer_bases(expr: ast.expr, assigned: dict[str, list[ast.expr]]) -> set[str]:
    """The names a Triton pointer expression may point into, through local assignments
    (``ptrs = out_ptr + offs[:, None] * stride; tl.store(ptrs, x)``: ``out_ptr``). A
    pointer is a base plus offsets: only the terms of ``+``/``-`` can be the base, never
    a product or what a call computes (``tl.load(starts_ptr + i)`` is an offset, not a
    pointer into ``starts_ptr``), except the calls that carry a pointer on
    (``p.to(...)``, ``tl.make_block_ptr(base, ...)``, ``tl.advance(p, ...)``)."""
    out: set[str] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Name):
            if e.id not in out:
                out.add(e.id)
                stack.extend(assigned.get(e.id, ()))
        elif isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)):
            stack.extend((e.left, e.right))
        elif isinstance(e, ast.Subscript):
            stack.append(e.value)
        elif isinstance(e, ast.IfExp):
            stack.extend((e.body, e.orelse))
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            if e.func.attr in _POINTER_CARRIERS and e.args:
                stack.append(e.args[0])
            elif e.func.attr in _POINTER_CARRIERS:
                stack.extend(kw.value for kw in e.keywords if kw.arg == "base")
            elif e.func.attr in ("to", "cast"):
                stack.append(e.func.value)  # ``p.to(...)``; ``tl.cast(p, ...)``: its argument
                stack.extend(e.args[:1])
    return out


_TRITON_STORES = frozenset(
    {"store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas",
     "atomic_and", "atomic_or", "atomic_xor"}
)  # fmt: skip


def _owner(expr: ast.expr, scope: _Scope, seen: frozenset[str] = frozenset()) -> str | None:
    """Whose tensor an expression names, as a function's summary records writes: a
    parameter (``buf``, ``buf[:n]``, a local view ``v = buf[:n]``) or an attribute of
    ``self`` (``self.buf``)."""
    attr: str | None = None
    while True:
        if isinstance(expr, ast.Attribute):
            attr = expr.attr
            expr = expr.value
        elif isinstance(expr, (ast.Subscript, ast.Starred)):
            attr = None
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if not derives_receiver(expr.func.attr, copies(expr)):
                return None
            attr = None
            expr = derived_from(expr)
        else:
            break
    if not isinstance(expr, ast.Name):
        return None
    if expr.id == scope.self_name:
        return f"self.{attr}" if attr else None
    if expr.id in scope.params:
        return expr.id
    values = scope.assigned.get(expr.id, ())
    if len(values) == 1 and expr.id not in seen and not isinstance(values[0], ast.Name):
        return _owner(values[0], scope, seen | {expr.id})  # a view: ``v = buf[:n]``
    return None


def made_here(expr: ast.expr, assigned: dict[str, list[ast.expr]]) -> bool:
    """A call, or a name bound to a call's result in this scope, or a field of one, or
    a list or tuple literal holding one (``nn.ModuleList([blocks])``)."""
    if isinstance(expr, ast.Call):
        return True
    if isinstance(expr, (ast.List, ast.Tuple)):
        return any(made_here(e, assigned) for e in expr.elts)
    if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
        expr = expr.value
    return isinstance(expr, ast.Name) and any(
        isinstance(v, ast.Call) for v in assigned.get(expr.id, ())
    )


def _is_raw_pointer(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "data_ptr"
    )


def handle_root(expr: ast.expr) -> str | None:
    """The name a tensor argument starts from: ``buf`` for ``buf``, ``buf[:n]``,
    ``buf.view(-1)``, ``self`` for ``self._buf``; None for anything computed."""
    while True:
        if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if not derives_receiver(expr.func.attr, copies(expr)):
                return None
            expr = derived_from(expr)
        else:
            break
    return expr.id if isinstance(expr, ast.Name) else None


def copies(call: ast.Call) -> bool:
    """Whether a call passes ``copy=True`` (``x.to(dtype, copy=True)``)."""
    return any(
        kw.arg == "copy" and isinstance(kw.value, ast.Constant) and kw.value.value is True
        for kw in call.keywords
    )


def derived_from(call: ast.Call) -> ast.expr:
    """The tensor a view or derived value comes from: ``buf`` of ``buf.view(-1)``, and
    of ``torch.as_strided(buf, ...)`` (the function form of a view takes it first, as
    ``values._torch_view`` reads it)."""
    assert isinstance(call.func, ast.Attribute)
    base = call.func.value
    torch = isinstance(base, ast.Name) and base.id == "torch"
    if torch and call.func.attr in VIEW_METHODS and call.args:
        return call.args[0]
    return base
