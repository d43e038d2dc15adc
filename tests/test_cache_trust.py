"""The cache comes from the tree under review: it must never change a finding unless
this user wrote it on this machine, and it must never be a way to hang the run, eat
memory or write outside the tree."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from .conftest import cache_payload, run_imlint

LAZY = (
    "import torch\n\n_C = {}\n\n\ndef get(n):\n    if n not in _C:\n"
    "        _C[n] = torch.empty(n)\n    _C[n].zero_()\n    return _C[n]\n"
)


def _json(*args: str, cwd: Path) -> tuple[list[tuple], str]:
    r = run_imlint("check", *args, "--output-format", "json", "--exit-zero", cwd=cwd)
    assert r.code == 0, r.err
    return [(i["path"], i["line"], i["code"], i["message"]) for i in json.loads(r.out)], r.err


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "m.py").write_text(LAZY)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "n.py").write_text(LAZY.replace("_C", "_D"))
    return tmp_path


def test_a_forged_results_cache_changes_nothing(tree):
    truth, _ = _json(".", "--no-cache", cwd=tree)
    assert len(truth) == 2
    _json(".", cwd=tree)  # writes the cache
    [entry] = (tree / ".imlint_cache").glob("results-*.json")
    data = json.loads(cache_payload(entry))
    for item in data["files"].values():
        item["findings"] = []  # what a pull request would plant to pass the gate
    forged = json.dumps(data).encode()
    entry.write_bytes(forged)  # plain JSON, as an older imlint wrote it
    assert _json(".", cwd=tree)[0] == truth
    entry.write_bytes(b"imlint-cache 1\n" + b"0" * 64 + b"\n" + forged)  # a made-up tag
    got, err = _json(".", cwd=tree)
    assert got == truth
    assert err.count("ignoring cache") == 1 and "not written by imlint" in err


def test_forged_summary_and_project_caches_change_nothing(tree):
    truth, _ = _json(".", "--no-cache", cwd=tree)
    _json(".", cwd=tree)
    for entry in (tree / ".imlint_cache").iterdir():
        if entry.name.endswith(".marshal") or entry.name.endswith(".json"):
            entry.write_bytes(b"imlint-cache 1\n" + b"f" * 64 + b"\n" + b"\x00" * 64)
    got, err = _json(".", cwd=tree)
    assert got == truth and "ignoring cache" in err


def test_a_cache_from_another_user_or_machine_is_not_trusted(tree, tmp_path_factory):
    """The same files, written under another key (another machine), are ignored."""
    truth, _ = _json(".", "--no-cache", cwd=tree)
    _json(".", cwd=tree)
    env_key = Path(os.environ["XDG_CACHE_HOME"]) / "imlint" / "key"
    env_key.write_bytes(os.urandom(32))  # this machine now has another key
    got, err = _json(".", cwd=tree)
    assert got == truth and "ignoring cache" in err


def test_the_key_is_private(tree):
    _json(".", cwd=tree)
    key = Path(os.environ["XDG_CACHE_HOME"]) / "imlint" / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert len(key.read_bytes()) == 32


def test_a_cache_folder_that_is_a_link_is_neither_read_nor_written(tree, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (tree / ".imlint_cache").symlink_to(outside, target_is_directory=True)
    truth, _ = _json(".", "--no-cache", cwd=tree)
    got, err = _json(".", cwd=tree)
    assert got == truth
    assert list(outside.iterdir()) == []
    assert "not a folder" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_planted_fifos_links_and_devices_do_not_hang_or_eat_memory(tree, tmp_path_factory):
    truth, _ = _json(".", "--no-cache", cwd=tree)
    _json(".", cwd=tree)
    cache = tree / ".imlint_cache"
    names = sorted(p.name for p in cache.iterdir() if p.name != ".gitignore")
    outside = tmp_path_factory.mktemp("outside")
    for i, name in enumerate(names):
        (cache / name).unlink()
        if i % 3 == 0:
            os.mkfifo(cache / name)
        elif i % 3 == 1:
            (cache / name).symlink_to("/dev/zero")
        else:
            (cache / name).symlink_to(outside / name)
    (cache / ".gitignore").unlink()
    (cache / ".gitignore").symlink_to(outside / "gitignore")
    got, _err = _json(".", cwd=tree)  # run_imlint's timeout would catch a hang
    assert got == truth
    assert list(outside.iterdir()) == []  # nothing written through a planted link


def test_our_own_cache_is_still_used(tree):
    """Trust is not paranoia: a second run reuses what the first wrote."""
    _json(".", cwd=tree)
    r = run_imlint("check", ".", "--statistics", "--explain-reach", cwd=tree)
    assert r.code == 1 and "ignoring cache" not in r.err
