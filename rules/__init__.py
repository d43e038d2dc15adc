"""imlint's rules: one module per rule. ``ALL_RULES`` is the registry, in code order."""

from __future__ import annotations

from imlint.rule import Rule

from .im001_lazy_buffer_mutated import LazyBufferMutated
from .im002_lazy_buffer_latent import LazyBufferLatent
from .im003_allocating_call import LazyAllocatingCall
from .im004_unguarded_persistent import UnguardedPersistentAllocation
from .im005_lazy_readonly import LazyReadOnlyTensor

ALL_RULES: tuple[type[Rule], ...] = (
    LazyBufferMutated,
    LazyBufferLatent,
    LazyAllocatingCall,
    UnguardedPersistentAllocation,
    LazyReadOnlyTensor,
)

RULES_BY_CODE: dict[str, type[Rule]] = {r.code: r for r in ALL_RULES}

__all__ = ["ALL_RULES", "RULES_BY_CODE"]
