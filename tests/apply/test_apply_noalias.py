"""A decision that assumes its tensor arguments do not overlap, at launch time, on the CPU.

Planted: ``bump_kernel`` loads ``in_out_ptr`` twice around a store through ``out_ptr``, and its
variant keeps the first load (what ``merge-redundant-loads`` does under no-alias, written as a
source variant because the interpreter runs no compiler passes). On separate buffers both give
``in_out = 2x``; called in place (``out_ptr`` is ``in_out_ptr``) the kernel gives ``3x`` and the
variant ``2x``. So a guard that lets an overlapping launch through fails these tests, and so
does one that refuses disjoint launches (nothing applied).
"""

from __future__ import annotations

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune import apply
from tritune.capture import _jit_shim
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.model.variant import Variant
from tritune.store import DecisionStore, current_target, key_for

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def bump_kernel(in_out_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(in_out_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, a * 2, mask=mask)
    b = tl.load(in_out_ptr + offs, mask=mask)
    tl.store(in_out_ptr + offs, a + b, mask=mask)
'''
MERGED = KERNEL.replace("b = tl.load(in_out_ptr + offs, mask=mask)", "b = a")
CPU = current_target("cpu")
N = 40


@pytest.fixture(scope="module")
def k(tmp_path_factory):
    path = tmp_path_factory.mktemp("noalias_kernels") / "noalias_kernels.py"
    path.write_text(KERNEL)
    return import_interpreted(path, "noalias_kernels")


@pytest.fixture(scope="module")
def spec(k, tmp_path_factory):
    out = tmp_path_factory.mktemp("noalias_capture")
    with capture(out):
        bump(k, torch.arange(N, dtype=torch.float32), torch.zeros(N))
    (found,) = read_launches(out)
    assert found.extra["overlapping"] == []
    return found


@pytest.fixture(autouse=True)
def disabled():
    yield
    apply.disable()
    assert not _jit_shim.installed()


def bump(k, in_out, out):
    k.bump_kernel[(triton.cdiv(N, 16),)](in_out, out, N, BLOCK=16)


def decide(path, spec, variant) -> None:
    with DecisionStore(path) as store:
        key = key_for(spec, CPU)
        run = store.start_run({"test": True})
        cand = store.add_candidate(run, key, variant)
        store.finish_candidate(cand.id, "verified", verification={"ok": True, "mode": "bitwise"},
                               timings={"median_ms": 1.0})
        store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)


def in_place(k) -> torch.Tensor:
    x = torch.arange(N, dtype=torch.float32)
    bump(k, x, x)
    return x


def test_the_planted_kernel_gives_another_result_in_place_when_the_variant_runs_unchecked(k, spec, tmp_path):
    """Without the assumption recorded nothing checks the arguments: the in-place call gets the
    variant's wrong 2x. This is what the guard is for."""
    x0 = torch.arange(N, dtype=torch.float32)
    assert torch.equal(in_place(k), 3 * x0)  # the kernel as written
    decide(tmp_path / "d.db", spec, Variant(name="merged, unchecked", source=MERGED))
    apply.enable(tmp_path / "d.db", device="cpu")
    assert torch.equal(in_place(k), 2 * x0)


def test_overlapping_arguments_run_the_baseline_and_disjoint_ones_the_variant(k, spec, tmp_path, capfd):
    decide(tmp_path / "d.db", spec, Variant(name="merged", source=MERGED, assumes=("noalias",)))
    applier = apply.enable(tmp_path / "d.db", device="cpu")
    x0 = torch.arange(N, dtype=torch.float32)
    for _ in range(2):
        assert torch.equal(in_place(k), 3 * x0)  # the baseline's (correct) result
    x, out = x0.clone(), torch.zeros(N)
    bump(k, x, out)
    assert torch.equal(x, 2 * x0) and torch.equal(out, 2 * x0)
    halves = torch.arange(2 * N, dtype=torch.float32)  # two halves of one buffer: disjoint ranges
    bump(k, halves[:N], halves[N:])
    assert torch.equal(halves[:N], 2 * x0)
    assert applier.stats()["bump_kernel"] == {"launches": 4, "applied": 2, "skipped": 2, "noalias_fallbacks": 2,
                                              "decisions": 1}
    assert capfd.readouterr().err.count("assumes tensor arguments that do not overlap") == 1
    assert apply.summary(applier.stats()).endswith("2 ran as written: their tensor arguments overlapped")


def test_the_check_holds_on_the_shims_hook_path_too(k, spec, tmp_path):
    """With a listener on the JIT shim (capture running alongside) launches go through
    ``jit_hook``, not ``_direct``: the same check."""
    decide(tmp_path / "d.db", spec, Variant(name="merged", source=MERGED, assumes=("noalias",)))
    applier = apply.enable(tmp_path / "d.db", device="cpu")
    x0 = torch.arange(N, dtype=torch.float32)
    with capture(tmp_path / "again"):
        assert torch.equal(in_place(k), 3 * x0)
        bump(k, x0.clone(), torch.zeros(N))
    stats = applier.stats()["bump_kernel"]
    assert (stats["applied"], stats["noalias_fallbacks"]) == (1, 1)


# ------------------------------------------------------------------ the binary, past Triton's run

def test_guarded_direct_refuses_overlapping_arguments_and_launches_disjoint_ones():
    from test_apply_fast import FakeFn, FakeKernel

    from tritune import aliasing
    from tritune.apply import fast

    x, out = torch.zeros(4), torch.zeros(4)
    kernel = FakeKernel()
    names = ("x_ptr", "out_ptr", "n")
    sources = {"x_ptr": ("arg", 0), "out_ptr": ("arg", 1), "n": ("arg", 2)}
    made = fast.GuardedDirect(kernel, 0, FakeFn(), fast.Recipe(names, sources, 3), lambda grid: (*grid, 1, 1),
                              lambda: 0, lambda device: 0, guard=aliasing.Guard((x, out, 4), {}, torch.Tensor))
    assert made.launch((x, x, 4), {}, (1,)) is fast.REFUSED and not kernel.launches
    assert made.launch((x, out, 4), {}, (1,)) is kernel and len(kernel.launches) == 1


def test_a_compiled_noalias_decision_goes_straight_only_while_its_arguments_are_apart(tmp_path, monkeypatch):
    """sm_90 binaries against a driver with no GPU (``test_apply_fast``): disjoint launches go to
    the decided binary past Triton's run (BLOCK 64: 16 programs), an in-place one runs the
    program's own launch (BLOCK 128: 8 programs) through Triton's run."""
    from test_apply_fast import decide_block, load_kernels, no_gpu

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    module = load_kernels(tmp_path)
    launches: list = []
    x, out = torch.zeros(1000), torch.zeros(1000)
    with no_gpu(launches):
        try:
            module.add_one.warmup(torch.zeros(4), torch.zeros(4), 4, BLOCK=64, grid=(1,))
        except Exception as exc:  # noqa: BLE001 - no ptxas here
            pytest.skip(f"cannot compile for sm_90 on this machine: {exc}")
        with DecisionStore(tmp_path / "d.db") as store:
            decide_block(store, module.add_one, 128, x, out, 1000, assumes=("noalias",))
            applier = apply.enable(store, device="cpu")
            for _ in range(3):
                module.add_one[(8,)](x, out, 1000, BLOCK=128)
            module.add_one[(8,)](x, x, 1000, BLOCK=128)
            apply.disable()
    assert [(launch[0], launch[3][2:]) for launch in launches] == [((16, 1, 1), (1000, 64))] * 3 + [
        ((8, 1, 1), (1000, 128))]
    # launch metadata None: past Triton's run (the shim's first launch and the one that keeps the
    # binary go through it, as in test_apply_fast); the in-place launch is Triton's run again
    assert [launch[2] is None for launch in launches] == [False, False, True, False]
    assert applier.stats()["add_one"]["noalias_fallbacks"] == 1


# ----------------------------------------------------------------------------------- Inductor

def test_an_inductor_noalias_decision_stays_on_the_checked_launch_path(tmp_path):
    """Never Inductor's own launcher (it would launch unchecked): the launch-time path, whose
    check sends an in-place call to Inductor's launcher as written."""
    from test_apply_inductor import _faked_tuner

    from tritune.apply import inductor_cache

    tuner, args, spec, inductors, compiled = _faked_tuner()
    assert spec.extra["overlapping"] == []
    variant = Variant(name="x64", constexprs={"XBLOCK": 64}, assumes=("noalias",))
    decide(tmp_path / "d.db", spec, variant)
    why = inductor_cache.not_config_only(tuner, tuner.launchers[0].config, type("D", (), {"variant": variant}), 1)
    assert why is not None and "noalias" in why
    applier = apply.enable(tmp_path / "d.db", device="cpu")
    for _ in range(3):
        tuner.run(*args, stream=1)  # the first is Inductor's own (it settles the config)
    x = args[0]
    tuner.run(x, args[1], x, *args[3:], stream=1)  # out_ptr0 is in_ptr0
    assert len(compiled.launches) == 2 and inductors == [1, 1]
    assert tuner.launchers[0] is not None and not applier._swaps  # no launcher of ours in place
    stats = applier.stats()[spec.kernel]
    assert (stats["applied"], stats["noalias_fallbacks"]) == (2, 1)
