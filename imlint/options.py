"""Options that change what the analysis model sees (part of the cache key)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class AnalysisOptions:
    #: Extra callables that allocate tensors (dotted or bare names).
    extra_allocators: frozenset[str] = field(default_factory=frozenset)
    #: Extra context managers / decorators that count as ``inference_mode(False)``.
    extra_guards: frozenset[str] = field(default_factory=frozenset)
    #: Extra decorators that cache a function's return value.
    extra_cache_decorators: frozenset[str] = field(default_factory=frozenset)
    #: Extra context managers / decorators that turn inference mode on (for reach).
    inference_mode_regions: frozenset[str] = field(default_factory=frozenset)
    #: Functions a framework outside the project calls while it sets up (model loading
    #: hooks): construction, like constructors (dotted or bare names).
    setup_functions: frozenset[str] = field(default_factory=frozenset)

    def key(self) -> str:
        """A stable text that changes when any option changes."""
        return "|".join(
            ",".join(sorted(s))
            for s in (
                self.extra_allocators,
                self.extra_guards,
                self.extra_cache_decorators,
                self.inference_mode_regions,
                self.setup_functions,
            )
        )
