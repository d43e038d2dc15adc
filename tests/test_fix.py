"""`imlint fix`: byte-for-byte fixtures, invariants, and the command line."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from imlint.rules import ALL_RULES

from imlint.config import Settings, load_settings
from imlint.engine import Linter, read_source

from .conftest import FIXTURES, REPO, project_facts, run_imlint

PAIRS = sorted(
    (p, p.with_name(p.name[: -len(".py")] + ".fixed.py"))
    for p in FIXTURES.rglob("*.py")
    if not p.name.endswith(".fixed.py")
    and p.with_name(p.name[: -len(".py")] + ".fixed.py").exists()
)
IDS = [str(b.relative_to(FIXTURES)) for b, _ in PAIRS]


@pytest.fixture(scope="module")
def linter():
    """The fixtures' settings, unsafe fixes on: the .fixed.py files are what
    ``imlint fix --unsafe-fixes`` makes."""
    settings = load_settings(FIXTURES / "pyproject.toml")
    settings.unsafe_fixes = True
    return Linter(settings)


def fix_bytes(linter: Linter, path: Path, before: Path | None = None) -> bytes:
    """``imlint fix`` on a fixture, with the fixture project's index (``before``: check
    ``path`` in that file's place)."""
    source = read_source(str(path))
    where = before or path
    facts = project_facts(linter, where, source.text)
    return source.encode(linter.fix_text(str(where), source.text, facts).text)


def test_every_fixable_fixture_has_an_after_file(linter):
    flagged = {p for p in FIXTURES.rglob("*.py") if b"# expect:" in p.read_bytes()}
    fixable = {
        p
        for p in flagged
        if not p.name.endswith(".fixed.py")
        and any(
            f.fixable
            for f in linter.check_text(str(p), read_source(str(p)).text, project_facts(linter, p))
        )
    }
    assert fixable == {b for b, _ in PAIRS}


@pytest.mark.parametrize(("before", "after"), PAIRS, ids=IDS)
def test_fix_matches_after_file_byte_for_byte(linter, before, after):
    assert fix_bytes(linter, before) == after.read_bytes()


@pytest.mark.parametrize(("before", "after"), PAIRS, ids=IDS)
def test_fix_is_idempotent_and_leaves_nothing_fixable(linter, before, after):
    assert fix_bytes(linter, after, before) == after.read_bytes()
    text = read_source(str(after)).text
    remaining = linter.check_text(str(before), text, project_facts(linter, before, text))
    assert [f for f in remaining if f.fixable] == []


@pytest.mark.parametrize(("before", "after"), PAIRS, ids=IDS)
def test_fixed_file_compiles(before, after):
    compile(after.read_bytes(), str(after), "exec", dont_inherit=True)


def test_unfixable_shapes_are_reported_with_reasons(linter):
    path = FIXTURES / "IM002" / "unfixable.py"
    source = read_source(str(path))
    report = linter.fix_text(str(path), source.text)
    assert report.text == source.text and report.fixed == 0
    reasons = [f.unfixable_reason for f in report.remaining]
    assert len(reasons) == 5 and all(reasons)
    assert any("lambda" in r or "generator" in r for r in reasons)
    assert any("yield/await" in r for r in reasons)


@pytest.mark.parametrize(
    ("rule", "index"),
    [(r, i) for r in ALL_RULES for i, ex in enumerate(r.INVALID) if ex.fixed is not None],
    ids=lambda v: getattr(v, "code", str(v)),
)
def test_rule_examples_fix_to_their_fixed_text(rule, index):
    example = rule.INVALID[index]
    linter = Linter(Settings(select=(rule.code,), unsafe_fixes=True))
    assert linter.fix_text("example.py", example.code).text == example.fixed


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
@pytest.mark.parametrize(("before", "after"), PAIRS, ids=IDS)
def test_ruff_format_stable_where_input_was(before, after):
    def formatted(p: Path) -> bool:
        cmd = ["ruff", "format", "--isolated", "--check", "-q", str(p)]
        return subprocess.run(cmd, capture_output=True).returncode == 0

    if formatted(before):
        assert formatted(after)


def _functions(path: Path) -> dict[str, str]:
    tree = ast.parse(path.read_text())
    return {n.name: ast.dump(n) for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("variant", ["page_split_unguarded_both", "page_split_unguarded_dst"])
def test_fixed_kernel_variants_match_the_reference_module(variant):
    module = _functions(REPO / "kernels" / "page_split.py")
    fixed = _functions(FIXTURES / "kernels" / f"{variant}.fixed.py")
    for name in ("get_dst_buffer", "get_page_mask"):
        assert fixed[name] == module[name], name


# ---- the command line


LAZY = "import torch\n\n_C = {}\n\n\ndef get(n):\n    if n not in _C:\n        _C[n] = torch.empty(n)\n    return _C[n]\n"
# A kernel from outside the project fills what the getter returns (IM002).
LAZY += "\n\n\ndef use(n):\n    import fastops\n\n    fastops.fill(get(n))\n"
FIXED = (
    "import torch\n\n_C = {}\n\n\ndef get(n):\n    if n not in _C:\n"
    "        with torch.inference_mode(False):\n            _C[n] = torch.empty(n)\n    return _C[n]\n"
) + LAZY.split("return _C[n]\n", 1)[1]
UNFIXABLE = LAZY.replace("        _C[n] = torch.empty(n)", "        t = 1; _C[n] = torch.empty(n)")


def test_fix_command_writes_and_summarises(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    (tmp_path / "b.py").write_text(LAZY.replace("_C", "_D"))
    (tmp_path / "a.py").chmod(0o640)
    r = run_imlint("fix", ".", cwd=tmp_path)
    assert r.code == 0, r.out + r.err
    assert "Fixed 2 findings in 2 files." in r.out
    assert (tmp_path / "a.py").read_text() == FIXED
    assert stat.S_IMODE((tmp_path / "a.py").stat().st_mode) == 0o640
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".imlint-")]
    again = run_imlint("fix", ".", cwd=tmp_path)
    assert again.code == 0 and "No fixes applied." in again.out


def test_check_fix_is_the_same_as_fix(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    r = run_imlint("check", "--fix", "a.py", cwd=tmp_path)
    assert r.code == 0 and (tmp_path / "a.py").read_text() == FIXED


@pytest.mark.parametrize("command", [("fix", "--diff"), ("check", "--diff")])
def test_diff_writes_nothing(tmp_path, command):
    (tmp_path / "a.py").write_text(LAZY)
    r = run_imlint(*command, "a.py", cwd=tmp_path)
    assert r.code == 0, r.out + r.err  # every finding would be fixed, as `fix` would exit
    assert "+        with torch.inference_mode(False):" in r.out
    assert r.out.startswith("--- a.py\n+++ a.py\n")
    assert "Would fix 1 finding in 1 file." in r.err
    assert (tmp_path / "a.py").read_text() == LAZY


def test_diff_exits_1_for_what_the_fix_would_leave(tmp_path):
    (tmp_path / "a.py").write_text(UNFIXABLE)
    r = run_imlint("fix", "--diff", "a.py", cwd=tmp_path)
    assert r.code == 1 and r.out == ""
    assert "1 finding left that cannot be fixed automatically" in r.err
    assert (tmp_path / "a.py").read_text() == UNFIXABLE


# The stored value computes from a tensor: the fix adds ``no_grad()`` and is unsafe.
COMPUTED = (
    "import torch\n\n_T = {}\n\n\ndef table(n, scale):\n    if n not in _T:\n"
    "        _T[n] = torch.arange(n) * scale\n    _T[n].zero_()\n    return _T[n]\n"
)
COMPUTED_FIXED = COMPUTED.replace(
    "        _T[n] = torch.arange(n) * scale\n",
    "        with torch.inference_mode(False), torch.no_grad():\n"
    "            _T[n] = torch.arange(n) * scale\n",
)


def test_unsafe_fix_is_shown_but_applied_only_on_request(tmp_path):
    (tmp_path / "a.py").write_text(COMPUTED)
    r = run_imlint("check", "a.py", "--no-show-source", cwd=tmp_path)
    assert r.code == 1 and "IM001 " in r.out and "[*]" not in r.out
    assert "No safe fixes available (1 hidden fix can be enabled with `--unsafe-fixes`)." in r.out
    r = run_imlint("fix", "a.py", cwd=tmp_path)
    assert r.code == 1 and (tmp_path / "a.py").read_text() == COMPUTED
    assert "unsafe fix not applied, `--unsafe-fixes` applies it: the statement computes" in r.out
    assert "No fixes applied; 1 unsafe fix not applied (`--unsafe-fixes`)." in r.out
    r = run_imlint("check", "a.py", "--unsafe-fixes", "--no-show-source", cwd=tmp_path)
    assert "IM001 [*]" in r.out and "1 finding fixable with `imlint fix`" in r.out
    r = run_imlint("fix", "a.py", "--unsafe-fixes", cwd=tmp_path)
    assert r.code == 0 and (tmp_path / "a.py").read_text() == COMPUTED_FIXED


def test_unsafe_fixes_from_the_config_and_overridden_on_the_command_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.imlint]\nunsafe-fixes = true\n")
    (tmp_path / "a.py").write_text(COMPUTED)
    r = run_imlint("fix", "a.py", "--no-unsafe-fixes", "--no-cache", cwd=tmp_path)
    assert r.code == 1 and (tmp_path / "a.py").read_text() == COMPUTED
    r = run_imlint("fix", "a.py", "--no-cache", cwd=tmp_path)
    assert r.code == 0 and (tmp_path / "a.py").read_text() == COMPUTED_FIXED
    (tmp_path / "pyproject.toml").write_text('[tool.imlint]\nunsafe-fixes = "yes"\n')
    r = run_imlint("check", "a.py", cwd=tmp_path)
    assert r.code == 2 and "unsafe-fixes must be true or false" in r.err


def test_unsafe_fix_seen_by_a_warm_cache_run(tmp_path):
    """The cache keys on unsafe-fixes: a run with it on does not replay ``[ ]``."""
    (tmp_path / "a.py").write_text(COMPUTED)
    assert "[*]" not in run_imlint("check", "a.py", "--no-show-source", cwd=tmp_path).out
    r = run_imlint("check", "a.py", "--unsafe-fixes", "--no-show-source", cwd=tmp_path)
    assert "IM001 [*]" in r.out


@pytest.mark.parametrize(
    ("statement", "applicability"),
    [
        ("torch.empty(n)", "safe"),
        ("torch.zeros(max(n, 16), len(x), device=x.device, dtype=torch.int32)", "safe"),
        ("x.new_zeros((n, x.size(0)))", "safe"),
        ("torch.empty(helper(n))", "unsafe"),  # the helper now runs with the mode off
        ("torch.arange(n) * 2", "unsafe"),
        ("x.clone()", "unsafe"),
        ("torch.cat([x, x])", "unsafe"),
        ("Workspace(n)", "unsafe"),
    ],
)
def test_applicability_of_each_statement_shape(statement, applicability):
    source = (
        "import torch\n\n_C = {}\n\n\ndef get(n, x):\n    if n not in _C:\n"
        f"        _C[n] = {statement}\n    _C[n].zero_()\n    return _C[n]\n"
    )
    if statement.startswith("Workspace"):
        source += (
            "\n\nclass Workspace:\n    def __init__(self, n):\n        self.t = torch.empty(n)\n"
        )
    (finding,) = Linter(Settings()).check_text("m.py", source)
    assert finding.applicability == applicability, finding
    assert finding.fixable == (applicability == "safe")
    assert (finding.unsafe_reason is None) == (applicability == "safe")


def test_a_guard_spanning_statements_is_unsafe():
    source = (
        "import torch\n\n_C = {}\n\n\ndef get(n, tail):\n    if n not in _C:\n"
        "        ids = torch.empty(n)\n        _C[n] = ids[:tail]\n"
        "    _C[n].zero_()\n    return _C[n]\n"
    )
    (finding,) = Linter(Settings()).check_text("m.py", source)
    assert finding.applicability == "unsafe" and "spans the statements" in finding.unsafe_reason


def test_json_and_sarif_carry_the_applicability(tmp_path):
    (tmp_path / "a.py").write_text(COMPUTED)
    (item,) = json.loads(run_imlint("check", "a.py", "--output-format", "json", cwd=tmp_path).out)
    assert (item["applicability"], item["fixable"]) == ("unsafe", False)
    assert item["unsafe_reason"].startswith("the statement computes")
    sarif = json.loads(run_imlint("check", "a.py", "--output-format", "sarif", cwd=tmp_path).out)
    (result,) = sarif["runs"][0]["results"]
    assert result["properties"]["applicability"] == "unsafe"
    assert "fixes" not in result  # not applied by default: no fix offered
    sarif = json.loads(
        run_imlint("check", "a.py", "--output-format", "sarif", "--unsafe-fixes", cwd=tmp_path).out
    )
    (result,) = sarif["runs"][0]["results"]
    assert result["fixes"] and result["properties"]["fixable"] is True


def test_unfixable_findings_exit_1_with_reason(tmp_path):
    (tmp_path / "a.py").write_text(UNFIXABLE)
    r = run_imlint("fix", "a.py", cwd=tmp_path)
    assert r.code == 1
    assert "not fixed: several statements on one line" in r.out
    assert (tmp_path / "a.py").read_text() == UNFIXABLE


def test_bad_files_untouched_others_fixed(tmp_path):
    (tmp_path / "bad.py").write_text("def (:\n" + LAZY)
    (tmp_path / "ro.py").write_text(LAZY)
    (tmp_path / "ro.py").chmod(0o444)
    os.symlink(tmp_path / "ro.py", tmp_path / "link.py")
    (tmp_path / "ok.py").write_text(LAZY)
    r = run_imlint("fix", ".", cwd=tmp_path)
    assert r.code == 2
    assert "bad.py: error: syntax error" in r.err
    assert "ro.py: error: file is read-only; not modified" in r.err
    assert "link.py: error: is a symbolic link" in r.err
    assert "Traceback" not in r.err
    assert (tmp_path / "bad.py").read_text().startswith("def (:")
    assert (tmp_path / "ro.py").read_text() == LAZY
    assert (tmp_path / "ok.py").read_text() == FIXED


def test_fix_keeps_crlf_and_bom_through_the_cli(tmp_path):
    data = b"\xef\xbb\xbf" + LAZY.replace("\n", "\r\n").encode()
    (tmp_path / "a.py").write_bytes(data)
    assert run_imlint("fix", "a.py", cwd=tmp_path).code == 0
    assert (tmp_path / "a.py").read_bytes() == b"\xef\xbb\xbf" + FIXED.replace(
        "\n", "\r\n"
    ).encode()


def test_fix_does_not_import_the_code(tmp_path):
    payload = "import pathlib\npathlib.Path(__file__).with_name('MARKER').write_text('x')\n" + LAZY
    (tmp_path / "m.py").write_text(payload)
    assert run_imlint("fix", "m.py", cwd=tmp_path).code == 0
    assert not (tmp_path / "MARKER").exists()


def test_python_m_imlint_fix(tmp_path):
    (tmp_path / "a.py").write_text(LAZY)
    proc = subprocess.run(
        [sys.executable, "-m", "imlint", "fix", "a.py"], cwd=tmp_path, capture_output=True
    )
    assert proc.returncode == 0


def _lazy_get(imports: str, local: str = "") -> str:
    return (
        f"{imports}\n_C = {{}}\n\n\ndef get(n):\n{local}    if n not in _C:\n"
        "        _C[n] = torch.empty(n)\n    _C[n].zero_()\n    return _C[n]\n"
    )


@pytest.mark.parametrize(
    ("imports", "local", "name"),
    [
        ("try:\n    import torch\nexcept ImportError:\n    torch = None\n", "", "torch"),
        (
            "import typing\n\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    import torch\n",
            "",
            "torch",
        ),
        ("", "    import torch\n\n", "torch"),
        ("", "    import torch as th\n\n", "th"),
    ],
)
def test_the_fix_reuses_the_torch_bound_where_the_guard_goes(tmp_path, imports, local, name):
    """A conditional module-level import or one inside the function: the guard names
    what it binds and nothing is added at module level (a module that imports torch
    lazily keeps importing without it)."""
    source = _lazy_get(imports, local).replace("torch.empty", f"{name}.empty")
    (finding,) = Linter(Settings()).check_text("m.py", source)
    assert finding.applicability == "safe"
    (tmp_path / "m.py").write_text(source)
    assert run_imlint("fix", "m.py", cwd=tmp_path).code == 0
    fixed = (tmp_path / "m.py").read_text()
    assert f"with {name}.inference_mode(False):" in fixed
    assert fixed.count("import torch") == source.count("import torch")


@pytest.mark.parametrize(
    "imports",
    [
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import torch\n",
        "",  # torch imported in another function only
    ],
)
def test_no_torch_bound_where_the_guard_goes_gets_an_unsafe_fix(tmp_path, imports):
    """Nothing to reuse: the fix would add `import torch` at the top, and the module
    would then need torch to import at all."""
    other = "" if imports else "\n\ndef warm():\n    import torch\n\n    return torch.ones(1)\n"
    source = _lazy_get(imports) + other
    (finding,) = Linter(Settings()).check_text("m.py", source)
    assert finding.applicability == "unsafe" and "no `torch` is bound" in finding.unsafe_reason
    (tmp_path / "m.py").write_text(source)
    assert run_imlint("fix", "m.py", cwd=tmp_path).code == 1
    assert (tmp_path / "m.py").read_text() == source  # the safe run adds nothing
    assert run_imlint("fix", "m.py", "--unsafe-fixes", cwd=tmp_path).code == 0
    fixed = (tmp_path / "m.py").read_text()
    assert "with torch.inference_mode(False):" in fixed
    top = [line for line in fixed.splitlines() if line == "import torch"]
    assert len(top) == 1 + sum(line == "import torch" for line in source.splitlines())


def test_fix_keeps_set_id_bits_and_replaces_the_file(tmp_path):
    """The mode survives whole (set-user-ID and set-group-ID bits too); the file is
    replaced, as ruff and black do, so a hard link keeps the old bytes."""
    target = tmp_path / "a.py"
    target.write_text(LAZY)
    target.chmod(0o6755)
    os.link(target, tmp_path / "alias.py")
    r = run_imlint("fix", "a.py", cwd=tmp_path)
    assert r.code == 0, r.out + r.err
    assert target.read_text() == FIXED
    assert stat.S_IMODE(target.stat().st_mode) == 0o6755
    assert (tmp_path / "alias.py").read_text() == LAZY


@pytest.mark.parametrize("codec", ["unicode_escape", "raw_unicode_escape"])
def test_fix_refuses_an_encoding_that_does_not_write_back(tmp_path, codec):
    """Written back with an escape-decoding codec, the file would change bytes the fix
    never touched (``"\\u0041"`` in a string): refused, with the reason, and still checked."""
    source = f"# -*- coding: {codec} -*-\n" + LAZY.replace("_C = {}", '_C = {}\nSEP = "\\u0041"')
    (tmp_path / "a.py").write_bytes(source.encode("ascii"))
    r = run_imlint("fix", "a.py", cwd=tmp_path)
    assert r.code != 0
    assert (
        f"its encoding ({codec}) does not write back the bytes read; not modified" in r.out + r.err
    )
    assert (tmp_path / "a.py").read_bytes() == source.encode("ascii")
    assert "IM002" in run_imlint("check", "a.py", cwd=tmp_path).out
