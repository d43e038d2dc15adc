"""The project pass: allocating callables across files (IM003) and reach (armed sites)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from imlint.options import AnalysisOptions
from imlint.project import ProjectIndex, module_name, summarize

from .conftest import run_imlint

# A package whose warm-up runs under inference mode and calls, through two modules,
# into a lazy allocator (IM002) and a lazy store of a helper's result (IM003).
PACKAGE = {
    "pkg/__init__.py": "",
    "pkg/kernels/__init__.py": "",
    "pkg/kernels/scratch.py": """
        import torch

        _SPLIT = {}


        def make_workspace(n):
            return torch.empty(n, 64, dtype=torch.uint8)


        def split_pages(kv, n):
            if n not in _SPLIT:
                _SPLIT[n] = torch.empty(n, 4096, dtype=torch.uint8)
            _split_kernel[(n,)](kv, _SPLIT[n])
            return _SPLIT[n]
        """,
    "pkg/layers/__init__.py": "",
    "pkg/layers/attention.py": """
        from ..kernels import scratch
        from ..kernels.scratch import make_workspace


        class Attention:
            def forward(self, kv, n):
                if self._ws is None:
                    self._ws = make_workspace(n)
                _scale_kernel[(n,)](self._ws)
                return scratch.split_pages(kv, n)
        """,
    "pkg/runner.py": """
        import torch

        from pkg.layers.attention import Attention


        class Runner:
            def __init__(self):
                self.attn = Attention()

            def warmup(self, kv):
                with torch.inference_mode():
                    self.autotune(kv)

            def autotune(self, kv):
                self.attn.forward(kv, 16)
        """,
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def check_json(root: Path, *args: str) -> list[dict]:
    r = run_imlint("check", "pkg", "--output-format", "json", *args, cwd=root)
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


def by_line(items: list[dict]) -> dict[tuple[str, int], dict]:
    return {(Path(d["path"]).name, d["line"]): d for d in items}


def test_warmup_under_inference_mode_arms_sites_two_modules_away(tmp_path):
    write_tree(tmp_path, PACKAGE)
    found = by_line(check_json(tmp_path, "--no-cache"))
    assert set(found) == {("scratch.py", 12), ("attention.py", 8)}
    direct, hidden = found[("scratch.py", 12)], found[("attention.py", 8)]
    assert direct["code"] == "IM002" and hidden["code"] == "IM003"
    assert "make_workspace returns a tensor via torch.empty" in hidden["message"]
    for d in (direct, hidden):
        assert d["armed"] is True
    assert direct["reach"] == (
        "Runner.warmup [inference_mode] -> Runner.autotune -> Attention.forward -> split_pages"
    )
    assert (
        hidden["reach"] == "Runner.warmup [inference_mode] -> Runner.autotune -> Attention.forward"
    )


def test_without_the_inference_mode_region_there_is_no_path(tmp_path):
    files = dict(PACKAGE)
    files["pkg/runner.py"] = PACKAGE["pkg/runner.py"].replace(
        "with torch.inference_mode():", "if True:"
    )
    write_tree(tmp_path, files)
    found = check_json(tmp_path, "--no-cache")
    assert len(found) == 2
    for d in found:
        assert d["armed"] is False
        assert d["reach"].startswith("no path found (") and d["reach"].endswith("unresolved calls)")


def test_a_guarded_site_is_not_reported_at_all(tmp_path):
    files = dict(PACKAGE)
    files["pkg/layers/attention.py"] = (
        PACKAGE["pkg/layers/attention.py"]
        .replace(
            "                    self._ws = make_workspace(n)",
            "                    with torch.inference_mode(False), torch.no_grad():\n"
            "                        self._ws = make_workspace(n)",
        )
        .replace(
            "from ..kernels import scratch", "import torch\n\n        from ..kernels import scratch"
        )
    )
    files["pkg/kernels/scratch.py"] = PACKAGE["pkg/kernels/scratch.py"].replace(
        "                _SPLIT[n] = torch.empty(n, 4096, dtype=torch.uint8)",
        "                with torch.inference_mode(False), torch.no_grad():\n"
        "                    _SPLIT[n] = torch.empty(n, 4096, dtype=torch.uint8)",
    )
    write_tree(tmp_path, files)
    assert check_json(tmp_path, "--no-cache") == []


def test_a_guard_in_the_only_caller_counts_and_explain_reach_says_so(tmp_path):
    files = dict(PACKAGE)
    files["pkg/layers/attention.py"] = """
        import torch

        from ..kernels import scratch


        class Attention:
            def forward(self, kv, n):
                with torch.inference_mode(False):
                    return scratch.split_pages(kv, n)
        """
    write_tree(tmp_path, files)
    assert check_json(tmp_path, "--no-cache") == []
    for args in (["--no-cache"], [], []):  # cold, then filling and reading the cache
        r = run_imlint("check", "pkg", "--explain-reach", *args, cwd=tmp_path)
        assert r.code == 0
        line = next(x for x in r.out.splitlines() if "scratch.py:12:" in x)
        assert "IM002 not reported: every call path passes through `inference_mode(False)`" in line
        assert "`Attention.forward`" in line
        assert "Project index: 6 files" in r.out


def test_an_unguarded_second_caller_keeps_the_site_reported(tmp_path):
    files = dict(PACKAGE)
    files["pkg/layers/attention.py"] = """
        import torch

        from ..kernels import scratch


        class Attention:
            def forward(self, kv, n):
                with torch.inference_mode(False):
                    return scratch.split_pages(kv, n)

            def forward_eager(self, kv, n):
                return scratch.split_pages(kv, n)
        """
    write_tree(tmp_path, files)
    assert [(Path(d["path"]).name, d["line"]) for d in check_json(tmp_path, "--no-cache")] == [
        ("scratch.py", 12)
    ]


def test_decorators_and_configured_regions_arm_sites(tmp_path):
    files = dict(PACKAGE)
    files["pkg/runner.py"] = """
        import torch

        from pkg.layers.attention import Attention
        from pkg.utils import DynamicGradMode


        class Runner:
            def __init__(self):
                self.attn = Attention()

            @DynamicGradMode()
            def forward_batch(self, kv):
                self.attn.forward(kv, 16)
        """
    files["pkg/utils.py"] = "class DynamicGradMode:\n    pass\n"
    write_tree(tmp_path, files)
    assert {d["armed"] for d in check_json(tmp_path, "--no-cache")} == {False}
    (tmp_path / "pyproject.toml").write_text(
        '[tool.imlint]\ninference-mode-regions = ["pkg.utils.DynamicGradMode"]\n'
    )
    found = check_json(tmp_path, "--no-cache")
    assert {d["armed"] for d in found} == {True}
    assert all(d["reach"].startswith("Runner.forward_batch [inference_mode]") for d in found)


def test_armed_findings_come_first_and_are_marked(tmp_path):
    files = dict(PACKAGE)
    files["pkg/aaa.py"] = """
        import torch

        _C = {}


        def cold(n):
            if n not in _C:
                _C[n] = torch.zeros(n)
            _C[n].add_(1)
            return _C[n]
        """
    write_tree(tmp_path, files)
    r = run_imlint("check", "pkg", "--no-cache", "--no-show-source", cwd=tmp_path)
    lines = [x for x in r.out.splitlines() if ": IM00" in x]
    assert [x.split(":")[0].rsplit("/", 1)[-1] for x in lines] == [
        "scratch.py",  # pkg/kernels/
        "attention.py",  # pkg/layers/
        "aaa.py",
    ]
    assert "[armed]" in lines[0] and "[armed]" not in lines[2]
    assert "2 armed" in r.out


def test_cache_follows_changes_in_other_files(tmp_path):
    """The project facts of a file change when another file changes: no stale result."""
    files = dict(PACKAGE)
    files["pkg/runner.py"] = PACKAGE["pkg/runner.py"].replace(
        "with torch.inference_mode():", "if True:"
    )
    write_tree(tmp_path, files)
    cold = check_json(tmp_path)
    assert {d["armed"] for d in cold} == {False}
    assert check_json(tmp_path) == cold  # warm, unchanged
    runner = tmp_path / "pkg/runner.py"
    runner.write_text(runner.read_text() + "\n# a comment\n")  # same summary
    assert check_json(tmp_path) == cold
    write_tree(tmp_path, {"pkg/runner.py": PACKAGE["pkg/runner.py"]})  # a region appears
    warm = check_json(tmp_path)
    assert {d["armed"] for d in warm} == {True}
    assert warm == check_json(tmp_path, "--no-cache")
    # The helper stops allocating: the IM003 site in another file goes.
    scratch = tmp_path / "pkg/kernels/scratch.py"
    scratch.write_text(
        scratch.read_text().replace(
            "    return torch.empty(n, 64, dtype=torch.uint8)", "    return None"
        )
    )
    after = check_json(tmp_path)
    assert [d["code"] for d in after] == ["IM002"]
    assert after == check_json(tmp_path, "--no-cache")


def test_fast_path_equals_plain_path_with_the_project_pass(tmp_path):
    write_tree(tmp_path, PACKAGE)
    fast = check_json(tmp_path, "--no-cache")
    plain = check_json(tmp_path, "--no-cache", "--no-fast", "-j", "1")
    assert fast == plain and len(fast) == 2


def test_fix_wraps_an_im003_site_found_through_another_module(tmp_path):
    write_tree(tmp_path, PACKAGE)
    r = run_imlint("fix", "pkg", "--no-cache", "--unsafe-fixes", cwd=tmp_path)
    assert r.code == 0, r.out + r.err
    text = (tmp_path / "pkg/layers/attention.py").read_text()
    assert (
        "with torch.inference_mode(False), torch.no_grad():\n                self._ws = make_workspace(n)"
        in text
    )
    assert "import torch\n" in text
    assert check_json(tmp_path, "--no-cache") == []


def test_sarif_carries_reach(tmp_path):
    write_tree(tmp_path, PACKAGE)
    r = run_imlint("check", "pkg", "--no-cache", "--output-format", "sarif", cwd=tmp_path)
    results = json.loads(r.out)["runs"][0]["results"]
    assert {res["properties"]["armed"] for res in results} == {True}
    assert all(" -> " in res["properties"]["reach"] for res in results)


# ---------------------------------------------------------------------- the index itself


def index_of(files: dict[str, str], root: Path) -> ProjectIndex:
    write_tree(root, files)
    return ProjectIndex(
        summarize(str(root / name), textwrap.dedent(text).lstrip("\n"), AnalysisOptions())
        for name, text in files.items()
    )


def test_module_names_follow_folders_also_without_init(tmp_path):
    (tmp_path / "ns" / "sub").mkdir(parents=True)
    name, is_package = module_name(str(tmp_path / "ns" / "sub" / "mod.py"))
    assert name.endswith("ns.sub.mod") and not is_package
    name, is_package = module_name(str(tmp_path / "ns" / "__init__.py"))
    assert name.endswith(".ns") and is_package


def test_index_resolves_reexports_bases_and_instances(tmp_path):
    files = {
        "lib/__init__.py": "from .impl import Workspace as Workspace\n",
        "lib/impl.py": """
            import torch

            class Base:
                def __init__(self, n):
                    self._init_buffers(n)

                def _init_buffers(self, n):
                    self.buf = torch.empty(n)

            class Workspace(Base):
                pass

            class Registry:
                def get(self, key, factory):
                    if key not in self._d:
                        self._d[key] = factory()
                    return self._d[key]

            REGISTRY = Registry()
            """,
        "app.py": """
            import lib
            from lib.impl import REGISTRY

            def use(n):
                w = lib.Workspace(n)
                return REGISTRY.get("k", lambda: None), w
            """,
    }
    index = index_of(files, tmp_path)
    facts = index.facts(str(tmp_path / "app.py"))
    chain, is_object, _content = facts.allocators["lib.Workspace"]
    assert is_object
    assert (
        chain
        == "Workspace extends Base: Base.__init__ allocates self.buf in Base._init_buffers via torch.empty"
    )
    position, param, helper, stored = facts.helpers["REGISTRY.get"]
    assert (position, param, helper) == (1, "factory", "Registry.get")
    assert "self._d" in stored


def test_unresolved_calls_are_counted_by_name(tmp_path):
    files = {
        "m.py": """
            import torch

            _C = {}

            def lazy(n):
                if n not in _C:
                    _C[n] = torch.empty(n)
                return _C[n]

            def caller(obj, n):
                obj.lazy(n)
                obj.other(n)
            """
    }
    index = index_of(files, tmp_path)
    target = index.target_of(str(tmp_path / "m.py"), "lazy")
    assert target is not None
    reach = index.reach(target)
    assert not reach.armed and reach.text() == "no path found (1 unresolved calls)"


def test_a_conversion_of_the_stored_value_is_not_a_lazy_allocation(tmp_path):
    files = {
        "m.py": """
            import torch

            def to_host(x):
                return torch.empty_like(x, device="cpu").copy_(x)

            class Output:
                def copy_to_cpu(self):
                    if self.logprobs is not None:
                        self.logprobs = to_host(self.logprobs)

                def lazy(self, x):
                    if self.host is None:
                        self.host = to_host(x)
                    return self.host
            """
    }
    write_tree(tmp_path, files)
    r = run_imlint(
        "check",
        "m.py",
        "--no-cache",
        "--output-format",
        "json",
        "--extend-select",
        "IM005",
        cwd=tmp_path,
    )
    # Nothing writes ``self.host``: the read-only tier.
    assert [(d["line"], d["code"]) for d in json.loads(r.out)] == [(13, "IM005")]


def test_a_helper_returning_an_object_says_so(tmp_path):
    files = {
        "m.py": """
            import torch

            class Group:
                def __init__(self, n):
                    self.flags = torch.zeros(n)

            def make_group(n):
                return Group(n)

            _G = None

            def group(n):
                global _G
                if _G is None:
                    _G = make_group(n)
                _G.flags.zero_()
                return _G
            """
    }
    index = index_of(files, tmp_path)
    chain, is_object, _content = index.facts(str(tmp_path / "m.py")).allocators["make_group"]
    assert is_object
    assert (
        chain
        == "make_group returns Group(...) -> Group.__init__ allocates self.flags via torch.zeros"
    )
    r = run_imlint("check", "m.py", "--no-cache", "--output-format", "json", cwd=tmp_path)
    ((line, code, severity),) = [(d["line"], d["code"], d["severity"]) for d in json.loads(r.out)]
    assert (line, code, severity) == (15, "IM003", "error")  # ``_G.flags.zero_()``


def test_prefilter_reads_calls_not_words(tmp_path):
    """A file that only mentions allocator names (in text) is never parsed by LibCST; a
    call through an import alias of an allocator still is; fast == plain."""
    files = {
        "words.py": '"""Returns a tensor full of ones, empty or zeros."""\n\ndef f(x):\n    return x\n',
        "alias.py": """
            from torch import empty as alloc

            _C = {}

            def get(n):
                if n not in _C:
                    _C[n] = alloc(n)
                _C[n].zero_()
                return _C[n]
            """,
    }
    write_tree(tmp_path, files)
    options = AnalysisOptions()
    words = summarize(str(tmp_path / "words.py"), (tmp_path / "words.py").read_text(), options)
    alias = summarize(str(tmp_path / "alias.py"), (tmp_path / "alias.py").read_text(), options)
    assert not words.may_allocate and alias.may_allocate
    fast = run_imlint("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    plain = run_imlint(
        "check", ".", "--no-cache", "--no-fast", "-j", "1", "--output-format", "json", cwd=tmp_path
    )
    assert fast.out == plain.out
    assert [(Path(d["path"]).name, d["line"]) for d in json.loads(fast.out)] == [("alias.py", 7)]


def test_a_local_function_handed_to_a_get_or_create_helper_is_the_site(tmp_path):
    files = {
        "reg.py": """
            class Registry:
                def __init__(self):
                    self._d = {}

                def get(self, key, factory):
                    if key not in self._d:
                        self._d[key] = factory()
                    return self._d[key]

            REGISTRY = Registry()
            """,
        "use.py": """
            import torch

            from reg import REGISTRY

            def split(n):
                def make():
                    return torch.empty(n)

                buf = REGISTRY.get("split", make)
                buf.zero_()
                return buf
            """,
    }
    write_tree(tmp_path, files)
    r = run_imlint("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    ((d,),) = [json.loads(r.out)]
    assert (Path(d["path"]).name, d["line"], d["code"]) == ("use.py", 9, "IM003")
    assert "the factory `make`: split.make returns a tensor via torch.empty" in d["message"]
    fixed = run_imlint("fix", ".", "--no-cache", "--unsafe-fixes", cwd=tmp_path)
    assert fixed.code == 0, fixed.out + fixed.err
    assert (
        '    with torch.inference_mode(False), torch.no_grad():\n        buf = REGISTRY.get("split", make)'
        in (tmp_path / "use.py").read_text()
    )


def test_summaries_are_the_same_in_every_process(tmp_path):
    """The cache compares summary digests made in workers and in the parent: they must
    not depend on string hashing or object identity."""
    import subprocess
    import sys

    (tmp_path / "m.py").write_text(
        textwrap.dedent(PACKAGE["pkg/kernels/scratch.py"])
        + "\nclass R:\n    def get(self, k, make, other):\n"
        + "        if k not in self._d:\n            self._d[k] = make() or other()\n"
        + "        return self._d[k]\n"
    )
    code = (
        "import sys; from imlint.project import summarize, summary_digest;"
        "from imlint.options import AnalysisOptions;"
        "print(summary_digest(summarize(sys.argv[1], open(sys.argv[1]).read(),"
        " AnalysisOptions()).to_data()))"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code, "m.py"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1


def test_a_function_handing_its_factory_to_a_helper_is_a_helper(tmp_path):
    """``def get_buffer(name, factory): return _CTX.get_buffer(name, factory)``: calls
    of it keep what the factory makes, even when imported inside the caller."""
    files = {
        "ctx.py": """
            class Context:
                def __init__(self):
                    self.buffers = {}

                def get_buffer(self, name, factory):
                    buf = self.buffers.get(name)
                    if buf is None:
                        buf = factory()
                        self.buffers[name] = buf
                    return buf

            _CTX = Context()

            def get_buffer(name, factory):
                return _CTX.get_buffer(name, factory)

            def describe(name, factory):
                return print(name, factory)
            """,
        "use.py": """
            import torch

            def workspace(n):
                from ctx import {helper}

                return {helper}("ws", lambda: torch.empty(n, dtype=torch.uint8))
            """,
    }
    write_tree(tmp_path, {**files, "use.py": files["use.py"].replace("{helper}", "get_buffer")})
    r = run_imlint("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    found = [(Path(d["path"]).name, d["line"], d["code"]) for d in json.loads(r.out)]
    assert found == [("use.py", 6, "IM003")]
    # Called while a long-lived object is built: eager, not a first use.
    in_init = """
        import torch
        from ctx import get_buffer

        class B:
            def __init__(self, n):
                self.ws = get_buffer("ws", lambda: torch.empty(n, dtype=torch.uint8))
        """
    write_tree(tmp_path, {"use.py": in_init})
    r = run_imlint("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    assert json.loads(r.out) == []
    write_tree(tmp_path, {"use.py": files["use.py"].replace("{helper}", "describe")})
    r = run_imlint("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    assert json.loads(r.out) == []


def test_code_that_runs_only_in_a_new_thread_is_not_reported(tmp_path):
    """Inference mode is per thread and off in a new one: a buffer made only on the way
    from a ``threading.Thread`` target is never an inference tensor."""
    video = """
        import threading

        import torch

        _BUF = {}

        def _acquire(n):
            buf = _BUF.get(n)
            if buf is None:
                buf = torch.empty(n, dtype=torch.uint8)
                _BUF[n] = buf
            return buf

        class Encoder:
            def _pipe(self, frames):
                for f in frames:
                    _acquire(f.numel())[: f.numel()].copy_(f.flatten())

            def start(self, frames):
                self._t = {start}
        """
    thread = "threading.Thread(target=self._pipe, args=(frames,), daemon=True)"
    write_tree(tmp_path, {"video.py": video.replace("{start}", thread)})
    r = run_imlint("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    assert json.loads(r.out) == []
    r = run_imlint("check", ".", "--no-cache", "--explain-reach", cwd=tmp_path)
    assert "a new thread" in r.out and "`Encoder.start`" in r.out
    write_tree(tmp_path, {"video.py": video.replace("{start}", "self._pipe(frames)")})
    r = run_imlint("check", ".", "--no-cache", "--output-format", "json", cwd=tmp_path)
    assert [(d["line"], d["code"]) for d in json.loads(r.out)] == [(10, "IM001")]
