"""The decided jit launch past Triton's run (``tritune.apply.fast``), on the CPU.

Signatures must tell apart every launch whose key, rewrite, binary or grid differ; ``Direct``
launches a fake compiled kernel that records what it got; and end to end, a real ``JITFunction``
compiled for sm_90 here (ptxas runs on a CPU) against a driver with no GPU, its launcher
replaced by a recorder: the first launch goes through Triton's run, the next ones straight to the
binary with the decision's arguments and grid, and a launch hook sends them back to Triton.

By hand, the per-launch cost with the GPU launch stubbed (plain Triton against tritune.enable;
printed, never asserted):  PYTHONPATH=$PWD/src python3 tests/apply/test_apply_fast.py [--base SRC]
("jit, noalias decision": the same launch with a decision that assumes no overlap, checked each time)
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import tempfile
import timeit
from pathlib import Path

import pytest
import torch
import triton
from triton import knobs

from tritune.apply import fast
from tritune.apply.jit import signature

NAMES = ("x_ptr", "out_ptr", "n", "scale", "flag", "EPS", "HAS", "BLOCK")
CONSTEXPR = {"EPS", "HAS", "BLOCK"}


def signatures():
    return fast.Signatures(NAMES, CONSTEXPR, torch.Tensor, signature)


def launch_sig(sigs, x=None, out=None, n=100, scale=1.0, flag=True, eps=1e-5, has=True, **kwargs):
    x = torch.zeros(64) if x is None else x
    out = torch.zeros(64) if out is None else out
    return sigs((x, out, n, scale, flag, eps, has), {"BLOCK": 32, **kwargs})


# ------------------------------------------------------------------------------ signatures

def test_equal_launches_have_equal_signatures_and_the_first_shape_gets_a_builder():
    sigs = signatures()
    first = launch_sig(sigs)
    assert launch_sig(sigs) == first and hash(launch_sig(sigs)) == hash(first)  # other tensors, same facts
    assert sigs.first is sigs.builders[0] and sigs.first((torch.zeros(64),), {}) is None  # another shape
    assert launch_sig(sigs, scale=2.5, flag=False) == first  # non-constexpr float/bool: by class only


@pytest.mark.parametrize("change", [
    {"x": torch.zeros(64, dtype=torch.float16)},  # dtype
    {"x": torch.zeros(65)},  # shape
    {"x": torch.zeros(65)[1:]},  # 16-byte alignment of the data pointer
    {"n": 101},  # an int's value
    {"n": 100.0},  # a float where an int was
    {"flag": 1},  # an int where a bool was (True == 1)
    {"has": False},  # a constexpr bool's value
    {"eps": 1e-6},  # a constexpr float's value
    {"num_warps": 8},  # a launch option
])
def test_what_changes_the_key_the_binary_or_the_grid_changes_the_signature(change):
    sigs = signatures()
    assert launch_sig(sigs, **change) != launch_sig(sigs)


def test_other_call_shapes_and_classes_never_share_a_signature():
    sigs = signatures()
    x, out = torch.zeros(64), torch.zeros(64)
    by_position = sigs((x, out, 100, 1.0, True, 1e-5, True, 32), {})
    by_name = sigs((x, out, 100, 1.0, True, 1e-5, True), {"BLOCK": 32})
    parameter = sigs((torch.nn.Parameter(x), out, 100, 1.0, True, 1e-5, True, 32), {})  # a tensor subclass
    odd = sigs((x, out, 100, 1.0, True, 1e-5, True), {"BLOCK": triton.language.constexpr(32)})
    assert len({by_position, by_name, parameter, odd}) == 4
    assert len(sigs.builders) == 3 and odd[0] is fast._GENERAL  # a class no builder takes: the general form
    assert sigs((x, out, 100, 1.0, True, 1e-6, True), {"BLOCK": triton.language.constexpr(32)}) != odd


# ------------------------------------------------------------------------------ Direct

class FakeKernel:
    """A CompiledKernel as Direct uses it: records each launch."""

    def __init__(self):
        self.launches = []
        self.function, self.packed_metadata = "function", "metadata"

    def run(self, *launch):
        self.launches.append(launch)


class FakeFn:
    def __init__(self):
        self.pre_run_hooks, self.used_global_vals = [], {}


def direct(sources=None, grid3=None, device=None):
    kernel, fn = FakeKernel(), FakeFn()
    names = ("x_ptr", "out_ptr", "n", "BLOCK")
    sources = sources or {"x_ptr": ("arg", 0), "out_ptr": ("arg", 1), "n": ("arg", 2), "BLOCK": ("fixed", 64)}
    current = {"device": 0}
    made = fast.Direct(kernel, 0, fn, fast.Recipe(names, sources, 3), grid3 or (lambda grid: (*grid, 1, 1)),
                       lambda: current["device"], lambda device: f"stream{device}")
    return made, kernel, fn, current


def test_direct_launches_the_binary_with_the_arguments_in_parameter_order_and_the_grid_of_three():
    made, kernel, _, _ = direct()
    x, out = torch.zeros(4), torch.zeros(4)
    assert made.launch((x, out, 100), {"BLOCK": 32}, (2,)) is kernel
    (g0, g1, g2, stream, function, metadata, launch_metadata, enter, leave, *args), = kernel.launches
    assert (g0, g1, g2, stream, function, metadata) == (2, 1, 1, "stream0", "function", "metadata")
    assert (launch_metadata, enter, leave) == (None, None, None)
    assert args[0] is x and args[1] is out and args[2:] == [100, 64]


def test_a_callable_grid_gets_every_argument_by_name_with_the_decisions_constexprs():
    made, kernel, _, _ = direct()
    seen = []
    made.launch((torch.zeros(4), torch.zeros(4), 100), {}, lambda meta: seen.append(dict(meta)) or (7, 2))
    assert seen[0]["BLOCK"] == 64 and seen[0]["n"] == 100 and list(seen[0]) == ["x_ptr", "out_ptr", "n", "BLOCK"]
    assert kernel.launches[0][:3] == (7, 2, 1)


def test_keyword_arguments_and_another_parameter_order_are_picked_each_launch():
    names = ("BLOCK", "n", "out_ptr", "x_ptr")  # a source variant may order its parameters otherwise
    sources = {"x_ptr": ("arg", 0), "out_ptr": ("kw", "out_ptr"), "n": ("arg", 1), "BLOCK": ("fixed", 64)}
    kernel = FakeKernel()
    made = fast.Direct(kernel, 0, FakeFn(), fast.Recipe(names, sources, 2), lambda grid: (1, 1, 1),
                       lambda: 0, lambda device: 0)
    x, out = torch.zeros(4), torch.zeros(4)
    made.launch((x, 100), {"out_ptr": out}, (1,))
    args = kernel.launches[0][9:]
    assert args[:2] == (64, 100) and args[2] is out and args[3] is x


def test_a_grid_that_cannot_be_recomputed_is_refused():
    made, kernel, _, _ = direct(grid3=lambda grid: None)
    assert made.launch((torch.zeros(4), torch.zeros(4), 100), {}, (1,)) is fast.REFUSED and not kernel.launches


@contextlib.contextmanager
def hook_added(which: str):
    chain, hook = getattr(knobs.runtime, which), (lambda metadata: None)
    chain.add(hook)
    try:
        yield
    finally:
        chain.remove(hook)


@contextlib.contextmanager
def hook_assigned():
    knobs.runtime.launch_enter_hook = lambda metadata: None
    try:
        yield
    finally:
        del knobs.runtime.launch_enter_hook  # back to Triton's chain (a class attribute)


@pytest.mark.parametrize("state", ["enter", "exit", "assigned", "pre_run", "global", "device", "debug"])
def test_direct_refuses_while_anything_triton_would_honour_is_set(state, monkeypatch):
    made, kernel, fn, current = direct()
    args = (torch.zeros(4), torch.zeros(4), 100)
    with contextlib.ExitStack() as stack:
        if state == "enter":
            stack.enter_context(hook_added("launch_enter_hook"))
        elif state == "exit":
            stack.enter_context(hook_added("launch_exit_hook"))
        elif state == "assigned":
            stack.enter_context(hook_assigned())
        elif state == "pre_run":
            fn.pre_run_hooks.append(lambda *a, **k: None)
            stack.callback(fn.pre_run_hooks.clear)
        elif state == "global":
            fn.used_global_vals[("SCALE", 0)] = (2, {"SCALE": 3})
            stack.callback(fn.used_global_vals.clear)
        elif state == "device":
            current["device"] = 1
            stack.callback(current.update, device=0)
        else:
            monkeypatch.setattr(knobs.runtime, "debug", not knobs.runtime.debug)
            stack.callback(monkeypatch.undo)
        assert made.launch(args, {}, (1,)) is fast.REFUSED and not kernel.launches
    assert made.launch(args, {}, (1,)) is kernel and len(kernel.launches) == 1  # unset: straight again


# ------------------------------------------------------------------ end to end (sm_90 binary)

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit
def add_one_tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@triton.jit
def add_one_checked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # main(): a decision that assumes no overlap
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
'''


class NoGpu:
    """Triton's driver without a GPU: device 0, stream 7, an sm_90 target to compile for."""

    def __init__(self):
        self.get_current_device = lambda: 0
        self.get_current_stream = lambda device: 7

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_active_torch_device(self):
        return torch.device("cpu")


@contextlib.contextmanager
def no_gpu(launches: list):
    """Compiled kernels whose launcher records (grid, stream, launch metadata, args)."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime import driver

    def init_handles(self):
        if self.module is None:
            self.module, self.function = object(), self.name
            self._run = lambda *launch: launches.append((launch[:3], launch[3], launch[6], launch[9:]))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CompiledKernel, "_init_handles", init_handles)
        mp.setattr(driver, "_active", NoGpu())  # put back as it was (reset_active would look for a GPU)
        yield


def load_kernels(folder: Path):
    path = folder / "fast_kernels.py"
    path.write_text(KERNELS)
    spec = importlib.util.spec_from_file_location("fast_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fast_kernels"] = module
    spec.loader.exec_module(module)
    return module


def decide_block(store, jit, block: int, x, out, n: int, new_block: int = 64, assumes: tuple = ()) -> None:
    from tritune.model.variant import Variant
    from tritune.store import LiveKeyer, current_target

    key = LiveKeyer.for_kernel(jit, current_target("cpu"))({"x_ptr": x, "out_ptr": out, "n": n, "BLOCK": block})
    assumed = {"assumes": assumes} if assumes else {}  # main(--base): a tree from before the field
    variant = Variant(name=f"block {new_block}", constexprs={"BLOCK": new_block}, **assumed)
    run = store.start_run({"test": True})
    cand = store.add_candidate(run, key, variant)
    store.finish_candidate(cand.id, "verified", verification={"ok": True, "mode": "tolerance"},
                           timings={"median_ms": 1.0})
    store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)


@pytest.fixture
def compiled(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = load_kernels(tmp_path)
    launches: list = []
    with no_gpu(launches):
        try:
            module.add_one.warmup(torch.zeros(4), torch.zeros(4), 4, BLOCK=64, grid=(1,))
        except Exception as exc:  # noqa: BLE001 - no ptxas here: nothing to launch past Triton
            pytest.skip(f"cannot compile for sm_90 on this machine: {exc}")
        yield module, launches


def test_a_decided_launch_goes_straight_to_the_binary_after_its_first(compiled, tmp_path):
    from tritune import apply
    from tritune.store import DecisionStore

    module, launches = compiled
    x, out = torch.zeros(1000), torch.zeros(1000)
    with DecisionStore(tmp_path / "decisions.db") as store:
        decide_block(store, module.add_one, 128, x, out, 1000)
        applier = apply.enable(store, device="cpu")
        try:
            for _ in range(3):
                module.add_one[(8,)](x, out, 1000, BLOCK=128)
            module.add_one[(8, 2)](x, out, 1000, BLOCK=128)  # another grid: recomputed for it
            with hook_added("launch_enter_hook"):
                module.add_one[(8,)](x, out, 1000, BLOCK=128)
        finally:
            apply.disable()
    assert applier.stats()["add_one"]["applied"] == 5
    assert [launch[0] for launch in launches] == [(16, 1, 1)] * 3 + [(16, 2, 1)] + [(16, 1, 1)]
    assert all(launch[1] == 7 and launch[3][0] is x and launch[3][1] is out and launch[3][2:] == (1000, 64)
               for launch in launches)
    # Triton's run passes launch metadata (a LazyDict), Direct None: the shim's first launch, the one
    # that keeps the binary, and the hook's
    assert [launch[2] is None for launch in launches] == [False, False, True, True, False]


def test_an_autotuned_launch_with_a_decision_goes_straight_too(compiled, tmp_path):
    from tritune import apply
    from tritune.store import DecisionStore

    module, launches = compiled
    x, out = torch.zeros(1000), torch.zeros(1000)
    with DecisionStore(tmp_path / "decisions.db") as store:
        decide_block(store, module.add_one_tuned.fn, 128, x, out, 1000)
        applier = apply.enable(store, device="cpu")
        try:
            for _ in range(4):
                module.add_one_tuned[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000)
        finally:
            apply.disable()
    assert applier.stats()["add_one_tuned"]["applied"] == 4
    assert [(launch[0], launch[2] is None, launch[3][2:]) for launch in launches] == (
        [((16, 1, 1), False, (1000, 64))] * 2 + [((16, 1, 1), True, (1000, 64))] * 2)


# ------------------------------------------------------------------ by hand: the cost per launch

def main() -> None:
    """Per-launch microseconds, the GPU launch stubbed: plain Triton against tritune.enable."""
    import os

    from tritune import apply
    from tritune.store import DecisionStore

    os.environ.pop("TRITON_INTERPRET", None)
    os.environ["TRITUNE_HOME"] = tempfile.mkdtemp(prefix="tritune-home-")  # as conftest.py: not the user's
    work = Path(tempfile.mkdtemp())
    module, x, out = load_kernels(work), torch.zeros(1024), torch.zeros(1024)
    cases = {
        "jit, fixed grid": lambda: module.add_one[(8,)](x, out, 1024, BLOCK=128),
        "jit, callable grid": lambda: module.add_one[lambda m: (triton.cdiv(1024, m["BLOCK"]),)](x, out, 1024,
                                                                                                 BLOCK=128),
        "autotune": lambda: module.add_one_tuned[lambda m: (triton.cdiv(1024, m["BLOCK"]),)](x, out, 1024),
    }

    from tritune.model.variant import Variant

    checked = "assumes" in Variant.__dataclass_fields__  # not in a --base tree from before it
    if checked:
        cases["jit, noalias decision"] = lambda: module.add_one_checked[(8,)](x, out, 1024, BLOCK=128)

    def per_launch(launch, loops=20000) -> float:
        launch()
        return timeit.timeit(launch, number=loops) / loops * 1e6

    with _discarding(), DecisionStore(work / "decisions.db") as store:
        decide_block(store, module.add_one, 128, x, out, 1024)
        decide_block(store, module.add_one_tuned.fn, 128, x, out, 1024)
        if checked:
            decide_block(store, module.add_one_checked, 128, x, out, 1024, assumes=("noalias",))
        times = {name: ([], []) for name in cases}
        for _ in range(5):
            for name, launch in cases.items():
                times[name][0].append(per_launch(launch))
            apply.enable(store, device="cpu")
            for name, launch in cases.items():
                times[name][1].append(per_launch(launch))
            apply.disable()
    for name, (plain, tritune) in times.items():
        print(f"{name:20s} plain Triton {min(plain):6.2f} us   tritune {min(tritune):6.2f} us   "
              f"added {min(tritune) - min(plain):+6.2f} us")


@contextlib.contextmanager
def _discarding():
    """``no_gpu`` with a launcher that keeps nothing (a benchmark makes many launches)."""
    with no_gpu([]):
        from triton.compiler.compiler import CompiledKernel

        loaded = CompiledKernel._init_handles

        def init_handles(self):
            loaded(self)
            self._run = lambda *launch: None

        CompiledKernel._init_handles = init_handles  # undone by no_gpu's monkeypatch
        yield


if __name__ == "__main__":
    if "--base" in sys.argv:  # another tritune tree (e.g. main's src) for the before figures
        sys.path.insert(0, sys.argv[sys.argv.index("--base") + 1])
        for name in [name for name in sys.modules if name.startswith("tritune")]:
            del sys.modules[name]
    main()
