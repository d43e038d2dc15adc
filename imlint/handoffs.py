"""What a call writes of the tensors handed to it, as the collecting walk records it.

A torch in-place method or ``out=`` to a torch op is a torch write (its other arguments
are its inputs); ``out=`` to a non-torch callable or a raw pointer (``x.data_ptr()``) is a
kernel write; a tensor handed to code imlint cannot read (a launch of a kernel from
elsewhere, an op from outside the project) is handed, and may be written or only read;
project code writes what the project index says it writes of its arguments
(``FileFacts.param_writes``). A module function handed by name to outside code hands it
what the function returns (a callback).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from imlint.index_facts import FileFacts
from imlint.kinds import collective_output, derives_receiver, is_inplace_name
from imlint.names import ImportMap, dotted_name, expr_text, passes_copy, unpacked
from imlint.positions import Positions
from imlint.semantic import (
    DATA_WRITE,
    HANDED_WRITE,
    KERNEL_WRITE,
    TORCH_WRITE,
    Frames,
    FunctionModel,
    InplaceWrite,
    strongest_write,
)


class CallWrites:
    """The collector's handling of calls that may write their arguments (a mixin of
    :class:`imlint.collect.Collector`, which owns the state below)."""

    imports: ImportMap
    facts: FileFacts
    positions: Positions
    callbacks: dict[str, InplaceWrite]

    if TYPE_CHECKING:

        def call_key(self, func: cst.BaseExpression) -> str | None: ...

        def _write(
            self,
            handle: cst.BaseExpression,
            text: str,
            at: cst.CSTNode | None = None,
            kind: str = TORCH_WRITE,
        ) -> None: ...

        def _locate(self, node: cst.CSTNode) -> None: ...

        def _snapshot(self) -> Frames: ...

        def _next(self) -> int: ...

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
                for v in unpacked(arg.value):
                    self._write(v, f"out={expr_text(v, f.self_name)}", at=node, kind=kind)
        if q.startswith("torch.distributed.") and self._collective(node, q, f):
            return
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if is_inplace_name(method):
                receiver = func.value
                text = f"{expr_text(receiver, f.self_name)}.{method}()"
                self._write(receiver, text, at=node, kind=_inplace_kind(receiver))
                if not torch_op:
                    return  # ``z.sub_(mean)``: the other arguments are inputs
            if torch_op:
                if is_inplace_name(method) and node.args and node.args[0].keyword is None:
                    # ``torch.index_put_(x, ...)``; ``torch._foreach_copy_((a, b), ...)``
                    for first in unpacked(node.args[0].value):
                        self._write(first, f"{q}({expr_text(first, f.self_name)}, ...)", at=node)
                return
        if not torch_op:
            self._raw_pointers(node, f)
        written = self._handed_writes(callee, launch, q, f)
        if not written:
            return
        if written.get("*") == HANDED_WRITE:
            self._callbacks(node, f)
        for i, arg in enumerate(a for a in node.args if a.keyword is None and a.star == ""):
            how = written.get(str(i), written.get("*"))
            if how is None:
                continue
            for v in _branches(arg.value):
                if _is_handle(v):
                    text = f"{expr_text(func, f.self_name)}(..., {expr_text(v, f.self_name)})"
                    self._write(v, text, at=node, kind=how)
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value != "out":
                how = written.get(arg.keyword.value, written.get("*"))
                for v in _branches(arg.value) if how is not None else ():
                    if how is not None and _is_handle(v):
                        text = f"{expr_text(func, f.self_name)}({arg.keyword.value}=...)"
                        self._write(v, text, at=node, kind=how)
            elif arg.star and isinstance(arg.value, cst.Name):
                # ``f(*args)``, ``f(**extra)``: what the local's literal holds may land on
                # any parameter
                how = strongest_write(written.values())
                if how is None:
                    continue
                text = f"{expr_text(func, f.self_name)}({arg.star}{arg.value.value})"
                for item in _literal_items(f.defs.get(arg.value.value, [])):
                    if _is_handle(item):
                        self._write(item, text, at=node, kind=how)

    def _collective(self, node: cst.Call, q: str, f: FunctionModel) -> bool:
        """``dist.irecv(buf, src)``, ``dist.all_gather(bufs, x)``: the argument a
        collective writes (``kinds.COLLECTIVE_OUTPUTS``) is written from a kernel;
        whether the call is one."""
        found = collective_output(q)
        if found is None:
            return False
        position, keyword = found
        positional = [a for a in node.args if a.keyword is None and a.star == ""]
        args = [a.value for a in node.args if a.keyword and a.keyword.value == keyword]
        if not args and len(positional) > position:
            args = [positional[position].value]
        for arg in args:
            for v in unpacked(arg):
                if _is_handle(v):
                    text = f"{q}({expr_text(v, f.self_name)}, ...)"
                    self._write(v, text, at=node, kind=KERNEL_WRITE)
        return True

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
                        HANDED_WRITE,
                    ),
                )  # fmt: skip

    def _handed_writes(
        self, callee: cst.BaseExpression, launch: bool, q: str, f: FunctionModel
    ) -> dict[str, str]:
        """What a call writes of the tensors handed to it: parameter position or name ->
        write kind (``*``: any). Project code says so in the facts; a Triton launch or a
        callable imported from outside the project (``torch.ops`` included) may write any
        of them, from a kernel, or only read them (``handed``); anything else is taken to read them."""
        key = self.call_key(callee)
        if key is not None:
            known = self.facts.param_writes.get(key)
            if known is not None:
                return dict(known)
        local = (dotted_name(callee) or "").split(".", 1)[0]
        external = self.facts.external
        if (
            (key is not None and "()." in key and key in external)
            or dotted_name(callee) in external
            or launch
            or q.startswith("torch.ops.")
            or local in external
            or f"{f.qualname}|{local}" in external
        ):
            return {"*": HANDED_WRITE}
        return {}  # project code the index cannot see into, a builtin: taken to read


def _literal_items(values: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
    """The items of the list, tuple or dict literals a local is bound to."""
    out: list[cst.BaseExpression] = []
    for v in values:
        if isinstance(v, (cst.List, cst.Tuple, cst.Dict)):
            out.extend(
                el.value for el in v.elements if isinstance(el, (cst.Element, cst.DictElement))
            )
    return out


def _branches(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What an argument may be: each branch of ``a if c else b`` (nested too), else the
    argument itself (``topk_out=buf if want else None`` hands ``buf`` when it hands
    anything)."""
    if isinstance(expr, cst.IfExp):
        return _branches(expr.body) + _branches(expr.orelse)
    return [expr]


def _tensor_method(func: cst.BaseExpression) -> bool:
    """``x.add(y, out=z)``: a method (not a module's function) taking ``out=``."""
    return isinstance(func, cst.Attribute) and not isinstance(func.value, cst.Name)


def _is_handle(expr: cst.BaseExpression) -> bool:
    """An argument that can name storage: ``buf``, ``self._buf``, ``ws[k]``, ``buf[:n]``,
    ``buf.view(-1)``, or what a call hands back (``_get_counters(dev)``, which the model
    resolves to a getter's cache when it is one)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if not derives_receiver(expr.func.attr.value, passes_copy(expr)):
            return isinstance(expr.func.value, (cst.Name, cst.Attribute))
        expr = expr.func.value
    return isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call))


def _inplace_kind(receiver: cst.BaseExpression) -> str:
    """``x.data.copy_(y)`` writes the whole of ``.data``, which the inference-tensor
    check does not see (``semantic.DATA_WRITE``); any other receiver, a torch write."""
    if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
        return DATA_WRITE
    return TORCH_WRITE
