"""imlint never imports or executes the code it checks."""

from __future__ import annotations

from .conftest import run_imlint

PAYLOAD = """\
import pathlib
pathlib.Path(__file__).with_name("MARKER").write_text("executed")
import torch

_C = {}


def get(n):
    if n not in _C:
        _C[n] = torch.empty(n)
    return _C[n]


def use(n):
    import fastops

    fastops.fill(get(n))
"""


def test_checked_code_conftest_and_config_are_never_executed(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name in ("__init__.py", "conftest.py", "setup.py", "mod.py", "__main__.py"):
        (pkg / name).write_text(PAYLOAD)
    (tmp_path / "pyproject.toml").write_text('[tool.imlint]\nextra-allocators = ["pkg.mod.get"]\n')
    r = run_imlint("check", "pkg", cwd=tmp_path)
    assert r.code == 1, r.err
    assert not (pkg / "MARKER").exists()
    assert not (tmp_path / "MARKER").exists()
