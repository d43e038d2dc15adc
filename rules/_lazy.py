"""What the lazy-allocation rules share: which sites they judge and how they say it."""

from __future__ import annotations

from imlint.semantic import DATA_WRITE, INFERENCE_WRITE, AllocationSite, Mode

GUARD_ADVICE = "wrap the allocation in `with torch.inference_mode(False):`"


def subject(site: AllocationSite) -> str:
    """How a message names the storage and where the tensor comes from."""
    store = site.store
    assert store is not None
    if store.kind == "helper":
        what = f"Buffer made by the factory handed to `{store.target}`"
    elif store.kind == "return":
        what = f"Cached return value of `{store.target}`"
    elif site.lazy is not None:
        what = f"Lazy buffer `{store.target}`"
    else:
        what = f"Persistent buffer `{store.target}`"
    if site.mode is Mode.INFERENCE:
        return f"{what} is allocated inside `inference_mode()` (an inference tensor)"
    return f"{what} is allocated outside `inference_mode(False)`"


def is_unguarded_hazard(site: AllocationSite) -> bool:
    """A lazy persistent allocation that a first touch under inference mode can poison.
    One made every time its code runs is IM004's, unless it is made inside inference
    mode and a torch in-place write outside inference mode reaches it: that one is an
    inference tensor for sure and the write raises (IM001, IM003)."""
    if site.store is None or site.mode is Mode.GUARDED:
        return False
    return site.lazy is not None or (site.mode is Mode.INFERENCE and bool(site.torch_writes))


def is_direct(site: AllocationSite) -> bool:
    """A torch allocation written at the site (IM001/IM002/IM004); IM003 takes the
    allocations behind a call (project helpers, constructors, configured allocators)."""
    return site.chain is None


#: Which latent write a message cites when there are several: a kernel write (or a
#: tensor handed to unreadable code) first, then a write through ``.data``, then a torch
#: write inside inference mode.
_CITED_LAST = {DATA_WRITE: 1, INFERENCE_WRITE: 2}


def kernel_writer(site: AllocationSite) -> str:
    """The kernel write a message cites, or why one is out of sight."""
    writes = site.kernel_writes
    if writes:
        w = min(writes, key=lambda w: _CITED_LAST.get(w.kind, 0))  # a kernel's first
        if w.kind == INFERENCE_WRITE:
            return (
                f"written in place only inside `inference_mode()`, where that cannot raise, "
                f"at `{w.text}` (line {w.line})"
            )
        if w.kind == DATA_WRITE:
            return (
                f"written in place only through `.data`, which the inference-tensor check "
                f"does not see, at `{w.text}` (line {w.line})"
            )
        return f"written only by a kernel at `{w.text}` (line {w.line})"
    return (
        f"left uninitialized by `{site.allocator}` with no visible writer: code out of "
        "sight (a kernel) fills it"
    )
