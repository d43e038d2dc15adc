"""``imlint server`` latency: from ``didChange`` to ``publishDiagnostics`` for one file
of a large project with a warm index, as an editor sees it (a real client over stdio).

    python benchmarks/bench_server.py --tree sglang-0.5.23 \
        --file sglang/srt/speculative/dflash_utils.py --rounds 20

Trees are the unpacked wheels under ``.cache/src/`` (``bench_accuracy.py --download``);
the tree's folder is the project root (it holds a ``pyproject.toml``), checked with an
empty configuration (as ``bench_accuracy.py`` checks it). Printed:

- the time until the project is indexed (the summary cache under the tree warms it for
  later runs; ``--cold`` empties it first);
- per edit kind, the latency quantiles over ``--rounds`` edits. ``comment``: a line of
  a function changes and the file's summary does not (most keystrokes). ``call``: a
  statement that calls a new name is added, so the summary changes: the buffer's
  diagnostics come at once from the facts the index has, and the index is rebuilt in
  the background (its time is printed from the server's log).

The debounce (``imlint.server.CHECK_DELAY``) is part of the latency. Nothing here is a
test: it prints figures to compare, side by side, on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / ".cache" / "src"


class Bench:
    def __init__(self, root: Path, file: Path, config: Path) -> None:
        self.root, self.file, self.config = root, file, config
        self.uri = from_fs_path(str(file))
        self.client = LanguageClient("imlint-bench", "1")
        self.got: dict[int, float] = {}  # version -> when its diagnostics came
        self.counts: dict[int, int] = {}
        self.logs: list[tuple[float, str]] = []
        self.event = asyncio.Event()

        @self.client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: Any) -> None:
            if params.uri == self.uri and params.version is not None:
                self.got[params.version] = time.perf_counter()
                self.counts[params.version] = len(params.diagnostics)
                self.event.set()

        @self.client.feature(lsp.WINDOW_LOG_MESSAGE)
        def on_log(params: Any) -> None:
            self.logs.append((time.perf_counter(), params.message))
            self.event.set()

    async def until(self, what: Any, timeout: float = 1800) -> None:
        deadline = time.perf_counter() + timeout
        while not what():
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), max(0.0, deadline - time.perf_counter()))

    async def start(self) -> float:
        start = time.perf_counter()
        await self.client.start_io(sys.executable, "-m", "imlint", "server", cwd=str(self.root))
        folder = lsp.WorkspaceFolder(uri=from_fs_path(str(self.root)), name="tree")
        await self.client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(),
                root_uri=folder.uri,
                workspace_folders=[folder],
                initialization_options={"config": str(self.config)},
            )
        )
        self.client.initialized(lsp.InitializedParams())
        text = self.file.read_text()
        item = lsp.TextDocumentItem(uri=self.uri, language_id="python", version=1, text=text)
        self.client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
        await self.until(lambda: any(m.startswith("imlint: indexed") for _, m in self.logs))
        indexed = time.perf_counter() - start
        await self.until(lambda: 1 in self.got)
        return indexed

    async def edit(self, version: int, text: str) -> float:
        doc = lsp.VersionedTextDocumentIdentifier(uri=self.uri, version=version)
        change = lsp.TextDocumentContentChangeWholeDocument(text=text)
        sent = time.perf_counter()
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(text_document=doc, content_changes=[change])
        )
        await self.until(lambda: version in self.got, 600)
        return self.got[version] - sent

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def edits(text: str, kind: str, n: int) -> str:
    """The file with edit ``n`` of ``kind`` made inside its first function."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if re.match(r"\s*def \w+\(.*:\s*$", line))
    body = next(i for i in range(at + 1, len(lines)) if lines[i].strip())
    indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
    extra = f"{indent}# edit {n}\n" if kind == "comment" else f"{indent}_bench_probe_{n}()\n"
    return "".join([*lines[:body], extra, *lines[body:]])


async def run(args: argparse.Namespace) -> None:
    root = SRC / args.tree
    file = root / args.file
    if args.cold:
        shutil.rmtree(root / ".imlint_cache", ignore_errors=True)
    # The tree as a project without configuration (not this repository's, which
    # excludes .cache/): an empty [tool.imlint] table given as the configuration.
    config = REPO / ".cache" / "bench-server.toml"
    config.write_text("[tool.imlint]\n")
    bench = Bench(root, file, config)
    indexed = await bench.start()
    lines = len(file.read_text().splitlines())
    files = sum(1 for _ in root.rglob("*.py"))
    print(f"project {args.tree}: {files} files; {args.file}: {lines} lines")
    print(f"indexed after {indexed:.1f} s ({'cold' if args.cold else 'summary cache as found'})")
    text = file.read_text()
    version = 1
    print(f"{'edit':<8} {'n':>3} {'median ms':>10} {'p90 ms':>8} {'max ms':>8} findings")
    for kind in ("comment", "call"):
        took = []
        for n in range(args.rounds):
            version += 1
            took.append(await bench.edit(version, edits(text, kind, n)) * 1000)
        took.sort()
        p90 = took[min(len(took) - 1, int(0.9 * len(took)))]
        print(
            f"{kind:<8} {len(took):>3} {statistics.median(took):>10.0f} {p90:>8.0f} "
            f"{took[-1]:>8.0f} {bench.counts[version]}"
        )
    await bench.until(lambda: any("index rebuilt" in m for _, m in bench.logs), 1800)
    for _, message in bench.logs:
        if "index rebuilt" in message:
            print(message)
    await bench.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default="sglang-0.5.23")
    parser.add_argument("--file", default="sglang/srt/speculative/dflash_utils.py")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cold", action="store_true", help="empty the tree's imlint cache first")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
