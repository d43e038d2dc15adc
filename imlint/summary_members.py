"""What a class's instances answer to by name (``DefSummary.members``): the names its
body binds (methods, class attributes, annotated fields, nested classes, imports) and
the attributes its methods store on ``self`` (``self.proj = ...``, ``self.a, self.b =
...``, ``with ... as self.f``, ``for self.i in ...``). ``OPEN`` is listed when the class
may answer to names the source does not show: a base that is not a plain dotted name
(``Base[T]`` other than ``Generic``/``Protocol``, ``make_base()``), ``__getattr__``
or ``__getattribute__``, ``setattr(self, ...)``, or ``self.__dict__`` touched.

The index reads these to tell which classes a call by a name it cannot resolve may
reach (``index_members.py``): a receiver also asked for a method the class lacks is
not one of its instances."""

from __future__ import annotations

import ast

#: The marker for a class whose members the source does not fully show.
OPEN = "*"
_DYNAMIC = frozenset({"__getattr__", "__getattribute__"})
_GENERIC_BASES = frozenset({"Generic", "Protocol"})


def class_members(node: ast.ClassDef) -> tuple[str, ...]:
    found: set[str] = set()
    if any(_opaque_base(b) for b in node.bases):
        found.add(OPEN)
    for stmt in node.body:
        found.update(_bound_names(stmt))
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.update(_self_stores(stmt))
    if found & _DYNAMIC:
        found.add(OPEN)
    return tuple(sorted(found))


def _opaque_base(base: ast.expr) -> bool:
    if isinstance(base, ast.Subscript):
        head = base.value
        name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", "")
        return name not in _GENERIC_BASES
    while isinstance(base, ast.Attribute):
        base = base.value
    return not isinstance(base, ast.Name)


def _bound_names(stmt: ast.stmt) -> set[str]:
    """The names a statement of the class body binds (in any branch it holds)."""
    out: set[str] = set()
    for node in _class_level(stmt):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.alias):
            out.add((node.asname or node.name).split(".", 1)[0])
    return out


def _class_level(stmt: ast.stmt) -> list[ast.AST]:
    """The nodes of a class-body statement outside any function or class it defines."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _self_stores(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Attributes a method stores on its first parameter, anywhere in its body."""
    args = func.args.posonlyargs + func.args.args
    if not args or any(_named(d, "staticmethod") for d in func.decorator_list):
        return set()
    me = args[0].arg
    out: set[str] = set()
    for node in ast.walk(func):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == me
        ):
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                out.add(node.attr)
            elif node.attr == "__dict__":
                out.add(OPEN)
        elif (
            isinstance(node, ast.Call)
            and (_named(node.func, "setattr") or _named(node.func, "__setattr__"))
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == me
        ):
            key = node.args[1] if len(node.args) > 1 else None
            literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
            out.add(key.value if literal else OPEN)  # type: ignore[union-attr]
    return out


def _named(node: ast.expr, name: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )
