"""The command line's ecosystem options: formats, statistics, source, baseline, stdin."""

from __future__ import annotations

import json
import os

from .conftest import run_imlint

LAZY = "import torch\n\n_C = {}\n\n\ndef get(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n    return _C[n]\n"
# A kernel from outside the project fills what the getter returns (IM002).
LAZY += "\n\n\ndef use(n):\n    import fastops\n\n    fastops.fill(get(n))\n"
MUTATED = LAZY.replace("    return _C[n]\n", "    _C[n].zero_()\n    return _C[n]\n")


def test_concise_and_github_formats(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    r = run_imlint("check", "a.py", "--output-format", "concise", cwd=tmp_path)
    assert (
        r.code == 1
        and r.out.startswith("a.py:8:17: IM002 [*] Lazy buffer")
        and "Found" not in r.out
    )
    r = run_imlint("check", "a.py", "--output-format", "github", cwd=tmp_path)
    assert r.out.startswith(
        "::warning file=a.py,line=8,col=17,endLine=8,endColumn=31,title=IM002::"
    )


def test_sarif_has_rules_results_and_an_exact_fix(tmp_path):
    (tmp_path / "a.py").write_text(MUTATED)
    r = run_imlint("check", "a.py", "--output-format", "sarif", cwd=tmp_path)
    assert r.code == 1
    log = json.loads(r.out)
    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} >= {"IM001", "IM005"}
    (result,) = run["results"]
    assert result["ruleId"] == "IM001" and result["level"] == "error"
    change = result["fixes"][0]["artifactChanges"][0]
    inserted = "".join(rep["insertedContent"]["text"] for rep in change["replacements"])
    assert "with torch.inference_mode(False):" in inserted


def test_statistics(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    (tmp_path / "b.py").write_text(MUTATED)
    r = run_imlint("check", ".", "--statistics", "--no-cache", cwd=tmp_path)
    lines = [line.split("\t") for line in r.out.splitlines() if "\t" in line]
    assert [(c[0], c[1]) for c in lines] == [("1", "IM001"), ("1", "IM002")]


def test_show_source_caret(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    r = run_imlint("check", "a.py", "--show-source", cwd=tmp_path)
    lines = r.out.splitlines()
    i = next(k for k, line in enumerate(lines) if "_C[n] = torch.empty(n)" in line)
    caret = lines[i + 1]
    code_col = lines[i].index("torch.empty")
    assert caret.index("^") == code_col and caret.count("^") == len("torch.empty(n)")
    assert "\x1b[" not in r.out  # not a terminal: no colour


def test_baseline_survives_unrelated_edits_and_reports_new_sites(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    r = run_imlint("check", "a.py", "--write-baseline", "base.json", cwd=tmp_path)
    assert r.code == 0 and "Wrote 1 finding to baseline base.json." in r.out
    (tmp_path / "a.py").write_text("# header\n" * 20 + LAZY)
    r = run_imlint("check", "a.py", "--baseline", "base.json", cwd=tmp_path)
    assert r.code == 0, r.out
    # Its own container: a write to an entry of ``_C`` under any key reaches the
    # baselined site too (and changes its code).
    new_site = "\n\n_D = {}\n\n\ndef other(n):\n    if n not in _D:\n        _D[n] = torch.zeros(n)\n    _D[n].zero_()\n"
    (tmp_path / "a.py").write_text("# header\n" * 20 + LAZY + new_site)
    r = run_imlint(
        "check", "a.py", "--baseline", "base.json", "--output-format", "json", cwd=tmp_path
    )
    assert r.code == 1
    assert [f["function"] for f in json.loads(r.out)] == ["other"]
    r = run_imlint("check", "a.py", "--baseline", "missing.json", cwd=tmp_path)
    assert r.code == 2 and "missing.json" in r.err


def test_stdin_filename_check_and_fix(tmp_path):
    r = run_imlint("check", "--stdin-filename", "pkg/mod.py", cwd=tmp_path, stdin=LAZY)
    assert r.code == 1 and r.out.startswith("pkg/mod.py:8:17: IM002")
    r = run_imlint("fix", "--stdin-filename", "pkg/mod.py", cwd=tmp_path, stdin=LAZY)
    assert r.code == 0 and "with torch.inference_mode(False):" in r.out
    r = run_imlint("check", "--stdin-filename", "x.py", cwd=tmp_path, stdin="def (:\n")
    assert r.code == 2 and "x.py: error: syntax error" in r.err


def test_exit_zero_and_quiet(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    r = run_imlint("check", "a.py", "--exit-zero", "--quiet", cwd=tmp_path)
    assert r.code == 0 and r.out.count("\n") == 1 and "Found" not in r.out


def test_rules_and_rule_commands():
    r = run_imlint("rules")
    assert r.code == 0
    for code in ("IM001", "IM005", "IM004"):
        assert code in r.out
    r = run_imlint("rule", "IM001")
    assert r.code == 0 and "## Why is this bad?" in r.out and "inference tensor" in r.out
    assert run_imlint("rule", "IM999").code == 2


def test_no_color_is_respected(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    env_code = (
        "import os, sys, io\n"
        "from imlint.report import want_color\n"
        "class T(io.StringIO):\n    def isatty(self): return True\n"
        "print(want_color(T(), {'NO_COLOR': '1'}), want_color(T(), {}))\n"
    )
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", env_code], capture_output=True, text=True, env={**os.environ}
    )
    assert out.stdout.split() == ["False", "True"]
