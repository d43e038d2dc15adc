"""``imlint server`` end to end: a real LSP client (pygls's) talks to the server over
stdio, as an editor does. Waits are bounded by generous timeouts, never timed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

lsp = pytest.importorskip("lsprotocol.types")
client_mod = pytest.importorskip("pygls.lsp.client")
uris = pytest.importorskip("pygls.uris")

from imlint.server import code_point_column, text_edits, utf16_column  # noqa: E402
from imlint.workspace import noqa_line, with_noqa  # noqa: E402

WAIT = 120.0  # seconds: a bound for a loaded machine, not a speed target

ALLOC = """\
import torch


def make_buffer(n):
    return torch.empty(n)
"""

USER = """\
import torch

from pkg.alloc import make_buffer


class Runner:
    def __init__(self):
        self._buf = None
        self._other = None

    def step(self, x):
        if self._buf is None:
            self._buf = torch.zeros(x.shape[0])
        self._buf.copy_(x)
        if self._other is None:
            self._other = make_buffer(x.shape[0])
        self._other.zero_()
        return self._buf
"""


def make_project(root: Path, config: str = "") -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "proj"\n' + config)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "alloc.py").write_text(ALLOC)
    (root / "pkg" / "user.py").write_text(USER)
    return root


class Session:
    """A client connected to ``imlint server``, recording what the server sends."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.client = client_mod.LanguageClient("imlint-tests", "1")
        self.diagnostics: dict[str, list[Any]] = {}
        self.logs: list[str] = []
        self.changed = asyncio.Event()
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: Any) -> None:
            self.diagnostics[params.uri] = params.diagnostics
            self.changed.set()

        @self.client.feature(lsp.WINDOW_LOG_MESSAGE)
        def on_log(params: Any) -> None:
            self.logs.append(params.message)
            self.changed.set()

    def uri(self, rel: str) -> str:
        return uris.from_fs_path(str(self.root / rel))

    async def start(self) -> None:
        await self.client.start_io(sys.executable, "-m", "imlint", "server", cwd=str(self.root))
        folder = lsp.WorkspaceFolder(uri=uris.from_fs_path(str(self.root)), name="proj")
        await self.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(),
                root_uri=folder.uri,
                workspace_folders=[folder],
            )
        )
        self.client.initialized(lsp.InitializedParams())

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()

    async def wait_for(self, what: Callable[[], bool]) -> None:
        """Until ``what()`` holds after something the server sent (or fail)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while not what():
            self.changed.clear()
            left = deadline - loop.time()
            if left <= 0:
                raise AssertionError(f"timed out; diagnostics: {self.codes_all()}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)

    def codes(self, rel: str) -> list[tuple[str, int]]:
        return [(d.code, d.range.start.line + 1) for d in self.diagnostics.get(self.uri(rel), [])]

    def codes_all(self) -> dict[str, list[tuple[str, int]]]:
        return {
            u: [(d.code, d.range.start.line + 1) for d in ds] for u, ds in self.diagnostics.items()
        }

    def open(self, rel: str, text: str | None = None) -> None:
        text = (self.root / rel).read_text() if text is None else text
        self.versions[rel] = 1
        self.texts[rel] = text
        item = lsp.TextDocumentItem(uri=self.uri(rel), language_id="python", version=1, text=text)
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))

    def change(self, rel: str, text: str) -> None:
        self.versions[rel] += 1
        self.texts[rel] = text
        doc = lsp.VersionedTextDocumentIdentifier(uri=self.uri(rel), version=self.versions[rel])
        whole = lsp.TextDocumentContentChangeWholeDocument(text=text)
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(text_document=doc, content_changes=[whole])
        )

    async def actions(self, rel: str, line: int) -> list[Any]:
        rng = lsp.Range(
            start=lsp.Position(line=line - 1, character=0),
            end=lsp.Position(line=line - 1, character=80),
        )
        params = lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri=self.uri(rel)),
            range=rng,
            context=lsp.CodeActionContext(diagnostics=[]),
        )
        return list(await self.client.text_document_code_action_async(params) or [])

    def apply(self, rel: str, action: Any) -> str:
        """The buffer with a code action's edits applied (what the editor would do)."""
        (change,) = action.edit.document_changes
        assert change.text_document.uri == self.uri(rel)
        return apply_edits(self.texts[rel], change.edits)


def apply_edits(text: str, edits: list[Any]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(pos: Any) -> int:
        before = sum(len(line) for line in lines[: pos.line])
        line = lines[pos.line] if pos.line < len(lines) else ""
        return before + code_point_column(line, pos.character)

    for edit in sorted(
        edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
    ):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def run(root: Path, scenario: Callable[[Session], Any]) -> None:
    async def main() -> None:
        session = Session(root)
        await session.start()
        try:
            await scenario(session)
        finally:
            await session.stop()

    asyncio.run(main())


def test_a_hazard_is_diagnosed_fixed_by_its_quick_fix_and_the_diagnostic_goes(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path / "proj")

    async def scenario(s: Session) -> None:
        s.open("pkg/user.py")
        await s.wait_for(lambda: ("IM003", 16) in s.codes("pkg/user.py"))
        assert s.codes("pkg/user.py") == [("IM001", 13), ("IM003", 16)]
        (im001,) = [d for d in s.diagnostics[s.uri("pkg/user.py")] if d.code == "IM001"]
        assert (im001.range.start.line, im001.range.start.character) == (12, 24)
        assert im001.source == "imlint"
        assert im001.code_description.href.endswith("IM001.md")

        actions = await s.actions("pkg/user.py", 13)
        fix = next(a for a in actions if a.title.startswith("Fix IM001"))
        assert fix.kind == lsp.CodeActionKind.QuickFix and fix.is_preferred
        fixed = s.apply("pkg/user.py", fix)
        assert "with torch.inference_mode(False):\n                self._buf = torch.zeros" in fixed
        s.change("pkg/user.py", fixed)
        await s.wait_for(lambda: "IM001" not in dict(s.codes("pkg/user.py")))
        assert [c for c, _ in s.codes("pkg/user.py")] == ["IM003"]

    run(root, scenario)


def test_the_diagnostics_are_the_findings_of_imlint_check(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")
    out = subprocess.run(
        [sys.executable, "-m", "imlint", "check", "--output-format", "json", "--no-cache", "."],
        cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    expected = sorted((f["code"], f["line"], f["col"]) for f in json.loads(out.stdout))
    assert expected, out.stderr

    async def scenario(s: Session) -> None:
        s.open("pkg/user.py")
        await s.wait_for(lambda: len(s.codes("pkg/user.py")) == len(expected))
        got = sorted(
            (d.code, d.range.start.line + 1, d.range.start.character + 1)
            for d in s.diagnostics[s.uri("pkg/user.py")]
        )
        assert got == expected

    run(root, scenario)


def test_an_edit_in_another_file_that_removes_the_allocator_clears_the_im003(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path / "proj")

    async def scenario(s: Session) -> None:
        s.open("pkg/user.py")
        s.open("pkg/alloc.py")
        await s.wait_for(lambda: ("IM003", 16) in s.codes("pkg/user.py"))
        s.change("pkg/alloc.py", ALLOC.replace("return torch.empty(n)", "return [0] * n"))
        await s.wait_for(lambda: "IM003" not in dict(s.codes("pkg/user.py")))
        assert s.codes("pkg/user.py") == [("IM001", 13)]
        s.change("pkg/alloc.py", ALLOC)  # and back
        await s.wait_for(lambda: ("IM003", 16) in s.codes("pkg/user.py"))

    run(root, scenario)


def test_a_syntax_error_clears_the_diagnostics_logs_why_and_the_server_goes_on(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path / "proj")

    async def scenario(s: Session) -> None:
        s.open("pkg/user.py")
        await s.wait_for(lambda: ("IM001", 13) in s.codes("pkg/user.py"))
        s.change("pkg/user.py", USER.replace("def step(self, x):", "def step(self, x:"))
        await s.wait_for(lambda: s.codes("pkg/user.py") == [])
        await s.wait_for(
            lambda: any("user.py: not checked" in m and "syntax error" in m for m in s.logs)
        )
        s.change("pkg/user.py", USER)
        await s.wait_for(lambda: ("IM001", 13) in s.codes("pkg/user.py"))

    run(root, scenario)


def test_the_noqa_action_suppresses_the_finding_and_hover_explains_it(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")

    async def scenario(s: Session) -> None:
        s.open("pkg/user.py")
        await s.wait_for(lambda: ("IM003", 16) in s.codes("pkg/user.py"))
        hover = await s.client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=s.uri("pkg/user.py")),
                position=lsp.Position(line=15, character=30),
            )
        )
        assert hover is not None
        assert hover.contents.value.startswith("**IM003** ")
        assert "make_buffer returns a tensor" in hover.contents.value
        assert "Reach" in hover.contents.value and "IM003.md" in hover.contents.value

        actions = await s.actions("pkg/user.py", 16)
        titles = [a.title for a in actions]
        assert any(t.startswith("Fix IM003") and "(unsafe: " in t for t in titles), titles
        noqa = next(a for a in actions if a.title.startswith("Ignore IM003"))
        s.change("pkg/user.py", s.apply("pkg/user.py", noqa))
        assert "make_buffer(x.shape[0])  # noqa: IM003\n" in s.texts["pkg/user.py"]
        await s.wait_for(lambda: s.codes("pkg/user.py") == [("IM001", 13)])

        fix_all = next(
            a for a in await s.actions("pkg/user.py", 13) if a.kind == "source.fixAll.imlint"
        )
        s.change("pkg/user.py", s.apply("pkg/user.py", fix_all))
        await s.wait_for(lambda: s.codes("pkg/user.py") == [])

    run(root, scenario)


def test_the_project_configuration_applies_as_on_the_command_line(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj", '\n[tool.imlint]\nignore = ["IM003"]\n')

    async def scenario(s: Session) -> None:
        s.open("pkg/user.py")
        await s.wait_for(
            lambda: any("indexed" in m for m in s.logs) and len(s.codes("pkg/user.py")) > 0
        )
        # the index is there: a cross-file IM003 would show by now, but it is ignored
        s.change("pkg/user.py", USER + "\n")
        await s.wait_for(
            lambda: s.versions["pkg/user.py"] == 2 and s.codes("pkg/user.py") == [("IM001", 13)]
        )

    run(root, scenario)


def test_an_unsaved_buffer_is_checked_on_its_own(tmp_path: Path) -> None:
    root = make_project(tmp_path / "proj")

    async def scenario(s: Session) -> None:
        uri = "untitled:Untitled-1"
        item = lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=USER)
        s.client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
        await s.wait_for(lambda: uri in s.diagnostics)
        # no project: the helper in pkg/alloc.py is not known, so no IM003
        assert [(d.code, d.range.start.line + 1) for d in s.diagnostics[uri]] == [("IM001", 13)]

    run(root, scenario)


def test_server_without_pygls_says_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['pygls'] = None; sys.modules['pygls.lsp.server'] = None\n"
        "from imlint.cli import main; sys.argv = ['imlint', 'server']; main()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert "pip install 'imlint[lsp]'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


# ---- the pieces, without a client


def test_utf16_columns_count_astral_characters_twice() -> None:
    line = "x = '😀' + torch.empty(1)"
    col = line.index("torch")
    assert utf16_column(line, col) == col + 1
    assert code_point_column(line, col + 1) == col


def test_text_edits_turn_the_old_text_into_the_new() -> None:
    old = "a\nb\nc"
    for new in ["a\nB\nc", "a\nb\nc\nd\n", "x\n", "", "a\nb\nc", "b\nc"]:
        assert apply_edits(old, text_edits(old, new)) == new


def test_noqa_is_added_or_merged_and_never_breaks_a_continuation() -> None:
    assert with_noqa("    x = f()\n", "IM001") == "    x = f()  # noqa: IM001\n"
    assert with_noqa("x = f()  # noqa: IM002\n", "IM001") == "x = f()  # noqa: IM002, IM001\n"
    assert with_noqa("x = f()  # noqa\n", "IM001") == "x = f()  # noqa\n"
    assert with_noqa("x = a + \\\n", "IM001") == "x = a + \\\n"
    text = textwrap.dedent(
        """\
        x = torch.empty(1) + \\
            y
        """
    )
    from imlint.finding import Finding

    f = Finding("p.py", 1, 5, 2, 6, "IM001", "error", "m")
    assert noqa_line(f, text) == (1, "    y  # noqa: IM001\n")
