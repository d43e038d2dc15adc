"""``imlint server``: the Language Server Protocol over stdio, on pygls (the ``lsp``
extra; the pre-commit hook's environment never needs it).

What it offers (the state behind it is ``imlint/workspace.py``):

- diagnostics on open, on change (debounced) and on save, from the same engine, the
  same settings and the same project index as ``imlint check``;
- quick fixes: the fix of a finding (a safe fix is the preferred action; an unsafe one
  says why it is unsafe), ``# noqa: IMxxx`` on the line, and fixing every finding of
  the file (``source.fixAll.imlint``, what ``imlint fix`` applies);
- hover on a finding: the rule's summary, the message, the reach path (a call path from
  an inference-mode region, when one is found) and the rule's page;
- a file that does not parse gets no diagnostics and one log message saying why.

Positions are sent in UTF-16 code units, the protocol's default.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from imlint import __version__
from imlint.config import ConfigError
from imlint.docs import rule_doc_url, rule_summary
from imlint.finding import Finding
from imlint.linediff import line_opcodes
from imlint.pool import default_jobs
from imlint.resolve import Overrides
from imlint.rules import RULES_BY_CODE
from imlint.workspace import Checked, Project, Workspace, noqa_line

#: seconds after the last keystroke before a buffer is checked
CHECK_DELAY = 0.05
#: seconds after the last edit that changed a summary before the index is rebuilt (at
#: least: see ``rebuild_delay``)
REBUILD_DELAY = 0.5
#: the longest wait before a rebuild, however long the last one took
REBUILD_DELAY_MAX = 30.0
#: configuration files (imlint reads ``[tool.imlint]`` of ``pyproject.toml``): a change
#: reloads the settings of every project
CONFIG_FILES = ("pyproject.toml",)
FIX_ALL = "source.fixAll.imlint"


#: the URI the editor named each path by (a path it cannot name stays its URI)
_URIS: dict[str, str] = {}


def ls_path(uri: str) -> str:
    """The file a document URI names (``file:`` URIs); other documents (an unsaved
    ``untitled:`` buffer) keep their URI as their name: they belong to no project."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    name = path or uri
    _URIS[name] = uri
    return name


def rebuild_delay(project: Project) -> float:
    """How long to wait for more edits before rebuilding ``project``'s index: a quarter
    of what the last build took (a tree of thousands of files takes tens of seconds,
    and a rebuild competes with the checks of each keystroke), within bounds."""
    return min(REBUILD_DELAY_MAX, max(REBUILD_DELAY, project.build_seconds / 4))


def utf16_column(line: str, column: int) -> int:
    """A 0-based column in code points as UTF-16 code units."""
    return len(line[:column].encode("utf-16-le")) // 2


def code_point_column(line: str, units: int) -> int:
    """A 0-based column in UTF-16 code units as code points."""
    count = 0
    for i, ch in enumerate(line):
        if count >= units:
            return i
        count += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


def _position(lines: list[str], line: int, column: int) -> lsp.Position:
    """A 1-based line and 1-based column (code points) as a protocol position."""
    text = lines[line - 1] if 1 <= line <= len(lines) else ""
    return lsp.Position(line=max(line - 1, 0), character=utf16_column(text, max(column - 1, 0)))


def finding_range(f: Finding, lines: list[str]) -> lsp.Range:
    return lsp.Range(
        start=_position(lines, f.line, f.col), end=_position(lines, f.end_line, f.end_col)
    )


def diagnostic(f: Finding, lines: list[str]) -> lsp.Diagnostic:
    severity = {"error": lsp.DiagnosticSeverity.Error, "warning": lsp.DiagnosticSeverity.Warning}
    return lsp.Diagnostic(
        range=finding_range(f, lines),
        message=f.message + f.armed_mark(),
        severity=severity.get(f.severity, lsp.DiagnosticSeverity.Information),
        code=f.code,
        code_description=lsp.CodeDescription(href=rule_doc_url(f.code)),
        source="imlint",
        data={"fix": f.applicability},
    )


def text_edits(old: str, new: str) -> list[lsp.TextEdit]:
    """The edits that turn ``old`` into ``new``, whole lines at a time."""
    a = old.splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    out: list[lsp.TextEdit] = []
    for tag, i1, i2, j1, j2 in line_opcodes(a, b):
        if tag == "equal":
            continue
        start = lsp.Position(line=i1, character=0)
        if i2 == len(a) and a and not a[-1].endswith(("\n", "\r")):
            # the last line has no newline: the range ends at its end, not past it
            end = lsp.Position(line=i2 - 1, character=utf16_column(a[-1], len(a[-1])))
        else:
            end = lsp.Position(line=i2, character=0)
        out.append(lsp.TextEdit(range=lsp.Range(start=start, end=end), new_text="".join(b[j1:j2])))
    return out


def _overrides(options: Any) -> Overrides:
    """``initializationOptions``: ``config``, ``select``, ``extendSelect``, ``ignore``,
    ``unsafeFixes`` (as the command line's flags)."""
    if not isinstance(options, dict):
        return Overrides()

    def codes(key: str) -> tuple[str, ...] | None:
        value = options.get(key)
        if isinstance(value, str):
            value = [value]
        return tuple(str(v) for v in value) if isinstance(value, list) else None

    unsafe = options.get("unsafeFixes")
    return Overrides.from_flags(
        options.get("config") if isinstance(options.get("config"), str) else None,
        codes("select"),
        codes("extendSelect"),
        codes("ignore"),
        unsafe_fixes=unsafe if isinstance(unsafe, bool) else None,
    )


class ImlintServer(LanguageServer):
    """The protocol's side: documents in, diagnostics, actions and hovers out."""

    def __init__(self) -> None:
        super().__init__("imlint", __version__)
        self.ws = Workspace(jobs=default_jobs())
        self._builds = ThreadPoolExecutor(max_workers=1, thread_name_prefix="imlint-index")
        self._checks: dict[str, asyncio.TimerHandle] = {}
        self._rebuilds: dict[int, asyncio.TimerHandle] = {}
        self._running: set[int] = set()
        self._reported_errors: dict[str, str] = {}

    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        self.window_log_message(lsp.LogMessageParams(type=kind, message=f"imlint: {message}"))

    # ---- diagnostics

    def publish(self, path: str) -> Checked | None:
        """Check an open buffer now and send its diagnostics."""
        if path not in self.ws.buffers:
            return None
        checked = self.ws.check(path)
        if checked.error is not None:
            if self._reported_errors.get(path) != checked.error:
                self.log(
                    f"{path}: not checked, no findings shown until it is: {checked.error}",
                    lsp.MessageType.Warning,
                )
            self._reported_errors[path] = checked.error
        else:
            self._reported_errors.pop(path, None)
        lines = checked.text.splitlines()
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(
                uri=_URIS.get(path) or from_fs_path(path) or path,
                version=checked.version,
                diagnostics=[diagnostic(f, lines) for f in checked.findings],
            )
        )
        return checked

    def check_soon(self, path: str, delay: float = CHECK_DELAY) -> None:
        loop = asyncio.get_running_loop()
        pending = self._checks.pop(path, None)
        if pending is not None:
            pending.cancel()
        self._checks[path] = loop.call_later(delay, self._check_now, path)

    def _check_now(self, path: str) -> None:
        """The debounced check: the buffer is summarised again (its project rebuilt when
        the summary changed) and its diagnostics sent."""
        self._checks.pop(path, None)
        if path not in self.ws.buffers:
            return
        project = self.ws.set_text(path, *self.ws.buffers[path])
        self.publish(path)
        if project is not None:
            self.rebuild_soon(project)

    # ---- the index

    def rebuild_soon(self, project: Project, delay: float | None = None) -> None:
        """Rebuild the index after ``delay`` seconds (default ``rebuild_delay``) without
        another edit that asks for one."""
        delay = rebuild_delay(project) if delay is None else delay
        loop = asyncio.get_running_loop()
        key = id(project)
        pending = self._rebuilds.pop(key, None)
        if pending is not None:
            pending.cancel()
        self._rebuilds[key] = loop.call_later(
            delay, lambda: asyncio.ensure_future(self._rebuild(project))
        )

    async def _rebuild(self, project: Project) -> None:
        key = id(project)
        self._rebuilds.pop(key, None)
        if key in self._running:
            return  # the running build looks for more changes when it ends
        self._running.add(key)
        try:
            while True:
                first = not project.ready
                if first:
                    self.log(f"indexing {project.root}")
                loop = asyncio.get_running_loop()
                started = loop.time()
                try:
                    changed = await loop.run_in_executor(
                        self._builds, project.rebuild, self.ws.open_paths(project)
                    )
                except Exception as exc:  # a bug: say so, keep serving one-file checks
                    self.log(f"indexing {project.root} failed: {exc}", lsp.MessageType.Error)
                    return
                took = loop.time() - started
                if changed is None:
                    changed = []
                elif first:
                    self.log(f"indexed {project.root} in {took:.1f} s")
                else:
                    self.log(
                        f"index rebuilt in {took:.1f} s: {len(changed)} open files' facts changed",
                        lsp.MessageType.Log,
                    )
                # and the buffers checked before the index was there
                unindexed = [
                    p
                    for p in self.ws.open_paths(project)
                    if p not in changed and not getattr(self.ws.last.get(p), "indexed", False)
                ]
                for path in [*changed, *unindexed]:
                    self.publish(path)
                if not project.stale:
                    return
        finally:
            self._running.discard(key)

    # ---- actions

    def current(self, path: str) -> Checked | None:
        """The findings of the buffer as it is now (checked again if it changed)."""
        if path not in self.ws.buffers:
            return None
        last = self.ws.last.get(path)
        if last is None or last.text != self.ws.buffers[path][0]:
            last = self.publish(path)
        return last

    def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        path = ls_path(params.text_document.uri)
        checked = self.current(path)
        if checked is None:
            return []
        only = params.context.only
        lines = checked.text.splitlines()
        out: list[lsp.CodeAction] = []
        if not only or any(k != FIX_ALL for k in only):
            for f in checked.findings:
                rng = finding_range(f, lines)
                if _overlaps(rng, params.range):
                    out += self._finding_actions(path, checked, f, lines)
        if not only or any(FIX_ALL.startswith(k) for k in only):
            fixed = self.ws.fixed_text(path) if any(f.fixable for f in checked.findings) else None
            if fixed is not None:
                out.append(
                    lsp.CodeAction(
                        title="imlint: fix all fixable findings in this file",
                        kind=FIX_ALL,
                        edit=self._edit(params.text_document.uri, checked, fixed),
                    )
                )
        return out

    def _finding_actions(
        self, path: str, checked: Checked, f: Finding, lines: list[str]
    ) -> list[lsp.CodeAction]:
        uri = _URIS.get(path) or from_fs_path(path) or path
        diag = [diagnostic(f, lines)]
        out: list[lsp.CodeAction] = []
        if f.applicability is not None:
            same = (f.code, f.line, f.col)
            fixed = self.ws.fixed_text(path, lambda g: (g.code, g.line, g.col) == same)
            if fixed is not None:
                title = f"Fix {f.code}: allocate under inference_mode(False)"
                if f.applicability == "unsafe":
                    title += f" (unsafe: {f.unsafe_reason})"
                out.append(
                    lsp.CodeAction(
                        title=title,
                        kind=lsp.CodeActionKind.QuickFix,
                        diagnostics=diag,
                        is_preferred=f.applicability == "safe",
                        edit=self._edit(uri, checked, fixed),
                    )
                )
        noqa = noqa_line(f, checked.text)
        if noqa is not None:
            number, new = noqa
            old = checked.text.splitlines(keepends=True)[number]
            end = (
                lsp.Position(line=number + 1, character=0)
                if old.endswith(("\n", "\r"))
                else lsp.Position(line=number, character=utf16_column(old, len(old)))
            )
            start = lsp.Position(line=number, character=0)
            edit = lsp.TextEdit(range=lsp.Range(start=start, end=end), new_text=new)
            out.append(
                lsp.CodeAction(
                    title=f"Ignore {f.code} on line {number + 1} (# noqa: {f.code})",
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=diag,
                    edit=self._workspace_edit(uri, checked, [edit]),
                )
            )
        return out

    def _edit(self, uri: str, checked: Checked, fixed: str) -> lsp.WorkspaceEdit:
        return self._workspace_edit(uri, checked, text_edits(checked.text, fixed))

    @staticmethod
    def _workspace_edit(uri: str, checked: Checked, edits: list[lsp.TextEdit]) -> lsp.WorkspaceEdit:
        document = lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=checked.version)
        return lsp.WorkspaceEdit(
            document_changes=[lsp.TextDocumentEdit(text_document=document, edits=list(edits))]
        )

    def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        path = ls_path(params.text_document.uri)
        checked = self.current(path)
        if checked is None:
            return None
        lines = checked.text.splitlines()
        for f in checked.findings:
            rng = finding_range(f, lines)
            if _overlaps(rng, lsp.Range(start=params.position, end=params.position)):
                return lsp.Hover(
                    contents=lsp.MarkupContent(
                        kind=lsp.MarkupKind.Markdown, value=self._hover_text(f)
                    ),
                    range=rng,
                )
        return None

    def _hover_text(self, f: Finding) -> str:
        rule = RULES_BY_CODE.get(f.code)
        head = f"**{f.code}** {rule_summary(rule)}" if rule is not None else f"**{f.code}**"
        parts = [head, f.message]
        reach = self.ws.reach(f)
        if reach is None:
            parts.append("Reach: not known yet (the project is being indexed).")
        elif reach[0]:
            label = "may be armed" if reach[1] == "dispatch" else "armed"
            parts.append(f"Reach ({label}): `{reach[2]}`")
        else:
            parts.append(f"Reach: {reach[2]}")
        parts.append(f"[{f.code} documentation]({rule_doc_url(f.code)})")
        return "\n\n".join(parts)


def _overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    def key(p: lsp.Position) -> tuple[int, int]:
        return p.line, p.character

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def build_server() -> ImlintServer:
    server = ImlintServer()

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: ImlintServer, params: lsp.InitializeParams) -> None:
        try:
            overrides = _overrides(params.initialization_options)
        except ConfigError as exc:
            ls.log(str(exc), lsp.MessageType.Error)
            overrides = Overrides()
        ls.ws = Workspace(overrides, jobs=default_jobs())

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: ImlintServer, params: lsp.InitializedParams) -> None:
        _watch_files(ls)
        for folder in ls.workspace.folders.values():
            path = to_fs_path(folder.uri)
            project = ls.ws.project_of(path) if path else None
            if project is not None:
                ls.rebuild_soon(project, 0)

    _documents(server)
    _workspace(server)
    return server


def _documents(server: ImlintServer) -> None:
    """What the editor says of its buffers, and what it asks of them."""

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ImlintServer, params: lsp.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        path = ls_path(doc.uri)
        project = ls.ws.set_text(path, doc.text, doc.version)
        ls.publish(path)
        project = project or ls.ws.project_of(path)
        if project is not None and (not project.ready or project.stale):
            ls.rebuild_soon(project, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ImlintServer, params: lsp.DidChangeTextDocumentParams) -> None:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        path = ls_path(doc.uri)
        ls.ws.store(path, doc.source, params.text_document.version)
        ls.check_soon(path)

    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix, FIX_ALL]),
    )
    def code_action(ls: ImlintServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return ls.code_actions(params)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: ImlintServer, params: lsp.HoverParams) -> lsp.Hover | None:
        return ls.hover(params)


def _workspace(server: ImlintServer) -> None:
    """Folders, files changed on disk, configuration."""

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def folders(ls: ImlintServer, params: lsp.DidChangeWorkspaceFoldersParams) -> None:
        for folder in params.event.added:
            path = to_fs_path(folder.uri)
            project = ls.ws.project_of(path) if path else None
            if project is not None and not project.ready:
                ls.rebuild_soon(project, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: ImlintServer, params: lsp.DidSaveTextDocumentParams) -> None:
        path = ls_path(params.text_document.uri)
        if os.path.basename(path) in CONFIG_FILES:
            reload(ls)
        elif path in ls.ws.buffers:
            # a save is a pause: check now, and rebuild now if the summary changed
            project = ls.ws.set_text(path, *ls.ws.buffers[path])
            ls.publish(path)
            if project is not None:
                ls.rebuild_soon(project, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ImlintServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        project = ls.ws.close(ls_path(uri))
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if project is not None:
            ls.rebuild_soon(project)

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: ImlintServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        paths = [ls_path(c.uri) for c in params.changes]
        if any(os.path.basename(p) in CONFIG_FILES for p in paths):
            reload(ls)
            return
        for project in {id(p): p for p in map(ls.ws.disk_changed, paths) if p}.values():
            ls.rebuild_soon(project)


def _watch_files(ls: ImlintServer) -> None:
    """Ask the client to say when Python files or configuration change on disk (a
    branch switch, a generated file), where it can."""
    workspace = ls.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace is not None else None
    if watched is None or not watched.dynamic_registration:
        return
    globs = ["**/*.py", *(f"**/{name}" for name in CONFIG_FILES)]
    options = lsp.DidChangeWatchedFilesRegistrationOptions(
        watchers=[lsp.FileSystemWatcher(glob_pattern=g) for g in globs]
    )
    registration = lsp.Registration(
        id="imlint-watched-files",
        method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=options,
    )
    ls.client_register_capability(lsp.RegistrationParams(registrations=[registration]))


def reload(ls: ImlintServer) -> None:
    """A configuration file changed: every open buffer is checked under the new
    settings, and its project indexed again."""
    ls.ws.reload_settings()
    ls.log("configuration changed: settings reloaded")
    for path in list(ls.ws.buffers):
        text, version = ls.ws.buffers[path]
        ls.ws.set_text(path, text, version)
        ls.publish(path)
        project = ls.ws.project_of(path)
        if project is not None:
            ls.rebuild_soon(project, 0)


def serve() -> None:
    """Serve the protocol on stdin and stdout until the client says exit."""
    build_server().start_io()


__all__ = ["ImlintServer", "build_server", "serve"]
