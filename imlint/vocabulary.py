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
     "sign", "floor", "ceil", "round", "minimum", "maximum", "clone"}
)  # fmt: skip

#: Tensor methods that allocate a new tensor: ``x.new_empty(...)``, ``x.clone()``.
TENSOR_NEW_METHODS = frozenset(
    {"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "clone"}
)

#: What a new tensor holds when made, by allocator name (``torch.empty``, ``.new_empty``):
#: ``blank`` storage is uninitialized, so whatever it is used for, a writer fills it
#: first; ``zeroed`` storage is the start of a workspace, a counter or an accumulator as
#: often as a constant. Every other allocation has content when made (``arange``,
#: ``tensor``, ``ones``, ``full``, computed values): handed to code from outside the
#: project, it is taken as an input unless something shows a write (see ``tier`` in
#: ``imlint/semantic.py``).
CONTENT_OF_ALLOCATOR = {
    **dict.fromkeys(("empty", "empty_like", "empty_strided", "new_empty"), "blank"),
    **dict.fromkeys(("zeros", "zeros_like", "new_zeros"), "zeroed"),
}


def content_of(allocator: str) -> str:
    """``blank``, ``zeroed`` or ``content`` (see :data:`CONTENT_OF_ALLOCATOR`)."""
    return CONTENT_OF_ALLOCATOR.get(allocator.rsplit(".", 1)[-1], "content")


#: Factories whose first argument is a size: a literal 0 in it makes a placeholder.
SIZED_FACTORIES = TORCH_FACTORIES - {
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
