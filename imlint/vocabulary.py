"""The vocabulary the analyses share: allocators, modes, caches (no parser needed: the
pre-filter, the project summaries and the LibCST model all read it)."""

from __future__ import annotations

#: ``torch.<name>`` factories that create a new tensor.
TORCH_FACTORIES = frozenset(
    {
        "empty",
        "zeros",
        "ones",
        "full",
        "empty_like",
        "zeros_like",
        "ones_like",
        "full_like",
        "empty_strided",
        "arange",
        "tensor",
        "eye",
        "linspace",
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "empty_permuted",
        "scalar_tensor",
        "logspace",
        "hann_window",
        "hamming_window",
        "blackman_window",
        "bartlett_window",
        "kaiser_window",
    }
)

#: ``torch.<name>`` functions that compute a new tensor from others (new storage, made
#: under the caller's mode: under inference mode, an inference tensor). Views
#: (``narrow``, ``unsqueeze``, ``expand``...) share their input's storage and are not
#: here: a view of a normal tensor stays a normal tensor.
TORCH_COMPUTE = frozenset(
    {"cat", "concat", "concatenate", "stack", "vstack", "hstack", "cos", "sin", "exp",
     "log", "sqrt", "rsqrt", "pow", "outer", "einsum", "matmul", "mm", "bmm", "cumsum",
     "cumprod", "where", "repeat_interleave", "tril", "triu", "polar", "complex", "gather",
     "index_select", "masked_select", "nonzero", "argsort", "clamp", "abs", "flip", "roll",
     "tile", "kron", "diag", "block_diag", "cartesian_prod", "bucketize", "searchsorted",
     "from_numpy", "as_tensor", "randperm", "sigmoid", "softmax", "reciprocal", "exp2",
     "sign", "floor", "ceil", "round", "minimum", "maximum", "clone", "unique",
     "unique_consecutive", "sort", "topk"}
)  # fmt: skip

#: Tensor methods that allocate a new tensor: ``x.new_empty(...)``, ``x.clone()``.
TENSOR_NEW_METHODS = frozenset(
    {"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "clone"}
)

#: Tensor methods that copy the tensor they are called on into new storage when they
#: change something: a dtype or device conversion, a contiguous copy, a copy to pinned
#: host memory (``x.to(device)``, ``w.float()``, ``t.contiguous()``). When nothing
#: changes they return the tensor itself; either way, kept lazily under inference mode,
#: what is kept may be a new inference tensor (flash-attention's rotary cache:
#: ``self._cos_cached = cos.to(dtype)``).
TENSOR_CONVERSIONS = frozenset(
    {"to", "float", "half", "bfloat16", "double", "int", "long", "bool", "cuda", "cpu",
     "contiguous", "pin_memory"}
)  # fmt: skip

#: Tensor methods that compute a new tensor (``w.exp()``, ``t.index_select(0, i)``):
#: torch's computing functions that Python numbers and numpy arrays do not have as
#: methods. Called on an imported module (``math.exp(x)``, ``np.sqrt(x)``) they are not
#: tensor methods. ``sort`` too: a list's and a numpy array's sort in place and return
#: None, so only a tensor's ``sort()`` has a result to keep (``values, _ = t.sort()``).
TENSOR_COMPUTE_METHODS = frozenset(
    {"exp", "exp2", "log", "sqrt", "rsqrt", "reciprocal", "sigmoid", "softmax", "cos", "sin",
     "pow", "outer", "matmul", "mm", "bmm", "tril", "triu", "gather", "index_select",
     "masked_select", "repeat_interleave", "abs", "clamp", "flip", "roll", "tile",
     "sort"}
)  # fmt: skip

#: The allocator of a site made by arithmetic (``(a + b) / 2``): new storage under the
#: caller's mode, a site only when a tensor made by an earlier statement reaches an
#: operand (``values.FunctionAnalysis.flow``), so numbers and arrays never are.
ARITHMETIC = "arithmetic"

#: The allocator of a site made by indexing with a tensor (``cos[idx]``, ``x[x > 0]``):
#: a gather into new storage under the caller's mode, a site only when a tensor made
#: by an earlier statement reaches an index (``values.FunctionAnalysis.flow``); indexing
#: with numbers and slices is a view.
INDEXING = "indexing"

#: The binary operators that compute a new tensor from tensors (LibCST's class names).
ARITHMETIC_OPERATORS = frozenset(
    {"Add", "Subtract", "Multiply", "Divide", "FloorDivide", "Modulo", "Power",
     "MatrixMultiply"}
)  # fmt: skip

#: Methods that make a new tensor from the one they are called on; only the innermost
#: of a chain is a site (``w.float().contiguous()``: the ``float()``; ``torch.zeros(n)
#: .to(d)``: the ``zeros``).
TENSOR_DERIVING_METHODS = TENSOR_CONVERSIONS | TENSOR_COMPUTE_METHODS

#: A call of one of them, as bytes and text patterns match it (``.to(``).
DERIVING_CALL = r"\.\s*(?:" + "|".join(sorted(TENSOR_DERIVING_METHODS)) + r")\s*\("

#: What a new tensor holds when made, by allocator name (``torch.empty``, ``.new_empty``):
#: ``blank`` storage is uninitialized, so whatever it is used for, a writer fills it
#: first; ``zeroed`` storage is the start of a workspace, a counter or an accumulator as
#: often as a constant. Every other allocation has content when made (``arange``,
#: ``tensor``, ``ones``, ``full``, computed values): handed to code from outside the
#: project, it is taken as an input unless something shows a write (see ``tier`` in
#: ``imlint/semantic.py``).
CONTENT_OF_ALLOCATOR = {
    **dict.fromkeys(
        ("empty", "empty_like", "empty_strided", "empty_permuted", "new_empty"), "blank"
    ),
    **dict.fromkeys(("zeros", "zeros_like", "new_zeros"), "zeroed"),
}


def content_of(allocator: str) -> str:
    """``blank``, ``zeroed`` or ``content`` (see :data:`CONTENT_OF_ALLOCATOR`)."""
    return CONTENT_OF_ALLOCATOR.get(allocator.rsplit(".", 1)[-1], "content")


#: Factories whose first argument is a size: a literal 0 in it makes a placeholder.
SIZED_FACTORIES = TORCH_FACTORIES - {
    "scalar_tensor",
    "logspace",
    "arange",
    "tensor",
    "linspace",
    "eye",
    "randint",
} | TENSOR_NEW_METHODS - {"clone"}

#: Every ``torch.<name>`` that makes a new tensor: what the model calls an allocator.
TORCH_ALLOCATORS = TORCH_FACTORIES | TORCH_COMPUTE

#: Qualified names of ``inference_mode``.
INFERENCE_MODE_NAMES = frozenset(
    {
        "torch.inference_mode",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.inference_mode",
    }
)

#: Decorators that cache a function's return value (besides any ``*cache*`` name).
CACHE_DECORATORS = frozenset(
    {"functools.cache", "functools.lru_cache", "functools.cached_property", "cache", "lru_cache"}
)

#: Tensor methods that return something other than a tensor. Any other method called
#: on a fresh allocation returns a tensor made under the same mode (``.tril()``).
NON_TENSOR_METHODS = frozenset(
    {
        "item",
        "tolist",
        "numel",
        "nelement",
        "size",
        "dim",
        "ndimension",
        "stride",
        "storage_offset",
        "data_ptr",
        "element_size",
        "is_contiguous",
        "is_inference",
        "get_device",
        "numpy",
        "untyped_storage",
        "__len__",
    }
)


#: Method names of ``torch.Tensor`` that a call on a receiver of unknown type is read
#: as (``x.clone()``, ``buf.to(device)``, ``t.float()``): the index does not take such a
#: call for a call of a project method of the same name, which would tie every tensor
#: conversion in the tree to, say, a sequence class's ``clone``.
TENSOR_METHOD_NAMES = TENSOR_DERIVING_METHODS | TENSOR_NEW_METHODS | NON_TENSOR_METHODS


def name_matches(qualified: str, configured: frozenset[str]) -> bool:
    """Whether a qualified name matches one of the configured names.

    A configured dotted name matches exactly; a configured bare name matches any
    qualified name ending in it (``CuteDslMoEWrapper`` matches
    ``flashinfer.CuteDslMoEWrapper``).
    """
    if qualified in configured:
        return True
    last = qualified.rsplit(".", 1)[-1]
    if last in configured:
        return True
    # ``from .wrappers import X`` qualifies to ``.wrappers.X``: match the dotted tail.
    stripped = qualified.lstrip(".")
    return any(
        c.endswith("." + stripped) or stripped.endswith("." + c) for c in configured if "." in c
    )
