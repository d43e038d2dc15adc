"""Installed packages: the sources of third-party packages the project imports, read
(never imported) from the target environment's site-packages, summarised like project
files, and joined to the project index as library code. A library's constructors that
keep tensors make ``layer._wrapper = Wrapper(...)`` an allocating call (IM003) without
``extra-allocators``; its context managers can be regions; its get-or-create helpers
count.

Where: the running interpreter's ``purelib``/``platlib`` folders, or those of
``--python PATH`` (asked of that interpreter in isolated mode: it runs no project code).
What: the top-level names the project's files import that are neither the project's own
packages, nor the standard library, nor packages imlint models itself (``torch``,
``triton``, ``numpy``), nor named in ``skip-installed``; ``installed-packages = false``
turns it all off.

Summaries are cached per package, version and summary layout in the user's cache folder
(``$XDG_CACHE_HOME/imlint/packages``), never inside the checked tree: a pull request
cannot plant one."""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import re
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from imlint import cachefile

if TYPE_CHECKING:
    from imlint.project import FileSummary

#: Packages imlint models itself, or too big to summarise for what they would add.
MODELLED = frozenset({"torch", "triton", "numpy", "jax", "tensorflow", "imlint"})
#: A package with more Python files than this is left out (and said so in stats).
MAX_FILES = 4000
_DIST_SUFFIXES = (".dist-info", ".egg-info")


class InstalledError(Exception):
    """The interpreter given with ``--python`` cannot tell its site-packages."""


@dataclass(frozen=True)
class Library:
    """One installed package the project imports."""

    name: str  # top-level import name
    folder: Path  # the package folder (or a single module file)
    version: str  # the distribution's version, or the folder's modification time

    def key(self, layout: str) -> str:
        """The cache key: the package, its version and folder, the summary layout, and
        every file's size and modification time (a reinstall of the same version with
        other files is summarised anew)."""
        stamps = []
        for path in library_files(self):
            with contextlib.suppress(OSError):
                st = path.stat()
                stamps.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
        text = "\n".join([self.name, self.version, str(self.folder), layout, *stamps])
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def site_folders(python: str | None) -> list[Path]:
    """The folders third-party packages are installed into."""
    if python is None:
        paths = sysconfig.get_paths()
        found = [paths.get("purelib"), paths.get("platlib")]
    else:
        code = "import json, sysconfig; p = sysconfig.get_paths(); print(json.dumps([p['purelib'], p['platlib']]))"
        try:
            out = subprocess.run(
                [python, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=True
            ).stdout
            found = json.loads(out)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise InstalledError(
                f"--python {python}: cannot read its site-packages ({exc})"
            ) from None
    folders: list[Path] = []
    for f in found:
        if isinstance(f, str) and os.path.isdir(f) and Path(f) not in folders:
            folders.append(Path(f))
    return folders


def environment_key(folders: Iterable[Path]) -> str:
    """What installed packages there are, by name and version (the names of their
    metadata folders) and when each was installed: a change means the project facts
    are recomputed."""
    names: list[str] = []
    for folder in folders:
        try:
            found = [n for n in os.listdir(folder) if n.endswith(_DIST_SUFFIXES)]
        except OSError:
            continue
        for name in found:  # a reinstall of the same version makes its folder anew
            with contextlib.suppress(OSError):
                names.append(f"{name}:{(folder / name).stat().st_mtime_ns}")
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:24]


def imported_names(
    imports: Iterable[str], project_roots: set[str], skip: Iterable[str]
) -> set[str]:
    """Top-level names of installed packages worth reading among ``imports`` (qualified
    import targets)."""
    left_out = project_roots | MODELLED | set(skip) | set(sys.stdlib_module_names)
    heads = {q.split(".", 1)[0] for q in imports if q and not q.startswith(".")}
    return {h for h in heads if h.isidentifier() and h not in left_out}


def find_libraries(names: Iterable[str], folders: list[Path]) -> list[Library]:
    """The installed packages among ``names`` built on torch (their distribution
    requires it, or, without metadata, a file imports it), each from the first folder
    holding it: other packages cannot allocate a tensor."""
    dists = _distributions(folders)
    found: list[Library] = []
    for name in sorted(names):
        for folder in folders:
            package, module = folder / name, folder / f"{name}.py"
            where = package if package.is_dir() else module if module.is_file() else None
            if where is None:
                continue
            version, on_torch = dists.get(name, (f"mtime-{int(where.stat().st_mtime)}", None))
            lib = Library(name, where, version)
            if on_torch or (on_torch is None and _imports_torch(lib)):
                found.append(lib)
            break
    return found


_TORCH_REQUIREMENT = re.compile(r"^torch\b", re.I)
_TORCH_IMPORT = re.compile(r"^\s*(import|from)\s+torch\b", re.M)


def _distributions(folders: list[Path]) -> dict[str, tuple[str, bool]]:
    """Top-level import name -> (version, whether the distribution requires torch),
    from the metadata folders (``top_level.txt``, else the distribution's own name)."""
    out: dict[str, tuple[str, bool]] = {}
    for folder in folders:
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(_DIST_SUFFIXES):
                continue
            dist, _, version = entry.rsplit(".", 1)[0].partition("-")
            meta = folder / entry
            tops = [dist.replace("-", "_").lower()]
            text = _read(meta / "top_level.txt")
            tops = [t.strip() for t in text.splitlines() if t.strip()] or tops
            requires = [
                line.split(":", 1)[1].strip()
                for line in _read(meta / "METADATA").splitlines()
                if line.startswith("Requires-Dist:")
            ] + _read(meta / "requires.txt").splitlines()
            on_torch = any(_TORCH_REQUIREMENT.match(r.strip()) for r in requires)
            for top in tops:
                out.setdefault(top, (version or "unknown", on_torch))
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _imports_torch(lib: Library) -> bool:
    return any(_TORCH_IMPORT.search(_read(p)) for p in library_files(lib))


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "imlint" / "packages"


def library_files(lib: Library) -> list[Path]:
    """The Python files of a library (none when it has more than ``MAX_FILES``)."""
    if lib.folder.is_file():
        return [lib.folder]
    files: list[Path] = []
    for root, dirs, names in os.walk(lib.folder):
        dirs[:] = sorted(d for d in dirs if d.isidentifier())  # no tests-data, no caches
        files += [Path(root) / n for n in sorted(names) if n.endswith(".py")]
        if len(files) > MAX_FILES:
            return []
    return files


def cache_path(lib: Library, layout: str) -> Path:
    """Where a library's summaries are cached (its key walks the library once)."""
    return cache_folder() / f"{lib.name}-{lib.key(layout)}.bin"


def load_cached(path: Path) -> list[object] | None:
    """A library's summaries (``FileSummary.to_data``), if this user cached them."""
    payload = cachefile.read(path)
    if payload is None:
        return None
    try:
        data = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    return data if isinstance(data, list) else None


def store_cached(path: Path, data: list[object]) -> None:
    """Cache a library's summaries (signed like every cache of ours)."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        cachefile.write(path, marshal.dumps(data))


def wanted_names(project: Iterable[FileSummary]) -> set[str]:
    """The qualified names the project's files import or call through an import
    (``flashinfer.gemm.bmm_fp8``, ``flashinfer.fused_moe``): where reading a library
    starts (``reachable``)."""
    out: set[str] = set()
    for s in project:
        out.update(q for q in s.imports.values() if q and not q.startswith("."))
        for d in s.defs.values():
            for text, _ in d.calls:
                head, dot, rest = text.partition(".")
                if dot and head in s.imports:
                    out.add(f"{s.imports[head]}.{rest}")
    return out


def reachable(
    lib: Library,
    wanted: Iterable[str],
    summarize: Callable[[list[str]], dict[str, tuple[object, ...]]],
    known: dict[str, tuple[object, ...]],
) -> list[FileSummary]:
    """The summaries of the library's files the project can reach: the modules it names
    (``wanted``) and, from each, what that module imports or calls through an import,
    within the library; a package's ``__init__`` is read, and followed only for the
    names asked of it (a re-export leads to the module defining the name; a name
    defined there, or one it cannot tell, follows all its imports). ``known`` holds summaries by path (a cache), and gains what ``summarize``
    (paths -> summary data) makes."""
    walk = _Closure(lib, known)
    pending = sorted(q for q in wanted if q.split(".", 1)[0] == lib.name)
    while pending:
        need = sorted({p for q in pending for p in walk.files_for(q) if p not in known})
        if need:
            known.update(summarize(need))
        pending = [nxt for q in sorted(set(pending)) for nxt in walk.follow(q)]
    return list(walk.reached.values())


class _Closure:
    """What ``reachable`` has read of one library so far."""

    def __init__(self, lib: Library, known: dict[str, tuple[object, ...]]) -> None:
        self.lib = lib
        self.known = known
        self.reached: dict[str, FileSummary] = {}
        self.followed: set[str] = set()
        self.asked: set[str] = set()
        self.base = lib.folder.parent

    def file_of(self, module: str) -> str | None:
        if module.split(".", 1)[0] != self.lib.name:
            return None  # another package (a re-export of ``otherlib.thing``): not ours
        if self.lib.folder.is_file():
            return str(self.lib.folder) if module == self.lib.name else None
        path = self.base.joinpath(*module.split("."))
        for candidate in (path.with_suffix(".py"), path / "__init__.py"):
            if candidate.is_file():
                return str(candidate)
        return None

    def files_for(self, name: str) -> list[str]:
        """The files a name loads: each package ``__init__`` on the way, and the
        deepest module it names."""
        parts = name.split(".")
        found = [self.file_of(".".join(parts[: i + 1])) for i in range(len(parts))]
        return [f for f in found if f is not None]

    def summary(self, path: str) -> FileSummary | None:
        from imlint.project import FileSummary

        if path not in self.reached:
            data = self.known.get(path)
            if data is None:
                return None
            self.reached[path] = FileSummary.from_data(data)
        return self.reached[path]

    def follow(self, name: str) -> list[str]:
        """The names to read next for ``name`` (read once)."""
        if name in self.asked:
            return []
        self.asked.add(name)
        parts = name.split(".")
        deepest, depth = None, 0
        for i in range(len(parts)):
            path = self.file_of(".".join(parts[: i + 1]))
            if path is not None:
                self.summary(path)
                deepest, depth = path, i + 1
        s = self.summary(deepest) if deepest is not None else None
        if deepest is None or s is None:
            return []
        rest = parts[depth:]
        if s.is_package:
            if not rest:
                return []  # the package itself: read; what is used of it is asked by name
            if rest[0] in s.imports:  # a re-export: the module that defines it
                return [".".join([s.imports[rest[0]], *rest[1:]])]
        return self._whole(deepest, s)

    def _whole(self, path: str, s: FileSummary) -> list[str]:
        if path in self.followed:
            return []
        self.followed.add(path)
        head = self.lib.name
        return sorted(q for q in wanted_names([s]) if q.split(".", 1)[0] == head)
