"""The fast path (pre-filter, workers, cache) gives exactly the plain path's results."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from imlint import __version__

from .conftest import FIXTURES, cache_payload, run_imlint, sign_cache

PLAIN = ("--no-fast", "--no-cache", "-j", "1")


def results(*args: str, cwd: Path) -> tuple[int, list[dict], list[str]]:
    # IM005 on: the snippets here are read-only lazy tensors, the cheapest site to write.
    r = run_imlint("check", "--output-format", "json", "--extend-select", "IM005", *args, cwd=cwd)
    return r.code, json.loads(r.out), sorted(r.err.splitlines())


def synthetic_tree(root: Path, n: int = 60) -> None:
    """Fixture code copied, renamed, shuffled and mixed with token-free files."""
    rng = random.Random(1234)
    sources = [
        p.read_bytes()
        for p in sorted(FIXTURES.rglob("*.py"))
        if "kernels" not in p.parts  # those import imlint.kernels; fine, but keep it small
    ]
    for i in range(n):
        pkg = root / f"pkg{i % 5}"
        pkg.mkdir(parents=True, exist_ok=True)
        kind = rng.random()
        if kind < 0.6:
            data = rng.choice(sources)
        elif kind < 0.9:
            data = b"def helper(x):\n    return [y * 2 for y in x]\n" * rng.randint(1, 30)
        else:
            data = b"def broken(:\n    pass\n"
        (pkg / f"m{i}.py").write_bytes(data)
    shutil.copy(FIXTURES / "pyproject.toml", root / "pyproject.toml")


def test_fast_equals_plain_on_fixtures(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "fixtures", ignore=shutil.ignore_patterns(".imlint_cache"))
    plain = results("fixtures", *PLAIN, cwd=tmp_path)
    fast = results("fixtures", "-j", "2", cwd=tmp_path)
    assert plain[1] and fast == plain


def test_fast_equals_plain_on_a_synthetic_tree(tmp_path):
    synthetic_tree(tmp_path)
    plain = results(".", *PLAIN, cwd=tmp_path)
    cold = results(".", "-j", "2", cwd=tmp_path)
    warm = results(".", "-j", "2", cwd=tmp_path)
    assert plain[1] and plain[2]  # findings and syntax errors both present
    assert cold == plain
    assert warm == plain


def test_cache_is_used_and_invalidated(tmp_path):
    code = "import torch\n_C = {}\ndef f(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n"
    (tmp_path / "a.py").write_text(code)
    first = results("a.py", cwd=tmp_path)
    cache = tmp_path / ".imlint_cache"
    assert (cache / ".gitignore").read_text().strip().endswith("*")
    [entry] = list(cache.glob("results-*.json"))
    data = json.loads(cache_payload(entry))
    assert data["version"] == __version__ and len(data["files"]) == 1
    # A cached result is what is reported: change it (as this user, signed) to prove it.
    key = next(iter(data["files"]))
    data["files"][key]["findings"][0]["message"] = "FROM CACHE"
    sign_cache(entry, json.dumps(data).encode())
    assert results("a.py", cwd=tmp_path)[1][0]["message"] == "FROM CACHE"
    # Content change: recomputed.
    (tmp_path / "a.py").write_text(code + "\n")
    assert results("a.py", cwd=tmp_path)[1][0]["message"] == first[1][0]["message"]
    # Configuration change: another cache file, never the stale result.
    changed = results("a.py", "--extend-select", "IM004,IM005", cwd=tmp_path)
    assert changed[1][0]["message"] == first[1][0]["message"]
    assert len(list(cache.glob("results-*.json"))) == 2


def test_version_change_invalidates(tmp_path):
    code = "import torch\n_C = {}\ndef f(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n"
    (tmp_path / "a.py").write_text(code)
    results("a.py", cwd=tmp_path)
    [entry] = list((tmp_path / ".imlint_cache").glob("results-*.json"))
    data = json.loads(cache_payload(entry))
    data["version"] = "0.0.0-old"
    for item in data["files"].values():
        item["findings"] = []
    sign_cache(entry, json.dumps(data).encode())
    assert len(results("a.py", cwd=tmp_path)[1]) == 1


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b"{not json",
        b"[1, 2]",
        b'{"version": 3}',
        f'{{"version": "{__version__}", "files": [1]}}'.encode(),
        f'{{"version": "{__version__}", "files": {{"x": 1}}}}'.encode(),
    ],
)
def test_corrupt_cache_is_ignored(tmp_path, garbage):
    (tmp_path / "a.py").write_text(
        "import torch\n_C = {}\ndef f(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n"
    )
    results("a.py", cwd=tmp_path)
    for entry in (tmp_path / ".imlint_cache").glob("results-*.json"):
        sign_cache(entry, garbage)  # even signed, garbage is not read as results
    code, found, _ = results("a.py", cwd=tmp_path)
    assert code == 1 and len(found) == 1


def test_no_cache_writes_nothing(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    assert run_imlint("check", "a.py", "--no-cache", cwd=tmp_path).code == 0
    assert not (tmp_path / ".imlint_cache").exists()


def test_output_order_is_deterministic_across_jobs(tmp_path):
    synthetic_tree(tmp_path, n=40)
    outs = {
        run_imlint("check", ".", "--no-cache", "-j", j, cwd=tmp_path).out for j in ("1", "2", "3")
    }
    assert len(outs) == 1


def test_a_worker_dying_on_one_file_does_not_lose_the_others(tmp_path, monkeypatch):
    import os

    import imlint.engine
    from imlint.config import Settings
    from imlint.runner import run_files

    code = "import torch\n_C = {}\ndef f(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n"
    files = []
    for i in range(12):
        p = tmp_path / f"m{i:02d}.py"
        p.write_text(code)
        files.append(str(p))
    files.insert(5, str(tmp_path / "bad.py"))
    (tmp_path / "bad.py").write_text(code)
    real = imlint.engine.process_file

    def dies_on_bad(linter, path, *args):
        if path.endswith("bad.py"):
            os._exit(3)  # the worker process dies, as on a segfault
        return real(linter, path, *args)

    monkeypatch.setattr(imlint.engine, "process_file", dies_on_bad)  # workers are forked
    outcomes = run_files(
        files,
        Settings(root=tmp_path, extend_select=("IM005",)),
        "check",
        jobs=2,
        fast=True,
        use_cache=False,
        debug=False,
    )
    assert [o.path for o in outcomes] == files
    by_path = {o.path: o for o in outcomes}
    assert "worker ended" in by_path[str(tmp_path / "bad.py")].error
    assert all(len(by_path[f].findings) == 1 for f in files if not f.endswith("bad.py"))
