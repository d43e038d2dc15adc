"""The allocator vocabulary the rules look for (no parser needed: the pre-filter reads it)."""

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

#: Tensor methods that allocate a new tensor: ``x.new_empty(...)``.
TENSOR_NEW_METHODS = frozenset({"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor"})
