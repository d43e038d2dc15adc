"""Baselines: fingerprints survive unrelated edits; only new findings are reported."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from imlint.baseline import (
    BASELINE_VERSION,
    Baseline,
    BaselineError,
    LineCache,
    canonical_statement,
    display_statement,
    fingerprint,
    fingerprints,
    load_baseline,
    write_baseline,
)
from imlint.config import Settings
from imlint.engine import Linter
from imlint.finding import Finding
from imlint.roots import normalize_path

MODULE = textwrap.dedent(
    """\
    import torch

    _CACHE = {}


    def get(n):
        if n not in _CACHE:
            _CACHE[n] = torch.arange(n)  # positions
        return _CACHE[n]


    class Sampler:
        def _workspace(self, n):
            if self._ws is None or self._ws.numel() < n:
                self._ws = torch.zeros(n)
            return self._ws

        def forward(self, x):
            self._ws.copy_(x)
    """
)

PATH = "pkg/mod.py"
LINTER = Linter(Settings(extend_select=("IM005",)))


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / PATH).write_text(MODULE, encoding="utf-8")
    return tmp_path


def check(path: str = PATH) -> list[Finding]:
    return LINTER.check_text(path, Path(path).read_text(encoding="utf-8"))


def new_findings(baseline_path: Path) -> list[Finding]:
    """Re-read the file from disk, as the command line would, and filter."""
    return load_baseline(baseline_path).filter(check(), LineCache())


@pytest.fixture
def baseline(project) -> Path:
    findings = check()
    assert [(f.code, f.function) for f in findings] == [
        ("IM005", "get"),
        ("IM001", "Sampler._workspace"),
    ]
    path = project / "imlint-baseline.json"
    written = write_baseline(path, findings, LineCache())
    assert len(written) == 2
    return path


def test_the_file_is_readable_json(baseline):
    data = json.loads(baseline.read_text(encoding="utf-8"))
    assert data["version"] == BASELINE_VERSION
    assert data["tool"] == "imlint"
    entries = data["entries"]
    assert [{k: v for k, v in e.items() if k != "fingerprint"} for e in entries] == [
        {
            "path": PATH,
            "code": "IM001",
            "function": "Sampler._workspace",
            "statement": "self._ws = torch.zeros(n)",
        },
        {
            "path": PATH,
            "code": "IM005",
            "function": "get",
            "statement": "_CACHE[n] = torch.arange(n)",
        },
    ]
    assert all(len(e["fingerprint"]) == 32 for e in entries)
    assert baseline.read_text(encoding="utf-8").endswith("}\n")


def test_unchanged_code_reports_nothing(baseline):
    assert new_findings(baseline) == []


def test_lines_inserted_above_report_nothing(baseline):
    header = "".join(f"# line {i}\nVALUE_{i} = {i}\n" for i in range(10))  # 20 lines
    Path(PATH).write_text(header + MODULE, encoding="utf-8")
    assert [f.line for f in check()] == [28, 35]
    assert new_findings(baseline) == []


def test_reformatting_reports_nothing(baseline):
    reformatted = (
        MODULE.replace("import torch\n", '"""A module."""\nimport torch  # the framework\n')
        .replace("\n\n\ndef get", "\n\n\n\n\ndef get")
        .replace("_CACHE[n] = torch.arange(n)  # positions", "_CACHE[n]=torch.arange( n )  # pos")
        .replace(
            "if self._ws is None or self._ws.numel() < n:",
            "if (\n            self._ws is None\n            or self._ws.numel() < n\n        ):",
        )
        .replace("self._ws.copy_(x)", "self._ws.copy_(\n            x,\n        )")
    )
    Path(PATH).write_text(reformatted, encoding="utf-8")
    assert len(check()) == 2
    assert new_findings(baseline) == []


def test_a_new_lazy_allocation_is_reported_alone(baseline):
    added = MODULE.replace(
        "\n\nclass Sampler:",
        "\n\ndef get_mask(n):\n    if n not in _CACHE:\n        _CACHE[n] = torch.ones(n)\n"
        "    return _CACHE[n]\n\n\nclass Sampler:",
    )
    Path("pkg/mod.py").write_text("# moved down\n" * 3 + added, encoding="utf-8")
    (new,) = new_findings(baseline)
    assert (new.code, new.function, new.line) == ("IM005", "get_mask", 17)


def test_the_same_finding_in_another_file_is_new(baseline):
    """A copy next to the original: the original's findings use up the entries."""
    Path("pkg/copy.py").write_text(MODULE, encoding="utf-8")
    both = check() + check("pkg/copy.py")
    new = load_baseline(baseline).filter(both, LineCache())
    assert sorted((f.path, f.code) for f in new) == [
        ("pkg/copy.py", "IM001"),
        ("pkg/copy.py", "IM005"),
    ]


def test_a_renamed_file_reports_nothing(baseline):
    Path("pkg/mod.py").rename("pkg/renamed.py")
    matched = load_baseline(baseline).match(check("pkg/renamed.py"), LineCache())
    assert (matched.new, matched.hidden, matched.moved, matched.stale) == ([], 2, 2, 0)


def test_a_method_moved_to_another_class_reports_nothing(baseline):
    moved = MODULE.replace("class Sampler:", "class Workspaces:")
    Path("pkg/mod.py").write_text(moved, encoding="utf-8")
    findings = check()
    assert {f.function for f in findings} == {"get", "Workspaces._workspace"}
    matched = load_baseline(baseline).match(findings, LineCache())
    assert (matched.new, matched.moved, matched.stale) == ([], 1, 0)


def test_an_extracted_function_reports_nothing(baseline):
    extracted = MODULE.replace(
        "def get(n):\n    if n not in _CACHE:\n        _CACHE[n] = torch.arange(n)  # positions\n"
        "    return _CACHE[n]\n",
        "def _fill(n):\n    if n not in _CACHE:\n        _CACHE[n] = torch.arange(n)\n\n\n"
        "def get(n):\n    _fill(n)\n    return _CACHE[n]\n",
    )
    assert extracted != MODULE
    Path("pkg/mod.py").write_text(extracted, encoding="utf-8")
    findings = check()
    assert "_fill" in {f.function for f in findings}, findings
    matched = load_baseline(baseline).match(findings, LineCache())
    assert matched.new == [] and matched.stale == 0


def test_fixed_findings_leave_stale_entries(baseline):
    Path("pkg/mod.py").write_text(MODULE.replace("torch.zeros(n)", "[0] * n"), encoding="utf-8")
    matched = load_baseline(baseline).match(check(), LineCache())
    assert (matched.new, matched.hidden, matched.stale) == ([], 1, 1)


def test_baseline_paths_are_relative_to_the_repository(tmp_path):
    """Written from a subfolder, used from the top (and the other way round)."""
    from .conftest import run_imlint

    (tmp_path / ".git").mkdir()
    (tmp_path / "fmt2").mkdir()
    (tmp_path / "fmt2" / "a.py").write_text(MODULE, encoding="utf-8")
    r = run_imlint("check", ".", "--write-baseline", "base.json", cwd=tmp_path / "fmt2")
    assert r.code == 0, r.err
    entries = json.loads((tmp_path / "fmt2" / "base.json").read_text())["entries"]
    assert {e["path"] for e in entries} == {"fmt2/a.py"}
    r = run_imlint("check", "fmt2", "--baseline", "fmt2/base.json", cwd=tmp_path)
    assert r.code == 0, r.out + r.err
    assert "Baseline fmt2/base.json: 1 finding hidden." in r.err
    (tmp_path / "fmt2" / "a.py").write_text(MODULE.replace("torch.zeros(n)", "[0] * n"))
    r = run_imlint("check", "fmt2", "--baseline", "fmt2/base.json", cwd=tmp_path)
    assert "0 findings hidden; 1 entry stale" in r.err


def test_occurrences_are_counted():
    def at(line: int) -> Finding:
        return Finding(PATH, line, 5, line, 20, "IM005", "warning", "m", function="f")

    lines = ["    x[k] = torch.empty(n)"] * 10

    def lines_of(path: str) -> list[str]:
        return lines

    recorded = Baseline.from_findings([at(2), at(5)], lines_of)
    assert len({e.fingerprint for e in recorded.entries}) == 2
    now = [at(3), at(6), at(9)]  # moved, plus one more
    assert recorded.filter(now, lines_of) == [at(9)]
    assert recorded.filter(now[:1], lines_of) == []
    # The order of the input does not matter: occurrences follow the file order.
    assert recorded.filter(list(reversed(now)), lines_of) == [at(9)]


def test_fingerprint_keys():
    f = Finding("./pkg//mod.py", 3, 5, 4, 6, "IM001", "error", "m", function="A.f")
    lines = ["", "", "    buf = torch.empty(  # why", "        n)  # more", ""]
    same = Finding("pkg/mod.py", 30, 5, 31, 6, "IM001", "error", "other", function="A.f")
    moved = [""] * 29 + ["\tbuf = torch.empty(", "\t\tn)"]  # re-indented, comments gone
    assert fingerprint(f, lines) == fingerprint(same, moved)
    assert fingerprint(f, lines) != fingerprint(f, lines, occurrence=1)
    for other in (
        Finding("pkg/other.py", 3, 5, 4, 6, "IM001", "error", "m", function="A.f"),
        Finding("pkg/mod.py", 3, 5, 4, 6, "IM005", "warning", "m", function="A.f"),
        Finding("pkg/mod.py", 3, 5, 4, 6, "IM001", "error", "m", function="A.g"),
    ):
        assert fingerprint(other, lines) != fingerprint(f, lines)
    assert fingerprint(f, ["", "", "    buf = torch.zeros(", "n)"]) != fingerprint(f, lines)
    # Without the source, the finding's own first line stands in.
    one_line = Finding(
        "a.py", 1, 7, 1, 20, "IM005", "warning", "m", statement="buf = torch.empty(n) # c"
    )
    assert fingerprint(one_line, None) == fingerprint(one_line, ["buf = torch.empty(n)"])
    assert fingerprints([one_line, one_line], lambda p: None)[1] == fingerprint(one_line, None, 1)


def test_statement_normalisation():
    code = "x = f( a ,\n   'b  # not a comment' )  # comment\\\n"
    assert display_statement(code) == "x = f( a , 'b # not a comment' )"
    assert canonical_statement(code) == "x=f(a,'b  # not a comment')"
    assert canonical_statement("return  not x") == "return not x"
    assert canonical_statement('y = """a\n  b"""  # c') == 'y="""a\n  b"""'
    assert normalize_path("./a/../b\\c.py").startswith("b")
    assert normalize_path("src/./x.py") == "src/x.py"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "baseline file not found"),
        ("{not json", "baseline is not valid JSON (line 1, column 2"),
        ("[]", "baseline must be a JSON object with a 'version' field"),
        ('{"entries": []}', "unsupported baseline version None (expected 1)"),
        ('{"version": 99, "entries": []}', "unsupported baseline version 99 (expected 1)"),
        ('{"version": 1}', "baseline has no 'entries' list"),
        ('{"version": 1, "entries": [{"fingerprint": 1}]}', "baseline entry 0 must be an object"),
        (b"\xff\xfe", "baseline file is not UTF-8 text"),
    ],
)
def test_broken_baselines_raise_one_line_errors(tmp_path, content, message):
    path = tmp_path / "baseline.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    assert message in text


def test_corrupting_a_written_baseline(baseline):
    baseline.write_text(baseline.read_text(encoding="utf-8")[:-20], encoding="utf-8")
    with pytest.raises(BaselineError, match="not valid JSON"):
        load_baseline(baseline)


def test_write_baseline_reports_an_unwritable_path(tmp_path):
    with pytest.raises(BaselineError, match="cannot write baseline"):
        write_baseline(tmp_path / "missing" / "b.json", [], LineCache())
