"""The tables of kinds: which calls make containers or fresh objects, which methods
derive a tensor from its receiver, which frames make code conditional. One source of
truth, read by the model (``imlint/collect.py``, ``values.py``, ``sites.py``) and by
narrowing (``imlint/narrow.py``)."""

from __future__ import annotations

from imlint.names import VIEW_METHODS

#: Functions whose attribute stores on ``self`` are construction, not lazy caching.
CONSTRUCTORS = frozenset({"__init__", "__new__", "__post_init__"})

#: The qualified name summaries give a module's own top-level code.
MODULE_SCOPE = "<module>"
#: The qualified name summaries give a module's script code (``if __name__ ==
#: "__main__":`` at module level): a function of its own that nothing calls.
SCRIPT_SCOPE = "<main>"

#: Calls that build a fresh object: a name assigned one of these is a local container.
FRESH_CALLS = frozenset(
    {
        "dict",
        "list",
        "set",
        "tuple",
        "frozenset",
        "defaultdict",
        "collections.defaultdict",
        "OrderedDict",
        "collections.OrderedDict",
        "SimpleNamespace",
        "types.SimpleNamespace",
        "object",
        # copies: a new object (stores on it replace its attributes, not the original's)
        "copy.copy",
        "copy.deepcopy",
        "dataclasses.replace",
    }
)

#: Builtins whose result holds the items of what they are handed (``tuple(items)``):
#: a value put into ``items`` is part of what the call returns.
ITEM_COPIES = frozenset({"tuple", "list", "set", "frozenset", "sorted"})

#: Methods whose result is (derived from) the receiver tensor, for handle aliasing.
DERIVED_METHODS = VIEW_METHODS | frozenset(
    {"to", "cuda", "cpu", "type", "float", "half", "bfloat16", "int", "long", "bool", "pin_memory"}
)


def derives_receiver(method: str, copies: bool = False) -> bool:
    """Whether what ``x.method(...)`` returns may be the receiver tensor or a view of it
    (a write through it writes the receiver). ``copies``: the call passes ``copy=True``,
    so a conversion (``x.to(dtype, copy=True)``) always returns new storage."""
    return method in DERIVED_METHODS and not (copies and method == "to")


LAZY_FRAMES = frozenset(
    {"if_body", "if_else", "while", "case", "ifexp_body", "ifexp_else", "boolop"}
)


CONTAINER_METHODS = frozenset(
    {"get", "setdefault", "pop", "popitem", "items", "keys", "values", "update", "clear", "append"}
)
CONTAINER_CALLS = frozenset(
    {
        "dict",
        "list",
        "defaultdict",
        "collections.defaultdict",
        "OrderedDict",
        "collections.OrderedDict",
        "weakref.WeakValueDictionary",
        "weakref.WeakKeyDictionary",
        "WeakValueDictionary",
        "WeakKeyDictionary",
    }
)


#: Modules whose functions only read the tensors they are handed (or take none): a
#: tensor handed to them is not written by a kernel.
READER_MODULES = frozenset(
    {"math", "numpy", "np", "logging", "os", "sys", "time", "functools", "itertools",
     "collections", "dataclasses", "typing", "copy", "json", "re", "warnings", "inspect",
     "contextlib", "enum", "abc", "operator", "builtins", "torch"}
)  # fmt: skip


def external_writer(qualified: str, roots: frozenset[str] | set[str]) -> bool:
    """Whether a callable, by its qualified name, lives outside the project and may
    write tensors handed to it from a kernel (``torch.ops`` included, torch's own
    functions not)."""
    if qualified.startswith("torch.ops."):
        return True
    head = qualified.split(".", 1)[0]
    return (
        bool(head)
        and not qualified.startswith(".")
        and head not in roots
        and head not in READER_MODULES
    )


#: Methods that store a value into the container or object they are called on, as the
#: model records them (``collect.py``) and narrowing looks for them (``narrow.py``):
#: method -> the store's kind (``sites.persistent`` decides by kind).
#: Builtins whose result holds the items of their arguments (``tuple(t.clone() for t in
#: ts)``, ``dict(a=buf)``): a tensor made in an argument flows into the result.
KEEPING_BUILTINS = frozenset({"tuple", "list", "set", "dict", "sorted"})

STORE_METHODS: dict[str, str] = {
    "setdefault": "setdefault",  # d.setdefault(k, v): the entry d[k], filled once
    "update": "update",  # d.update(k=v) / d.update({k: v})
    "__setitem__": "subscript",  # d.__setitem__(k, v)
    "register_buffer": "register_buffer",  # module.register_buffer("name", t)
    "append": "append",  # kept.append(t): a list kept beyond the call
    "insert": "append",  # kept.insert(0, t): the same, at a position
}


#: Store kinds that put an item into a container (the container is the store's root).
CONTAINER_STORE_KINDS = frozenset(STORE_METHODS.values()) - {"register_buffer"}

#: Attributes of a tensor that autograd owns: ``p.grad = torch.zeros_like(p)`` fills the
#: gradient of this step (the optimizer sets it back to None, or zeroes it, every step),
#: not a buffer kept for the process. Stores there are not stores into storage.
AUTOGRAD_SLOTS = frozenset({"grad"})

#: Methods that read an item of a container (``d.get(k)``, ``d.setdefault(k, v)``).
ITEM_GETTERS = frozenset({"get", "setdefault", "pop", "__getitem__"})


#: ``torch.distributed`` collectives and the argument each writes (position, keyword):
#: the backend (NCCL) writes it from a kernel, out of the dispatcher's sight, so an
#: inference tensor there is a latent hazard (``semantic.KERNEL_WRITE``).
COLLECTIVE_OUTPUTS: dict[str, tuple[int, str]] = {
    "recv": (0, "tensor"),
    "irecv": (0, "tensor"),
    "broadcast": (0, "tensor"),
    "all_reduce": (0, "tensor"),
    "reduce": (0, "tensor"),
    "all_gather": (0, "tensor_list"),
    "all_gather_into_tensor": (0, "output_tensor"),
    "reduce_scatter": (0, "output"),
    "reduce_scatter_tensor": (0, "output"),
    "all_to_all": (0, "output_tensor_list"),
    "all_to_all_single": (0, "output"),
    "scatter": (0, "tensor"),
}


def collective_output(qualified: str) -> tuple[int, str] | None:
    """The argument (position, keyword) a ``torch.distributed`` collective writes, when
    ``qualified`` names one (``torch.distributed.irecv``); else None."""
    head, _, name = qualified.rpartition(".")
    return COLLECTIVE_OUTPUTS.get(name) if head == "torch.distributed" else None


def is_inplace_name(name: str) -> bool:
    """``zero_``, ``copy_``, ``index_put_``: torch's in-place ops end in one underscore
    (``torch._foreach_copy_`` too: the in-place form of a list op)."""
    if name.startswith("_foreach_"):
        return name.endswith("_") and not name.endswith("__")
    return name.endswith("_") and not name.startswith("_") and len(name) > 1


#: The call region of a function started as a thread (``threading.Thread(target=f)``):
#: inference mode is per thread and off in a new one, so like ``inference_mode(False)``
#: it stops a path from an inference-mode region.
THREAD_REGION = "thread"
#: Call regions that run their callee with inference mode off.
MODE_OFF_REGIONS = frozenset({"guarded", THREAD_REGION})
#: The call region of a ``with`` block whose context managers the file cannot tell the
#: mode of: ``cm:<call text>[|<call text>...]``, resolved over the project
#: (``index_regions.RegionFinder``) to one of the regions here, or "".
CM_REGION_PREFIX = "cm:"
#: The call region of a context manager that enters inference mode on some paths only
#: (``yield`` in an ``if use_im: with torch.inference_mode():`` branch and another
#: outside): a path through it may arm a site, but code under it may also run with
#: inference mode off.
MAYBE_REGION = "maybe"
#: Regions that turn inference mode on, always or on some paths (reach).
ARMING_REGIONS = frozenset({"inference", MAYBE_REGION})
