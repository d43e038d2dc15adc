"""Launch a Triton kernel without the JIT's per-call dispatch, once it has compiled.

Calling ``kernel[grid](...)`` binds the arguments, computes the specialization key of every
argument, hashes it, looks the compiled kernel up and checks the kernel's globals: about
8-9 us of host time per launch on the lent H100/H200, as much as the driver launch itself.
An eager page split is one to three launches, so that dispatch is most of the host time that
separated imlint's split from sglang's.

:func:`launch` keeps the compiled kernel that the JIT returned, under a key that holds at
least everything the JIT specializes on (each tensor's dtype and 16-byte alignment; each
integer's value class: equal to 1, divisible by 16, 32-bit or 64-bit; the constexpr values;
``num_warps``; the device), and the next time hands the compiled kernel's launcher what
``JITFunction.run`` hands it: the grid, the current stream, the kernel's function and
metadata, and every parameter in order. The first launch for a key, a kernel that reads
globals the JIT checks, and every launch while launch hooks, debug mode or an
instrumentation mode are on, or under the Triton interpreter, go through the JIT.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch
from triton.runtime.driver import driver as _driver
from triton.runtime.jit import JITFunction

try:  # triton >= 3.4
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older triton: every launch goes through the JIT
    _knobs = None

#: compiled kernels by launch key (bounded: cleared when it grows past _COMPILED_MAX)
_COMPILED: dict[tuple[object, ...], tuple[Any, ...]] = {}
_COMPILED_MAX = 512

_I32 = (-(2**31), 2**31)


def _arg_class(arg: object) -> object:
    """What the JIT could specialize on for one argument (a superset of it)."""
    if isinstance(arg, torch.Tensor):
        return (arg.dtype, arg.data_ptr() % 16 == 0)
    if type(arg) is int:
        return ("i", arg == 1, arg % 16 == 0, _I32[0] <= arg < _I32[1], arg >= 2**63)
    return (type(arg), arg)  # floats, None, bools: by value (never a reused kernel by mistake)


def _hooked(hook: object) -> bool:
    """A launch hook is set: a ``HookChain`` (triton >= 3.5, never ``None``) that holds a
    function, or a function put in its place."""
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else hook is not None


def _direct_ok() -> bool:
    """Launch hooks (profilers), debug mode and an instrumentation mode change what the JIT
    does per launch, or which kernel it compiles."""
    if _knobs is None:
        return False
    runtime = _knobs.runtime
    hooked = _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook)
    instrumented = getattr(_knobs.compilation, "instrumentation_mode", "")
    return not (hooked or runtime.debug or instrumented)


class Constexprs:
    """A kernel's compile-time arguments (:func:`constexprs`): what the JIT gets as
    keywords, the values the launcher gets after the runtime arguments, and a key that
    tells ``True``, ``1`` and ``1.0`` apart as the JIT does."""

    __slots__ = ("key", "kwargs", "values")

    def __init__(self, kwargs: dict[str, object]) -> None:
        self.kwargs = kwargs
        self.values = tuple(kwargs.values())
        self.key = tuple((name, type(value), value) for name, value in kwargs.items())


def constexprs(**kwargs: object) -> Constexprs:
    """The :class:`Constexprs` of these keyword values, in the kernel's parameter order
    (made once per set by the caller: building one costs what a launch saves)."""
    return Constexprs(kwargs)


class _State:
    #: off for the rest of the process once a direct launch has raised
    direct = True


def launch(
    fn: Any,
    grid: tuple[int, ...],
    args: tuple[object, ...],
    consts: Constexprs,
    num_warps: int,
    device: torch.device,
) -> None:
    """``fn[grid](*args, **consts.kwargs, num_warps=num_warps)`` on the current stream.

    ``args`` are the kernel's runtime arguments in order, ``consts`` its compile-time ones
    (from :func:`constexprs`, in the kernel's parameter order, after the runtime ones).
    ``device`` must be the current device (the caller's device guard). Should a direct
    launch ever raise (a Triton whose launcher takes other arguments than the ones read
    here), direct launches stop for the process with a warning, and this launch and the
    later ones go through the JIT, which raises the error again if it was the kernel's own.
    """
    if not _State.direct or not isinstance(fn, JITFunction) or not _direct_ok():
        fn[grid](*args, **consts.kwargs, num_warps=num_warps)
        return
    # id(fn): hashing a JITFunction takes a lock per call; the entry keeps fn alive
    key = (id(fn), device.index, num_warps, consts.key, *map(_arg_class, args))
    known = _COMPILED.get(key)
    if known is not None:
        run, function, packed, stream_of, _fn = known
        g = (*grid, 1, 1)
        try:
            # what JITFunction.run passes to the launcher, with no hooks to call
            run(g[0], g[1], g[2], stream_of(device.index), function, packed, None, None, None,
                *args, *consts.values)  # fmt: skip
            return
        except Exception as exc:  # the JIT below raises a real error again
            _State.direct = False
            _COMPILED.clear()
            warnings.warn(
                f"imlint.kernels: direct Triton launches are off for this process ({exc!r})",
                RuntimeWarning,
                stacklevel=2,
            )
    compiled = fn[grid](*args, **consts.kwargs, num_warps=num_warps)
    if _State.direct and compiled is not None and _repeatable(fn, len(args), consts.kwargs):
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        stream_of = _driver.active.get_current_stream
        entry = (compiled.run, compiled.function, compiled.packed_metadata, stream_of, fn)
        _COMPILED[key] = entry


def _repeatable(fn: Any, n_args: int, constexprs: Mapping[str, object]) -> bool:
    """The JIT's per-call work is only the dispatch: the launcher takes every parameter,
    constexprs included, in the kernel's order (the constexprs are the last ones), and the
    kernel reads no global whose value the JIT would check, with no pre-run hooks."""
    names = list(fn.arg_names)
    if names != [*names[:n_args], *constexprs]:
        return False
    return not getattr(fn, "used_global_vals", None) and not getattr(fn, "pre_run_hooks", None)
