"""Name resolution: import aliases, dotted names and normalised expression text.

Everything here is purely syntactic: imlint never imports the code it checks.
"""

from __future__ import annotations

import libcst as cst

from imlint.vocabulary import (
    INFERENCE_MODE_NAMES,
    TENSOR_NEW_METHODS,
    TORCH_ALLOCATORS,
    TORCH_FACTORIES,
    name_matches,
)

__all__ = [
    "INFERENCE_MODE_NAMES",
    "TENSOR_NEW_METHODS",
    "TORCH_ALLOCATORS",
    "TORCH_FACTORIES",
    "name_matches",
]

#: Methods that return a view sharing storage with their receiver.
VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "narrow",
        "as_strided",
        "flatten",
        "unflatten",
        "squeeze",
        "unsqueeze",
        "transpose",
        "permute",
        "t",
        "expand",
        "expand_as",
        "select",
        "diagonal",
        "detach",
        "contiguous",
        "movedim",
        "swapaxes",
        "swapdims",
        "unfold",
        "split",
        "chunk",
        "unbind",
        "tensor_split",
        "__getitem__",
        "view_as_real",  # function forms only: ``torch.view_as_real(x)``
        "view_as_complex",
    }
)

#: Attributes that are views of a tensor.
VIEW_ATTRIBUTES = frozenset({"data", "T", "mT", "H", "mH", "real", "imag"})


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


#: Modules that projects re-export under their usual name (``from vllm.triton_utils
#: import tl, triton``): a name imported as one of these is that module, whoever
#: re-exports it (the linter does not import the re-exporting module to find out).
REEXPORTED_MODULES = {"triton": "triton", "tl": "triton.language"}


def imported_from(prefix: str, name: str) -> str:
    """The qualified name ``from <prefix> import <name>`` binds."""
    known = REEXPORTED_MODULES.get(name)
    if known is not None and prefix.lstrip(".").split(".", 1)[0] != known.split(".", 1)[0]:
        return known
    return f"{prefix}.{name}" if prefix and not prefix.endswith(".") else prefix + name


class ImportMap:
    """Maps local names bound by imports to qualified names."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def add(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted_name(alias.name)
                if full is None:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.names[alias.asname.name.value] = full
                else:
                    head = full.split(".", 1)[0]
                    self.names[head] = head
            return
        if isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module) if node.module is not None else ""
        prefix = "." * len(node.relative) + (module or "")
        for alias in node.names:
            name = dotted_name(alias.name)
            if name is None:
                continue
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.names[local] = imported_from(prefix, name)

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The qualified name of a dotted expression, through import aliases."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self.names.get(head)
        if target is None:
            return dotted
        return f"{target}.{rest}" if rest else target

    def alias_for(self, qualified: str) -> str | None:
        """A local expression that names module ``qualified`` (e.g. ``th`` for ``torch``)."""
        for local, target in self.names.items():
            if target == qualified:
                return local
        return None


def passes_copy(call: cst.Call) -> bool:
    """Whether a call passes ``copy=True`` (``x.to(dtype, copy=True)``)."""
    return any(
        a.keyword is not None
        and a.keyword.value == "copy"
        and isinstance(a.value, cst.Name)
        and a.value.value == "True"
        for a in call.args
    )


_EMPTY_MODULE = cst.Module(body=[])


def expr_text(node: cst.CSTNode, self_name: str | None = None) -> str:
    """Whitespace-free source text of an expression, with the method's first
    parameter spelled ``self`` so that texts compare across methods."""
    if isinstance(node, cst.Name):
        return "self" if self_name is not None and node.value == self_name else node.value
    if isinstance(node, cst.Attribute):
        return f"{expr_text(node.value, self_name)}.{node.attr.value}"
    if isinstance(node, cst.Subscript):
        inner = ",".join(expr_text(s.slice, self_name) for s in node.slice)
        return f"{expr_text(node.value, self_name)}[{inner}]"
    if isinstance(node, cst.Index):
        return expr_text(node.value, self_name)
    if isinstance(node, (cst.Integer, cst.SimpleString)):
        return node.value
    code = _EMPTY_MODULE.code_for_node(node)
    return "".join(code.split())


def unpacked(node: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The items of a tuple or list display (``del a, b``, ``out=(x, y)``), else the
    expression itself."""
    if isinstance(node, (cst.Tuple, cst.List)):
        return [el.value for el in node.elements]
    return [node]


def views_of_items(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``(buf[:n] for buf in bufs)``, ``[b.view(-1) for b in bufs]``: a comprehension
    with one ``for`` and no condition whose element is its loop variable or a view of
    it (basic indexing, ``VIEW_METHODS``): the iterated expression, whose items it
    yields in order as views; else None."""
    if not isinstance(node, (cst.GeneratorExp, cst.ListComp)):
        return None
    comp = node.for_in
    if comp.inner_for_in is not None or comp.ifs or comp.asynchronous is not None:
        return None
    if not isinstance(comp.target, cst.Name):
        return None
    e: cst.BaseExpression = node.elt
    while True:
        if isinstance(e, cst.Name):
            return comp.iter if e.value == comp.target.value else None
        if isinstance(e, cst.Subscript) and all(_basic_index(s) for s in e.slice):
            e = e.value
        elif (
            isinstance(e, cst.Call)
            and isinstance(e.func, cst.Attribute)
            and e.func.attr.value in VIEW_METHODS
        ):
            e = e.func.value
        else:
            return None


def _basic_index(element: cst.SubscriptElement) -> bool:
    """A slice, an integer, ``...`` or ``None``: indexing that views (not a gather)."""
    s = element.slice
    if not isinstance(s, cst.Index):
        return isinstance(s, cst.Slice)
    v = s.value
    return isinstance(v, (cst.Integer, cst.Ellipsis)) or (
        isinstance(v, cst.Name) and v.value == "None"
    )


def literal_bool(node: cst.BaseExpression) -> bool | None:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    if isinstance(node, cst.Integer):
        return node.value != "0"
    return None


def string_value(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def torch_alias(node: cst.Import) -> str | None:
    """The name an ``import`` binds to torch: ``th`` for ``import torch as th``,
    ``torch`` for ``import torch`` or ``import torch.nn``."""
    for alias in node.names:
        name = dotted_name(alias.name) or ""
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            if name == "torch":
                return alias.asname.name.value
        elif name.split(".")[0] == "torch":
            return "torch"
    return None
