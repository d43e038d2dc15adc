"""`imlint probe`: the seed's runtime table, recorded automatically (CPU; GPU rows marked)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

BUFFERS = """\
import torch

_CACHE = {}


def get(n):
    buf = _CACHE.get(n)
    if buf is None:
        buf = torch.empty(n)
        _CACHE[n] = buf
    return buf


def step(n):
    b = get(n)
    b.zero_()
    return b
"""
GUARDED = BUFFERS.replace(
    "        buf = torch.empty(n)\n",
    "        with torch.inference_mode(False):\n            buf = torch.empty(n)\n",
)
MAIN = """\
import torch

from {pkg}.buffers import step

with torch.inference_mode():
    step(4)  # warm-up under inference mode: the first allocation
print("warm-up done")
step(4)  # outside inference mode
print("served")
"""


def make_package(root: Path, name: str, buffers: str) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "buffers.py").write_text(buffers)
    (pkg / "main.py").write_text(MAIN.format(pkg=name))


def probe(root: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "imlint",
            "probe",
            *args,
            "--out",
            "probe.json",
            "--",
            sys.executable,
            "-m",
            "app.main",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc, json.loads((root / "probe.json").read_text())["sites"]


def test_unguarded_buffer_first_touched_under_inference_mode(tmp_path):
    make_package(tmp_path, "app", BUFFERS)
    before = (tmp_path / "app" / "buffers.py").read_bytes()
    proc, rows = probe(tmp_path, "--package", "app")
    # the program's own exit status and output are preserved
    assert proc.returncode == 1
    assert proc.stdout == "warm-up done\n"
    # tracebacks point at the real lines
    assert 'buffers.py", line 16, in step' in proc.stderr
    (row,) = rows
    assert row["site"] == "app/buffers.py:9" and row["code"] == "IM001"
    assert row["under_inference_mode"] == 1 and row["outside_inference_mode"] == 0
    assert row["inference_tensors"] == 1 and row["first_mode"] == "inference_mode"
    assert row["first_write"] == "zero_()"
    assert (
        row["outcome"]
        == "RuntimeError: Inplace update to inference tensor outside InferenceMode is not allowed"
    )
    assert "| app/buffers.py:9 | IM001 | inference_mode |" in proc.stderr
    assert (tmp_path / "app" / "buffers.py").read_bytes() == before  # no file changed


def test_guarded_buffer_is_normal_and_the_program_succeeds(tmp_path):
    make_package(tmp_path, "app", GUARDED)
    proc, rows = probe(tmp_path, "--package", "app", "--all-sites")
    assert proc.returncode == 0 and proc.stdout == "warm-up done\nserved\n"
    (row,) = rows
    assert row["code"] == "guarded" and row["first_mode"] == "normal"
    assert row["inference_tensors"] == 0 and row["outcome"] == ""
    # without --all-sites a guarded site is not probed at all
    _, rows = probe(tmp_path, "--package", "app")
    assert rows == []


def test_modules_outside_the_package_are_untouched(tmp_path):
    make_package(tmp_path, "app", BUFFERS)
    proc, rows = probe(tmp_path, "--package", "elsewhere")
    assert proc.returncode == 1 and rows == []


def test_python_api(tmp_path, monkeypatch):
    from imlint.probe import probing

    make_package(tmp_path, "apimod", BUFFERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with probing(package="apimod") as recorder:
        import apimod.buffers as buffers

        with torch.inference_mode():
            buffers.step(3)
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
            buffers.step(3)
    row = recorder.sites["apimod/buffers.py:9"]
    assert row.under_inference_mode == 1 and row.inference_tensors == 1
    assert row.outcome.startswith("RuntimeError: Inplace update")
    sys.modules.pop("apimod.buffers", None)
    sys.modules.pop("apimod", None)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_capture_state_is_recorded(tmp_path):
    """First touch during CUDA-graph capture vs under inference mode (the seed's two cases)."""
    variants = Path(__file__).resolve().parent.parent / "fixtures" / "kernels"
    pkg = tmp_path / "variants"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "both.py").write_text((variants / "page_split_unguarded_both.py").read_text())
    (tmp_path / "run.py").write_text(
        textwrap.dedent(
            """
            import sys
            import torch
            from variants import both
            from imlint.kernels import SCRATCH
            P, pages = 128, 8
            kv = torch.randint(0, 255, (pages, P * 584), dtype=torch.uint8, device="cuda")
            idx = torch.arange(0, pages * P, 7, device="cuda", dtype=torch.int32)
            mode = sys.argv[1]
            if mode == "inference":
                with torch.inference_mode():
                    both.split_kv_pages_to_64(kv, P, idx)  # simulated autotune
            # warm-up and capture outside inference mode
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=s):
                    both.split_kv_pages_to_64(kv, P, idx)
            g.replay()
            torch.cuda.synchronize()
            print("captured")
            """
        )
    )
    rows_by_mode = {}
    for mode in ("capture", "inference"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "imlint",
                "probe",
                "--package",
                "variants",
                "--out",
                f"{mode}.json",
                "--",
                sys.executable,
                "run.py",
                mode,
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        rows_by_mode[mode] = (proc, json.loads((tmp_path / f"{mode}.json").read_text())["sites"])
    proc, rows = rows_by_mode["capture"]
    assert proc.returncode == 0, proc.stderr
    assert rows and all(r["capturing"] >= 1 and r["inference_tensors"] == 0 for r in rows)
    proc, rows = rows_by_mode["inference"]
    assert proc.returncode != 0
    mask = next(r for r in rows if r["code"] == "IM001")
    assert mask["first_mode"] == "inference_mode" and mask["inference_tensors"] >= 1
    assert (
        "Inplace update to inference tensor outside InferenceMode is not allowed" in mask["outcome"]
    )
    print(json.dumps(rows_by_mode["capture"][1] + rows, indent=1))


# Two more lazy sites beside the one the warm-up reaches: one the program allocates only
# with inference mode off, one it never calls.
MORE = """\
import torch

_OTHER = {}
_NEVER = {}


def cold(n):
    if n not in _OTHER:
        _OTHER[n] = torch.zeros(n)
    _OTHER[n].add_(1)
    return _OTHER[n]


def never(n):
    if n not in _NEVER:
        _NEVER[n] = torch.zeros(n)
    _NEVER[n].add_(1)
    return _NEVER[n]
"""


def check_with(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imlint", "check", "app", "--no-cache", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_check_with_the_probe_marks_exactly_the_observed_sites(tmp_path):
    make_package(tmp_path, "app", BUFFERS)
    (tmp_path / "app" / "more.py").write_text(MORE)
    main = tmp_path / "app" / "main.py"
    main.write_text(
        main.read_text().replace(
            "from app.buffers import step\n",
            "from app.buffers import step\nfrom app.more import cold\n\ncold(3)\n",
        )
    )
    probe(tmp_path, "--package", "app")
    plain = json.loads(check_with(tmp_path, "--output-format", "json").stdout)
    r = check_with(tmp_path, "--output-format", "json", "--probe", "probe.json")
    assert r.returncode == 1, r.stderr
    found = {(Path(d["path"]).name, d["line"]): d for d in json.loads(r.stdout)}
    assert set(found) == {(Path(d["path"]).name, d["line"]) for d in plain}
    warm, cold, never = found[("buffers.py", 9)], found[("more.py", 9)], found[("more.py", 16)]
    assert warm["tier"] == "observed" and warm["armed"] is True
    assert warm["observed"]["under_inference_mode"] == 1
    assert warm["observed"]["threads"] == ["MainThread"]
    assert warm["observed"]["outcome"].startswith("RuntimeError: Inplace update")
    assert cold["tier"] != "observed" and cold["observed"]["under_inference_mode"] == 0
    assert cold["observed"]["outside_inference_mode"] == 1
    assert never["observed"] is None and never["tier"] == ""
    # observed findings come first in text output, with what the probe saw under them
    text = check_with(tmp_path, "--probe", "probe.json", "--no-show-source").stdout
    lines = text.splitlines()
    assert "buffers.py:9" in lines[0] and "[armed (observed)]" in lines[0]
    assert lines[1] == (
        "    observed: 1 of 1 allocations under inference mode (thread MainThread); first "
        "in-place write outside it: zero_() -> RuntimeError: Inplace update to inference "
        "tensor outside InferenceMode is not allowed"
    )
    assert "    observed: 1 allocations, none under inference mode" in lines
    sarif = json.loads(
        check_with(tmp_path, "--output-format", "sarif", "--probe", "probe.json").stdout
    )
    props = [res["properties"] for res in sarif["runs"][0]["results"]]
    assert sorted(p.get("tier", "") for p in props).count("observed") == 1


def test_a_bad_probe_file_is_a_one_line_error(tmp_path):
    make_package(tmp_path, "app", BUFFERS)
    for name, text in [
        ("missing.json", None),
        ("junk.json", "{not json"),
        ("list.json", "[]"),
        ("row.json", '{"sites": [{"site": "app/buffers.py"}]}'),
        ("counts.json", '{"sites": [{"site": "app/buffers.py:9", "allocations": "9"}]}'),
    ]:
        if text is not None:
            (tmp_path / name).write_text(text)
        r = check_with(tmp_path, "--probe", name)
        assert r.returncode == 2, name
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, (name, r.stderr)
        assert r.stderr.startswith(f"error: {name}"), r.stderr
