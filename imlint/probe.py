"""``imlint probe``: record, at run time, which mode each lazy allocation really ran under.

An import hook rewrites, in memory, every allocation that ``imlint check`` flags in the
probed package (``--all-sites``: every lazy persistent allocation, guarded ones too):
``torch.empty(n)`` becomes ``__imlint_probe__("site", torch.empty(n))`` on the same line,
so line numbers in tracebacks stay right and no file on disk changes. At each allocation
the recorder notes the thread, ``torch.is_inference_mode_enabled()``, whether a CUDA
stream is capturing, and ``Tensor.is_inference()``. For inference tensors it then watches
(with a ``TorchFunctionMode`` in that thread, active only while such a tensor has not been
written yet) for the first torch-level in-place write outside inference mode, and records
whether it worked or the error it raised. At exit (also on an exception or Ctrl-C) each
process writes a JSON file; ``imlint probe`` merges them and prints a Markdown table.

Modules outside the probed package are not touched: the finder returns at once.
Torch is needed only here, never by the linter.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

PROBE_NAME = "__imlint_probe__"
ENV_PACKAGE = "IMLINT_PROBE_PACKAGE"
ENV_PATH = "IMLINT_PROBE_PATH"
ENV_ALL = "IMLINT_PROBE_ALL_SITES"
ENV_OUT = "IMLINT_PROBE_OUT"


# ------------------------------------------------------------------------------ records


@dataclass
class SiteRecord:
    site: str  # path:line
    code: str  # IM001, IM002, ... or "guarded"
    function: str
    allocations: int = 0
    under_inference_mode: int = 0
    outside_inference_mode: int = 0
    capturing: int = 0
    inference_tensors: int = 0
    threads: list[str] = field(default_factory=list)
    first_mode: str = ""  # the mode of the first allocation
    first_write: str = ""  # the first torch in-place write outside inference mode
    outcome: str = ""  # "ok", the error text, or "" (no such write seen)


class Recorder:
    """Collects allocation events in one process (thread-safe)."""

    def __init__(self) -> None:
        self.sites: dict[str, SiteRecord] = {}
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[str, Any]] = {}  # storage ptr -> (site, weakref)
        self._modes: dict[int, Any] = {}  # thread id -> active write watcher

    def register(self, site: str, code: str, function: str) -> None:
        self.sites.setdefault(site, SiteRecord(site, code, function))

    def probe(self, site: str, value: Any) -> Any:
        """Called in place of the allocation's value: record it, return it unchanged."""
        with contextlib.suppress(Exception):  # the probe must never break the program
            self._record(site, value)
        return value

    def _record(self, site: str, value: Any) -> None:
        import torch

        tensors = [t for t in _tensors_in(value) if isinstance(t, torch.Tensor)]
        inference = torch.is_inference_mode_enabled()
        capturing = False
        if torch.cuda.is_available() and any(t.is_cuda for t in tensors):
            with contextlib.suppress(Exception):
                capturing = bool(torch.cuda.is_current_stream_capturing())
        thread = threading.current_thread().name
        with self._lock:
            rec = self.sites.setdefault(site, SiteRecord(site, "?", ""))
            rec.allocations += 1
            if inference:
                rec.under_inference_mode += 1
            else:
                rec.outside_inference_mode += 1
            rec.capturing += capturing
            if thread not in rec.threads:
                rec.threads.append(thread)
            if not rec.first_mode:
                rec.first_mode = "inference_mode" if inference else "normal"
                if capturing:
                    rec.first_mode += ", capturing"
            for t in tensors:
                if t.is_inference():
                    rec.inference_tensors += 1
                    with contextlib.suppress(Exception):
                        ptr = t.untyped_storage().data_ptr()
                        self._pending[ptr] = (site, weakref.ref(t))
        if self._pending:
            self._watch_writes()

    # -- the first in-place write to an inference tensor outside inference mode

    def _watch_writes(self) -> None:
        tid = threading.get_ident()
        if tid in self._modes:
            return
        mode = _make_watcher(self)
        mode.__enter__()
        self._modes[tid] = mode

    def match(self, tensor: Any) -> str | None:
        try:
            ptr = tensor.untyped_storage().data_ptr()
        except Exception:
            return None
        entry = self._pending.get(ptr)
        return entry[0] if entry is not None else None

    def written(self, tensor: Any, site: str, op: str, outcome: str) -> None:
        with self._lock:
            rec = self.sites[site]
            if not rec.first_write:
                rec.first_write = op
                rec.outcome = outcome
            with contextlib.suppress(Exception):
                self._pending.pop(tensor.untyped_storage().data_ptr(), None)

    def rows(self) -> list[SiteRecord]:
        return sorted(self.sites.values(), key=lambda r: r.site)

    def dump(self, path: str | os.PathLike[str]) -> None:
        data = {"pid": os.getpid(), "argv": sys.argv, "sites": [asdict(r) for r in self.rows()]}
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=1)
        os.replace(tmp, path)


def _tensors_in(value: Any) -> list[Any]:
    """Tensors an allocation produced: the value, a tuple of them, or an object's fields."""
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _tensors_in(item)]
    if isinstance(value, dict):
        return [v for item in value.values() for v in _tensors_in(item)]
    if type(value).__module__.startswith("torch"):
        return [value]
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict):
        return [v for v in fields.values() if type(v).__module__.startswith("torch")]
    return []


def _make_watcher(recorder: Recorder) -> Any:
    import torch
    from torch.overrides import TorchFunctionMode

    class WriteWatcher(TorchFunctionMode):
        """Sees every torch call in this thread while an inference tensor awaits its first write."""

        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            if not recorder._pending or torch.is_inference_mode_enabled():
                return func(*args, **kwargs)
            name = getattr(func, "__name__", "")
            targets: list[Any] = []
            if (name.endswith("_") and not name.endswith("__") and args) or (
                name == "__setitem__" and args
            ):
                targets.append(args[0])
            out = kwargs.get("out")
            if out is not None:
                targets.extend(out if isinstance(out, (tuple, list)) else [out])
            hit = next(((t, s) for t in targets if (s := recorder.match(t)) is not None), None)
            if hit is None:
                return func(*args, **kwargs)
            tensor, site = hit
            op = f"{name}()" if name != "__setitem__" else "x[...] = ..."
            try:
                result = func(*args, **kwargs)
            except RuntimeError as exc:
                first = str(exc).splitlines()[0].split(".")[0]  # the message's first sentence
                recorder.written(tensor, site, op, f"RuntimeError: {first}")
                raise
            recorder.written(tensor, site, op, "ok")
            return result

    return WriteWatcher()


RECORDER = Recorder()


# ---------------------------------------------------------------------- the transform


def instrument(source: str, path: str, all_sites: bool) -> tuple[str, list[tuple[str, str, str]]]:
    """The source with every selected allocation wrapped, and the sites (id, code, function)."""
    import libcst as cst

    from imlint.config import find_config, load_settings
    from imlint.engine import Linter, split_guarded

    settings = load_settings(find_config(Path(path)))
    linter = Linter(settings)
    module, model, facts = linter.model(path, source)
    chosen: dict[int, tuple[str, str, str]] = {}
    reported, _ = split_guarded(linter.findings(path, source, model), facts)
    for f in reported:
        if f.site is not None:
            chosen[id(f.site.call)] = (f"{_shown(path)}:{f.line}", f.code, f.function)
    if all_sites:
        for site in model.sites:
            if id(site.call) not in chosen and (
                site.lazy is not None or site.mode.value == "inference"
            ):
                label = "guarded" if site.mode.value == "guarded" else "lazy"
                chosen[id(site.call)] = (
                    f"{_shown(path)}:{site.line}",
                    label,
                    site.function.qualname,
                )
    if not chosen:
        return source, []

    class Wrap(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            info = chosen.get(id(original))
            if info is None:
                return updated
            return cst.Call(
                func=cst.Name(PROBE_NAME),
                args=[cst.Arg(cst.SimpleString(json.dumps(info[0]))), cst.Arg(updated)],
            )

    return module.visit(Wrap()).code, list(chosen.values())


def _shown(path: str) -> str:
    """A path relative to the working folder when it is inside it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


class ProbeLoader(importlib.machinery.SourceFileLoader):
    """Loads a module from source with its allocation sites wrapped; writes no bytecode."""

    all_sites = False

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        from imlint.source import decode

        text = decode(data).text
        try:
            new_text, sites = instrument(text, path, self.all_sites)
        except Exception:
            new_text, sites = text, []  # not analysable: load it as it is
        for site, code, function in sites:
            RECORDER.register(site, code, function)
        return compile(new_text, path, "exec", dont_inherit=True)

    def exec_module(self, module: ModuleType) -> None:
        module.__dict__[PROBE_NAME] = RECORDER.probe
        super().exec_module(module)


class ProbeFinder(importlib.abc.MetaPathFinder):
    """Hands modules of the probed package (or folder) to :class:`ProbeLoader`."""

    def __init__(self, package: str | None, path: str | None, all_sites: bool) -> None:
        self.package = package
        self.path = os.path.realpath(path) if path else None
        self.all_sites = all_sites

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if self.package is not None and not (
            fullname == self.package or fullname.startswith(self.package + ".")
        ):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        if self.path is not None and not os.path.realpath(spec.origin).startswith(
            self.path + os.sep
        ):
            return None
        loader = ProbeLoader(fullname, spec.origin)
        loader.all_sites = self.all_sites
        return importlib.util.spec_from_file_location(
            fullname,
            spec.origin,
            loader=loader,
            submodule_search_locations=spec.submodule_search_locations,
        )


@contextlib.contextmanager
def probing(
    package: str | None = None, path: str | None = None, all_sites: bool = False
) -> Iterator[Recorder]:
    """Probe modules of ``package`` (or under ``path``) imported inside the block."""
    if package is None and path is None:
        raise ValueError("probing() needs a package or a path")
    finder = ProbeFinder(package, path, all_sites)
    sys.meta_path.insert(0, finder)
    try:
        yield RECORDER
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)


def install_from_env() -> None:
    """Called from the ``sitecustomize`` that ``imlint probe`` puts on PYTHONPATH."""
    package, path = os.environ.get(ENV_PACKAGE), os.environ.get(ENV_PATH)
    out = os.environ.get(ENV_OUT)
    if not out or not (package or path):
        return
    sys.meta_path.insert(
        0, ProbeFinder(package or None, path or None, os.environ.get(ENV_ALL) == "1")
    )
    atexit.register(lambda: RECORDER.dump(Path(out) / f"probe-{os.getpid()}.json"))


# ------------------------------------------------------------------------------ report


def merge(files: Sequence[Path]) -> list[dict[str, Any]]:
    """Merge the per-process JSON files: counts add up, first events are kept."""
    merged: dict[str, dict[str, Any]] = {}
    for f in sorted(files):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for row in data.get("sites", []):
            cur = merged.get(row["site"])
            if cur is None:
                merged[row["site"]] = dict(row)
                continue
            for k in (
                "allocations",
                "under_inference_mode",
                "outside_inference_mode",
                "capturing",
                "inference_tensors",
            ):
                cur[k] += row[k]
            cur["threads"] = sorted(set(cur["threads"]) | set(row["threads"]))
            for k in ("first_mode", "first_write", "outcome", "code", "function"):
                if not cur.get(k) and row.get(k):
                    cur[k] = row[k]
    return sorted(merged.values(), key=lambda r: r["site"])


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        "| site | code | first touch | allocations (inference / normal) | capturing | "
        "is_inference | first in-place write outside inference mode | outcome |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    body = ""
    for r in rows:
        outcome = r["outcome"] or (
            "no write seen" if r["inference_tensors"] else "n/a (not an inference tensor)"
        )
        body += (
            f"| {r['site']} | {r['code']} | {r['first_mode'] or 'never allocated'} | "
            f"{r['allocations']} ({r['under_inference_mode']} / {r['outside_inference_mode']}) | "
            f"{r['capturing']} | {'True' if r['inference_tensors'] else 'False'} | "
            f"{r['first_write'] or '-'} | {outcome} |\n"
        )
    return head + body


_SITECUSTOMIZE = """\
# Written by `imlint probe`: install the probe, then run any sitecustomize this one shadows.
import importlib.machinery
import importlib.util
import os
import sys

import imlint.probe

imlint.probe.install_from_env()
_here = os.path.dirname(os.path.abspath(__file__))
_rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _shadowed = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_shadowed)
"""


def run_probe(
    command: Sequence[str], package: str | None, path: str | None, all_sites: bool, out: str
) -> int:
    """Run ``command`` with the probe in every Python process it starts; report; return its
    exit status (the program's own output is untouched; the table goes to stderr)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="imlint-probe-") as tmp:
        hook, results = Path(tmp) / "hook", Path(tmp) / "results"
        hook.mkdir()
        results.mkdir()
        (hook / "sitecustomize.py").write_text(_SITECUSTOMIZE, encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook), env.get("PYTHONPATH", "")) if p)
        env[ENV_OUT] = str(results)
        env[ENV_PACKAGE] = package or ""
        env[ENV_PATH] = os.path.abspath(path) if path else ""
        env[ENV_ALL] = "1" if all_sites else "0"
        try:
            code = subprocess.call(list(command), env=env)
        except KeyboardInterrupt:
            code = 130
        except OSError as exc:
            print(
                f"imlint probe: error: cannot run {command[0]!r}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return 2
        rows = merge(sorted(results.glob("probe-*.json")))
    Path(out).write_text(
        json.dumps({"command": list(command), "sites": rows}, indent=1) + "\n", encoding="utf-8"
    )
    print(f"\nimlint probe: {len(rows)} site(s); JSON in {out}\n", file=sys.stderr)
    print(markdown(rows), file=sys.stderr, end="")
    return code
