"""Verification against the known kernel-evaluation hacks (issue 23 §3), under the interpreter.

Planted value-conditional kernels, each an edit of tests/programs/verify/kernels.py: right on the
N(0, 1) draws of the fresh input sets, wrong elsewhere. Each fails because of a transformed draw
(``tritune.verify.draws``) and passes with ``draws=()``: the draws are what catches it.

Streams and late writes: the interpreter has no CUDA streams, so what is tested here is the logic
around them, with fakes: a counted launch whose metadata names another stream is rejected; the
synchronization after a run is the device-wide ``torch.cuda.synchronize``; outputs a host thread
writes after the run returned are read unwritten. That a real side-stream launch reaches the
launch hook with its stream, and that ``torch.cuda.synchronize`` waits for it, needs a GPU:
``test_a_side_stream_launch_on_a_gpu_is_a_ghost_and_memory_is_measured`` runs only there. Run on
one H200 (torch 2.11, Triton 3.6) on 2026-11-28: it passed; with the stream check removed, the
side-stream candidate verified (the device-wide synchronize makes its outputs right), so on a GPU
the stream check is what stops it.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from test_verify_check import AXPY_OUT, SOURCE, axpy, edit, scalar, spec_of, vec  # noqa: E402
from tritune.model.variant import Variant
from tritune.replay import make_args  # noqa: E402

# A planted source with host code (a cache, a thread) tests verification, not the allowlist (which
# refuses it before it runs, tests/worker/test_llm_sandbox.py): marked as a source a rule of tritune's made.
RULED = {"rule": "pipeline-loop", "exact": "tolerance", "params": {}}
from tritune.model.failures import GHOST  # noqa: E402
from tritune.replay.launches import Launches  # noqa: E402
from tritune.verify import WRONG_RESULT, verify  # noqa: E402
from tritune.verify import check as check_module  # noqa: E402
from tritune.verify.draws import transform  # noqa: E402
from tritune.verify.memory import LARGE_BYTES, Peaks  # noqa: E402


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def scale_by(root, n):
    return spec_of(root, "scale_by", [vec("x_ptr", n), vec("s_ptr", 1), vec("out_ptr", n, written=True),
                                      scalar("n", n)], n)


# ------------------------------------------------------------------- value-conditional shortcuts

# right where |x| < 10, as every N(0, 1) draw is; 0 elsewhere
WHERE_SMALL = edit(AXPY_OUT, AXPY_OUT + "    out = tl.where(tl.abs(x) < 10.0, out, 0.0)\n")
# clamped to the range N(0, 1) draws produce
CLAMPED = edit(AXPY_OUT, AXPY_OUT + "    out = tl.minimum(tl.maximum(out, -20.0), 20.0)\n")
# tiny inputs flushed to zero: below 1e-5 no N(0, 1) element of these draws falls
FLUSHED = edit(AXPY_OUT, AXPY_OUT + "    out = tl.where(tl.abs(x) < 1e-5, 0.0, out)\n")


@pytest.mark.parametrize("planted, draw", [(WHERE_SMALL, "x1e3"), (CLAMPED, "x1e3"), (FLUSHED, "x1e-3")],
                         ids=["where_small", "clamped", "flushed"])
def test_a_magnitude_conditional_kernel_fails_on_a_scaled_draw(tmp_path, planted, draw):
    spec = axpy(tmp_path, 1000)
    assert verify(spec, planted, tmp_path, draws=()).ok  # the fresh draws alone let it through
    result = verify(spec, planted, tmp_path)
    assert not result.ok and result.failure == WRONG_RESULT
    assert result.worst.draw == draw and result.worst.input_set == 0
    assert result.message.startswith(f"{WRONG_RESULT} on input set 0 {draw}: out_ptr[")


def test_a_kernel_that_drops_the_sign_of_its_scale_fails_on_the_negated_draw(tmp_path):
    spec = scale_by(tmp_path, 256)
    # precondition: the scale is positive in every fresh set from seed 2 (so abs() is invisible there)
    assert all(float(make_args(spec, tmp_path, seed=s)["s_ptr"]) > 0 for s in (2, 3, 4))
    unsigned = edit("    s = tl.load(s_ptr)\n", "    s = tl.abs(tl.load(s_ptr))\n")
    assert verify(spec, unsigned, tmp_path, seed=2, draws=()).ok
    assert verify(spec, unsigned, tmp_path, seed=2, draws=[("x1e3", 1e3), ("x1e-3", 1e-3)]).ok  # scaling keeps the sign
    result = verify(spec, unsigned, tmp_path, seed=2)
    assert not result.ok and result.worst.draw == "negated" and result.worst.name == "out_ptr"
    assert verify(spec, Variant(constexprs={"BLOCK": 64}), tmp_path, seed=2).ok  # a legal variant passes


def test_a_cached_answer_for_the_expected_inputs_fails_on_the_first_draw(tmp_path):
    """A candidate that hands back results kept from the inputs it expects: the kernel launches
    (no ghost) and copies the answer it recognises by its first input element."""
    spec = axpy(tmp_path, 64)
    answers = {}
    for s in range(3):
        args = make_args(spec, tmp_path, seed=s)
        answers[round(float(args["x_ptr"][0]), 6)] = (2.0 * args["x_ptr"] + args["y_ptr"]).tolist()
    cached = SOURCE + f'''

_ANSWERS = {answers!r}
_real_run = axpy.run


def _cached(*args, grid, warmup, **kwargs):
    out = _real_run(*args, grid=grid, warmup=warmup, **kwargs)
    known = _ANSWERS.get(round(float(kwargs["x_ptr"][0]), 6))
    if not warmup and known is not None:
        import torch
        kwargs["out_ptr"].copy_(torch.tensor(known))
    elif not warmup:
        kwargs["out_ptr"].zero_()
    return out


axpy.run = _cached
'''
    planted = Variant(name="cached", source=cached, rewrite=RULED)
    assert verify(spec, planted, tmp_path, draws=()).ok
    result = verify(spec, planted, tmp_path)
    assert not result.ok and any(not c.ok and c.draw == "x1e3" for c in result.checks)


def test_a_candidate_the_fresh_sets_reject_runs_no_draw(tmp_path):
    result = verify(axpy(tmp_path, 100), edit(AXPY_OUT, "    out = 2.0 * x + y + 1.0\n"), tmp_path, input_sets=1)
    assert not result.ok and result.draws == [] and result.launches == 1
    assert result.message.startswith(f"{WRONG_RESULT} on input set 0: out_ptr[")


# ------------------------------------------------------------------------- what draws transform

def test_draws_transform_random_floats_only_and_keep_what_would_overflow(tmp_path):
    n = 64
    spec = spec_of(tmp_path, "quantize", [vec("x_ptr", n, dtype="float8_e4m3fn"), vec("y_ptr", n, dtype="float16"),
                                          vec("i_ptr", n, dtype="int32"), vec("k_ptr", n, values="range", low=0,
                                                                              high=5, dtype="int64"),
                                          vec("q_ptr", n, dtype="int32", written=True), scalar("n", n)], n)
    guards = check_module.layout(spec, 128)
    before = make_args(spec, tmp_path, seed=0, block=128)
    args = make_args(spec, tmp_path, seed=0, block=128)
    draw = transform(spec, args, guards, "x1e3", 1e3, outputs=["q_ptr"])
    assert draw.transformed == ["y_ptr"] and list(draw.kept) == ["x_ptr"]  # e4m3 tops out at 448
    assert "overflow float8_e4m3fn" in draw.kept["x_ptr"] and draw.skipped is None
    assert torch.equal(args["y_ptr"].float(), (before["y_ptr"].float() * 1e3).half().float())
    for name in ("x_ptr", "i_ptr", "k_ptr"):  # kept, never scaled, indices untouched
        assert torch.equal(args[name].view(torch.uint8) if name == "x_ptr" else args[name],
                           before[name].view(torch.uint8) if name == "x_ptr" else before[name]), name
    # margins untouched: the guard check still passes after the transform
    assert all(check_module.breach(k, args[k], g) is None for k, g in guards.items())


def test_a_draw_on_which_the_baseline_overflows_is_skipped_with_its_reason(tmp_path):
    n = 1000
    fp16 = [vec("x_ptr", n, dtype="float16"), vec("plus_ptr", n, dtype="float16", written=True),
            vec("square_ptr", n, dtype="float16", written=True), scalar("n", n)]
    spec = spec_of(tmp_path, "two_outputs", fp16, n)
    result = verify(spec, Variant(constexprs={"BLOCK": 256}), tmp_path)
    assert result.ok, result.message
    skipped = {d["name"]: d["skipped"] for d in result.draws}
    assert skipped["x1e-3"] is None and skipped["negated"] is None
    assert skipped["x1e3"].startswith("the baseline overflows on it: square_ptr has ")  # (5e3)^2 > 65504
    assert "x1e3 skipped: the baseline overflows on it" in result.message
    assert not any(c.draw == "x1e3" for c in result.checks)


# -------------------------------------------------------------------------- streams, late writes

def test_the_gpu_count_flags_a_launch_on_another_stream():
    from triton import knobs
    from triton.compiler.compiler import LazyDict

    launches = Launches("axpy", interpreted=False, stream=0)
    with launches.counting():
        knobs.runtime.launch_enter_hook(LazyDict({"name": "axpy", "function": None, "stream": 0}))
        knobs.runtime.launch_enter_hook(LazyDict({"name": "axpy", "function": None, "stream": 7}))
        knobs.runtime.launch_enter_hook(LazyDict({"name": "other", "function": None, "stream": 7}))
    assert launches.count == 2 and launches.off_stream == 1


class SideStreamLaunches(Launches):
    """What the GPU hook sees when a candidate's host code moves its launch to a side stream:
    the launch counted, and counted off the replay's stream."""

    def seen(self, name, stream=None, expected=None):
        super().seen(name, stream=7, expected=0)


def test_a_candidate_launching_on_another_stream_is_a_ghost(tmp_path, monkeypatch):
    spec = axpy(tmp_path, 1000)
    monkeypatch.setattr(check_module, "Launches", SideStreamLaunches)
    result = verify(spec, Variant(options={"num_warps": 2}), tmp_path)
    assert not result.ok and result.failure == GHOST and result.launches == 1
    assert result.message == ("ghost on input set 0: the candidate's kernel axpy launched on another stream than "
                              "the replay's (1 launch(es)): its work would escape the timer")
    monkeypatch.setattr(check_module, "Launches", Launches)
    assert verify(spec, Variant(options={"num_warps": 2}), tmp_path).ok


def test_the_sync_after_a_run_is_device_wide(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(("device", device)))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a, **k: pytest.fail("a stream-only sync"))
    check_module._synchronize("cuda:1")
    check_module._synchronize("cpu")
    assert calls == [("device", "cuda:1")]


LATE_WRITER = SOURCE + '''

import threading

_real_run = axpy.run
LATE = threading.Event()  # set by the test once verification returned
WRITERS = []


def _late(*args, grid, warmup, **kwargs):
    if warmup:
        return _real_run(*args, grid=grid, warmup=warmup, **kwargs)
    out = kwargs["out_ptr"]
    _real_run(*args, grid=grid, warmup=warmup, **{**kwargs, "out_ptr": out.clone()})  # launched, on scratch
    right = 2.0 * kwargs["x_ptr"] + kwargs["y_ptr"]

    def write():
        LATE.wait(30)
        out.copy_(right)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    WRITERS.append(writer)


axpy.run = _late
'''


def test_outputs_written_after_the_run_returned_are_read_unwritten(tmp_path):
    """A side stream nobody waits for, played by a host thread: the kernel launches (on scratch)
    and the right outputs arrive only later. Verification reads the outputs once the run and the
    device sync returned, so it sees them unwritten. (On a GPU a side-stream kernel is waited for
    by the device-wide sync and caught by the stream check instead.)"""
    import sys

    spec = axpy(tmp_path, 1000)
    planted = Variant(name="late", source=LATE_WRITER, rewrite=RULED)
    try:
        result = verify(spec, planted, tmp_path, input_sets=1, draws=())
    finally:
        module = next(m for m in list(sys.modules.values())
                      if isinstance(getattr(m, "LATE", None), threading.Event) and hasattr(m, "WRITERS"))
        module.LATE.set()
        for writer in module.WRITERS:
            writer.join(5)
    assert not result.ok and result.failure == WRONG_RESULT and result.launches == 1
    assert result.worst.worst.reason == "unwritten" and result.worst.unwritten == 1000


# ---------------------------------------------------------------------------------- peak memory

def test_peak_memory_is_none_on_the_cpu_and_a_large_increase_is_a_note(tmp_path):
    result = verify(axpy(tmp_path, 100), Variant(), tmp_path, input_sets=1, draws=())
    assert result.memory == {"baseline_peak_bytes": None, "candidate_peak_bytes": None} and result.notes == []
    mib = 1024 * 1024
    assert Peaks(10 * mib, 100 * mib).note() == ("peak device memory 100 MiB against the baseline's 10 MiB "
                                                 "(10.0x, +90 MiB): reported, not a rejection")
    assert "(from none, +100 MiB)" in Peaks(0, 100 * mib).note()
    assert Peaks(200 * mib, 280 * mib).note() is None  # +80 MiB, but 1.4x
    assert Peaks(10 * mib, 10 * mib + LARGE_BYTES).note() is None  # 7.4x, but not more than 64 MiB more
    assert Peaks(None, 100 * mib).note() is None and Peaks().note() is None


class GreedyPeaks(Peaks):
    """What the allocator reports on a GPU for a candidate that keeps 256 MiB per run."""

    def run(self, device, candidate):
        self.baseline = self.baseline or 1024
        if candidate:
            self.candidate = 256 * 1024 * 1024
        return super().run("cpu", candidate)


def test_a_large_memory_increase_is_reported_not_rejected(tmp_path, monkeypatch):
    monkeypatch.setattr(check_module, "Peaks", GreedyPeaks)
    result = verify(axpy(tmp_path, 100), Variant(options={"num_warps": 2}), tmp_path, input_sets=1, draws=())
    assert result.ok and result.failure is None
    assert result.memory == {"baseline_peak_bytes": 1024, "candidate_peak_bytes": 256 * 1024 * 1024}
    assert result.notes == [GreedyPeaks(1024, 256 * 1024 * 1024).note()]
    assert result.message.endswith("; " + result.notes[0]) and result.to_json()["notes"] == result.notes


# ------------------------------------------------------------------------------------ on a GPU

# On a GPU the replay launches the compiled kernel that ``run(..., warmup=True)`` returns; this
# source hands back one whose launches go to a stream of its own, and one that keeps 256 MiB of
# device memory per launch.
ON_A_GPU = SOURCE + '''

import torch

_real_run = axpy.run
_SIDE = []
_KEPT = []


class _Wrapped:
    def __init__(self, kernel, how):
        self.kernel, self.how = kernel, how

    def __getitem__(self, grid):
        launch = self.kernel[grid]

        def wrapped(*args):
            if self.how == "side":
                if not _SIDE:
                    _SIDE.append(torch.cuda.Stream())
                _SIDE[0].wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(_SIDE[0]):
                    launch(*args)
            else:
                launch(*args)
                _KEPT.append(torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))

        return wrapped


def _run(*args, grid, warmup, **kwargs):
    kernel = _real_run(*args, grid=grid, warmup=warmup, **kwargs)
    return _Wrapped(kernel, HOW) if warmup else kernel


axpy.run = _run
'''

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (streams, the allocator's peaks)")


@gpu
def test_a_side_stream_launch_on_a_gpu_is_a_ghost_and_memory_is_measured(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")
    spec = axpy(tmp_path, 1 << 20)
    plain = verify(spec, Variant(options={"num_warps": 2}), tmp_path, device="cuda")
    assert plain.ok and plain.launches == 6 and plain.notes == [], plain.message  # no stream false positive
    assert isinstance(plain.memory["baseline_peak_bytes"], int) and plain.memory["candidate_peak_bytes"] == 0
    side = verify(spec, Variant(name="side", source=ON_A_GPU.replace("HOW)", '"side")'), rewrite=RULED), tmp_path, device="cuda")
    assert not side.ok and side.failure == GHOST and side.launches == 1, side.message
    assert "launched on another stream than the replay's" in side.message
    greedy = verify(spec, Variant(name="greedy", source=ON_A_GPU.replace("HOW)", '"keep")'), rewrite=RULED), tmp_path,
                    device="cuda")
    assert greedy.ok and greedy.memory["candidate_peak_bytes"] >= 256 << 20, greedy.message
    assert greedy.notes and "reported, not a rejection" in greedy.message
    assert not verify(spec, WHERE_SMALL, tmp_path, device="cuda").ok


# the rounding a legal reordering leaves, in proportion to the terms: within fp32's atol on N(0, 1)
# draws; ~1e3 x that on x1e3, where elements whose terms cancel (2x ~ -y) are tiny
ROUNDED = edit(AXPY_OUT, AXPY_OUT + "    out = out + 5e-7 * (tl.abs(2.0 * x) + tl.abs(y))\n")
# the same kind of error, 100 x larger: beyond the table on the unscaled values already
MISROUNDED = edit(AXPY_OUT, AXPY_OUT + "    out = out + 5e-5 * (tl.abs(2.0 * x) + tl.abs(y))\n")


def test_a_scaled_draw_compares_in_the_units_of_its_outputs(tmp_path, monkeypatch):
    """A legal reordering's rounding is judged on x1e3 as on the unscaled values (atol grows with
    the baseline's outputs: ``tolerances.scaled``); without that, the draw alone rejects it."""
    spec = axpy(tmp_path, 4000)
    assert verify(spec, ROUNDED, tmp_path, seed=3, draws=()).ok
    assert verify(spec, ROUNDED, tmp_path, seed=3).ok
    assert not verify(spec, MISROUNDED, tmp_path, seed=3).ok
    monkeypatch.setattr(check_module, "scaled", lambda tol, ratio, draw: tol)  # the check removed
    result = verify(spec, ROUNDED, tmp_path, seed=3)
    assert not result.ok and result.worst.draw == "x1e3"
