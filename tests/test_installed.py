"""Installed packages: a library's allocating constructor, read (never imported) from
the target environment's site-packages, makes the project's lazy store of it IM003."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from .conftest import run_imlint

WRAPPER = """
    import torch


    class MoEWrapper:
        def __init__(self, n):
            self.workspace = torch.empty(n, 1024)

        def run(self, x):
            self.workspace.zero_()
            return x
    """
LAYER = """
    from extlib import MoEWrapper


    class Layer:
        def forward(self, x):
            if self._wrapper is None:
                self._wrapper = MoEWrapper(x.shape[0])
            return self._wrapper.run(x)
    """


def build_wheel(folder: Path, wrapper: str, requires_torch: bool = True) -> Path:
    """A wheel of ``extlib`` 1.2.3, built by hand (no build backend needed)."""
    files = {
        "extlib/__init__.py": "from extlib.wrapper import MoEWrapper\n",
        "extlib/wrapper.py": textwrap.dedent(wrapper).lstrip(),
        "extlib-1.2.3.dist-info/METADATA": "Metadata-Version: 2.1\nName: extlib\nVersion: 1.2.3\n"
        + ("Requires-Dist: torch>=2.0\n" if requires_torch else ""),
        "extlib-1.2.3.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
        "extlib-1.2.3.dist-info/top_level.txt": "extlib\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{name},sha256={digest.decode()},{len(text.encode())}")
    record.append("extlib-1.2.3.dist-info/RECORD,,")
    files["extlib-1.2.3.dist-info/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / "extlib-1.2.3-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return wheel


def make_env(root: Path, wrapper: str = WRAPPER, requires_torch: bool = True) -> str:
    """A virtual environment with ``extlib`` installed by pip; its interpreter."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    install(root, python, wrapper, requires_torch)
    return python


def install(root: Path, python: str, wrapper: str, requires_torch: bool = True) -> None:
    code = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['purelib']))"
    purelib = json.loads(
        subprocess.run([python, "-c", code], capture_output=True, text=True).stdout
    )
    wheel = build_wheel(root, wrapper, requires_torch)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--upgrade",
         "--disable-pip-version-check", "--target", purelib, str(wheel)],
        check=True,
    )  # fmt: skip


def check(root: Path, *args: str) -> list[dict]:
    r = run_imlint("check", "app", "--output-format", "json", *args, cwd=root / "proj")
    assert r.code in (0, 1), r.err
    return [d for d in json.loads(r.out) if d["code"] == "IM003"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    app = tmp_path / "proj" / "app"
    app.mkdir(parents=True)
    (app / "__init__.py").write_text("")
    (app / "layer.py").write_text(textwrap.dedent(LAYER).lstrip())
    return tmp_path


def test_an_installed_librarys_allocating_constructor_is_an_allocating_call(project):
    python = make_env(project)
    (found,) = check(project, "--python", python)
    assert found["line"] == 7
    assert "MoEWrapper.__init__ allocates self.workspace via torch.empty" in found["message"]
    # the interpreter running imlint has no extlib: nothing is known of MoEWrapper
    assert check(project) == []
    r = run_imlint("check", "app", "--python", python, "--explain-reach", cwd=project / "proj")
    assert "installed: extlib 1.2.3" in r.out


def test_summaries_are_cached_per_user_and_follow_a_reinstall(project):
    python = make_env(project)
    assert len(check(project, "--python", python)) == 1
    cached = list((Path(os.environ["XDG_CACHE_HOME"]) / "imlint" / "packages").glob("extlib-*"))
    assert len(cached) == 1  # outside the checked tree
    assert not list((project / "proj").rglob("extlib-*"))
    assert len(check(project, "--python", python)) == 1  # from the cache
    # the same version reinstalled without the in-place write: read anew
    install(project, python, WRAPPER.replace("self.workspace.zero_()", "pass"))
    assert check(project, "--python", python) == []


def test_opting_out_per_package_or_altogether(project):
    python = make_env(project)
    config = project / "proj" / "pyproject.toml"
    for table in ('skip-installed = ["extlib"]', "installed-packages = false"):
        config.write_text(f"[tool.imlint]\n{table}\n")
        assert check(project, "--python", python) == [], table


def test_packages_not_built_on_torch_are_not_read(project):
    python = make_env(project, requires_torch=False)
    assert check(project, "--python", python) == []


def test_an_interpreter_that_cannot_be_asked_is_a_one_line_error(project):
    r = run_imlint("check", "app", "--python", str(project / "nope"), cwd=project / "proj")
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("error: --python") and len(r.err.strip().splitlines()) == 1


def test_only_the_modules_the_project_reaches_are_read(tmp_path: Path) -> None:
    """A re-export in the package's ``__init__`` leads to the module defining the name,
    and that module's imports are read; modules nothing reaches are not."""
    from imlint.installed import Library, reachable, wanted_names
    from imlint.options import AnalysisOptions
    from imlint.project import summarize

    site = tmp_path / "site-packages"
    files = {
        "extlib/__init__.py": "from extlib.wrapper import MoEWrapper\nfrom extlib import other\n"
        "from otherlib import thing\n",
        "extlib/wrapper.py": "from extlib.util import workspace\nimport extlib.sub.b\n"
        + textwrap.dedent(WRAPPER)
        + "\ndef g():\n    return extlib.sub.b.h()\n",
        "extlib/util.py": "import torch\ndef workspace(n):\n    return torch.empty(n)\n",
        "extlib/sub/__init__.py": "",
        "extlib/sub/b.py": "def h():\n    pass\n",
        "extlib/other.py": "from extlib.unused import helper\n",
        "extlib/unused.py": "def helper():\n    pass\n",
        "otherlib/__init__.py": "def thing():\n    pass\n",
    }
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    layer = textwrap.dedent(LAYER) + "\n\ndef other():\n    import extlib\n    extlib.thing()\n"
    project = [summarize("layer.py", layer, AnalysisOptions())]
    asked: list[str] = []

    def summaries(paths: list[str]) -> dict[str, tuple[object, ...]]:
        asked.extend(paths)
        return {p: summarize(p, Path(p).read_text(), AnalysisOptions()).to_data() for p in paths}

    known: dict[str, tuple[object, ...]] = {}
    lib = Library("extlib", site / "extlib", "1.2.3")
    read = reachable(lib, wanted_names(project), summaries, known)
    names = sorted(Path(s.path).relative_to(site).as_posix() for s in read)
    # ``extlib.thing`` is ``otherlib``'s: another package, not read as ``extlib``'s;
    # ``extlib.sub.b.h()`` in the wrapper reads ``sub/b.py``
    assert names == [
        "extlib/__init__.py",
        "extlib/sub/__init__.py",
        "extlib/sub/b.py",
        "extlib/util.py",
        "extlib/wrapper.py",
    ]
    assert sorted(known) == sorted(asked) and len(asked) == len(set(asked))
    # From what is known already, nothing is summarised again.
    asked.clear()
    again = reachable(lib, wanted_names(project), summaries, known)
    assert asked == [] and sorted(s.path for s in again) == sorted(s.path for s in read)
