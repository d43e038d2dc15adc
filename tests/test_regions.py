"""Regions the project opens for itself (context managers, decorators made from them),
callables handed into regions, and reach's dispatch tier (calls by name)."""

from __future__ import annotations

from pathlib import Path

from .test_project import check_json, index_of, write_tree

# A lazy, kernel-written buffer two calls below a runner, and a runner that warms it up
# in whichever way each test puts in ``pkg/runner.py``.
KERNEL = """
    import torch

    _BUFS = {}


    def split_pages(kv):
        buf = _BUFS.get("split")
        if buf is None or buf.shape[0] < kv.shape[0]:
            buf = torch.empty(kv.shape[0], 64)
            _BUFS["split"] = buf
        _split_kernel[(1,)](kv, buf)
        return buf
    """

TUNE = """
    import contextlib

    import torch


    @contextlib.contextmanager
    def autotune_context(runner):
        with torch.cuda.stream(runner.stream):
            with torch.inference_mode():
                yield


    def run_autotune(runner, forward_fn):
        with autotune_context(runner):
            forward_fn()
    """


def package(runner: str, tune: str = TUNE) -> dict[str, str]:
    return {
        "pkg/__init__.py": "",
        "pkg/kern.py": KERNEL,
        "pkg/tune.py": tune,
        "pkg/runner.py": runner,
    }


def reach_of(tmp_path: Path, files: dict[str, str]) -> dict:
    write_tree(tmp_path, files)
    found = [d for d in check_json(tmp_path, "--no-cache") if d["path"].endswith("kern.py")]
    assert len(found) == 1, found
    return found[0]


def test_a_nested_callable_handed_into_a_context_managers_region_is_armed(tmp_path):
    runner = """
        import torch
        from pkg.tune import run_autotune
        from pkg.kern import split_pages

        class Runner:
            def warmup(self):
                def forward_fn():
                    self._dummy_run(4)
                run_autotune(self, forward_fn)

            def _dummy_run(self, n):
                split_pages(torch.zeros(n))
        """
    d = reach_of(tmp_path, package(runner))
    assert d["armed"] is True and d["tier"] == "exact"
    assert d["reach"] == (
        "run_autotune [inference_mode via `autotune_context`, calls `forward_fn`] -> "
        "Runner.warmup.forward_fn -> Runner._dummy_run -> split_pages"
    )


def test_bound_methods_lambdas_and_partials_are_callables_too(tmp_path):
    for handed, first in [
        ("self._dummy_run", "Runner._dummy_run"),
        ("lambda: self._dummy_run()", "Runner._dummy_run"),
        ("functools.partial(self._dummy_run, 4)", "Runner._dummy_run"),
    ]:
        runner = f"""
            import functools
            import torch
            from pkg.tune import run_autotune
            from pkg.kern import split_pages

            class Runner:
                def warmup(self):
                    run_autotune(self, {handed})

                def _dummy_run(self, n=4):
                    split_pages(torch.zeros(n))
            """
        d = reach_of(tmp_path, package(runner))
        assert d["tier"] == "exact", handed
        assert d["reach"].split(" -> ")[1] == first, handed


def test_a_callable_handed_on_through_another_function_still_runs_in_the_region(tmp_path):
    tune = (
        TUNE
        + """

    def tune_all(runner, fn):
        run_autotune(runner, forward_fn=fn)
    """
    )
    runner = """
        import torch
        from pkg.tune import tune_all
        from pkg.kern import split_pages

        def step():
            split_pages(torch.zeros(4))

        def warmup(runner):
            tune_all(runner, step)
        """
    d = reach_of(tmp_path, package(runner, tune))
    assert d["tier"] == "exact"
    assert d["reach"].startswith(
        "tune_all [inference_mode via `autotune_context`, calls `fn` in `run_autotune`]"
    )
    assert d["reach"].endswith("-> step -> split_pages")


def test_a_context_manager_that_does_not_enter_inference_mode_arms_nothing(tmp_path):
    """sglang 0.5.18: the autotune context no longer enters ``inference_mode()``."""
    tune = TUNE.replace("with torch.inference_mode():", "with torch.no_grad():")
    runner = """
        import torch
        from pkg.tune import run_autotune
        from pkg.kern import split_pages

        def warmup(runner):
            run_autotune(runner, lambda: split_pages(torch.zeros(4)))
        """
    d = reach_of(tmp_path, package(runner, tune))
    assert d["armed"] is False and d["tier"] == ""


def test_context_managers_of_each_shape_make_regions(tmp_path):
    shapes = {
        # a class whose __enter__ enters inference mode by hand
        "class": """
            import torch

            class warm:
                def __enter__(self):
                    self._mode = torch.inference_mode()
                    self._mode.__enter__()
                    return self

                def __exit__(self, *exc):
                    return self._mode.__exit__(*exc)
            """,
        # a function returning the mode object (``maybe_inference_mode()``)
        "returns": """
            import torch

            def warm():
                return torch.inference_mode()
            """,
        # a context manager around another one
        "nested": """
            import contextlib
            import torch

            @contextlib.contextmanager
            def inner():
                with torch.inference_mode():
                    yield

            @contextlib.contextmanager
            def warm():
                with inner():
                    yield
            """,
    }
    runner = """
        import torch
        from pkg.tune import warm
        from pkg.kern import split_pages

        def warmup():
            with warm():
                split_pages(torch.zeros(4))
        """
    for name, tune in shapes.items():
        d = reach_of(tmp_path, package(runner, tune))
        assert d["tier"] == "exact", name
        assert d["reach"] == "warmup [inference_mode via `warm`] -> split_pages", name


def test_a_decorator_made_from_a_context_manager_is_a_region(tmp_path):
    runner = """
        import contextlib
        import torch
        from pkg.kern import split_pages

        @contextlib.contextmanager
        def serving_mode():
            with torch.inference_mode():
                yield

        @serving_mode()
        def warmup():
            split_pages(torch.zeros(4))
        """
    d = reach_of(tmp_path, package(runner))
    assert d["tier"] == "exact"
    assert d["reach"] == "warmup [inference_mode] -> split_pages"


def test_a_context_manager_entering_inference_mode_on_some_paths_only(tmp_path):
    """``maybe_inference_mode()``: it may arm a site, but what runs under it does not
    run only in inference mode (a torch write there can still raise)."""
    tune = """
        import contextlib
        import os
        import torch

        @contextlib.contextmanager
        def maybe_inference_mode():
            if os.environ.get("USE_IM"):
                with torch.inference_mode():
                    yield
            else:
                yield
        """
    runner = """
        import torch
        from pkg.tune import maybe_inference_mode
        from pkg.kern import split_pages

        def warmup():
            with maybe_inference_mode():
                split_pages(torch.zeros(4))
        """
    d = reach_of(tmp_path, package(runner, tune))
    assert d["tier"] == "exact"
    assert d["reach"] == (
        "warmup [inference_mode on some paths via `maybe_inference_mode`] -> split_pages"
    )
    files = package(runner, tune)
    index = index_of(files, tmp_path)
    target = index.target_of(str(tmp_path / "pkg/kern.py"), "split_pages")
    assert target is not None and target not in index.confined
    always = tune.replace('if os.environ.get("USE_IM"):', "if True:").replace(
        "            else:\n                yield\n", ""
    )
    index = index_of(package(runner, always), tmp_path)
    assert target in index.confined


def test_a_project_guard_context_manager_covers_its_callees(tmp_path):
    """A context manager that turns inference mode off guards what runs in it: a site
    every caller reaches only through it is not reported."""
    tune = """
        import contextlib
        import torch

        @contextlib.contextmanager
        def normal_mode():
            with torch.inference_mode(False):
                yield
        """
    runner = """
        import torch
        from pkg.tune import normal_mode
        from pkg.kern import split_pages

        def warmup():
            with normal_mode():
                split_pages(torch.zeros(4))
        """
    write_tree(tmp_path, package(runner, tune))
    assert [d for d in check_json(tmp_path, "--no-cache") if d["path"].endswith("kern.py")] == []


def test_calls_by_name_make_a_weaker_tier_ranked_after_exact_paths(tmp_path):
    runner = """
        import torch
        from pkg.kern import split_pages

        class Splitter:
            def run(self, n):
                split_pages(torch.zeros(n))

        def warmup(worker):
            with torch.inference_mode():
                worker.splitter.run(4)
        """
    d = reach_of(tmp_path, package(runner))
    assert d["armed"] is False and d["tier"] == "dispatch"
    assert d["reach"] == (
        "may be armed, through calls by name of at most 1 candidates: warmup [inference_mode] "
        "-> Splitter.run (by name: `worker.splitter.run`, 1 of 1) -> split_pages"
    )
    r_files = package(runner)
    r_files["pkg/aaa.py"] = """
        import torch
        from pkg.kern import split_pages

        _C = {}

        def exact(n):
            if n not in _C:
                _C[n] = torch.empty(n)
            _fill_kernel[(1,)](_C[n])
            return _C[n]

        def warm():
            with torch.inference_mode():
                exact(4)
        """
    write_tree(tmp_path, r_files)
    from .conftest import run_imlint

    r = run_imlint("check", "pkg", "--no-cache", "--no-show-source", cwd=tmp_path)
    lines = [x for x in r.out.splitlines() if ": IM00" in x]
    assert "aaa.py" in lines[0] and "[armed]" in lines[0]
    assert "kern.py" in lines[1] and "[may be armed]" in lines[1]
    assert "1 armed" in r.out and "1 may be armed" in r.out


def test_calls_by_name_with_too_many_candidates_are_not_followed(tmp_path):
    from imlint.index_dispatch import DISPATCH_BOUND

    def runner(n: int) -> str:
        classes = "\n".join(
            f"""
        class Splitter{i}:
            def run(self, n):
                split_pages(torch.zeros(n))
        """
            for i in range(n)
        )
        return f"""
        import torch
        from pkg.kern import split_pages
        {classes}

        def warmup(worker):
            with torch.inference_mode():
                worker.splitter.run(4)
        """

    d = reach_of(tmp_path, package(runner(DISPATCH_BOUND)))
    assert d["tier"] == "dispatch"
    assert f"(by name: `worker.splitter.run`, 1 of {DISPATCH_BOUND})" in d["reach"]
    d = reach_of(tmp_path, package(runner(DISPATCH_BOUND + 1)))
    assert d["tier"] == "" and d["reach"].startswith("no path found")
