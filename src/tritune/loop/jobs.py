"""Worker entries of the loop: each candidate is built, verified and timed in an isolated process.

``candidate_job`` is one worker call per candidate: verification first (>= 3 fresh input sets,
poisoned outputs), and only a verified candidate is timed, so a wrong kernel never costs a
benchmark. A compile error, fault, hang or crash surfaces as the worker's failure kind (the
worker classifies it); a wrong result is returned with its verification record. ``target_job``
names the machine the decisions are keyed by, and measures the roofline bandwidth once.
"""

from __future__ import annotations

from tritune.bench.run import bench_spec
from tritune.capture.spec import LaunchSpec
from tritune.replay import Variant
from tritune.verify import verify

CANDIDATE_JOB = "tritune.loop.jobs:candidate_job"
BASELINE_JOB = "tritune.bench.run:bench_job"
BASELINES_JOB = "tritune.loop.jobs:baselines_job"
CONFIRM_JOB = "tritune.arbiter.confirm:confirm_job"
TARGET_JOB = "tritune.loop.jobs:target_job"
INDUCTOR_LAUNCHES_JOB = "tritune.loop.jobs:inductor_launches_job"
BENCH_METHODS = ("median", "graph")  # the median decides; the graph time tells launch-bound kernels apart


def candidate_job(payload: dict) -> dict:
    """``{"spec", "root", "variant", "mode", "input_sets"?, "copy_gbps"?}`` ->
    ``{"verification": VerifyResult JSON, "timing": bench result or None}``."""
    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload["variant"])
    result = verify(spec, variant, payload["root"], mode=payload.get("mode", "tolerance"),
                    input_sets=int(payload.get("input_sets", 3)))
    body = {"verification": result.to_json(), "timing": None}
    if result.ok:
        body["timing"] = bench_spec(spec, payload["root"], variant, methods=BENCH_METHODS,
                                    copy_gbps=payload.get("copy_gbps"))
    return body


def baselines_job(payload: dict) -> dict:
    """``{"specs": [spec JSON], "root", "copy_gbps"?}`` -> ``{"timings": [[id, bench result or
    None, failure JSON or None]], "fault": bool}``: every spec's baseline timed in one call (the
    optimizer ranks keys by time before proposing). A launch that fails is recorded and the next
    one timed; after a device fault (the CUDA context is unusable from then on) the job returns
    what it has with ``fault`` set, and the caller restarts the worker and sends the rest."""
    from tritune.worker.failures import RESTART_KINDS, from_exception

    timings: list[list] = []
    for body in payload["specs"]:
        spec = LaunchSpec.from_json(body)
        try:
            timing = bench_spec(spec, payload["root"], methods=BENCH_METHODS, copy_gbps=payload.get("copy_gbps"))
        except Exception as exc:  # noqa: BLE001 - classified and returned with the spec it belongs to
            failure = from_exception(exc)
            timings.append([spec.id, None, failure.to_json()])
            if failure.kind in RESTART_KINDS:
                return {"timings": timings, "fault": True}
            continue
        timings.append([spec.id, timing, None])
    return {"timings": timings, "fault": False}


def target_job(payload: dict) -> dict:
    """``{}`` -> ``current_target()`` plus ``copy_gbps`` (None without a GPU) and ``meaningful``."""
    import torch

    from tritune.bench.timing import copy_bandwidth_gbps
    from tritune.replay.inputs import interpreting
    from tritune.store.keys import current_target

    on_gpu = torch.cuda.is_available() and not interpreting()
    target = current_target("cuda" if on_gpu else "cpu")
    target["copy_gbps"] = copy_bandwidth_gbps("cuda") if on_gpu else None
    target["meaningful"] = on_gpu
    return target


def inductor_launches_job(payload: dict) -> dict:
    """``{"modules": DIR, "out": DIR}`` -> ``{"launches", "errors"}``: Inductor kernel modules as a
    capture (launched on a GPU, so the spec holds Inductor's choice; built on the CPU)."""
    from tritune.capture.inductor_modules import kernel_files, specs_from_modules

    files = sorted(kernel_files(payload["modules"]))
    specs, errors = specs_from_modules(files, payload["out"])
    return {"launches": len(specs), "errors": [f"{e.file}: {e.error}" for e in errors], "modules": len(files)}
