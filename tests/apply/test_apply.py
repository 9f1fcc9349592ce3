"""Apply at runtime, on the CPU: interpreted kernels, a store with real verified decisions keyed
from a capture, and the launch observed from inside the kernel (each program writes its BLOCK
into ``seen[pid]``: how many programs ran and with which block size).

The decisions are planted so that a test fails if the decision is not applied (the program
count, the block size or a source variant's marker changes) and if it is applied where it must
not be (another GPU, rolled back, not verified, an unsafe grid).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune import apply
from tritune.capture import _jit_shim
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.model.target import Target
from tritune.model.variant import Variant
from tritune.store import DecisionStore, StoreError, current_target, key_for

BODY = """
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
    tl.store(seen_ptr + offs // BLOCK, BLOCK)
"""
KERNELS = f'''
import triton
import triton.language as tl


def fake_bench(fn, quantiles=None, **_):
    fn()
    return [1.0] * len(quantiles) if quantiles else 1.0


@triton.jit
def scale_kernel(x_ptr, out_ptr, seen_ptr, n, BLOCK: tl.constexpr):{BODY}

@triton.jit
def plain_kernel(x_ptr, out_ptr, seen_ptr, n, BLOCK: tl.constexpr):{BODY}

@triton.autotune(configs=[triton.Config({{"BLOCK": 16}}, num_warps=2), triton.Config({{"BLOCK": 32}}, num_warps=4)],
                 key=["n"], do_bench=fake_bench)
@triton.jit
def tuned_kernel(x_ptr, out_ptr, seen_ptr, n, BLOCK: tl.constexpr):{BODY}

@triton.heuristics({{"BLOCK": lambda args: 16}})
@triton.jit
def heur_kernel(x_ptr, out_ptr, seen_ptr, n, BLOCK: tl.constexpr):{BODY}

@triton.jit
def special_kernel(x_ptr, out_ptr, seen_ptr, n, SCALE: tl.constexpr, FLAG: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask) * SCALE
    if FLAG:
        y = y + 1
    tl.store(out_ptr + offs, y, mask=mask)
    tl.store(seen_ptr + offs // BLOCK, BLOCK)
'''
MARKED = "tl.store(seen_ptr + offs // BLOCK, BLOCK + 1000)"  # a source variant: same results, another marker
CPU = current_target("cpu")


def cdiv_grid(n: int):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


def launch(kernel, n: int, grid=None, **constexprs) -> tuple[int, list[int]]:
    """Launch on x = 0..n-1; check out == 2x; return (programs that ran, BLOCK values they saw)."""
    x, out, seen = torch.arange(n, dtype=torch.float32), torch.zeros(n), torch.zeros(64, dtype=torch.int32)
    kernel[grid if grid is not None else cdiv_grid(n)](x, out, seen, n, **constexprs)
    assert torch.equal(out, x * 2), "the variant computed something else"
    ran = seen[seen != 0]
    return len(ran), sorted(set(ran.tolist()))


def fixed(kernel, n: int, block: int = 32) -> tuple[int, list[int]]:
    return launch(kernel, n, (triton.cdiv(n, block),), BLOCK=block)


@pytest.fixture(scope="module")
def k(tmp_path_factory):
    path = tmp_path_factory.mktemp("apply_kernels") / "apply_kernels.py"
    path.write_text(KERNELS)
    return import_interpreted(path, "apply_kernels")


@pytest.fixture(scope="module")
def specs(k, tmp_path_factory):
    """Captured launches: scale n=100 (grid 4) and n=20 (grid 1), the autotuned and the
    heuristics kernels at n=100 (the autotuner picks BLOCK 16: equal fake timings, first wins)."""
    out = tmp_path_factory.mktemp("apply_capture")
    with capture(out):
        assert fixed(k.scale_kernel, 100) == (4, [32])
        assert fixed(k.scale_kernel, 20) == (1, [32])
        assert launch(k.tuned_kernel, 100) == (7, [16])
        assert launch(k.heur_kernel, 100) == (7, [16])
    found = {}
    for spec in read_launches(out):
        n = spec.arg("n").value
        found[(spec.kernel, n)] = spec
    assert found[("tuned_kernel", 100)].kind == "autotune" and found[("heur_kernel", 100)].kind == "heuristics"
    return found


@pytest.fixture
def store(tmp_path):
    with DecisionStore(tmp_path / "decisions.db") as opened:
        yield opened


@pytest.fixture(autouse=True)
def disabled():
    yield
    apply.disable()
    assert not _jit_shim.installed()


def decide(store, spec, variant, *, target=CPU, promote=True):
    """A real verified decision: run, candidate, verified with a passing record, promoted."""
    key = key_for(spec, target)
    run = store.start_run({"test": True})
    cand = store.add_candidate(run, key, variant)
    store.finish_candidate(cand.id, "verified", verification={"ok": True, "mode": "tolerance"},
                           timings={"median_ms": 1.0})
    if promote:
        store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)
    return key


B64 = Variant(name="block 64", constexprs={"BLOCK": 64})
B16 = Variant(name="block 16", constexprs={"BLOCK": 16})


@contextlib.contextmanager
def spying():
    """An around hook inside the applier's: what it hands Triton's run."""
    seen = []

    def spy(launch, run):
        seen.append((launch.fn, launch.args, dict(launch.kwargs), launch.grid, os.environ.get("TRITUNE_PASSES")))
        return run(launch)

    _jit_shim.install_around(spy)
    try:
        yield seen
    finally:
        _jit_shim.uninstall_around(spy)


# ------------------------------------------------------------------------------ constexprs

def test_a_constexpr_decision_recomputes_a_fixed_grid_and_a_callable_one(k, specs, store):
    decide(store, specs[("scale_kernel", 100)], B64)
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (2, [64])  # (cdiv(100, 32),) became (cdiv(100, 64),)
    assert launch(k.scale_kernel, 100, BLOCK=32) == (2, [64])  # the callable grid got BLOCK=64 from Triton
    x, out, seen = torch.arange(100.0), torch.zeros(100), torch.zeros(64, dtype=torch.int32)
    k.scale_kernel[(4,)](x, out, seen, 100, 32)  # BLOCK passed positionally
    assert torch.equal(out, x * 2) and seen[:3].tolist() == [64, 64, 0]
    assert applier.stats()["scale_kernel"] == {"launches": 3, "applied": 3, "skipped": 0,
                                               "noalias_fallbacks": 0, "decisions": 1}


def test_a_smaller_block_gets_more_programs(k, specs, store):
    decide(store, specs[("scale_kernel", 100)], B16)
    apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (7, [16])


def test_the_key_covers_its_shape_bucket_only(k, specs, store):
    decide(store, specs[("scale_kernel", 100)], B64)  # n=100: bucket 128
    apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 120) == (2, [64])  # 120 <= 128: same key
    assert fixed(k.scale_kernel, 200) == (7, [32])  # another bucket: as written
    assert fixed(k.scale_kernel, 100, block=16) == (7, [16])  # another constexpr value: another key


def test_an_unsafe_fixed_grid_is_left_as_written(k, specs, store, capsys):
    # grid (1,) at n=20: cdiv(20, 32) == 1 or one program per row? A smaller block is not applied.
    decide(store, specs[("scale_kernel", 20)], B16)
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 20) == (1, [32])
    assert launch(k.scale_kernel, 20, BLOCK=32) == (2, [16])  # a callable grid is always right: applied
    assert applier.stats()["scale_kernel"] == {"launches": 2, "applied": 1, "skipped": 1,
                                               "noalias_fallbacks": 0, "decisions": 1}


def test_a_larger_block_on_a_one_program_grid_is_applied(k, specs, store):
    decide(store, specs[("scale_kernel", 20)], B64)
    apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 20) == (1, [64])


def test_autotuned_kernel_uses_the_decision_for_the_config_it_chose(k, specs, store):
    decide(store, specs[("tuned_kernel", 100)], B64)  # keyed with BLOCK=16, the chosen config
    applier = apply.enable(store, device="cpu")
    with spying() as seen:
        assert launch(k.tuned_kernel, 100) == (2, [64])
    assert seen[0][2]["num_warps"] == 2  # the chosen config's options still reach the launch
    assert applier.stats()["tuned_kernel"]["applied"] == 1


def test_heuristics_kernel_uses_the_decision(k, specs, store):
    decide(store, specs[("heur_kernel", 100)], B64)
    apply.enable(store, device="cpu")
    assert launch(k.heur_kernel, 100) == (2, [64])


def test_a_decision_applies_to_its_own_specialization_only(k, store, tmp_path):
    """The per-launch signature that finds a prepared launch tells apart all the key does: after a
    launch the decision applied to, a launch with another dtype, a misaligned pointer, another
    bool or float constexpr (all passed positionally, or all by name) is another key, with no
    decision: it runs as written."""
    def run(x=None, scale=2.0, flag=True, by_name=False):
        x = torch.arange(100.0) if x is None else x
        out, seen = torch.zeros(100, dtype=x.dtype), torch.zeros(64, dtype=torch.int32)
        if by_name:
            k.special_kernel[(4,)](x_ptr=x, out_ptr=out, seen_ptr=seen, n=100, SCALE=scale, FLAG=flag, BLOCK=32)
        else:
            k.special_kernel[(4,)](x, out, seen, 100, scale, flag, 32)
        assert torch.equal(out, x * scale + (1 if flag else 0)), "the variant computed something else"
        return sorted(set(seen[seen != 0].tolist()))

    with capture(tmp_path / "cap"):
        assert run() == [32]
    (spec,) = read_launches(tmp_path / "cap")
    decide(store, spec, B64)
    applier = apply.enable(store, device="cpu")
    for by_name in (False, True):
        assert run(by_name=by_name) == [64]  # the decision's own key: applied, its launch prepared
        assert run(torch.arange(100.0, dtype=torch.float64), by_name=by_name) == [32]
        assert run(torch.arange(101.0)[1:], by_name=by_name) == [32]  # 4 bytes past a 16-byte boundary
        assert run(flag=False, by_name=by_name) == [32]
        assert run(scale=3.0, by_name=by_name) == [32]
        assert run(by_name=by_name) == [64]
    assert applier.stats()["special_kernel"] == {"launches": 12, "applied": 4, "skipped": 0,
                                                 "noalias_fallbacks": 0, "decisions": 1}


# ---------------------------------------------------------------------- options, source, passes

def test_options_reach_the_launch(k, specs, store):
    decide(store, specs[("scale_kernel", 100)], Variant(name="w8", options={"num_warps": 8, "num_stages": 2}))
    apply.enable(store, device="cpu")
    with spying() as seen:
        assert fixed(k.scale_kernel, 100) == (4, [32])
    fn, args, kwargs, grid, _ = seen[0]
    assert fn is k.scale_kernel and kwargs == {"BLOCK": 32, "num_warps": 8, "num_stages": 2} and grid == (4,)


def test_a_source_variant_runs_the_replacement_text(k, specs, store):
    text = KERNELS.replace("tl.store(seen_ptr + offs // BLOCK, BLOCK)", MARKED)
    decide(store, specs[("scale_kernel", 100)], Variant(name="marked", source=text))
    apply.enable(store, device="cpu")
    with spying() as seen:
        assert fixed(k.scale_kernel, 100) == (4, [1032])
    fn, args, kwargs, _, _ = seen[0]
    assert fn is not k.scale_kernel and fn.fn.__name__ == "scale_kernel"
    assert args == () and set(kwargs) == {"x_ptr", "out_ptr", "seen_ptr", "n", "BLOCK"}  # by name, as replay
    assert fixed(k.plain_kernel, 100) == (4, [32])  # same file, no decision: untouched


def test_passes_build_a_private_clone_inside_the_compiler_scope_once(k, specs, store):
    decide(store, specs[("scale_kernel", 100)], Variant(name="exact", passes=("exact",)))
    apply.enable(store, device="cpu")
    with spying() as seen:
        assert fixed(k.scale_kernel, 100) == (4, [32])
        assert fixed(k.scale_kernel, 100) == (4, [32])
    (first, *_, passes_first), (second, *_, passes_second) = seen
    assert first is second and first is not k.scale_kernel and first.fn is k.scale_kernel.fn
    assert passes_first and not passes_second  # built inside tritune.compiler.enabled(...), once
    assert os.environ.get("TRITUNE_PASSES") is None


def test_one_clone_per_pass_set(k):
    from tritune.apply.kernels import variant_kernel

    exact, again = Variant(passes=("exact",)), Variant(name="other key", passes=("exact",))
    fast = Variant(passes=("exact",), fast_math=True)
    assert variant_kernel(k.scale_kernel, B64) is k.scale_kernel  # options/constexprs: the kernel itself
    assert variant_kernel(k.scale_kernel, exact) is variant_kernel(k.scale_kernel, again)
    assert variant_kernel(k.scale_kernel, fast) is not variant_kernel(k.scale_kernel, exact)
    assert variant_kernel(k.plain_kernel, exact) is not variant_kernel(k.scale_kernel, exact)


RULED = {"rule": "pipeline-loop", "exact": "exact", "params": {}}  # a source a rule of tritune's made


@pytest.mark.parametrize("rewrite", [{"rule": "llm", "exact": "tolerance", "params": {}}, None],
                         ids=["llm", "unmarked"])
def test_a_models_source_that_fails_the_allowlist_is_refused_and_the_launch_runs_as_written(
        k, specs, store, capfd, tmp_path, rewrite):
    """Checked against the kernel's own file before it is imported: its top level never runs."""
    sentinel = tmp_path / "sentinel"
    text = KERNELS + f"\nopen({str(sentinel)!r}, 'w').write('ran')\n"
    decide(store, specs[("scale_kernel", 100)], Variant(name="payload", source=text, rewrite=rewrite))
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (4, [32])
    err = capfd.readouterr().err
    assert "not applied: Unsafe: line" in err and "a call at module level is not allowed" in err
    assert not sentinel.exists() and applier.stats()["scale_kernel"]["applied"] == 0


def test_a_decision_that_fails_is_reported_once_and_the_launch_runs_as_written(k, specs, store, capfd):
    decide(store, specs[("scale_kernel", 100)], Variant(name="broken", source="raise ValueError('planted')\n",
                                                        rewrite=RULED))
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (4, [32])
    assert fixed(k.scale_kernel, 100) == (4, [32])
    err = capfd.readouterr().err
    assert err.count("tritune apply: kernel scale_kernel: decision for scale_kernel") == 1
    assert "planted" in err and "\n" not in err.strip()
    assert applier.stats()["scale_kernel"]["applied"] == 0


@pytest.mark.parametrize("alone", [True, False], ids=["direct", "hook"])
def test_a_decision_that_fails_after_it_ran_is_not_tried_again(k, specs, store, capfd, alone):
    """A decision that ran, then fails on a later launch (alone: on the applier's own ``run``, past
    the shim; else in the shim's hook): that launch runs as written, and the decision is not
    tried again."""
    text = KERNELS.replace("def fake_bench", f"FAIL = []  # one module per case: {alone}\n\n\ndef fake_bench").replace(
        "tl.store(seen_ptr + offs // BLOCK, BLOCK)", "tl.store(seen_ptr + offs // BLOCK, BLOCK + 1000)\n    assert not FAIL, 'planted'", 1)
    decide(store, specs[("scale_kernel", 100)], Variant(name="fails later", source=text, rewrite=RULED))
    applier = apply.enable(store, device="cpu")
    with contextlib.nullcontext() if alone else spying():
        assert fixed(k.scale_kernel, 100) == (4, [1032])
        assert ("run" in vars(k.scale_kernel)) == alone  # the applier's own run, while alone on the shim
        (entry,) = [e for e in applier._jit.values() if e.fn is k.scale_kernel]
        (prepared,) = entry.fast.values()
        prepared.fn.fn.__globals__["FAIL"].append(True)
        assert fixed(k.scale_kernel, 100) == (4, [32])
        assert fixed(k.scale_kernel, 100) == (4, [32])
    assert applier.stats()["scale_kernel"] == {"launches": 3, "applied": 1, "skipped": 1,
                                               "noalias_fallbacks": 0, "decisions": 1}
    assert capfd.readouterr().err.count("failed, this key runs as written from now on") == 1


def test_a_warmup_compiles_the_program_s_kernel_and_launches_nothing(k, specs, store):
    decide(store, specs[("scale_kernel", 100)], B64)
    apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (2, [64])  # the applier's own run is in place now
    x, out, seen = torch.arange(100.0), torch.zeros(100), torch.zeros(64, dtype=torch.int32)
    k.scale_kernel.warmup(x, out, seen, 100, BLOCK=32, grid=(4,))
    assert not out.any() and not seen.any()


# -------------------------------------------------------------- which decisions, and switching off

def test_a_kernel_without_a_decision_gets_the_same_function_and_arguments(k, specs, store):
    decide(store, specs[("scale_kernel", 100)], B64)
    applier = apply.enable(store, device="cpu")
    x, out, seen = torch.arange(100.0), torch.zeros(100), torch.zeros(64, dtype=torch.int32)
    with spying() as calls:
        k.plain_kernel[(4,)](x, out, seen, 100, BLOCK=32)
    fn, args, kwargs, grid, _ = calls[0]
    assert fn is k.plain_kernel and grid == (4,) and kwargs == {"BLOCK": 32}
    assert all(a is b for a, b in zip(args, (x, out, seen, 100)))
    assert applier.stats()["plain_kernel"] == {"launches": 1, "applied": 0, "skipped": 0,
                                               "noalias_fallbacks": 0, "decisions": 0}


def test_disable_restores_triton_exactly(k, specs, store):
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.__dict__["run"]
    decide(store, specs[("scale_kernel", 100)], B64)
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (2, [64])
    assert InterpretedFunction.__dict__["run"] is not original
    assert apply.disable() is applier and apply.active() is None
    assert InterpretedFunction.__dict__["run"] is original
    assert fixed(k.scale_kernel, 100) == (4, [32])


def test_rollback_stops_the_decision_at_once_and_refresh_sees_the_store(k, specs, store):
    key = decide(store, specs[("scale_kernel", 100)], B64)
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (2, [64])
    assert apply.rollback("scale_kernel") == 1
    assert store.decision_for(key) is None
    assert fixed(k.scale_kernel, 100) == (4, [32])
    store.enable(key)  # e.g. another process switched it back on: seen at the next refresh
    assert fixed(k.scale_kernel, 100) == (4, [32])
    assert applier.refresh() == 1
    assert fixed(k.scale_kernel, 100) == (2, [64])
    store.rollback(key)
    applier.refresh()
    assert fixed(k.scale_kernel, 100) == (4, [32])


def test_enable_and_disable_toggle_cheaply_and_repeatedly(k, specs, store):
    """As the end-to-end benchmark does between blocks of steps: each enable takes over what the
    last applier prepared while the store is unchanged, with stats of its own; off is plain
    Triton every time. While
    on, a kernel without decisions goes straight to Triton and one with decisions straight to the
    applier's own path (both past the shim's wrapper); off, both are back on the class's run."""
    from triton.runtime.interpreter import InterpretedFunction

    original = InterpretedFunction.__dict__["run"]
    key = decide(store, specs[("scale_kernel", 100)], B64)
    first = apply.enable(store, device="cpu")
    appliers = []
    for _ in range(5):
        appliers.append(apply.enable(store, device="cpu"))
        assert appliers[-1]._jit is first._jit  # prepared once, taken over
        assert fixed(k.scale_kernel, 100) == (2, [64])
        assert fixed(k.plain_kernel, 100) == (4, [32])
        assert vars(k.plain_kernel)["run"].__func__ is original
        assert vars(k.scale_kernel)["run"].__qualname__ == "Applier._direct.<locals>.run"
        apply.disable()
        assert InterpretedFunction.__dict__["run"] is original
        assert "run" not in vars(k.plain_kernel) and "run" not in vars(k.scale_kernel)
        assert fixed(k.scale_kernel, 100) == (4, [32])
    assert all(a.stats()["scale_kernel"] == {"launches": 1, "applied": 1, "skipped": 0,
                                             "noalias_fallbacks": 0, "decisions": 1}
               for a in appliers)  # as many appliers as enables: their stats add up
    store.rollback(key)  # changed in between: the next enable sees it
    again = apply.enable(store, device="cpu")
    assert again._jit is not first._jit
    assert fixed(k.scale_kernel, 100) == (4, [32])
    assert apply.enable(str(store.path), device="cpu")._jit is again._jit
    assert apply.enable(store)._jit is not again._jit  # another device


def test_only_verified_enabled_decisions_apply(k, specs, store):
    key = decide(store, specs[("scale_kernel", 100)], B64, promote=False)  # verified, never decided on
    decide(store, specs[("heur_kernel", 100)], B64)
    with store._db.write() as conn:  # a decision whose verification was withdrawn
        conn.execute("UPDATE decisions SET verified = 0")
    decide(store, specs[("tuned_kernel", 100)], B64)
    store.rollback_all("tuned_kernel")  # rolled back before the program started
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (4, [32])
    assert launch(k.heur_kernel, 100) == (7, [16])
    assert launch(k.tuned_kernel, 100) == (7, [16])
    assert store.decision_for(key) is None
    assert all(s["decisions"] == 0 and s["applied"] == 0 for s in applier.stats().values())


def test_a_decision_for_another_gpu_is_not_applied(k, specs, store):
    h100 = Target("NVIDIA H100 80GB HBM3", 90, CPU.triton_version)
    decide(store, specs[("scale_kernel", 100)], B64, target=h100)
    decide(store, specs[("heur_kernel", 100)], B64, target=dataclasses.replace(CPU, triton_version="0.0.1"))
    applier = apply.enable(store, device="cpu")
    assert fixed(k.scale_kernel, 100) == (4, [32])
    assert launch(k.heur_kernel, 100) == (7, [16])
    assert applier.stats()["scale_kernel"]["decisions"] == 0


def test_capture_and_apply_run_together(k, specs, store, tmp_path):
    decide(store, specs[("scale_kernel", 100)], B64)
    apply.enable(store, device="cpu")
    with capture(tmp_path / "cap"):
        assert fixed(k.scale_kernel, 100) == (2, [64])
    (spec,) = read_launches(tmp_path / "cap")
    assert spec.constexprs == {"BLOCK": 32} and spec.grid == [4, 1, 1]  # what the program asked for
    assert [a.name for a in spec.written] == ["out_ptr", "seen_ptr"]
    assert fixed(k.scale_kernel, 100) == (2, [64])  # capture's exit left apply in place


def test_errors_are_one_line(tmp_path):
    with pytest.raises(StoreError, match="no decision store at"):
        apply.enable(tmp_path / "missing.db")
    (tmp_path / "empty.db").touch()  # SQLite would open it as a new database and write a schema in
    with pytest.raises(StoreError, match="an empty file, not a decision store"):
        apply.enable(tmp_path / "empty.db")
    assert (tmp_path / "empty.db").stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    with pytest.raises(apply.ApplyError, match="not enabled"):
        apply.rollback("scale_kernel")


def test_tritune_enable_is_apply_enable():
    import tritune

    assert tritune.enable is apply.enable and tritune.disable is apply.disable


# --------------------------------------------------------------------------------- cost

def test_per_launch_overhead_is_printed(k, specs, store, monkeypatch):
    """The cost apply adds per launch on this CPU (printed, never asserted: a shared machine's
    timings prove nothing; benchmarks/apply_overhead.py measures it on the GPU): real launches of
    the interpreted kernels through the shim, with Triton's own run replaced by a no-op."""
    from triton.runtime.interpreter import InterpretedFunction

    monkeypatch.setattr(InterpretedFunction, "run", lambda self, *args, grid, warmup, **kwargs: None)
    decide(store, specs[("scale_kernel", 100)], B64)
    x, out, seen = torch.arange(100.0), torch.zeros(100), torch.zeros(64, dtype=torch.int32)
    cases = {"no decision for the kernel": lambda: k.plain_kernel[(4,)](x, out, seen, 100, BLOCK=32),
             "decision applied (fixed grid)": lambda: k.scale_kernel[(4,)](x, out, seen, 100, BLOCK=32),
             "decision applied (callable grid)": lambda: k.scale_kernel[cdiv_grid(100)](x, out, seen, 100, BLOCK=32),
             "decisions, none for this key": lambda: k.scale_kernel[(4,)](x, out, seen, 100, BLOCK=16)}

    def per_launch(launch, loops=20000) -> float:
        launch()
        start = time.perf_counter()
        for _ in range(loops):
            launch()
        return (time.perf_counter() - start) / loops * 1e6

    plain = {what: per_launch(launch) for what, launch in cases.items()}
    applier = apply.enable(store, device="cpu")
    added = {what: per_launch(launch) - plain[what] for what, launch in cases.items()}
    assert applier.stats()["scale_kernel"]["applied"] > 0
    print()
    for what, us in added.items():
        print(f"apply adds per launch, {what}: {us:+.2f} us (plain {plain[what]:.2f} us)")


# ------------------------------------------------------------ the shim's around hook (apply's way in)

def test_a_hook_that_fails_before_launching_leaves_the_launch_as_written(k, capfd, monkeypatch):
    monkeypatch.setattr(_jit_shim, "_reported", set())

    def broken(launch, run):
        raise KeyError("planted")

    _jit_shim.install_around(broken)
    try:
        assert fixed(k.plain_kernel, 100) == (4, [32])
        assert fixed(k.plain_kernel, 100) == (4, [32])
    finally:
        _jit_shim.uninstall_around(broken)
    err = capfd.readouterr().err
    assert err.count("tritune: kernel plain_kernel launched as written (launch hook failed: KeyError") == 1


def test_an_error_of_the_launch_itself_reaches_the_program_unchanged(k, capfd, monkeypatch):
    monkeypatch.setattr(_jit_shim, "_reported", set())
    tries = []

    def passing(launch, run):
        tries.append(launch)
        return run(launch)

    _jit_shim.install_around(passing)
    try:
        with pytest.raises(Exception, match="BLOCK"):
            k.plain_kernel[(1,)](torch.zeros(4), torch.zeros(4), torch.zeros(4, dtype=torch.int32), 4)  # no BLOCK
    finally:
        _jit_shim.uninstall_around(passing)
    assert not _jit_shim.installed()
    assert len(tries) == 1 and "launch hook failed" not in capfd.readouterr().err  # not taken for a hook bug
