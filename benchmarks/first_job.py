"""What a worker's first job costs, phase by phase (issue 24, section 1): on an H200 a cold
verify worker's first candidate took ~9-11 s on a Liger kernel whose later candidates took ~2 s
(``fixed_probe.py``), and the ranking's two launches ~10 s in the timing worker.

In a fresh worker (as a lane makes them: torch, Triton and the GPU brought up at its start), one
job runs the phases a first candidate runs, each timed: the captured kernel's module loaded
(``Replay``: its imports), inputs made, the baseline compiled, timed (the ranking's do_bench), a
variant compiled, verified against the baseline (``verify``: 3 input sets and the 3 scaled draws).
Then the same job again in the same worker (warm), and in a second fresh worker sharing the first
one's Triton cache. ``--profile``: the cold job under cProfile, its top functions by cumulative
time in the result.

    export PYTHONPATH=$PWD/src
    python3 benchmarks/first_job.py --out $OUT/first_job.json [--profile] CAPTURE [CAPTURE ...]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import _common

HERE = pathlib.Path(__file__).resolve().parent


def phases(payload: dict) -> dict:
    """The job: each phase's seconds (and, with ``profile``, the top functions)."""
    import cProfile

    profiler = cProfile.Profile() if payload.get("profile") else None
    if profiler is not None:
        profiler.enable()
    try:
        return {"phases": _phases(payload), **({"top": _top(profiler)} if profiler else {})}
    finally:
        if profiler is not None:
            profiler.disable()


def _top(profiler) -> str:
    import io
    import pstats

    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(45)
    return text.getvalue()[-12000:]


def _phases(payload: dict) -> dict:
    import torch

    from tritune.bench.run import bench_spec
    from tritune.model.launch import LaunchSpec
    from tritune.model.variant import Variant
    from tritune.replay import Replay, make_args
    from tritune.verify import verify

    spec, root = LaunchSpec.from_json(payload["spec"]), payload["root"]
    found: dict[str, float] = {}
    mark = time.perf_counter()

    def done(name: str) -> None:
        nonlocal mark
        torch.cuda.synchronize()
        now = time.perf_counter()
        found[name] = round(now - mark, 3)
        mark = now

    replay = Replay(spec, Variant(), root=root, device="cuda")
    done("load_module")
    args = make_args(spec, root, device="cuda")
    done("make_args")
    replay.compile(args)
    done("compile")
    bench_spec(spec, root, methods=("median",), medians=1, bench_ms=(10, 40), replay=replay, copy_gbps=1000.0)
    done("bench")
    variant = Variant(name="first-job", options={"num_warps": 8 if spec.options.get("num_warps") != 8 else 4})
    Replay(spec, variant, root=root, device="cuda").compile(args)
    done("compile_variant")
    del args
    result = verify(spec, variant, root, mode="tolerance", input_sets=3, device="cuda", baseline=replay)
    done("verify")
    found["verified"] = bool(result.ok)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    from tritune.capture.spec import read_launches
    from tritune.loop.evaluate import PRELOAD
    from tritune.loop.lanes import HASH_MODULE, READY_MODULE
    from tritune.worker import SharedCache, Worker, jail

    runs = []
    for capture in args.captures:
        capture = capture.resolve()
        spec = read_launches(capture)[0]
        policy = jail.for_workers(capture, untrusted=False)
        cache = SharedCache()
        payload = {"spec": spec.to_json(), "root": str(capture)}
        row: dict = {"capture": capture.parent.name, "kernel": spec.kernel, "jailed": policy is not None}
        try:
            with Worker(600, preload=(HASH_MODULE, *PRELOAD, READY_MODULE), jail=policy, cache=cache.path) as first:
                begin = time.perf_counter()
                first.start()
                row["start_s"] = round(time.perf_counter() - begin, 3)
                for name, profile in (("cold", args.profile), ("warm", False)):
                    outcome = first.call("first_job:phases", {**payload, "profile": profile})
                    row[name] = outcome.value if outcome.ok else {"failure": str(outcome.failure)[:2000]}
                    row[name + "_s"] = round(outcome.seconds, 3)
            with Worker(600, preload=(HASH_MODULE, *PRELOAD, READY_MODULE), jail=policy, cache=cache.path) as second:
                second.start()
                outcome = second.call("first_job:phases", payload)
                row["cold_shared_cache"] = outcome.value if outcome.ok else {"failure": str(outcome.failure)[:2000]}
                row["cold_shared_cache_s"] = round(outcome.seconds, 3)
        finally:
            cache.remove()
        runs.append(row)
        print(json.dumps({k: ({kk: vv for kk, vv in v.items() if kk != "top"} if isinstance(v, dict) else v)
                          for k, v in row.items()}), flush=True)
        args.out.write_text(json.dumps({"environment": _common.environment(), "command": " ".join(sys.argv),
                                        "runs": runs}, indent=1, default=str))


if __name__ == "__main__":
    main()
