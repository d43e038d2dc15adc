"""Launch a Triton kernel without the JIT's per-call dispatch, once it has compiled.

Calling ``kernel[grid](...)`` binds the arguments, computes the specialization key of every
argument, hashes it, looks the compiled kernel up and checks the kernel's globals: about
8-9 us of host time per launch on the lent H100/H200, as much as the driver launch itself.
An eager page split is one to three launches, so that dispatch is most of the host time that
separated imlint's split from sglang's.

:func:`launch` keeps the compiled kernel that the JIT returned, under a key that holds at
least everything the JIT specializes on (each tensor's dtype and 16-byte alignment; each
integer's value class: equal to 1, divisible by 16, 32-bit or 64-bit; the constexpr values;
``num_warps``; the device), and launches it directly the next time through
``CompiledKernel.__getitem__(grid)(*args)``, which passes the current stream and the launch
hooks as the JIT does. The first launch for a key, and every launch while launch hooks or
the JIT's debug mode are on or under the Triton interpreter, goes through the JIT.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch
from triton.runtime.jit import JITFunction

try:  # triton >= 3.4
    from triton import knobs as _knobs
except ImportError:  # pragma: no cover - older triton: every launch goes through the JIT
    _knobs = None

#: compiled kernels by launch key (bounded: cleared when it grows past _COMPILED_MAX)
_COMPILED: dict[tuple[object, ...], tuple[Any, tuple[object, ...]]] = {}
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
    """Launch hooks (profilers) and debug mode change what the JIT does per launch."""
    if _knobs is None:
        return False
    runtime = _knobs.runtime
    return not (
        _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook) or runtime.debug
    )


class _State:
    #: off for the rest of the process once a direct launch has raised
    direct = True


def launch(
    fn: Any,
    grid: tuple[int, ...],
    args: tuple[object, ...],
    constexprs: Mapping[str, object],
    num_warps: int,
    device: torch.device,
) -> None:
    """``fn[grid](*args, **constexprs, num_warps=num_warps)`` on the current stream.

    ``args`` are the kernel's runtime arguments in order, ``constexprs`` its compile-time
    ones (in the kernel's parameter order, after the runtime ones). ``device`` must be the
    current device (the caller's device guard). Should a direct launch ever raise (a Triton
    whose launcher takes other arguments than the ones read here), direct launches stop for
    the process with a warning, and this launch and the later ones go through the JIT,
    which raises the error again if it was the kernel's own.
    """
    if not _State.direct or not isinstance(fn, JITFunction) or not _direct_ok():
        fn[grid](*args, **constexprs, num_warps=num_warps)
        return
    key = (fn, device.index, num_warps, *map(_arg_class, args), *constexprs.items())
    known = _COMPILED.get(key)
    if known is not None:
        compiled, tail = known
        try:
            compiled[(*grid, 1, 1)[:3]](*args, *tail)
            return
        except Exception as exc:  # the JIT below raises a real error again
            _State.direct = False
            _COMPILED.clear()
            warnings.warn(
                f"imlint.kernels: direct Triton launches are off for this process ({exc!r})",
                RuntimeWarning,
                stacklevel=2,
            )
    compiled = fn[grid](*args, **constexprs, num_warps=num_warps)
    # the launcher takes every parameter, constexprs included, in the kernel's order
    if not _State.direct or compiled is None:
        return
    if list(fn.arg_names) != [*fn.arg_names[: len(args)], *constexprs]:
        return  # (not a call this cache can repeat: the JIT launches it every time)
    if len(_COMPILED) >= _COMPILED_MAX:
        _COMPILED.clear()
    _COMPILED[key] = (compiled, tuple(constexprs.values()))
