"""Worker entries of the loop: each candidate is built and verified, then timed, in isolated processes.

A candidate is two worker calls, so that N workers can build and verify while one times:

- ``verify_job``  compile, then verify (>= 3 fresh input sets and the first one scaled x1e3,
                  x1e-3 and negated; poisoned outputs, guard margins).
                  The GPU launches hold the GPU lock shared (``tritune.worker.gpulock``); the
                  compilation holds nothing, so it overlaps another worker's timing.
- ``time_job``    only for a verified candidate (a wrong kernel never costs a benchmark): the
                  do_bench median and a CUDA graph, holding the lock exclusively, so no other
                  process launches on the GPU while it is timed.

Every other job that times (baselines, confirmation, profile, the roofline copy) holds the lock
exclusively too (``exclusive_job``, ``baselines_job``, ``target_job``). A compile error, fault,
hang or crash surfaces as the worker's failure kind (the worker classifies it); a wrong result is
returned with its record.

Screening. The candidate is timed with one do_bench median (the baseline gets two, whose spread
is the noise the arbiter screens with). The second median only ever gave the candidate's own
spread, which no decision reads, so dropping it changes no decision and saves about a third of
the timing. The one median keeps do_bench's full budget (25 ms warm-up, 100 ms of runs), so the
screen ranks candidates exactly as before: a shorter budget would let noise put a real winner
below the threshold (a lost decision) or send losers to the interleaved ABBA re-timing
(``arbiter.confirm``), which is what accepts; a lost decision cannot be won back later.

The baseline of a launch is built once per worker process (``baseline_replay``) and verified
against by every candidate that worker sees, not rebuilt per candidate.

Ranking (``compile_job``, ``baselines_job``): before the session ranks its keys, the verify
workers build every captured launch (``compile_job``: compiled, never launched), so Triton's
on-disk cache holds the binaries and the one timing worker, which times them one after another,
only loads them. ``Evaluator.baselines`` says what the ranking times and why.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from typing import Any, Callable

from tritune.bench.run import bench_spec
from tritune.model.launch import LaunchSpec
from tritune.model.target import Target
from tritune.model.variant import Variant
from tritune.replay import Replay, device_of, make_args
from tritune.verify import verify
from tritune.worker.gpulock import GpuLock

VERIFY_JOB = "tritune.loop.jobs:verify_job"
TIME_JOB = "tritune.loop.jobs:time_job"
EXCLUSIVE_JOB = "tritune.loop.jobs:exclusive_job"
BASELINES_JOB = "tritune.loop.jobs:baselines_job"  # holds the lock itself, per launch
BASELINE_JOB = "tritune.bench.run:bench_job"  # run through EXCLUSIVE_JOB
CONFIRM_JOB = "tritune.arbiter.confirm:confirm_job"  # run through EXCLUSIVE_JOB
TARGET_JOB = "tritune.loop.jobs:target_job"
DEVICES_JOB = "tritune.worker.cuda_driver:devices_job"  # the CUDA driver, no torch
INDUCTOR_LAUNCHES_JOB = "tritune.loop.jobs:inductor_launches_job"
COMPILE_JOB = "tritune.loop.jobs:compile_job"
BENCH_METHODS = ("median", "graph")  # the median decides; the graph time tells launch-bound kernels apart
RANK_METHODS = ("median",)  # a key's share needs its time, not its noise nor its graph time
# The ranking's do_bench (warm-up, runs) in ms: a share to a few percent needs ~40 ms of runs (at
# least ~40 of a 1 ms kernel, thousands of a short one), not the 25 + 100 ms a decision's median gets.
RANK_BENCH_MS = (10, 40)
SCREEN_MEDIANS = 1  # a candidate's do_bench medians (module docstring: why one)
BASELINES_KEPT = 8  # built baselines a worker keeps (keys are optimized one after another)

_BASELINES: collections.OrderedDict[tuple, Replay] = collections.OrderedDict()
_LOCKS: dict[str, GpuLock] = {}


def verify_job(payload: dict) -> dict:
    """``{"spec", "root", "variant", "mode", "input_sets"?}`` -> ``{"verification": VerifyResult
    JSON, "lock_wait_s"}``."""
    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload["variant"])
    device = device_of(spec)
    lock = gpu_lock(device)
    waited = lock.waited_s
    result = verify(spec, variant, payload["root"], mode=payload.get("mode", "tolerance"),
                    input_sets=int(payload.get("input_sets", 3)), device=device,
                    baseline=baseline_replay(spec, payload["root"], device), on_gpu=lock.shared)
    _free_cached_memory(device)  # N workers each holding their peak would crowd the GPU
    return {"verification": result.to_json(), "lock_wait_s": lock.waited_s - waited}


def time_job(payload: dict) -> dict:
    """``{"spec", "root", "variant", "copy_gbps"?}`` -> ``{"timing": bench result, "lock_wait_s"}``."""
    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload["variant"])
    device = device_of(spec)
    lock = gpu_lock(device)
    waited = lock.waited_s
    replay = Replay(spec, variant, root=payload["root"], device=device)
    with lock.shared():  # the inputs it is built for are made on the GPU; the build is a cache hit
        replay.compile()
    with lock.exclusive():
        timing = bench_spec(spec, payload["root"], variant, device=device, methods=BENCH_METHODS,
                            copy_gbps=payload.get("copy_gbps"), replay=replay, medians=SCREEN_MEDIANS)
    return {"timing": timing, "lock_wait_s": lock.waited_s - waited}


def compile_job(payload: dict) -> dict:
    """``{"spec", "root"}`` -> ``{"compiled": bool, "lock_wait_s"}``: the captured launch built and
    not launched, so that Triton's on-disk cache holds its binary and its launcher
    (``prepare_launch``). False: the interpreter builds nothing; the kernel's file is still
    imported, so a source that does not load fails here. The
    inputs its specialization is read from (pointer alignment) are made as ``bench_spec`` makes
    them, on the GPU, holding the lock shared; the build itself holds nothing."""
    spec = LaunchSpec.from_json(payload["spec"])
    device = device_of(spec)
    replay = Replay(spec, Variant(), root=payload["root"], device=device)
    if not replay.compiles:
        return {"compiled": False, "lock_wait_s": 0.0}
    lock = gpu_lock(device)
    waited = lock.waited_s
    with lock.shared():
        args = make_args(spec, payload["root"], device=device)
    prepare_launch(replay.compile(args))
    del args
    _free_cached_memory(device)
    return {"compiled": True, "lock_wait_s": lock.waited_s - waited}


def prepare_launch(compiled: Any) -> None:
    """What Triton does at a compiled kernel's first launch, done now: its binary loaded on the
    GPU and its launcher (a C module per signature, built with the host's compiler, ~0.27 s) built
    into the cache. Measured on an H200: with the ranking's launches only compiled by the verify
    workers, the timing worker built 8 launchers for 10 launches, 2.2 s of its 3.5 s. Nothing is
    launched. A Triton without the step (its private ``_init_handles``) is left to launch as it
    does, and so is a load that fails here (CUDA out of memory beside the other builds: the
    build itself succeeded, and the timing reports what it finds)."""
    init = getattr(compiled, "_init_handles", None)
    if not callable(init):
        return
    try:
        init()
    except Exception:  # noqa: BLE001 - the timing worker loads it again and reports its own failure
        return


def exclusive_job(payload: dict) -> Any:
    """``{"job": "package.module:function", "payload": {"spec", ...}}`` -> that job's value, run
    holding the spec's GPU exclusively (baseline timing, confirmation, profile)."""
    from tritune.worker.child import resolve

    inner = payload["payload"]
    device = device_of(LaunchSpec.from_json(inner["spec"]), inner.get("device"))
    with gpu_lock(device).exclusive():
        return resolve(payload["job"])(inner)


def baseline_replay(spec: LaunchSpec, root: str, device: str) -> Replay:
    """The captured launch's ``Replay``, built once per process and kept (its kernel stays
    compiled). Keyed by the spec's whole JSON, not its id alone: two specs may share an id."""
    text = json.dumps(spec.to_json(), sort_keys=True, default=str)
    key = (str(root), device, hashlib.sha256(text.encode()).hexdigest())
    replay = _BASELINES.get(key)
    if replay is None:
        replay = _BASELINES[key] = Replay(spec, Variant(), root=root, device=device)
        while len(_BASELINES) > BASELINES_KEPT:
            _BASELINES.popitem(last=False)
    _BASELINES.move_to_end(key)
    return replay


def gpu_lock(device: str) -> GpuLock:
    """This process's handle on the lock of ``device``'s GPU (the CPU has one too, so the
    interpreter runs the same code; nothing times the CPU for a decision)."""
    name = _gpu_name(device)
    if name not in _LOCKS:
        from tritune.config import gpu_lock_path

        _LOCKS[name] = GpuLock(gpu_lock_path(name))
    return _LOCKS[name]


def _gpu_name(device: str) -> str:
    if not str(device).startswith("cuda"):
        return "cpu"
    import torch

    parsed = torch.device(device)
    index = parsed.index if parsed.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    return str(uuid) if uuid else f"{index}-{props.name}"


def _free_cached_memory(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def baselines_job(payload: dict) -> dict:
    """``{"specs": [spec JSON], "root", "copy_gbps"?, "methods"?, "medians"?, "slice_s"?}`` ->
    ``{"timings": [[id, bench result or None, failure JSON or None]], "fault": bool}``: the specs'
    baselines timed in one call (the optimizer ranks keys by time before proposing), with
    ``methods`` (default ``BENCH_METHODS``), ``medians`` (default 2) and ``bench_ms`` (a single
    median's do_bench warm-up and runs, ``bench_spec``). A launch that fails is
    recorded and the next one timed; after a device fault (the CUDA context is unusable from then
    on) the job returns what it has with ``fault`` set, and the caller restarts the worker and
    sends the rest. ``slice_s``: no launch is started after that many seconds; the caller sends
    the rest in the next call (and tells the user how far it is in between)."""
    import time

    from tritune.worker.failures import RESTART_KINDS, from_exception

    started = time.monotonic()
    slice_s = payload.get("slice_s")
    methods = tuple(payload.get("methods") or BENCH_METHODS)
    timings: list[list] = []
    for body in payload["specs"]:
        if timings and slice_s is not None and time.monotonic() - started >= slice_s:
            break
        spec = LaunchSpec.from_json(body)
        try:
            with gpu_lock(device_of(spec)).exclusive():
                bench_ms = payload.get("bench_ms")
                timing = bench_spec(spec, payload["root"], methods=methods, copy_gbps=payload.get("copy_gbps"),
                                    medians=int(payload.get("medians", 2)),
                                    bench_ms=tuple(bench_ms) if bench_ms else None)
        except Exception as exc:  # noqa: BLE001 - classified and returned with the spec it belongs to
            failure = from_exception(exc)
            timings.append([spec.id, None, failure.to_json()])
            if failure.kind in RESTART_KINDS:
                return {"timings": timings, "fault": True}
            continue
        timings.append([spec.id, timing, None])
    return {"timings": timings, "fault": False}


def full_timing(timing: dict | None) -> bool:
    """Whether a baseline timing is what ``KernelLoop`` starts from (noise and graph time), not a
    ranking's one median (``RANK_METHODS``)."""
    return bool(timing) and set(BENCH_METHODS) <= set(timing.get("methods") or ())


class TargetUnknown(RuntimeError):
    """``ask_target``: the worker could not say which GPU it runs on (one line)."""


def ask_target(call: Callable[[str, dict], Any]) -> Target:
    """The target a worker runs on (``target_job``), through ``call`` (a worker's or a lane's
    guarded ``call``): the one place the parent asks, the GPU staying in the worker."""
    outcome = call(TARGET_JOB, {})
    if not outcome.ok:
        raise TargetUnknown(f"cannot tell which GPU this is: {outcome.failure.kind}: {outcome.failure.message}")
    return Target.from_json(outcome.value)


def target_job(payload: dict) -> dict:
    """``{}`` -> ``current_target()`` plus ``copy_gbps`` (None without a GPU) and ``meaningful``."""
    import torch

    from tritune.bench.timing import copy_bandwidth_gbps
    from tritune.replay.inputs import interpreting
    from tritune.store.keys import current_target

    on_gpu = torch.cuda.is_available() and not interpreting()
    target = current_target("cuda" if on_gpu else "cpu")
    if on_gpu:
        with gpu_lock("cuda").exclusive():  # a bandwidth measured beside other launches is low
            copy_gbps = copy_bandwidth_gbps("cuda")
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        facts = {}
        for name, prop in (("sm_count", "multi_processor_count"), ("l2_bytes", "L2_cache_size"),
                           ("smem_per_sm", "shared_memory_per_multiprocessor"),
                           ("regs_per_sm", "regs_per_multiprocessor")):  # the LLM prompt's GPU facts
            value = getattr(props, prop, None)
            if isinstance(value, int):
                facts[name] = value
        target = dataclasses.replace(target, copy_gbps=copy_gbps, meaningful=True, **facts)
    return target.to_json()


def inductor_launches_job(payload: dict) -> dict:
    """``{"modules": DIR, "out": DIR}`` -> ``{"launches", "errors"}``: Inductor kernel modules as a
    capture (launched on a GPU, so the spec holds Inductor's choice; built on the CPU)."""
    from tritune.capture.inductor_modules import kernel_files, specs_from_modules

    files = sorted(kernel_files(payload["modules"]))
    specs, errors = specs_from_modules(files, payload["out"])
    return {"launches": len(specs), "errors": [f"{e.file}: {e.error}" for e in errors], "modules": len(files)}
