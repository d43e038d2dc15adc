"""The kernels compile for the GPUs they are tuned on, without a GPU.

CI has no GPU, and the Triton interpreter that runs ``tests/test_kernels.py`` there does not
compile anything: a kernel that the compiler rejects, or one whose copies lose their 16-byte
accesses (a large drop in bandwidth), would only show on a GPU. Triton compiles for a named
target without one (``triton.compile`` with a ``GPUTarget``, its bundled ``ptxas``), so this
test compiles every kernel configuration the split launches (and the one-launch masked split
of ``claim.py``) for sm_90 (H100/H200) and reads the PTX. It runs in a subprocess: the kernels must be defined with ``TRITON_INTERPRET``
unset, and ``tests/test_kernels.py`` sets it for its own process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Not imported here: importing triton in this process before ``tests/test_kernels.py`` sets
# ``TRITON_INTERPRET=1`` would leave triton.language compiled for a GPU for every later test.
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("triton") is None:
    pytest.skip("needs torch and triton (the kernels extra)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location(
    "imlint.kernels", sys.argv[1] + "/__init__.py", submodule_search_locations=[sys.argv[1]]
)
module = importlib.util.module_from_spec(spec)
sys.modules["imlint.kernels"] = module
spec.loader.exec_module(module)
ps = sys.modules["imlint.kernels.page_split"]
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

target = GPUTarget("cuda", 90, 32)
aligned = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 4, 5)}
runtime = {"src_ptr": "*u8", "dst_ptr": "*u8", "mask_ptr": "*i8", "n_src_pages": "i32",
           "src_page_stride": "i64", "dst_page_stride": "i32"}
out = {}
for name, masked, find, split in [("full", False, False, 2), ("full8", False, False, 8),
                                  ("masked", True, False, 4), ("masked_find", True, True, 4)]:
    chunk, warps = (ps.SPLIT_CHUNK_BYTES, ps.SPLIT_NUM_WARPS) if not masked else ps.MASKED_CONFIG
    const = dict(SPLIT=split, HAS_MASK=masked, GROUP=ps.MASK_GROUP, CHUNK=chunk,
                 TILE=1 << (chunk - 1).bit_length(), DATA_BYTES=ps.DST_DATA_BYTES,
                 SCALE_BYTES=ps.DST_SCALE_BYTES, STREAM=ps.SPLIT_STREAM, FIND=find)
    sig = dict(runtime, **{k: "constexpr" for k in const})
    src = ASTSource(fn=ps._page_split_kernel, signature=sig, constexprs=const, attrs=aligned)
    ptx = triton.compile(src, target=target, options={"num_warps": warps}).asm["ptx"]
    out[name] = [ptx.count("ld.global.v4.b32"), ptx.count("st.global.v4.b32")]
claim = sys.modules["imlint.kernels.claim"]
chunk, warps = ps.MASKED_CONFIG
const = dict(SPLIT=4, SRC_PBS=256, BLOCK=ps.CLAIM_BLOCK, CHUNK=chunk,
             TILE=1 << (chunk - 1).bit_length(), DATA_BYTES=ps.DST_DATA_BYTES,
             SCALE_BYTES=ps.DST_SCALE_BYTES, STREAM=ps.SPLIT_STREAM)
sig = {"idx_ptr": "*i32", "claim_ptr": "*i32", "src_ptr": "*u8", "dst_ptr": "*u8",
       "n_idx": "i32", "idx_stride": "i32", "n_tokens": "i32", "src_page_stride": "i64",
       "dst_page_stride": "i32", **{k: "constexpr" for k in const}}
src = ASTSource(fn=claim.claim_split_kernel, signature=sig, constexprs=const,
                attrs={(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 7, 8)})
ptx = triton.compile(src, target=target, options={"num_warps": warps}).asm["ptx"]
out["claim"] = [ptx.count("ld.global.v4.b32"), ptx.count("st.global.v4.b32"), ptx.count("atom.")]
const = dict(SRC_PBS=256, BLOCK=ps.MARK_BLOCK)
sig = {"idx_ptr": "*i32", "mask_ptr": "*i8", "n_idx": "i32", "idx_stride": "i32",
       "n_tokens": "i32", "SRC_PBS": "constexpr", "BLOCK": "constexpr"}
src = ASTSource(fn=ps._mark_pages_kernel, signature=sig, constexprs=const)
out["mark"] = [len(triton.compile(src, target=target, options={"num_warps": 4}).asm["ptx"])]
print(json.dumps(out))
"""


def test_every_split_configuration_compiles_for_sm90_with_16_byte_copies() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT / "kernels")],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    # A destination page's 36864 data bytes move in 16-byte loads and stores: at least
    # 36864 / 16 / threads per program of each, whatever the warps (16 or 32 here).
    for name in ("full", "full8", "masked", "masked_find", "claim"):
        loads, stores = counts[name][:2]
        assert loads >= 4 and stores >= 4, (name, counts)
    assert counts["claim"][2] > 0  # the claims are atomic exchanges
    assert counts["mark"][0] > 0
