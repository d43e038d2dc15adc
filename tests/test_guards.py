"""A module's own guard helpers (``imlint/guards.py``) guard what runs under them, on the
plain path and the fast one (narrowed text, project summaries) alike."""

from __future__ import annotations

import ast
import json
import textwrap

import pytest

from imlint.guards import local_guards

from .conftest import run_imlint

HELPERS = """
import contextlib
from contextlib import contextmanager

import torch
import torch as th


@contextlib.contextmanager
def no_inference():
    with torch.inference_mode(False):
        yield


@contextmanager
def no_inference_mode_kw():
    with th.inference_mode(mode=False), torch.no_grad():
        yield


def no_inference_tensors():
    if not torch.is_inference_mode_enabled():
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode(False))
    stack.enter_context(torch.no_grad())
    return stack


def plain_guard():
    return torch.inference_mode(False)


@contextlib.contextmanager
def turns_it_on():
    with torch.inference_mode():
        yield


@contextlib.contextmanager
def guards_then_yields_outside():
    with torch.inference_mode(False):
        pass
    yield


def enters_but_returns_other():
    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode(False))
    return contextlib.nullcontext()


def no_decorator_yields():
    with torch.inference_mode(False):
        yield
"""

GUARDS = {"no_inference", "no_inference_mode_kw", "no_inference_tensors", "plain_guard"}
NOT_GUARDS = {
    "turns_it_on",
    "guards_then_yields_outside",
    "enters_but_returns_other",
    "no_decorator_yields",
}


def test_guard_helpers_are_read_from_their_code():
    assert local_guards(ast.parse(HELPERS)) == GUARDS


def _lazy(helper: str, key: str) -> str:
    return f"""

def get_{key}(n, device):
    buf = _BUF.get(("{key}", device))
    if buf is None:
        with {helper}():
            buf = torch.empty(n, device=device)
        _BUF["{key}", device] = buf
    return buf
"""


def _module() -> str:
    code = HELPERS + "\n_BUF = {}\n"
    for helper in sorted(GUARDS | NOT_GUARDS):
        code += _lazy(helper, helper)
    code += _lazy("contextlib.nullcontext", "nullcontext")
    return code


@pytest.mark.parametrize("args", [(), ("--no-fast", "--no-cache", "-j", "1")])
def test_allocations_under_a_guard_helper_are_guarded(tmp_path, args):
    src = _module()
    (tmp_path / "m.py").write_text(src, encoding="utf-8")
    r = run_imlint("check", "--output-format", "json", "--exit-zero", *args, ".", cwd=tmp_path)
    assert r.code == 0, r.err
    reported = set()
    for f in json.loads(r.out):
        assert "torch.empty" in src.splitlines()[f["line"] - 1]
        reported.add(_function_at(src, f["line"]))
    # The lazy allocations under a guard helper are not reported; the others are.
    assert reported == {f"get_{h}" for h in NOT_GUARDS | {"nullcontext"}}


def _function_at(src: str, line: int) -> str:
    name = ""
    for i, text in enumerate(src.splitlines(), 1):
        if i > line:
            break
        if text.startswith("def "):
            name = text[4:].split("(", 1)[0]
    return name


GUARDED_MODULE = textwrap.dedent(
    """
    import contextlib
    import torch

    _BUF = {}

    @contextlib.contextmanager
    def no_inference():
        with torch.inference_mode(False):
            yield
    """
)


def test_an_allocation_behind_a_call_under_a_guard_helper_is_guarded(tmp_path):
    """``buf = make(n)`` under the helper: the call site (IM003) is guarded."""
    code = GUARDED_MODULE + textwrap.dedent(
        """
        def make(n):
            return torch.empty(n)

        def get(n):
            buf = _BUF.get(n)
            if buf is None:
                with no_inference():
                    buf = make(n)
                _BUF[n] = buf
            buf.zero_()
            return buf
        """
    )
    (tmp_path / "m.py").write_text(code, encoding="utf-8")
    for args in [(), ("--no-fast", "--no-cache", "-j", "1")]:
        r = run_imlint("check", "--output-format", "json", "--exit-zero", *args, ".", cwd=tmp_path)
        assert json.loads(r.out) == [], r.out
    unguarded = code.replace("with no_inference():", "if True:")
    (tmp_path / "m.py").write_text(unguarded, encoding="utf-8")
    r = run_imlint(
        "check", "--output-format", "json", "--exit-zero", "--no-cache", ".", cwd=tmp_path
    )
    assert [f["code"] for f in json.loads(r.out)] == ["IM003"]


def test_every_caller_under_a_guard_helper_guards_the_callee(tmp_path):
    """The project summary's regions read the helper: ``_fill``'s only caller guards it."""
    code = GUARDED_MODULE + textwrap.dedent(
        """
        def _fill(n):
            if n not in _BUF:
                _BUF[n] = torch.zeros(n)
            _BUF[n].zero_()

        def run(n):
            with no_inference():
                _fill(n)
        """
    )
    (tmp_path / "m.py").write_text(code, encoding="utf-8")
    (tmp_path / "u.py").write_text(code.replace("with no_inference():", "if True:"), "utf-8")
    for args in [(), ("--no-fast", "--no-cache", "-j", "1")]:
        r = run_imlint("check", "--output-format", "json", "--exit-zero", *args, ".", cwd=tmp_path)
        assert [(f["path"].rsplit("/", 1)[-1], f["code"]) for f in json.loads(r.out)] == [
            ("u.py", "IM001")
        ], r.out
