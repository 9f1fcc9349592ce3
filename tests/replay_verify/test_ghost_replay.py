"""Ghost replay (KernelGenBench): a candidate whose outputs are right but whose kernel never
launched is rejected. Under the interpreter, with the kernels of tests/programs/verify."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

from test_verify_check import SOURCE, axpy, edit  # noqa: E402
from tritune.model.failures import GHOST  # noqa: E402
from tritune.model.variant import Variant  # noqa: E402
from tritune.replay.launches import Launches  # noqa: E402
from tritune.verify import verify  # noqa: E402

# a source a rule of tritune's made: the allowlist (``allowlist.sandbox``) refuses this planted code in any
# other source; marked so, it tests what this file tests, behind the allowlist
RULED = {"rule": "pipeline-loop", "exact": "tolerance", "params": {}}

# The kernel stays, decorated as before; its run is replaced by torch computing the right output.
GHOST_RUN = SOURCE + '''

def _from_torch(*args, grid, warmup, **kwargs):
    if not warmup:
        kwargs["out_ptr"].copy_(2.0 * kwargs["x_ptr"] + kwargs["y_ptr"])



axpy.run = _from_torch
'''

# Launches for real on the first run only, then hands back what torch computes.
GHOST_AFTER_ONE = SOURCE + '''

_real_run = axpy.run
_runs = []


def _once_then_torch(*args, grid, warmup, **kwargs):
    if warmup:
        return _real_run(*args, grid=grid, warmup=warmup, **kwargs)
    _runs.append(1)
    if len(_runs) == 1:
        return _real_run(*args, grid=grid, warmup=warmup, **kwargs)
    kwargs["out_ptr"].copy_(2.0 * kwargs["x_ptr"] + kwargs["y_ptr"])


axpy.run = _once_then_torch
'''


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_baseline_and_a_correct_source_verify_with_their_launches_counted(tmp_path):
    spec = axpy(tmp_path, 1000)
    rewritten = edit("    out = 2.0 * x + y\n", "    out = x + x + y\n")
    for variant in (Variant(), rewritten):
        result = verify(spec, variant, tmp_path)
        assert result.ok and result.failure is None, result.message
        assert result.launches == 6  # one candidate run per input set and transformed draw (a pure float output)
        assert result.to_json()["launches"] == 6


@pytest.mark.parametrize("ghost", [GHOST_RUN, GHOST_AFTER_ONE], ids=["run", "after-one"])
def test_the_allowlist_alone_refuses_these_ghosts_as_a_models_source(ghost):
    from tritune.allowlist.sandbox import Unsafe, check_variant_source

    with pytest.raises(Unsafe, match="function _from_torch is not allowed|the value of _real_run must be a literal"):
        check_variant_source(SOURCE, ghost, "axpy")


def test_a_run_replaced_by_torch_is_a_ghost(tmp_path):
    spec = axpy(tmp_path, 1000)
    result = verify(spec, Variant(name="ghost", source=GHOST_RUN, rewrite=RULED), tmp_path)
    assert not result.ok and result.failure == GHOST and result.launches == 0
    assert result.message == ("ghost on input set 0: the candidate's kernel axpy never launched (its outputs came "
                              "from somewhere else: a fallback or a cached result)")
    assert verify(spec, Variant(), tmp_path).ok  # the baseline, in the same process, is untouched


def test_launching_once_then_falling_back_is_a_ghost_on_the_next_input_set(tmp_path):
    result = verify(axpy(tmp_path, 1000), Variant(name="ghost", source=GHOST_AFTER_ONE, rewrite=RULED), tmp_path)
    assert not result.ok and result.failure == GHOST and result.launches == 1
    assert result.message.startswith("ghost on input set 1:")


def test_a_ghost_is_rejected_by_the_loops_verify_job_in_a_worker(tmp_path):
    from tritune.worker import run_isolated

    spec = axpy(tmp_path, 1000)
    payload = {"spec": spec.to_json(), "root": str(tmp_path), "variant": Variant(source=GHOST_RUN, rewrite=RULED).to_json(),
               "input_sets": 1}
    outcome = run_isolated("tritune.loop.jobs:verify_job", payload, timeout_s=120, env={"TRITON_INTERPRET": "1"})
    assert outcome.ok, outcome.failure
    verification = outcome.value["verification"]
    assert verification["ok"] is False and verification["failure"] == GHOST and verification["launches"] == 0


# ------------------------------------------------------------------- what the count relies on in Triton

def test_interpreter_count_wraps_the_grid_executor_and_puts_it_back():
    from triton.runtime.interpreter import GridExecutor, InterpretedFunction

    assert "GridExecutor(" in inspect.getsource(InterpretedFunction.run)  # every launch goes through it
    original = GridExecutor.__call__
    launches = Launches("axpy", interpreted=True)
    with launches.counting():
        assert GridExecutor.__call__ is not original
    assert GridExecutor.__call__ is original and launches.count == 0


def test_gpu_count_takes_the_launch_hooks_metadata_by_kernel_name():
    from triton import knobs
    from triton.compiler.compiler import CompiledKernel, LazyDict

    assert '"name": self.name' in inspect.getsource(CompiledKernel.launch_metadata)  # what the hook receives
    chain = knobs.runtime.launch_enter_hook
    before = list(chain.calls)
    launches = Launches("axpy", interpreted=False)
    with launches.counting():
        chain(LazyDict({"name": "axpy", "function": None, "stream": 0}))
        chain(LazyDict({"name": "ratio", "function": None, "stream": 0}))  # another kernel: not counted
    chain(LazyDict({"name": "axpy", "function": None, "stream": 0}))  # after the block: not counted
    assert launches.count == 1 and chain.calls == before


def _fill_seven(out_ptr, n):  # a kernel's text, never compiled: skipping returns before
    pass


@pytest.mark.parametrize("interpreted", [True, False])
def test_skipping_returns_before_the_kernel_runs_and_puts_triton_back(interpreted):
    from triton.runtime.interpreter import GridExecutor, InterpretedFunction
    from triton.runtime.jit import JITFunction, KernelInterface

    from tritune.replay.launches import skipping

    # what kernel[grid](...) calls: run, which under the interpreter makes a GridExecutor
    assert "self.run(grid=grid, warmup=False" in inspect.getsource(KernelInterface.__getitem__)
    assert "GridExecutor(" in inspect.getsource(InterpretedFunction.run)
    originals = (GridExecutor.__call__, JITFunction.run)
    kernel = (InterpretedFunction if interpreted else JITFunction)(_fill_seven)
    out = torch.zeros(4)
    with skipping(interpreted=interpreted) as skipped:
        assert kernel[(1,)](out, 4) is None  # on this CPU a JITFunction that ran would fail: no driver
    assert skipped == ["_fill_seven"] and (GridExecutor.__call__, JITFunction.run) == originals
