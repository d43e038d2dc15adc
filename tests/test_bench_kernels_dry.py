"""The kernel benchmark runs end to end without a GPU (``--dry-run``).

The benchmark only ever times anything on a lent GPU, where device time is short; a script
that fails there (a renamed function, a wrong argument) wastes a whole call. Its dry run
takes every code path, sweep included, on CPU tensors in the Triton interpreter, with the
same correctness checks (the full, masked and claim-mode splits against the torch
reference), and times nothing.
"""

from __future__ import annotations

import importlib.util
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


def _run_interpreted(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<script>`` with the kernels in the Triton interpreter."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, env=env, timeout=900, cwd=ROOT,
    )  # fmt: skip


def test_the_kernel_benchmark_sweep_runs_on_the_cpu_interpreter() -> None:
    proc = _run_interpreted("bench_kernels.py", "--sweep", "--dry-run", "--pbs", "256")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "full split equals the torch reference: True" in out
    assert "masked split equals the torch reference: True" in out
    assert out.count("sweep claim mode (graph") == 6  # 3 blocks x random, ordered
    assert "summary" in out and " 256 " in out.split("summary")[1]


def test_the_host_time_benchmark_sees_one_jit_call_per_specialization() -> None:
    """``bench_kernels_host.py`` times the wrapper with stand-in kernels and exits non-zero
    unless every launch after a specialization's first went the direct way."""
    proc = _run_interpreted("bench_kernels_host.py", "--calls", "20", "--repeat", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "_page_split_kernel 2 JIT + 40 direct" in proc.stdout
    assert "_mark_pages_kernel 1 JIT + 20 direct" in proc.stdout
    assert "claim_split_kernel 1 JIT + 20 direct" in proc.stdout
    assert "masked (claim mode)" in proc.stdout
