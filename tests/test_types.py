"""Reach through the classes the code declares or makes evident (``index_types.py``):
annotated parameters kept on ``self``, return annotations, a class every ``return``
builds, aliases, modules called as functions (their ``forward``), and the override a
call on a declared base class runs."""

from __future__ import annotations

from pathlib import Path

from .test_regions import KERNEL as REGIONS_KERNEL
from .test_regions import reach_of

# ``test_regions.KERNEL``'s lazy split buffer, and backends of a declared base class,
# one of which reaches it.
KERNEL = (
    REGIONS_KERNEL
    + """

    class Backend:
        def forward(self, q):
            raise NotImplementedError


    class SplitBackend(Backend):
        def forward(self, q):
            return split_pages(q)


    class OtherBackend(Backend):
        def forward(self, q):
            return q
    """
)

CONTEXT = """
    from __future__ import annotations

    from typing import TYPE_CHECKING, Optional

    if TYPE_CHECKING:
        from pkg.kern import Backend

    _current = None


    def get_backend() -> Optional["Backend"]:
        return _current
    """

MODEL = """
    import torch
    from pkg.context import get_backend


    class Attention(torch.nn.Module):
        def forward(self, x):
            backend = get_backend()
            return backend.forward(x)


    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = self._build_attn()

        def _build_attn(self) -> torch.nn.Module:
            return Attention()

        def forward(self, x):
            return self.attn(x)


    class ModelRunner:
        def __init__(self):
            self.layer = Layer()
    """


def package(runner: str, context: str = CONTEXT) -> dict[str, str]:
    return {
        "pkg/__init__.py": "",
        "pkg/kern.py": KERNEL,
        "pkg/context.py": context,
        "pkg/model.py": MODEL,
        "pkg/runner.py": runner,
    }


RUNNER = """
    import torch
    from pkg.model import ModelRunner


    class Runner:
        def __init__(self, model_runner: ModelRunner):
            self.model_runner = model_runner

        def warmup(self):
            mr = self.model_runner

            def run_once():
                return mr.layer.forward(torch.zeros(4))

            with torch.inference_mode():
                run_once()
    """


def test_a_path_through_declared_classes_is_exact(tmp_path: Path) -> None:
    d = reach_of(tmp_path, package(RUNNER))
    assert d["armed"] is True and d["tier"] == "exact"
    assert d["reach"] == (
        "Runner.warmup [inference_mode] -> Runner.warmup.run_once -> Layer.forward -> "
        "Attention.forward [calls `Backend.forward`] -> SplitBackend.forward -> split_pages"
    )


def test_without_the_annotations_the_path_is_not_exact(tmp_path: Path) -> None:
    runner = RUNNER.replace("model_runner: ModelRunner", "model_runner")
    d = reach_of(tmp_path, package(runner))
    assert d["tier"] != "exact"
    context = CONTEXT.replace(' -> Optional["Backend"]', "")
    d = reach_of(tmp_path, package(RUNNER, context))
    assert d["tier"] != "exact"


def test_an_attribute_two_methods_store_different_classes_in_has_no_one_class(
    tmp_path: Path,
) -> None:
    runner = RUNNER.replace(
        "self.model_runner = model_runner",
        "self.model_runner = model_runner\n\n"
        "        def reset(self, other: Runner):\n"
        "            self.model_runner = other",
    )
    d = reach_of(tmp_path, package(runner))
    assert d["tier"] != "exact"


def test_a_union_of_classes_names_no_class(tmp_path: Path) -> None:
    context = CONTEXT.replace('Optional["Backend"]', '"Backend | int"')
    d = reach_of(tmp_path, package(RUNNER, context))
    assert d["tier"] != "exact"


def test_a_self_call_in_one_subclass_never_runs_a_sibling_subclass_override(
    tmp_path: Path,
) -> None:
    """``Drafter`` calls ``self.slots()``: ``OtherDrafter.slots`` (a sibling's
    override) never runs there, only ``Drafter``'s own line of classes."""
    kern = """
        import torch

        _BUFS = {}


        class Proposer:
            def slots(self):
                return None


        class Drafter(Proposer):
            def dummy_run(self):
                with torch.inference_mode():
                    self.slots()


        class OtherDrafter(Proposer):
            def slots(self):
                buf = _BUFS.get("s")
                if buf is None:
                    buf = _BUFS["s"] = torch.empty(8)
                buf.zero_()
                return buf
        """
    d = reach_of(tmp_path, {"pkg/__init__.py": "", "pkg/kern.py": kern})
    assert d["tier"] == "" and d["reach"].startswith("no path found"), d["reach"]
    subclass = kern.replace("class OtherDrafter(Proposer):", "class OtherDrafter(Drafter):")
    d = reach_of(tmp_path, {"pkg/__init__.py": "", "pkg/kern.py": subclass})
    assert d["tier"] == "exact"
    assert (
        d["reach"]
        == "Drafter.dummy_run [inference_mode, calls `Proposer.slots`] -> OtherDrafter.slots"
    )


NAMED_CALLS = """
    import torch


    class Proposer:
        def __init__(self):
            pass

        def slots(self):
            return None


    class Drafter(Proposer):
        def __init__(self):
            super().__init__()

        def slots(self):
            return super().slots()


    def warm(p: Proposer):
        with torch.inference_mode():
            CALL
    """


def test_calls_that_name_their_method_never_run_an_override(tmp_path: Path) -> None:
    """``Proposer()`` runs ``Proposer.__init__``, ``Proposer.slots(p)`` and
    ``super().slots()`` the method they name; ``p.slots()`` on a parameter declared a
    ``Proposer`` may run any subclass's override."""
    from .test_project import index_of

    def callers(call: str, method: str) -> list[str]:
        files = {"pkg/__init__.py": "", "pkg/kern.py": NAMED_CALLS.replace("CALL", call)}
        index = index_of(files, tmp_path)
        module = index.modules["pkg.kern"].module
        return sorted(c[1] for c, _ in index.reach_callers((module, method)))

    assert callers("Proposer()", "Drafter.__init__") == []
    assert callers("Proposer.slots(p)", "Drafter.slots") == []
    assert callers("p.slots()", "Drafter.slots") == ["warm"]
    assert callers("p.slots()", "Proposer.slots") == ["Drafter.slots", "warm"]


def test_an_annotated_alias_keeps_its_annotation(tmp_path: Path) -> None:
    """``mr: ModelRunner = self.model_runner`` names the class; a local bound to an
    alias and to something else names none."""
    runner = RUNNER.replace("mr = self.model_runner", "mr: ModelRunner = self.model_runner")
    runner = runner.replace("model_runner: ModelRunner)", "model_runner)")
    d = reach_of(tmp_path, package(runner))
    assert d["tier"] == "exact", d["reach"]
    rebound = RUNNER.replace(
        "mr = self.model_runner", "mr = self.model_runner\n            mr = make_other()"
    )
    d = reach_of(tmp_path, package(rebound))
    assert d["tier"] != "exact", d["reach"]


def test_odd_annotations_name_no_class() -> None:
    import ast

    from imlint.summary_types import annotation

    def of(text: str) -> str | None:
        return annotation(ast.parse(text, mode="eval").body)

    assert of('"pkg.Backend"') == "pkg.Backend"
    assert of("Optional[Backend]") == of("Backend | None") == of("Union[None, Backend]")
    assert of("Backend | None") == "Backend"
    for odd in (
        '"not an expression ("',
        '"a\\x00b"',
        "list[Backend]",
        "type[Backend]",
        "Backend | Other",
        "Union[Backend, Other]",
        "None",
        "'None'",
        "f(x)",
    ):
        assert of(odd) is None, odd
