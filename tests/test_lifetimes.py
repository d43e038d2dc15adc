"""Object lifetimes across a project (imlint/lifetimes.py): which objects live for one
call, which functions run only while an object is built."""

from __future__ import annotations

import textwrap
from pathlib import Path

from imlint.options import AnalysisOptions
from imlint.project import ProjectIndex, summarize

from .test_tiers_and_lifetimes import _check, _tree

BATCH = """
import torch


class DraftInput:
    def __init__(self, n):
        self.n = n
        self.lens = None

    def ensure_lens(self):
        if self.lens is None:
            self.lens = torch.empty(self.n)
        self.lens.zero_()


class Batch:
    def __init__(self, n):
        self.n = n
        self.spec_info = None
"""

RUNNER = """
from pkg.batch import Batch, DraftInput


class Runner:
    def step(self, n):
        batch = Batch(n)
        batch.spec_info = DraftInput(n)
        batch.spec_info.ensure_lens()
        return n


def serve(runner):
    for n in range(4):
        runner.step(n)
"""


def _findings(root: Path, files: dict[str, str]) -> list[tuple[str, int, str]]:
    _tree(root, {"pkg/__init__.py": "", **files})
    return [(name, line, code) for name, line, code, _severity in _check(root)]


def test_an_object_kept_on_a_per_call_object_is_per_call(tmp_path):
    # The draft input is kept on the step's batch, which dies with the step.
    assert _findings(tmp_path, {"pkg/batch.py": BATCH, "pkg/runner.py": RUNNER}) == []
    # Kept on the runner, the batch outlives the step, and so does its draft input.
    kept = RUNNER.replace("batch = Batch(n)", "batch = self.last = Batch(n)")
    assert _findings(tmp_path, {"pkg/runner.py": kept}) == [("batch.py", 12, "IM001")]


def test_test_code_does_not_decide_lifetimes(tmp_path):
    keeper = """
    from pkg.batch import Batch, DraftInput

    def make_batch():
        batch = Batch(4)
        batch.spec_info = DraftInput(4)
        return batch
    """
    files = {"pkg/batch.py": BATCH, "pkg/runner.py": RUNNER, "pkg/tests/test_kit.py": keeper}
    # A test helper nothing calls returns a draft input: tests are not the served process.
    assert _findings(tmp_path, files) == []
    # The same helper in production code is an entry point whose result may be kept.
    _tree(tmp_path, {"pkg/kit.py": keeper})
    assert _findings(tmp_path, files) == [("batch.py", 12, "IM001")]


def test_calls_by_a_name_the_index_cannot_resolve_are_judged_where_they_are(tmp_path):
    maker = """
    from pkg.batch import DraftInput

    class Maker:
        def make(self, n):
            return DraftInput(n)
    """
    used = """
    def step(factory, n):
        draft = factory.make(n)
        draft.ensure_lens()

    def serve(factory):
        for n in range(4):
            step(factory, n)
    """
    files = {"pkg/batch.py": BATCH, "pkg/maker.py": maker, "pkg/user.py": used}
    # ``factory.make`` cannot be resolved; what it returns is used for the call only.
    assert _findings(tmp_path, files) == []
    kept = used.replace("draft = factory.make(n)", "draft = _LAST[0] = factory.make(n)")
    files["pkg/user.py"] = "\n    _LAST = [None]\n" + kept
    assert _findings(tmp_path, files) == [("batch.py", 12, "IM001")]


def test_an_object_handed_to_an_unresolved_wrapper_lives_as_long_as_its_result(tmp_path):
    backend = """
    import torch

    class Kernel:
        def __init__(self):
            self.staging = {}

        def get(self, n):
            if n not in self.staging:
                self.staging[n] = torch.zeros(n)
            self.staging[n].zero_()
            return self.staging[n]

    class Backend:
        def __init__(self):
            self.kernel = Kernel()
    """
    registry = """
    from pkg.backend import Backend

    def build(wrapper_cls):
        return wrapper_cls(Backend())

    def step(wrapper_cls):
        {use}

    def serve(wrapper_cls):
        for _ in range(4):
            step(wrapper_cls)
    """
    files = {
        "pkg/backend.py": backend,
        "pkg/registry.py": registry.replace("{use}", "build(wrapper_cls).run()"),
    }
    # The wrapper made per call: what it was handed dies with it.
    assert _findings(tmp_path, files) == []
    # The wrapper kept: ``wrapper_cls`` may keep its argument, the backend lives on.
    files["pkg/registry.py"] = registry.replace("{use}", "_ATTN.append(build(wrapper_cls))")
    files["pkg/registry.py"] = files["pkg/registry.py"].replace(
        "def build", "_ATTN = []\n\n    def build"
    )
    assert _findings(tmp_path, files) == [("backend.py", 10, "IM001")]


def test_a_global_filled_while_a_long_lived_object_is_built_is_construction(tmp_path):
    code = """
    import torch

    _WORKSPACE = None

    class Backend:
        def __init__(self, n):
            global _WORKSPACE
            if _WORKSPACE is None:
                _WORKSPACE = torch.zeros(n)
            _WORKSPACE.zero_()

    class Server:
        def __init__(self):
            self.backend = Backend(4)
    """
    assert _findings(tmp_path, {"pkg/a.py": code}) == []
    # Built for one call, the first step fills the global lazily.
    per_call = (
        code.replace("self.backend = Backend(4)", "pass")
        + """
        def step(self):
            Backend(4)

    def serve(server):
        server.step()
    """
    )
    assert _findings(tmp_path, {"pkg/a.py": per_call}) == [("a.py", 10, "IM001")]


def test_a_helper_the_constructor_fills_eagerly_is_construction(tmp_path):
    code = """
    import torch

    _BUF = None

    def get_buffer():
        global _BUF
        if _BUF is None:
            _BUF = torch.zeros(1024)
        return _BUF

    class Attention:
        def __init__(self):
            get_buffer()

        def forward(self, x):
            get_buffer().copy_(x)
    """
    # The constructor ran first on every instance whose forward asks for the buffer.
    assert _findings(tmp_path, {"pkg/a.py": code}) == []
    # Another class asks for it lazily: the buffer may be made on its first forward.
    other = (
        code
        + """
    class Other:
        def forward(self, x):
            get_buffer().copy_(x)
    """
    )
    assert _findings(tmp_path, {"pkg/a.py": other}) == [("a.py", 9, "IM001")]
    # A helper with parameters may be asked for something else (a bigger table) later.
    sized = code.replace("get_buffer()", "get_buffer(x.numel())").replace(
        "def get_buffer(x.numel())", "def get_buffer(n)"
    )
    sized = sized.replace("if _BUF is None:", "if _BUF is None or _BUF.numel() < n:")
    sized = sized.replace(
        "self):\n            get_buffer(x.numel())", "self):\n            get_buffer(1)"
    )
    assert _findings(tmp_path, {"pkg/a.py": sized}) == [("a.py", 9, "IM001")]


def test_building_an_object_made_per_call_is_not_set_up(tmp_path):
    code = """
    import torch

    class Manager:
        mask = None

        def query(self, current):
            if Manager.mask is None:
                Manager.mask = torch.zeros_like(current)
            Manager.mask.copy_(current)

    class StepOutput:
        def __init__(self, manager, current):
            self.fault = manager.query(current)

    class Runner:
        def step(self, manager, current):
            StepOutput(manager, current)

    def serve(runner, manager, current):
        for _ in range(4):
            runner.step(manager, current)
    """
    # ``manager.query`` runs when each step's output is built: on the first step.
    assert _findings(tmp_path, {"pkg/a.py": code}) == [("a.py", 9, "IM001")]
    # Built once for the runner, the same call is set-up.
    once = code.replace("StepOutput(manager, current)", "return self.out")
    once = once.replace(
        "class Runner:",
        "class Runner:\n        def __init__(self, m, c):\n            self.out = StepOutput(m, c)\n",
    )
    assert _findings(tmp_path, {"pkg/a.py": once}) == []


def test_a_method_called_by_an_unresolved_name_only_from_constructors_is_construction(tmp_path):
    code = """
    import torch

    class Box:
        def tables(self, n):
            if self._t is None:
                self._t = torch.zeros(n)
            self._t.zero_()
            return self._t

    class Chain:
        def __init__(self, box, n):
            self.t = box.tables(n)
    """
    assert _findings(tmp_path, {"pkg/a.py": code}) == []
    lazy = (
        code
        + """
    def step(box, n):
        box.tables(n)
    """
    )
    assert _findings(tmp_path, {"pkg/a.py": lazy}) == [("a.py", 7, "IM001")]


def test_a_call_by_name_whose_receiver_lacks_the_class_s_methods_does_not_reach_it(tmp_path):
    # ``head.tables(n)`` in ``draft`` cannot be ``Box.tables``: the same receiver is
    # asked for ``step_dtype()``, a method of the project that ``Box`` lacks.
    code = """
    import torch

    class Box:
        def __init__(self, n):
            self.build(n)

        def build(self, n):
            self.tables(n)

        def tables(self, n):
            if self._t is None:
                self._t = torch.zeros(n)
            self._t.zero_()
            return self._t

    class Head:
        def tables(self, n):
            return n

        def step_dtype(self):
            return torch.float32

    def draft(head, n):
        head.tables(n)
        return head.step_dtype()
    """
    assert _findings(tmp_path, {"pkg/a.py": code}) == []
    # A subclass of Box that has the method: the receiver may be one of its objects.
    sub = (
        code
        + """
    class BigBox(Box):
        def step_dtype(self):
            return torch.float16
    """
    )
    assert _findings(tmp_path, {"pkg/a.py": sub}) == [("a.py", 13, "IM001")]
    # An attribute stored on self answers to the name as well as a method would.
    stored = code.replace("self.build(n)", "self.build(n)\n            self.step_dtype = None")
    assert _findings(tmp_path, {"pkg/a.py": stored}) == [("a.py", 14, "IM001")]
    # A class whose members the source does not show (``__getattr__``) is never ruled out.
    dynamic = code.replace(
        "def build(self, n):",
        "def __getattr__(self, name):\n            return None\n\n        def build(self, n):",
    )
    assert _findings(tmp_path, {"pkg/a.py": dynamic}) == [("a.py", 16, "IM001")]
    # A receiver made by another library is never a project object.
    outside = (
        code
        + """
    import cutlass

    def kernel(n):
        frag = cutlass.make_fragment(n)
        frag.tables(n)
    """
    )
    assert _findings(tmp_path, {"pkg/a.py": outside}) == []
    handed = outside.replace("kernel(n)", "kernel(frag, n)").replace(
        "frag = cutlass.make_fragment(n)", "pass"
    )
    assert _findings(tmp_path, {"pkg/a.py": handed}) == [("a.py", 13, "IM001")]


def test_an_instance_kept_on_its_class_by_a_class_method_is_long_lived(tmp_path):
    code = """
    import torch

    class SharedOutput:
        _shared = None

        def __init__(self, n):
            self.n = n
            self.buffers = {}

        @classmethod
        def create(cls, n):
            if cls._shared is None:
                cls._shared = cls(n)
            return cls._shared

        def get(self, rows):
            if rows not in self.buffers:
                self.buffers[rows] = torch.zeros(rows, self.n)
            self.buffers[rows].zero_()
            return self.buffers[rows]

    def step(n):
        SharedOutput.create(n).get(4)

    def serve():
        for n in range(4):
            step(n)
    """
    # ``cls._shared`` is a class attribute: it lives for the process.
    assert _findings(tmp_path, {"pkg/a.py": code}) == [("a.py", 19, "IM001")]


def test_methods_that_delegate_by_name_are_construction_when_every_way_in_is(tmp_path):
    code = """
    import torch

    class Backend:
        def init_graph_state(self, n):
            if self.indptr is None:
                self.indptr = torch.zeros(n)
            self.indptr.zero_()

    class MultiStep:
        def __init__(self, backends):
            self.backends = backends

        def init_graph_state(self, n):
            for b in self.backends:
                b.init_graph_state(n)

    class GraphRunner:
        def __init__(self, backend, n):
            backend.init_graph_state(n)
    """
    # Every call by that name is in a constructor or in a method of that name.
    assert _findings(tmp_path, {"pkg/a.py": code}) == []
    # A test that calls it does not change that; a step that calls it does.
    test = "from pkg.a import Backend\n\n\ndef test_it():\n    Backend().init_graph_state(4)\n"
    assert _findings(tmp_path, {"pkg/a.py": code, "pkg/tests/test_a.py": test}) == []
    step = (
        code
        + """
    def step(backend):
        backend.init_graph_state(4)
    """
    )
    assert _findings(tmp_path, {"pkg/a.py": step}) == [("a.py", 7, "IM001")]
    # Methods that only call each other are reached from somewhere unseen: not set-up.
    unseen = code.replace("backend.init_graph_state(n)", "self.backend = backend")
    assert _findings(tmp_path, {"pkg/a.py": unseen}) == [("a.py", 7, "IM001")]


def test_a_constructor_that_hands_its_argument_to_a_kept_constructor_keeps_it(tmp_path):
    parts = """
    import torch

    class Finalize:
        def __init__(self, offset):
            self.offset = offset
            self._ids = None

        def ids(self, n):
            if self._ids is None:
                self._ids = torch.arange(n) + self.offset
            self._ids.add_(1)
            return self._ids

    class Impl:
        def __init__(self, finalize):
            self.finalize = finalize

    class Kernel:
        def __init__(self, finalize):
            {keep}

        def run(self, n):
            return self.impl.finalize.ids(n)
    """
    runner = """
    from pkg.parts import Finalize, Kernel

    _KERNELS = []

    def step(offset, n):
        kernel = Kernel(Finalize(offset))
        {use}
        return kernel.run(n)

    def serve():
        for n in range(4):
            step(3, n)
    """
    kept = parts.replace("{keep}", "self.impl = Impl(finalize)")
    keep_kernel = runner.replace("{use}", "_KERNELS.append(kernel)")
    # ``Kernel`` keeps ``finalize`` through ``Impl``, and a global keeps the kernel.
    files = {"pkg/parts.py": kept, "pkg/runner.py": keep_kernel}
    assert _findings(tmp_path, files) == [("parts.py", 11, "IM001")]
    # The kernel made per step: what it keeps dies with it.
    assert _findings(tmp_path, {"pkg/runner.py": runner.replace("{use}", "pass")}) == []
    # Handed to ``Impl`` but the result not kept: the kernel does not keep the object.
    used = parts.replace("{keep}", "self.n = len([Impl(finalize)])")
    assert _findings(tmp_path, {"pkg/parts.py": used, "pkg/runner.py": keep_kernel}) == []


def test_an_instance_assigned_to_a_global_is_long_lived(tmp_path):
    manager = """
    import torch

    class Manager:
        def __init__(self, device):
            self.device = device
            self.slots = [None]

        def get(self, n):
            if self.slots[0] is None or self.slots[0].numel() < n:
                self.slots[0] = torch.empty(n, device=self.device)
            self.slots[0].zero_()
            return self.slots[0]

    _manager = None

    def init_manager(device):
        {body}

    def step(n):
        return _manager.get(n)

    def serve():
        for d in range(2):
            init_manager(d)
    """
    kept = "global _manager\n        _manager = Manager(device)"
    assert _findings(tmp_path, {"pkg/manager.py": manager.replace("{body}", kept)}) == [
        ("manager.py", 11, "IM001")
    ]
    # Bound to a local of the call: made and dropped per call.
    dropped = "manager = Manager(device)\n        manager.get(4)"
    assert _findings(tmp_path, {"pkg/manager.py": manager.replace("{body}", dropped)}) == []
    # Set for the length of a call and put back: a context, made per call.
    scoped = (
        "global _manager\n        prev = _manager\n        _manager = Manager(device)\n"
        "        try:\n            step(4)\n        finally:\n            _manager = prev"
    )
    assert _findings(tmp_path, {"pkg/manager.py": manager.replace("{body}", scoped)}) == []


WORKSPACE = """
import torch


class Workspace:
    def __init__(self, n):
        self.n = n
        self.tmp = None

    @classmethod
    def for_shape(cls, n):
        ws = cls(n)
        ws._allocate()
        return ws

    def _allocate(self):
        if self.tmp is None:
            self.tmp = torch.empty(self.n)

    def set_config(self, k):
        self._allocate()
        self.tmp.zero_()
"""


def test_an_alternate_constructor_builds_its_object(tmp_path):
    # ``for_shape`` makes the instance (``cls(n)``) and fills it: construction, like
    # ``__init__``; a later method finds the buffer made.
    eager = (
        WORKSPACE
        + "\n\nclass Backend:\n    def __init__(self):\n        self.ws = Workspace.for_shape(4)\n"
    )
    assert _findings(tmp_path, {"pkg/ws.py": eager}) == []
    # Called lazily, the alternate constructor is the allocating call (IM003).
    lazy = WORKSPACE + (
        "\n\n_WS = None\n\n\ndef get_ws():\n    global _WS\n    if _WS is None:\n"
        "        _WS = Workspace.for_shape(4)\n    return _WS\n"
    )
    assert _findings(tmp_path, {"pkg/ws.py": lazy}) == [("ws.py", 31, "IM003")]


FACTORY = """
import torch


class Workspace:
    def __init__(self, n):
        self.n = n
        self.tmp = None

    def allocate(self):
        if self.tmp is None:
            self.tmp = torch.empty(self.n)

    def run(self, x):
        self.tmp[: x.numel()].copy_(x)


class Arena:
    def make_workspace(self, n):
        ws = Workspace(n)
        ws.allocate()
        return ws
"""


def test_a_factory_builds_the_object_it_makes_and_returns(tmp_path):
    # ``make_workspace`` makes a Workspace, fills it and returns it: ``allocate`` runs
    # while that object is built, so the site is where the factory's result is kept.
    eager = FACTORY + (
        "\n\nclass Backend:\n    def __init__(self):\n        self.arena = Arena()\n"
        "        self.ws = self.arena.make_workspace(4)\n"
    )
    assert _findings(tmp_path, {"pkg/ws.py": eager}) == []
    lazy = FACTORY + (
        "\n\nclass Backend:\n    def __init__(self):\n        self.arena = Arena()\n"
        "        self.ws = None\n\n"
        "    def forward(self, x):\n        if self.ws is None:\n"
        "            self.ws = self.arena.make_workspace(4)\n        self.ws.run(x)\n"
    )
    assert _findings(tmp_path, {"pkg/ws.py": lazy}) == [("ws.py", 32, "IM003")]
    # Not returned, the object is not what the function makes for its caller: the
    # method's own store is the site.
    # Bound to a cached object too, the local is not only what the call makes: a
    # method called on it may run on the cached one, long after it was built.
    cached = lazy.replace(
        "        ws = Workspace(n)\n",
        "        ws = self.cache.get(n)\n        if ws is None:\n            ws = Workspace(n)\n",
        1,
    )
    assert ("ws.py", 12, "IM001") in _findings(tmp_path, {"pkg/ws.py": cached})
    kept = lazy.replace("        return ws\n", "        self.last = ws\n", 1)
    kept = kept.replace("self.ws = self.arena.make_workspace(4)", "self.ws = 1")
    assert ("ws.py", 12, "IM001") in _findings(tmp_path, {"pkg/ws.py": kept})


GROWER = """
import torch


class Pool:
    def __init__(self):
        self.buf = None
        self._allocate(n=4)

    def _allocate(self, *, n):
        if self.buf is None or self.buf.numel() < n:
            self.buf = torch.empty(n)

    def grow(self, n):
        self._allocate(n=n)
        self.buf[:n].zero_()


POOL = Pool()
"""


def test_a_method_with_keyword_only_parameters_is_not_set_up_once(tmp_path):
    # The constructor fills the pool, but ``grow`` calls the allocating method again with
    # another size: it reallocates at run time (only a method without any parameter
    # returns the same to every caller).
    assert _findings(tmp_path, {"pkg/pool.py": GROWER}) == [("pool.py", 12, "IM001")]
    fixed = GROWER.replace("*, n", "").replace("n=4", "").replace("n=n", "")
    fixed = fixed.replace("< n:", "< 4:").replace("empty(n)", "empty(4)")
    assert _findings(tmp_path, {"pkg/pool.py": fixed}) == []


def test_a_call_on_self_does_not_reach_a_module_function(tmp_path):
    code = """
    import torch
    from somewhere import Base

    def scratch(buffers, name, n):
        if name not in buffers:
            buffers[name] = torch.empty(n)
        return buffers[name]

    class Runtime:
        def __init__(self):
            self.buffers = {}
            scratch(self.buffers, "a", 8).zero_()

    class Runner(Base):
        def step(self, n):
            self.scratch(n).zero_()
    """
    # ``self.scratch`` is a method of ``Runner`` (from a base the index cannot see):
    # only the constructor calls the module-level ``scratch``.
    assert _findings(tmp_path, {"pkg/a.py": code}) == []
    # A call by the same name on another object may be the module function.
    other = code.replace("self.scratch(n)", "helpers.scratch(n)")
    assert _findings(tmp_path, {"pkg/a.py": other}) == [("a.py", 7, "IM001")]


def test_a_thread_the_constructor_starts_is_not_set_up():
    code = textwrap.dedent(
        """
        import threading

        class Offloader:
            def __init__(self):
                threading.Thread(target=self._loop, daemon=True).start()

            def _loop(self):
                while True:
                    self._step(8)

            def _step(self, n):
                pass
        """
    )
    # The loop runs beside the program for the object's life, not while it is built.
    index = ProjectIndex([summarize("pkg/a.py", code, AnalysisOptions())])
    assert not {q for _m, q in index.construction} & {"Offloader._loop", "Offloader._step"}
    # Called from the constructor itself, the same loop is set-up.
    eager = code.replace("threading.Thread(target=self._loop, daemon=True).start()", "self._loop()")
    index = ProjectIndex([summarize("pkg/a.py", eager, AnalysisOptions())])
    assert {q for _m, q in index.construction} >= {"Offloader._loop", "Offloader._step"}


JOB = """
import torch


class Job:
    def __init__(self, n):
        self.n = n
        self.mask = None

    def get_mask(self):
        if self.mask is None:
            self.mask = torch.empty(self.n)
        self.mask.zero_()
        return self.mask
"""

GENERATOR = """
from pkg.job import Job


class Generator:
    def __init__(self):
        self.pending = []

    def enqueue(self, job):
        self.pending.append(job)

    def iterate(self):
        for job in list(self.pending):
            job.get_mask()
            {done}

    def generate(self, n):
        job = Job(n)
        self.enqueue(job)
        while self.pending:
            self.iterate()
"""


def test_an_object_kept_only_in_a_queue_lives_per_request(tmp_path):
    # ``generate`` is an entry point, but its job only waits in a list the generator
    # takes finished jobs out of: the job's mask dies with the request.
    served = GENERATOR.format(done="self.pending.remove(job)")
    assert _findings(tmp_path, {"pkg/job.py": JOB, "pkg/gen.py": served}) == []
    for done in ("del self.pending[0]", "self.pending = [j for j in self.pending if j.n]"):
        assert _findings(tmp_path, {"pkg/gen.py": GENERATOR.format(done=done)}) == []
    # A list nothing takes items out of keeps every job for the process.
    kept = GENERATOR.format(done="pass")
    assert _findings(tmp_path, {"pkg/gen.py": kept}) == [("job.py", 12, "IM001")]
    # A cache fills on a miss only: what it holds is reused, not served and dropped.
    cache = served.replace(
        "self.pending.append(job)",
        "if job not in self.pending:\n            self.pending.append(job)",
    )
    assert _findings(tmp_path, {"pkg/gen.py": cache}) == [("job.py", 12, "IM001")]
    # Kept on the generator besides, the job outlives its turn in the queue.
    also = served.replace("self.enqueue(job)", "self.enqueue(job)\n        self.last = job")
    assert _findings(tmp_path, {"pkg/gen.py": also}) == [("job.py", 12, "IM001")]


def test_an_object_that_queues_itself_lives_per_request(tmp_path):
    wrapper = """
    from pkg.job import Job


    class AsyncJob:
        def __init__(self, generator, n):
            self.job = Job(n)
            generator.submit(self)


    class AsyncGenerator:
        def __init__(self):
            self.jobs = {}

        def submit(self, job):
            self.jobs[job.job.n] = job

        def finish(self, n):
            del self.jobs[n]
    """
    # Nothing in the tree makes an AsyncJob; its constructor hands it to a queue (by a
    # call the index resolves only by name), so it and the job it holds are per call.
    files = {"pkg/job.py": JOB, "pkg/wrap.py": wrapper}
    assert _findings(tmp_path, files) == []
    forever = wrapper.replace("del self.jobs[n]", "pass")
    assert _findings(tmp_path, {"pkg/wrap.py": forever}) == [("job.py", 12, "IM001")]


def test_a_method_reached_only_by_name_takes_what_those_calls_hand_it(tmp_path):
    steps = """
    import torch


    class State:
        def __init__(self, logits):
            self.logits = logits
            self.probs = None


    class Normalize:
        def run(self, state):
            if state.probs is None:
                state.probs = torch.empty(4)
            state.probs.zero_()


    class Sampler:
        def __init__(self, steps):
            self.steps = steps

        def sample(self, logits):
            state = State(logits)
            for step in self.steps:
                step.run(state)
            return logits


    def serve(sampler, batches):
        return [sampler.sample(b) for b in batches]
    """
    # Every call by the name ``run`` the index cannot resolve hands a state made for
    # the call: what ``Normalize.run`` stores on it dies with the call.
    other = "def launch(kernel, x):\n    return kernel.run(x, 1, 2, grid=(1,))\n"
    files = {"pkg/steps.py": steps, "pkg/other.py": other}
    assert _findings(tmp_path, files) == []
    # A call by that name that may reach it (its arguments fit) and hands a kept
    # object leaves the parameter unjudged.
    keeper = "KEPT = None\n\ndef keep(step, state):\n    step.run(state)\n"
    assert _findings(tmp_path, {**files, "pkg/keep.py": keeper}) == [("steps.py", 14, "IM001")]


def test_a_local_bound_to_named_functions_calls_them(tmp_path):
    kernels = """
    import torch


    def decode(q, scratch=None):
        if scratch is not None:
            if q.shape[0] not in scratch:
                scratch[q.shape[0]] = torch.empty(q.shape[0])
            scratch[q.shape[0]].zero_()
        return q


    def prefill(q, scratch=None):
        return q
    """
    attn = """
    from pkg.kernels import decode, prefill


    class Attention:
        def __init__(self):
            self._scratch = {}

        def forward(self, q, short):
            kernel = decode if short else prefill
            return kernel(q)
    """
    # ``kernel(q)`` calls ``decode`` (or ``prefill``) without a scratch dict: the
    # function is not an entry point, and no caller hands it storage to fill.
    files = {"pkg/kernels.py": kernels, "pkg/attn.py": attn}
    assert _findings(tmp_path, files) == []
    # Handed the attention's own dict, the scratch buffers live as long as it does.
    kept = attn.replace("kernel(q)", "kernel(q, scratch=self._scratch)")
    assert _findings(tmp_path, {"pkg/attn.py": kept}) == [("kernels.py", 8, "IM001")]


def test_functions_the_framework_calls_at_set_up_are_construction(tmp_path):
    layer = """
    import torch


    class Method:
        def process_weights_after_loading(self, layer):
            self._prepare(layer)

        def _prepare(self, layer):
            if not hasattr(layer, "w_t"):
                layer.w_t = layer.weight.t().contiguous()
            else:
                layer.w_t.copy_(layer.weight.t())


    class Layer:
        def __init__(self):
            self.weight = torch.ones(4, 4)
            self.method = Method()
    """
    # Nothing in the tree calls the loading hook: it may run at any time, first use
    # included, so the transposed weight is a lazy buffer.
    files = {"pkg/layer.py": layer}
    assert _findings(tmp_path, files) == [("layer.py", 11, "IM001")]
    # Declared as a hook the framework runs while it loads the model, it and what only
    # it calls are set-up.
    config = '[tool.imlint]\nsetup-functions = ["process_weights_after_loading"]\n'
    (tmp_path / "pyproject.toml").write_text(config, encoding="utf-8")
    assert _findings(tmp_path, files) == []
    dotted = config.replace('"process', '"pkg.layer.Method.process')
    (tmp_path / "pyproject.toml").write_text(dotted, encoding="utf-8")
    assert _findings(tmp_path, files) == []


def test_what_a_call_stores_on_a_copy_it_makes_is_per_call(tmp_path):
    proposer = """
    import copy

    import torch


    class Proposer:
        def __init__(self, meta):
            self.meta = meta

        def _copy_meta(self, meta):
            return copy.copy(meta)

        def step(self, n):
            meta = self._copy_meta(self.meta)
            if meta.lens is None:
                meta.lens = torch.zeros(n)
            meta.lens.add_(1)
            return meta
    """
    # The copy is a new object for each call: what is made for it dies with the call.
    assert _findings(tmp_path, {"pkg/prop.py": proposer}) == []
    # Storing on the proposer's own metadata replaces what it keeps.
    kept = proposer.replace("meta = self._copy_meta(self.meta)", "meta = self.meta")
    assert _findings(tmp_path, {"pkg/prop.py": kept}) == [("prop.py", 17, "IM001")]


def test_an_object_a_factory_makes_through_a_picked_class_lives_as_its_result(tmp_path):
    backend = """
    import torch


    class Backend:
        def __init__(self):
            self.buf = None

        def run(self, n):
            if self.buf is None:
                self.buf = torch.empty(n)
            self.buf.zero_()


    class FastBackend(Backend):
        pass


    def create(fast):
        cls = FastBackend if fast else Backend
        return cls()
    """
    runner = """
    from pkg.backend import create


    class Runner:
        def __init__(self, fast):
            self.backend = create(fast)

        def step(self, n):
            self.backend.run(n)
    """
    # ``cls()`` makes a Backend (or a FastBackend) that ``create`` returns and the
    # runner keeps: a long-lived backend, whose buffer is lazy.
    files = {"pkg/backend.py": backend, "pkg/runner.py": runner}
    assert _findings(tmp_path, files) == [("backend.py", 11, "IM001")]
    # Made for each step of a serving loop instead, the backend and its buffer die
    # with the step.
    per_step = runner.replace("self.backend = create(fast)", "self.fast = fast")
    per_step = per_step.replace("self.backend.run(n)", "create(self.fast).run(n)")
    per_step += (
        "\n\n    def serve(runner):\n        for n in range(4):\n            runner.step(n)\n"
    )
    assert _findings(tmp_path, {"pkg/runner.py": per_step}) == []


def test_a_factory_method_named_like_the_one_it_calls_is_still_an_entry_point(tmp_path):
    engine = """
    import torch


    class Engine:
        def __init__(self):
            self.ring = [None, None]

        @classmethod
        def init(cls, n):
            return cls()

        def pack(self, i, x):
            slot = self.ring[i]
            if slot is None:
                slot = torch.empty(8)
                self.ring[i] = slot
            slot.copy_(x)
    """
    factory = """
    class Factory:
        registry = {}

        @classmethod
        def init(cls, name, n):
            engine_cls = cls.registry[name]()
            return engine_cls.init(n)
    """
    # ``engine_cls.init(n)`` inside ``Factory.init`` is a call by the name ``init``
    # (it may be ``Engine.init``) made from ``Factory.init`` itself: that does not make
    # the factory a callee of its own; nothing else calls it, so whoever calls it from
    # outside keeps the engine, and the ring's slot is a lazy buffer.
    files = {"pkg/engine.py": engine, "pkg/factory.py": factory}
    assert _findings(tmp_path, files) == [("engine.py", 16, "IM001")]


def test_a_dropped_result_does_not_outlive_its_statement(tmp_path):
    output = """
    import torch


    class Manager:
        last = None

        def query(self):
            if Manager.last is None:
                Manager.last = torch.zeros(4)
            Manager.last.zero_()


    MANAGER = Manager()


    class Output:
        def __init__(self):
            MANAGER.query()


    class Engine:
        def step(self):
            return Output()


    def serve(engine):
        for _ in range(4):
            engine.step()
    """
    bench = """
    import torch


    def bench(fn):
        with torch.profiler.profile() as prof:
            for _ in range(3):
                fn()
                prof.step()
    """
    # Each step's output asks the manager on construction: made per step, that is a
    # first use, not set-up. ``prof.step()`` may be ``Engine.step`` by its name, and
    # ``bench`` is called from nowhere (an entry point, whose results may live as
    # long as the process): but the statement drops what it returns.
    files = {"pkg/output.py": output, "pkg/bench.py": bench}
    assert _findings(tmp_path, files) == [("output.py", 10, "IM001")]
    # Kept in a global instead, an output lives for the process: building it is
    # set-up, and the manager's buffer is made then.
    kept = bench.replace("prof.step()", "_LAST.append(prof.step())")
    kept = kept.replace("import torch", "import torch\n    _LAST = []")
    assert _findings(tmp_path, {"pkg/bench.py": kept}) == []


SALIENCY = """
import torch


class Saliency:
    def __init__(self, n):
        self.n = n
        self.total = None

    def add(self, x):
        if self.total is None:
            self.total = torch.zeros(self.n)
        self.total += x
"""


def test_what_a_function_nothing_calls_makes_and_only_uses_is_its_calls(tmp_path):
    # ``prune`` is a public API nothing in the tree calls: code from outside may run it
    # many times, and each run's tallies die with it.
    prune = """
    from pkg.saliency import Saliency


    def prune(layers):
        for layer in layers:
            tally = Saliency(4)
            tally.add(layer)
    """
    assert _findings(tmp_path, {"pkg/saliency.py": SALIENCY, "pkg/prune.py": prune}) == []
    # Put where the process keeps it, the tally outlives the call.
    kept = "\n    _KEPT = []\n" + prune + "        _KEPT.append(tally)\n"
    assert _findings(tmp_path, {"pkg/prune.py": kept}) == [("saliency.py", 12, "IM001")]
    # Returned, it lives as long as the caller from outside keeps it (a factory that
    # fills it first builds it: ``add`` is then set-up, so here the caller adds).
    made = prune.replace("tally.add(layer)", "return tally")
    user = """
    from pkg.prune import prune


    def step(layers, x):
        prune(layers).add(x)
    """
    files = {"pkg/prune.py": made, "pkg/user.py": user}
    assert _findings(tmp_path, files) == []  # the step's tally dies with the step
    keeps = user.replace(
        "prune(layers).add(x)", "_LAST[0] = prune(layers)\n        _LAST[0].add(x)"
    )
    files["pkg/user.py"] = "\n    _LAST = [None]\n" + keeps
    assert _findings(tmp_path, files) == [("saliency.py", 12, "IM001")]


def test_what_is_returned_in_a_copy_of_a_local_list_is_returned(tmp_path):
    # ``return tuple(items)`` hands back what ``items`` holds.
    init = """
    from pkg.saliency import Saliency


    def initialize(n):
        tally = Saliency(n)
        items = [tally, n]
        return tuple(items)
    """
    files = {"pkg/saliency.py": SALIENCY, "pkg/init.py": init}
    assert _findings(tmp_path, files) == [("saliency.py", 12, "IM001")]
    dropped = init.replace("return tuple(items)", "return tuple([n])")
    assert _findings(tmp_path, {"pkg/init.py": dropped}) == []


def test_a_scripts_main_block_runs_once_as_a_script_not_at_import(tmp_path):
    # What ``if __name__ == "__main__":`` makes is a demo run's local, not a module
    # global of every process that imports the file.
    demo = """
    from pkg.saliency import Saliency


    def tally(x):
        t = Saliency(4)
        t.add(x)


    if __name__ == "__main__":
        DEMO = Saliency(4)
        DEMO.add(1.0)
    """
    assert _findings(tmp_path, {"pkg/saliency.py": SALIENCY, "pkg/demo.py": demo}) == []
    # At the module's top level, the object is a global of every importer.
    top = demo.replace('if __name__ == "__main__":', "if True:")
    assert _findings(tmp_path, {"pkg/demo.py": top}) == [("saliency.py", 12, "IM001")]
    # A script block's ``else`` is the module's own code.
    orelse = demo.replace("DEMO.add(1.0)", "DEMO.add(1.0)\n    else:\n        KEPT = Saliency(4)")
    assert _findings(tmp_path, {"pkg/demo.py": orelse}) == [("saliency.py", 12, "IM001")]


LAYER = """
import torch


class Layer:
    def __init__(self, n):
        self.n = n
        self.cache = None

    def step(self, x):
        if self.cache is None:
            self.cache = torch.zeros(self.n)
        self.cache.copy_(x)
"""


def test_a_code_generators_template_is_not_checked_twice(tmp_path):
    # ``modeling_x.py`` says it was generated from ``modular_x.py``: the template never
    # runs (nothing imports it), its generated copy does, and is the one reported.
    header = "# This file was automatically generated from src/pkg/modular_x.py.\n"
    files = {
        "pkg/modular_x.py": LAYER,
        "pkg/modeling_x.py": header + LAYER,
        "pkg/modular_y.py": "from pkg.modular_x import Layer\n",
        "pkg/modeling_y.py": "# automatically generated from pkg/modular_y.py\n",
    }
    assert _findings(tmp_path, files) == [("modeling_x.py", 13, "IM001")]
    # A module that runs imports it: it is code like any other.
    files["pkg/user.py"] = "from pkg.modular_y import Layer\n"
    assert _findings(tmp_path, files) == [
        ("modeling_x.py", 13, "IM001"),
        ("modular_x.py", 12, "IM001"),
    ]


def test_an_object_a_setter_keeps_lives_until_other_code_sets_it_anew(tmp_path):
    # ``self._set(f)`` keeps the tally on the model; each request starts with
    # ``self.tally = None``, so a tally lives for one request, not for the model's life.
    model = """
    from pkg.saliency import Saliency


    class Model:
        def __init__(self):
            self.tally = None

        def _set(self, tally):
            self.tally = tally

        def begin(self):
            self.tally = None

        def record(self, x):
            if self.tally is None:
                self._set(Saliency(4))
            self.tally.add(x)


    MODEL = Model()
    """
    files = {"pkg/saliency.py": SALIENCY, "pkg/model.py": model}
    assert _findings(tmp_path, files) == []
    # Nothing but construction sets it anew: the tally lives as long as the model.
    files["pkg/model.py"] = model.replace(
        "self.tally = None\n\n        def record", "pass\n\n        def record"
    )
    assert _findings(tmp_path, files) == [("saliency.py", 12, "IM001")]


def test_an_object_handed_in_a_list_literal_is_handed(tmp_path):
    # ``model.blocks = nn.ModuleList([tally])``: the module list keeps the tally on the
    # model the caller handed in, which outlives the call.
    apply = """
    import torch.nn as nn
    from pkg.saliency import Saliency


    def apply(model):
        tally = Saliency(4)
        model.blocks = nn.ModuleList([tally])
    """
    user = """
    from pkg.apply import apply


    def install(model):
        apply(model)
        return model
    """
    files = {"pkg/saliency.py": SALIENCY, "pkg/apply.py": apply, "pkg/user.py": user}
    assert _findings(tmp_path, files) == [("saliency.py", 12, "IM001")]
    dropped = apply.replace("model.blocks = nn.ModuleList([tally])", "nn.ModuleList([tally])")
    assert _findings(tmp_path, {"pkg/apply.py": dropped}) == []


def test_a_tensor_method_on_an_unknown_receiver_is_not_a_project_method(tmp_path):
    # A sequence class with its own ``clone``; the model's forward clones a tensor that
    # it keeps on a global. ``x.clone()`` is torch's clone, not ``Seq.clone``: the
    # sequences stay made per call (the job's, dropped with it).
    seq = """
    import torch

    class Seq:
        def __init__(self, n):
            self.n = n
            self.t = None

        def grow(self):
            if self.t is None:
                self.t = torch.empty(self.n)
            self.t.zero_()

        def clone(self):
            return Seq.from_n(self.n)

        @staticmethod
        def from_n(n):
            return Seq(n)
    """
    used = """
    from pkg.seq import Seq

    KEPT = {}

    def forward(layer, x):
        x = layer(x)
        KEPT["x"] = x.clone()
        return x

    def job(n):
        s = Seq(n)
        c = s.clone()
        c.grow()
        return n
    """
    files = {"pkg/seq.py": seq, "pkg/model.py": used}
    assert _findings(tmp_path, files) == []
    # Called on the sequence itself (its type known), the clone is what the global keeps.
    kept = used.replace('KEPT["x"] = x.clone()', 'seq = Seq(4)\n        KEPT["x"] = seq.clone()')
    assert _findings(tmp_path, {**files, "pkg/model.py": kept}) == [("seq.py", 11, "IM001")]


def test_a_method_its_own_constructor_runs_is_construction_for_every_caller(tmp_path):
    # The graph runner captures in its constructor; ``capture`` (no parameters) builds
    # the capture-time metadata. Another module calls ``.capture()`` by name on an
    # object it cannot type: on a runner that call runs capture again, on a built one.
    runner = """
    import torch

    class Backend:
        def __init__(self):
            self.meta = {}

        def init_meta(self, bs):
            m = self.meta.get(bs)
            if m is None:
                m = self.meta[bs] = torch.zeros(bs)
            m.zero_()

    class GraphRunner:
        def __init__(self, backend):
            self.backend = backend
            self.capture()

        def capture(self):
            for bs in (1, 2, 4):
                self.backend.init_meta(bs)
    """
    other = """
    def graph_capture(comm):
        with comm.capture():
            pass
    """
    files = {"pkg/runner.py": runner, "pkg/other.py": other}
    assert _findings(tmp_path, files) == []
    # A subclass built without capturing (its own constructor) first captures later.
    lazy = (
        runner
        + """
    class LateRunner(GraphRunner):
        def __init__(self, backend):
            self.backend = backend

        def warm(self):
            self.capture()
    """
    )
    assert _findings(tmp_path, {**files, "pkg/runner.py": lazy}) == [("runner.py", 11, "IM001")]


def test_a_method_only_its_own_methods_call_first_is_not_built_by_them(tmp_path):
    # ``query_mask`` fills a class-level mask on first use; ``query_fault`` of the same
    # class calls it (and a sentinel's constructor calls that), and outside code calls
    # it by name: no constructor of the manager calls it, so the poll may be first.
    code = """
    import torch

    class Manager:
        _mask = None

        def __init__(self, n):
            self.n = n

        def query_mask(self):
            if Manager._mask is None:
                Manager._mask = torch.zeros(self.n)
            Manager._mask.zero_()
            return Manager._mask

        def query_fault(self):
            return self.query_mask().any()
    """
    user = """
    class Sentinel:
        def __init__(self, manager):
            self.healthy = not manager.query_fault()

    def poll(manager):
        return manager.query_mask()
    """
    files = {"pkg/m.py": code, "pkg/user.py": user}
    assert _findings(tmp_path, files) == [("m.py", 12, "IM001")]
