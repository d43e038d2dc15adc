"""Same findings everywhere: a check of some files (a pre-commit batch, one file, an
editor's buffer on stdin) reports exactly what `imlint check .` reports for them,
because the project index always covers the project the files belong to."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from .conftest import run_imlint

# A package whose hazards are only visible across files.
PACKAGE = {
    "pyproject.toml": "[project]\nname = 'demo'\n",
    "pkg/__init__.py": "",
    # A constructor that allocates and writes: building it lazily is IM003 (error).
    "pkg/wrapper.py": (
        "import torch\n\n\nclass Workspace:\n    def __init__(self, n):\n"
        "        self.buf = torch.empty(n)\n        self.buf.zero_()\n"
    ),
    "pkg/user.py": (
        "from pkg.wrapper import Workspace\n\n_WS = {}\n\n\ndef get(n):\n"
        "    if n not in _WS:\n        _WS[n] = Workspace(n)\n    return _WS[n]\n"
    ),
    # A getter whose buffer another module writes in place: IM001 only with that module.
    "pkg/buffers.py": (
        "import torch\n\n_B = {}\n\n\ndef scratch(n):\n    if n not in _B:\n"
        "        _B[n] = torch.empty(n)\n    return _B[n]\n"
    ),
    "pkg/consumer.py": (
        "from pkg.buffers import scratch\n\n\ndef step(x):\n    scratch(x.numel()).copy_(x)\n"
    ),
    # A buffer handed to a helper in another module that fills it in place.
    "pkg/ops.py": "def clear(buf):\n    buf.fill_(0)\n",
    "pkg/cache.py": (
        "import torch\n\nfrom pkg.ops import clear\n\n\nclass Cache:\n"
        "    def __init__(self):\n        self._t = None\n\n    def table(self, n):\n"
        "        if self._t is None:\n            self._t = torch.zeros(n)\n"
        "        clear(self._t)\n        return self._t\n"
    ),
    # Something to keep clean, and a file in a subpackage.
    "pkg/clean.py": "def add(a, b):\n    return a + b\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/deep.py": (
        "from pkg.buffers import scratch\n\n\ndef run(x):\n    scratch(4)[:2].zero_()\n"
    ),
}


def _write(root: Path) -> list[str]:
    for name, text in PACKAGE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sorted(n for n in PACKAGE if n.endswith(".py"))


def _key(item: dict) -> tuple:
    return (item["path"], item["line"], item["col"], item["code"], item["severity"],
            item["message"])  # fmt: skip


def _findings(*args: str, cwd: Path, stdin: str | None = None) -> set[tuple]:
    r = run_imlint("check", *args, "--output-format", "json", "--exit-zero", cwd=cwd, stdin=stdin)
    assert r.code == 0, r.err
    return {_key(i) for i in json.loads(r.out)}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, list[str], set[tuple]]:
    files = _write(tmp_path)
    full = _findings(".", "--no-cache", cwd=tmp_path)
    # The package must hold cross-file findings of each kind, or the test proves nothing.
    assert {(p, c, s) for p, _l, _c, c, s, _m in full} >= {
        ("pkg/user.py", "IM003", "error"),
        ("pkg/buffers.py", "IM001", "error"),
        ("pkg/cache.py", "IM001", "error"),
    }, full
    return tmp_path, files, full


@pytest.mark.parametrize("seed", range(4))
def test_random_batches_report_the_subset_of_the_whole_check(project, seed):
    """As pre-commit does: files shuffled and split into batches, one run per batch."""
    root, files, full = project
    rng = random.Random(seed)
    shuffled = files[:]
    rng.shuffle(shuffled)
    n = rng.choice([2, 3, 5])
    batches = [shuffled[i::n] for i in range(n)]
    cache = ["--no-cache"] if seed % 2 else []  # warm caches must agree too
    union: set[tuple] = set()
    for batch in batches:
        got = _findings(*batch, *cache, cwd=root)
        assert got == {f for f in full if f[0] in batch}, batch
        union |= got
    assert union == full


def test_one_file_from_a_subfolder_sees_its_project(project):
    root, _files, full = project
    got = _findings("user.py", "--no-cache", cwd=root / "pkg")
    assert {f[1:] for f in got} == {f[1:] for f in full if f[0] == "pkg/user.py"}


@pytest.mark.parametrize("name", ["pkg/user.py", "pkg/buffers.py", "pkg/cache.py"])
def test_stdin_sees_its_project(project, name):
    root, _files, full = project
    text = (root / name).read_text()
    got = _findings("--stdin-filename", name, "--no-cache", cwd=root, stdin=text)
    assert got == {f for f in full if f[0] == name}


def test_stdin_uses_the_buffer_not_the_file_on_disk(project):
    """The editor's unsaved text stands in for the file in the index."""
    root, _files, _full = project
    edited = (root / "pkg/buffers.py").read_text().replace("torch.empty(n)", "torch.ones(n)")
    got = _findings("--stdin-filename", "pkg/buffers.py", cwd=root, stdin=edited)
    assert got and all("ones" in f[5] or f[3] == "IM001" for f in got)


def test_fix_of_one_file_sees_what_check_of_the_project_sees(project):
    root, _files, _full = project
    r = run_imlint("fix", "pkg/user.py", "--unsafe-fixes", "--no-cache", cwd=root)
    assert r.code == 0, r.out + r.err
    assert "Fixed 1 finding in 1 file." in r.out
    assert "torch.inference_mode(False), torch.no_grad():" in (root / "pkg/user.py").read_text()


def test_stdin_fix_prints_only_the_fixed_source(project):
    root, _files, _full = project
    text = (root / "pkg/buffers.py").read_text()
    r = run_imlint("fix", "--stdin-filename", "pkg/buffers.py", cwd=root, stdin=text)
    assert r.code == 0, r.err
    compile(r.out, "buffers.py", "exec")
    assert "with torch.inference_mode(False):" in r.out
    assert "Fixed 1 finding in 1 file." in r.err and "Fixed" not in r.out
    # Unfixable (unsafe, not enabled): the source unchanged on stdout, the finding on stderr.
    text = (root / "pkg/user.py").read_text()
    r = run_imlint("fix", "--stdin-filename", "pkg/user.py", "-q", cwd=root, stdin=text)
    assert r.code == 1 and r.out == text and "IM003" in r.err


def test_force_exclude_applies_to_stdin(project):
    root, _files, _full = project
    (root / "pyproject.toml").write_text("[tool.imlint]\nextend-exclude = ['pkg/buffers.py']\n")
    text = (root / "pkg/buffers.py").read_text()
    args = ("--stdin-filename", "pkg/buffers.py", "--force-exclude")
    r = run_imlint("check", *args, cwd=root, stdin=text)
    assert r.code == 0 and r.out == ""
    r = run_imlint("fix", *args, cwd=root, stdin=text)
    assert r.code == 0 and r.out == text
    # Without --force-exclude the name given on stdin is checked, as a path given would be.
    assert run_imlint("check", args[0], args[1], cwd=root, stdin=text).code == 1


def test_no_project_marker_means_the_given_files_are_the_project(tmp_path):
    """With no pyproject.toml or .git above, nothing outside the given paths is read."""
    for name, text in PACKAGE.items():
        if name != "pyproject.toml":
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)
    from imlint.discovery import project_root

    if project_root(str(tmp_path)) is not None:
        pytest.skip("a pyproject.toml or .git sits above the temporary folder")
    got = _findings("pkg/user.py", "--no-cache", cwd=tmp_path)
    assert not any(f[3] == "IM003" for f in got)


# ------------------------------------------------------------------ .gitignore

LAZY = "import torch\n\n_C = {}\n\n\ndef get(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n    _C[n].zero_()\n    return _C[n]\n"


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _paths(*args: str, cwd: Path) -> set[str]:
    r = run_imlint("check", *args, "--output-format", "json", "--exit-zero", "--no-cache", cwd=cwd)
    assert r.code == 0, r.err
    return {i["path"] for i in json.loads(r.out)}


def test_gitignored_files_are_skipped_unless_asked_for(tmp_path):
    _tree(
        tmp_path,
        {
            ".gitignore": "build/\n*_generated.py\n",
            "src/a.py": LAZY,
            "build/lib/src/a.py": LAZY,
            "src/x_generated.py": LAZY,
            "src/keep/.gitignore": "!*_generated.py\n",  # a deeper file's negation wins
            "src/keep/y_generated.py": LAZY,
        },
    )
    (tmp_path / ".git").mkdir()
    assert _paths(".", cwd=tmp_path) == {"src/a.py", "src/keep/y_generated.py"}
    # From a subfolder, the root's .gitignore still applies.
    assert _paths(".", cwd=tmp_path / "src") == {"a.py", "keep/y_generated.py"}
    assert _paths(".", "--no-respect-gitignore", cwd=tmp_path) == {
        "src/a.py",
        "build/lib/src/a.py",
        "src/x_generated.py",
        "src/keep/y_generated.py",
    }
    # Paths given explicitly are checked, files and folders alike.
    assert _paths("src/x_generated.py", cwd=tmp_path) == {"src/x_generated.py"}
    assert _paths("build", cwd=tmp_path) == {"build/lib/src/a.py"}
    (tmp_path / "pyproject.toml").write_text("[tool.imlint]\nrespect-gitignore = false\n")
    assert "build/lib/src/a.py" in _paths(".", cwd=tmp_path)


def test_gitignored_files_are_not_indexed_for_others(tmp_path):
    """A copy under build/ must not stand in for the project's own module."""
    files = {name: text for name, text in PACKAGE.items() if name != "pyproject.toml"}
    _tree(tmp_path, files)
    _tree(tmp_path, {".gitignore": "build/\n", "pyproject.toml": "[project]\nname='d'\n"})
    # An ignored build copy whose constructor allocates nothing.
    _tree(
        tmp_path,
        {
            "build/lib/pkg/__init__.py": "",
            "build/lib/pkg/wrapper.py": "class Workspace:\n    def __init__(self, n):\n        pass\n",
        },
    )
    r = run_imlint("check", "pkg/user.py", "--no-cache", cwd=tmp_path)
    assert "IM003" in r.out


# ------------------------------------------------------- configuration per file

UNCONDITIONAL = "import torch\n\n\nclass A:\n    def f(self):\n        self.b = torch.empty(1)\n"


def test_each_file_is_checked_under_its_nearest_config_whatever_the_order(tmp_path):
    """A monorepo: python/ turns IM004 on and ignores IM002; kernel/ keeps the defaults."""
    _tree(
        tmp_path,
        {
            "python/pyproject.toml": (
                '[tool.imlint]\nextend-select = ["IM004"]\nignore = ["IM002"]\n'
            ),
            "python/a.py": LAZY.replace("    _C[n].zero_()\n", "") + UNCONDITIONAL,
            "kernel/pyproject.toml": "[tool.imlint]\n",
            "kernel/b.py": LAZY.replace("    _C[n].zero_()\n", "") + UNCONDITIONAL,
        },
    )

    def codes(*paths: str) -> set[tuple[str, str]]:
        r = run_imlint("check", *paths, "--output-format", "json", "--exit-zero", cwd=tmp_path)
        assert r.code == 0, r.err
        return {(i["path"], i["code"]) for i in json.loads(r.out)}

    one = codes("python/a.py", "kernel/b.py")
    two = codes("kernel/b.py", "python/a.py")
    assert one == two
    assert ("python/a.py", "IM004") in one and ("python/a.py", "IM002") not in one
    assert ("kernel/b.py", "IM004") not in one
    # Folders, from the top, agree with files.
    assert codes("kernel", "python") == one
    # --config applies one file to every path.
    r = run_imlint(
        "check", "kernel/b.py", "python/a.py", "--config", "kernel/pyproject.toml",
        "--output-format", "json", "--exit-zero", cwd=tmp_path,
    )  # fmt: skip
    assert not any(i["code"] == "IM004" for i in json.loads(r.out))


def test_a_bad_config_anywhere_is_an_error(tmp_path):
    _tree(
        tmp_path,
        {
            "a/pyproject.toml": "[tool.imlint]\n",
            "a/x.py": LAZY,
            "b/pyproject.toml": '[tool.imlint]\nselect = ["IM09"]\n',
            "b/y.py": LAZY,
        },
    )
    r = run_imlint("check", "a/x.py", "b/y.py", cwd=tmp_path)
    assert r.code == 2 and "b/pyproject.toml: error: [tool.imlint] unknown rule selector" in r.err


def test_show_settings_and_show_files(tmp_path):
    _tree(
        tmp_path,
        {
            "python/pyproject.toml": '[tool.imlint]\nextend-select = ["IM004"]\nunsafe-fixes = true\n',
            "python/a.py": LAZY,
            "python/build/x.py": LAZY,
            "python/.gitignore": "build/\n",
            "kernel/b.py": LAZY,
        },
    )
    r = run_imlint("check", "--show-settings", "python/a.py", cwd=tmp_path)
    assert r.code == 0, r.err
    assert r.out.startswith("Settings for python/a.py\n")
    lines = dict(line.split(" = ", 1) for line in r.out.splitlines()[1:])
    lines = {k.strip(): v for k, v in lines.items()}
    assert lines["config file"].endswith("python/pyproject.toml")
    assert lines["enabled rules"] == "IM001, IM002, IM003, IM004"
    assert lines["unsafe-fixes"] == "true"
    assert lines["project index root"].endswith("python")
    r = run_imlint("check", "--show-settings", "kernel/b.py", "--select", "IM001", cwd=tmp_path)
    assert "(none: defaults)" in r.out and "enabled rules          = IM001\n" in r.out
    r = run_imlint("check", "--show-files", "kernel", "python", cwd=tmp_path)
    assert r.code == 0 and r.out.splitlines() == ["kernel/b.py", "python/a.py"]
    r = run_imlint("check", "--show-settings", "--select", "IM7", cwd=tmp_path)
    assert r.code == 2 and "unknown rule selector" in r.err


# ------------------------------------------------------ paths in annotations


def test_github_and_sarif_paths_are_relative_to_the_repository(tmp_path):
    _tree(tmp_path, {".git/HEAD": "ref: refs/heads/main\n", "pkg/zz.py": LAZY})
    r = run_imlint("check", "zz.py", "--output-format", "github", cwd=tmp_path / "pkg")
    assert r.out.startswith("::error file=pkg/zz.py,line=8,"), r.out
    r = run_imlint("check", "zz.py", "--output-format", "sarif", cwd=tmp_path / "pkg")
    run = json.loads(r.out)["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "pkg/zz.py", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_github_workspace_is_the_root_of_annotations(tmp_path):
    import os
    import subprocess
    import sys

    _tree(tmp_path, {"ws/sub/pkg/zz.py": LAZY})
    env = {**os.environ, "GITHUB_WORKSPACE": str(tmp_path / "ws")}
    proc = subprocess.run(
        [sys.executable, "-m", "imlint", "check", "pkg/zz.py", "--output-format", "github"],
        cwd=tmp_path / "ws" / "sub", capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout.startswith("::error file=sub/pkg/zz.py,"), proc.stdout
