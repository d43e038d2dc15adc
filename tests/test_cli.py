"""The `imlint check` command: output, exit codes, config, suppressions and bad input."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, expected_markers, fixture_text, run_imlint

LAZY = """\
import torch

_CACHE = {}


def get(n):
    if n not in _CACHE:
        _CACHE[n] = torch.empty(n)
    return _CACHE[n]


def use(n):
    import fastops

    fastops.fill(get(n))
"""
CLEAN = "import torch\n\n\ndef f(n):\n    return torch.empty(n)\n"


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def test_finding_output_and_exit_1(tmp_path):
    write(tmp_path, "pkg/a.py", LAZY)
    r = run_imlint("check", "pkg", cwd=tmp_path)
    assert r.code == 1, r.err
    first = r.out.splitlines()[0]
    assert first.startswith(f"pkg{os.sep}a.py:8:21: IM002 [*] Lazy buffer `_CACHE[n]`")
    assert "Found 1 finding (1 warning) in 1 file." in r.out


def test_clean_exit_0(tmp_path):
    write(tmp_path, "a.py", CLEAN)
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 0 and "All checks passed" in r.out


def test_default_path_is_cwd_and_skips_git_venv(tmp_path):
    write(tmp_path, "a.py", LAZY)
    write(tmp_path, ".git/hooks/x.py", LAZY)
    write(tmp_path, "venv/lib/y.py", LAZY)
    write(tmp_path, "env2/pyvenv.cfg", "home = /usr\n")
    write(tmp_path, "env2/lib/z.py", LAZY)
    write(tmp_path, "notes.txt", LAZY)
    r = run_imlint("check", "--output-format", "json", cwd=tmp_path)
    assert r.code == 1
    assert [d["path"] for d in json.loads(r.out)] == ["a.py"]


def test_json_output_is_a_list_of_stable_objects(tmp_path):
    write(tmp_path, "a.py", LAZY)
    r = run_imlint("check", "a.py", "--output-format", "json", cwd=tmp_path)
    (item,) = json.loads(r.out)
    assert set(item) == {
        "path",
        "line",
        "col",
        "end_line",
        "end_col",
        "code",
        "severity",
        "message",
        "fixable",
        "unfixable_reason",
        "applicability",
        "unsafe_reason",
        "function",
        "statement",
        "armed",
        "tier",
        "observed",
        "reach",
        "kept_line",
        "url",
        "fix",
    }
    assert item["url"].endswith("/IM002.md")
    assert item["fix"]["applicability"] == "safe"
    assert item["applicability"] == "safe" and item["unsafe_reason"] is None
    assert item["armed"] is False and item["reach"].startswith("no path found")
    assert item["kept_line"] is None  # allocated in the statement that keeps it
    assert (item["line"], item["col"], item["code"], item["severity"]) == (
        8,
        21,
        "IM002",
        "warning",
    )
    assert item["function"] == "get"


@pytest.mark.parametrize(
    "args",
    [
        ("--select", "IM999"),
        ("--select", "IM01"),  # a prefix of no rule: would turn every rule off
        ("--select", "IM001,XYZ"),
        ("--extend-select", "IM9"),
        ("--ignore", "IM0001"),
    ],
)
def test_unknown_selectors_on_the_command_line_are_errors(tmp_path, args):
    write(tmp_path, "a.py", LAZY)
    r = run_imlint("check", "a.py", *args, cwd=tmp_path)
    assert r.code == 2 and r.out == ""
    assert "unknown rule selector" in r.err and "known: IM001" in r.err


@pytest.mark.parametrize(
    "table",
    [
        'select = ["IM01"]',
        'extend-select = ["IM7"]',
        'ignore = ["X"]',
        'per-file-ignores = { "a.py" = ["IM0002"] }',
    ],
)
def test_unknown_selectors_in_the_config_are_errors(tmp_path, table):
    write(tmp_path, "a.py", LAZY)
    write(tmp_path, "pyproject.toml", f"[tool.imlint]\n{table}\n")
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 2 and "pyproject.toml: error: [tool.imlint] unknown rule selector" in r.err


def test_known_selectors_pass(tmp_path):
    write(tmp_path, "a.py", LAZY)
    for selector in ("ALL", "IM", "IM0", "im002", "IM00"):
        assert run_imlint("check", "a.py", "--select", selector, cwd=tmp_path).code == 1


def test_repeated_flags_accumulate(tmp_path):
    write(tmp_path, "a.py", LAZY)
    unconditional = "import torch\nclass A:\n    def f(self):\n        self.b = torch.empty(1)\n"
    write(tmp_path, "b.py", unconditional)
    r = run_imlint(
        "check", ".", "--select", "IM002", "--select", "IM004", "--output-format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert sorted(i["code"] for i in json.loads(r.out)) == ["IM002", "IM004"]
    r = run_imlint(
        "check", ".", "--ignore", "IM002", "--ignore", "IM001", "--extend-select", "IM004",
        "--output-format", "json", cwd=tmp_path,
    )  # fmt: skip
    assert [i["code"] for i in json.loads(r.out)] == ["IM004"]


def _apply_edits(text: str, edits: list[dict]) -> str:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(loc: dict) -> int:
        return offsets[loc["row"] - 1] + loc["column"] - 1

    for e in sorted(edits, key=lambda e: at(e["location"]), reverse=True):
        text = text[: at(e["location"])] + e["content"] + text[at(e["end_location"]) :]
    return text


def test_json_fix_edits_give_what_fix_writes(tmp_path):
    """Unsafe fixes included (marked so): applying a finding's edits gives the file
    `imlint fix --unsafe-fixes` writes; errors come last with a null code."""
    computed = LAZY.replace("torch.empty(n)", "torch.empty(n) * 2")
    write(tmp_path, "a.py", computed)
    write(tmp_path, "bad.py", "def (:\n")
    r = run_imlint("check", ".", "--output-format", "json", cwd=tmp_path)
    items = json.loads(r.out)
    assert r.code == 2
    (item,) = [i for i in items if i["code"]]
    assert item["fix"]["applicability"] == "unsafe" and item["fixable"] is False
    fixed = _apply_edits(computed, item["fix"]["edits"])
    assert run_imlint("fix", "a.py", "--unsafe-fixes", cwd=tmp_path).code == 0
    assert fixed == (tmp_path / "a.py").read_text()
    (error,) = [i for i in items if i["code"] is None]
    assert error["path"] == "bad.py" and "syntax error" in error["message"]


def test_caches_are_kept_per_python_version(tmp_path, monkeypatch):
    """A syntax error under one Python is not replayed under another."""
    from imlint import runner
    from imlint.config import Settings

    names = set()
    for version in ("py3.11", "py3.12"):
        monkeypatch.setattr(runner, "_PYTHON", version)
        settings = Settings(root=tmp_path)
        names.add(runner.ResultCache(tmp_path, settings).file.name)
        names.add(runner.SummaryCache(tmp_path, settings).file.name)
        names.add(runner.ProjectCache(tmp_path, settings).file.name)
    assert len(names) == 6


def test_select_and_ignore(tmp_path):
    write(tmp_path, "a.py", LAZY)
    assert run_imlint("check", "a.py", "--ignore", "IM002", cwd=tmp_path).code == 0
    assert run_imlint("check", "a.py", "--select", "IM001", cwd=tmp_path).code == 0
    assert run_imlint("check", "a.py", "--select", "IM", cwd=tmp_path).code == 1
    unconditional = "import torch\nclass A:\n    def f(self):\n        self.b = torch.empty(1)\n"
    write(tmp_path, "b.py", unconditional)
    assert run_imlint("check", "b.py", cwd=tmp_path).code == 0
    r = run_imlint("check", "b.py", "--extend-select", "IM004", cwd=tmp_path)
    assert r.code == 1 and "IM004" in r.out


@pytest.mark.parametrize(
    ("comment", "suppressed"),
    [
        ("  # imlint: ignore[IM002]", True),
        ("  # imlint: ignore", True),
        ("  # noqa: IM002", True),
        ("  # noqa", True),
        ("  # NOQA:IM001, IM002", True),
        ("  # imlint: ignore[IM001]", False),
        ("  # noqa: E501", False),
    ],
)
def test_suppressions(tmp_path, comment, suppressed):
    text = LAZY.replace("torch.empty(n)\n", f"torch.empty(n){comment}\n")
    write(tmp_path, "a.py", text)
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == (0 if suppressed else 1), r.out


def test_config_from_nearest_pyproject(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.imlint]\nignore = ["IM002"]\nexclude = ["gen"]\n')
    write(tmp_path, "src/a.py", LAZY)
    write(tmp_path, "src/gen/b.py", LAZY.replace("torch.empty", "torch.zeros"))
    r = run_imlint("check", "src", cwd=tmp_path)
    assert r.code == 0, r.out
    # an explicit --select wins over the config's ignore; the exclude still applies
    r = run_imlint("check", "src", "--select", "IM002", cwd=tmp_path)
    assert r.code == 1
    assert "src/a.py" in r.out.replace(os.sep, "/")
    assert "src/gen" not in r.out.replace(os.sep, "/")


def test_per_file_ignores_and_extra_allocators(tmp_path):
    write(
        tmp_path,
        "pyproject.toml",
        '[tool.imlint]\nextra-allocators = ["kern.Workspace"]\n'
        '[tool.imlint.per-file-ignores]\n"legacy/*.py" = ["IM003"]\n',
    )
    code = (
        "from kern import Workspace\n_C = {}\ndef f(n):\n    if n not in _C:\n"
        "        _C[n] = Workspace(n)\n    _C[n].buf.zero_()\n"
    )
    write(tmp_path, "new/a.py", code)
    write(tmp_path, "legacy/b.py", code)
    r = run_imlint("check", "--output-format", "json", cwd=tmp_path)
    assert [(d["path"].replace(os.sep, "/"), d["line"]) for d in json.loads(r.out)] == [
        ("new/a.py", 5)
    ]


def test_explicit_file_checked_even_if_excluded_unless_forced(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.imlint]\nexclude = ["gen"]\n')
    write(tmp_path, "gen/a.py", LAZY)
    assert run_imlint("check", "gen/a.py", cwd=tmp_path).code == 1
    assert run_imlint("check", "gen/a.py", "--force-exclude", cwd=tmp_path).code == 0


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        ('[tool.imlint]\nselct = ["IM001"]\n', "unknown key(s) in [tool.imlint]: selct"),
        ('[tool.imlint]\nselect = "IM001"\n', "select must be a list of strings"),
        (
            "[tool.imlint]\nextra-allocators = [1, 2]\n",
            "extra-allocators must be a list of strings",
        ),
        ('[tool.imlint]\nper-file-ignores = ["x"]\n', "per-file-ignores must be a table"),
        ("[tool.imlint\nselect = [\n", "invalid TOML"),
    ],
)
def test_broken_config_is_one_line_and_exit_2(tmp_path, config, needle):
    write(tmp_path, "pyproject.toml", config)
    write(tmp_path, "a.py", LAZY)
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "pyproject.toml: error:" in lines[0]
    assert "Traceback" not in r.err


def test_missing_explicit_config(tmp_path):
    r = run_imlint("check", "--config", "nope.toml", ".", cwd=tmp_path)
    assert r.code == 2 and "nope.toml: error: config file not found" in r.err


BAD_INPUTS = {
    "syntax.py": ("def f(:\n    pass\n", "syntax error at 1:"),
    "py2.py": ('print "hello"\n', "syntax error"),
    "latin1.py": (b"x = '\xe9t\xe9'\n", "cannot decode as utf-8"),
    "binary.py": (b"\x89PNG\r\n\x1a\n\x00\x00", "NUL bytes"),
    "cookie.py": (b"# -*- coding: no-such-codec -*-\nx = 1\n", "encoding"),
}


def test_bad_files_are_one_line_each_and_others_still_checked(tmp_path):
    for name, (content, _) in BAD_INPUTS.items():
        write(tmp_path, f"src/{name}", content)
    write(tmp_path, "src/good.py", LAZY)
    write(tmp_path, "src/empty.py", "")
    (tmp_path / "src/dir.py").mkdir()
    write(tmp_path, "src/dir.py/inner.py", CLEAN)
    os.symlink(tmp_path / "src/missing-target.py", tmp_path / "src/dangling.py")
    os.symlink(tmp_path / "src/loop.py", tmp_path / "src/loop.py")
    r = run_imlint("check", "src", cwd=tmp_path)
    assert r.code == 2
    assert "Traceback" not in r.err
    err_lines = r.err.strip().splitlines()
    by_file = {Path(line.split(": error: ")[0]).name: line for line in err_lines}
    for name, (_, needle) in BAD_INPUTS.items():
        assert needle in by_file[name], by_file.get(name)
    assert "dangling symbolic link" in by_file["dangling.py"]
    assert "symbolic link loop" in by_file["loop.py"]
    assert len(err_lines) == len(BAD_INPUTS) + 2
    # the good file was still checked; the empty file is valid Python and clean
    assert "good.py:8:21: IM002 [*]" in r.out
    assert "empty.py" not in r.err


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root reads everything")
def test_unreadable_file(tmp_path):
    p = write(tmp_path, "a.py", LAZY)
    p.chmod(0)
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 2 and "a.py: error: permission denied" in r.err


def test_unreadable_file_as_root_via_directory(tmp_path):
    # Root can read any mode bits, so make the path unreadable another way: a file
    # that vanishes between discovery and read is reported the same way.
    r = run_imlint("check", "gone.py", cwd=tmp_path)
    assert r.code == 2 and "gone.py: error: no such file or directory" in r.err


def test_path_given_twice_is_checked_once(tmp_path):
    write(tmp_path, "a.py", LAZY)
    r = run_imlint("check", "a.py", "./a.py", ".", "--output-format", "json", cwd=tmp_path)
    assert len(json.loads(r.out)) == 1


def test_findings_and_errors_exit_2(tmp_path):
    write(tmp_path, "a.py", LAZY)
    write(tmp_path, "b.py", "def (:\n")
    r = run_imlint("check", ".", cwd=tmp_path)
    assert r.code == 2 and "IM002" in r.out


def test_usage_error_exit_2(tmp_path):
    r = run_imlint("check", "--output-format", "yaml", cwd=tmp_path)
    assert r.code == 2


def test_check_on_bundled_fixtures_reports_every_marker():
    r = run_imlint("check", "fixtures", "--output-format", "json", cwd=FIXTURES.parent)
    assert r.code == 1, r.err
    got = sorted((Path(d["path"]).resolve(), d["line"], d["code"]) for d in json.loads(r.out))
    want = sorted(
        (p.resolve(), line, code)
        for p in FIXTURES.rglob("*.py")
        if not p.name.endswith(".fixed.py")
        for line, code in expected_markers(fixture_text(p))
    )
    assert got == want


def test_repo_itself_is_clean():
    r = run_imlint("check", ".", cwd=FIXTURES.parent)
    assert r.code == 0, r.out + r.err


def test_version():
    r = run_imlint("--version")
    assert r.code == 0 and "imlint" in r.out
