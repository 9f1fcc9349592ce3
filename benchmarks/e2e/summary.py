"""``OUT/e2e/MODEL.json`` from the bookkeeping of ``benchmarks/e2e.py`` (``tasks.Progress``): the five
modes, the optimize runs' coverage, where the step is CPU-bound, and the issue's goals as measured.
"""

from __future__ import annotations

from measure import bound
from tasks import COMPILE_MODES, MAX_FAILURES, ORDER, TUNED, Progress, is_final


def coverage(run) -> dict:
    """From an optimize run (``tritune.model.results.RunResults``): the share of the program's kernel
    time held by the keys it optimized (its ``coverage``); a run without time shares (format 1)
    gives the share of keys decided instead."""
    ran = [k for k in run.kernels if k.ran]
    keys = run.keys or run.planned or len(run.kernels)
    out = {"keys": keys, "timed": len(run.timed), "optimized": len(ran),
           "improved": sum(1 for k in ran if k.improved(run.threshold)),
           "decided": sum(1 for k in run.kernels if k.decision), "finished": bool(run.finished),
           "stopped": run.stopped, "program_ms": run.program_ms, "expected_gain": run.expected_gain}
    if run.coverage is not None:
        out.update(share=run.coverage, of="kernel time (optimize.json's coverage: time_share of the keys optimized)")
    else:
        out.update(share=out["decided"] / keys if keys else None, of="keys: decided / keys (no time shares)")
    return out


MODE_FIELDS = ("step_ms", "kernel_ms", "gpu_ms", "noise", "gpu_busy", "triton_share", "cpu_bound", "loss", "blocks")


def assemble(progress: Progress) -> dict:
    """``OUT/e2e/MODEL.json``: the five modes, coverage, where the step is CPU-bound, the goals."""
    tasks = progress.data["tasks"]
    modes, facts, envs = {}, {}, []
    for mode in COMPILE_MODES:
        entry = tasks.get(f"modes:{mode}") or {"status": "pending"}
        result = entry.get("result") if entry["status"] == "done" else None
        modes[mode] = {**_fields(result), "compile_s": result and result["compile_s"], "status": _status(entry)}
        if result:
            facts, envs = result["model_facts"], envs + [result["environment"]]
    coverages = {}
    for mode, label in TUNED.items():
        entry = tasks.get(f"measure:{mode}") or {"status": "pending"}
        optimized = tasks.get(f"optimize:{mode}") or {}
        result = entry.get("result") if entry["status"] == "done" else None
        coverages[mode] = optimized.get("coverage")
        row = {**_fields(result and result["on"]), "optimize_s": optimized.get("optimize_s"), "status": _status(entry)}
        if result:
            facts, envs = result["model_facts"], envs + [result["environment"]]
            row.update(speedup=result["paired"], kernel_speedup=result["kernel_speedup"],
                       loss_check=result["loss_check"], same_process_baseline=_fields(result["off"]),
                       applier={k: v for k, v in result["applier"].items() if k != "per_kernel"},
                       first_step_s=result["first_step_s"])
        modes[label] = row
    baseline = modes["tritune"].get("same_process_baseline")
    if modes["default"]["step_ms"] is None and baseline and baseline.get("step_ms") is not None:
        modes["default"] = {**baseline, "compile_s": None, "status": "done",
                            "source": "the tritune measurement's blocks with tritune disabled (same process)"}
    latest = max(envs, key=lambda env: env.get("utc") or "", default={})
    return {"gpu": latest.get("gpu"), "date": latest.get("utc"), "torch": latest.get("torch"),
            "triton": latest.get("triton"), "command": [call["command"] for call in progress.data["calls"]],
            "model": {k: facts.get(k) for k in ("name", "what", "precision", "batch", "params")} if facts
            else {"name": progress.data["model"]},
            "modes": modes, "coverage": coverages, "cpu_bound": cpu_bound_note(modes), "goals": goals(modes),
            "missing": [t.name for t in ORDER if t.name not in tasks or not is_final(tasks[t.name])],
            "tasks": {t.name: {k: tasks.get(t.name, {"status": "pending"}).get(k)
                               for k in ("status", "note", "seconds", "calls", "failures", "command")} for t in ORDER},
            "definitions": DEFINITIONS}


def merge(old: dict, new: dict) -> dict:
    """Two results files of one model (``OUT/e2e/MODEL.json``) made from different states, e.g. two
    sessions whose state archives were not kept: per mode, per coverage and per task the newer
    file's entry where its task is done, else the older one's. Each mode says in ``measured`` the
    date of the file it came from; the goals, the CPU-bound note and ``missing`` are derived again.
    Modes of the two files compare as separate processes do (each compiled anew)."""
    older, newer = sorted((old, new), key=lambda result: result.get("date") or "")
    if (older.get("model") or {}).get("name") != (newer.get("model") or {}).get("name"):
        raise ValueError(f"cannot merge results of {older.get('model')} and {newer.get('model')}")
    tasks, modes, coverages = {}, {}, {}
    for name in (t.name for t in ORDER):
        pick = newer if (newer["tasks"].get(name) or {}).get("status") == "done" else older
        tasks[name] = pick["tasks"].get(name) or {"status": "pending"}
    mode_task = {**{mode: f"modes:{mode}" for mode in COMPILE_MODES},
                 **{label: f"measure:{mode}" for mode, label in TUNED.items()}}
    for label, name in mode_task.items():
        pick = newer if (newer["tasks"].get(name) or {}).get("status") == "done" else older
        if label == "default" and (pick["modes"].get(label) or {}).get("step_ms") is None:
            pick = newer if (newer["modes"].get(label) or {}).get("step_ms") is not None else older
        modes[label] = {**pick["modes"][label], "measured": pick.get("date")}
    for mode in TUNED:
        pick = newer if (newer["tasks"].get(f"optimize:{mode}") or {}).get("status") == "done" else older
        coverages[mode] = pick["coverage"].get(mode)
    merged = {**newer, "command": [*older.get("command", []), *newer.get("command", [])], "modes": modes,
              "coverage": coverages, "cpu_bound": cpu_bound_note(modes), "goals": goals(modes),
              "missing": [name for name, entry in tasks.items() if entry.get("status") not in ("done", "skipped")
                          and not (entry.get("failures") or 0) >= MAX_FAILURES],
              "tasks": tasks, "merged_from": [older.get("date"), newer.get("date")]}
    return merged


DEFINITIONS = {
    "step_ms": "median over blocks of a block's mean step time (host clock between device syncs)",
    "noise": "(max - min) / (2 * median) of the blocks",
    "kernel_ms": "torch.profiler: summed time of kernels named triton_* per step",
    "gpu_ms": "torch.profiler: every device kernel, copy and memset per step",
    "speedup": "tritune modes: median over ABAB pairs of disabled / enabled step time, same process; "
               "verdict 'faster' only when every pair agrees",
    "modes vs each other": "separate processes (each compiles and autotunes anew)",
    "loss_check": "see rule: enabled vs disabled from one snapshot, same data and RNG",
    "source": "where a mode was not run in a process of its own, the measurement it comes from "
              "(compile_s is then not known: that process's compile found warm caches)",
}


def _fields(result: dict | None) -> dict:
    return {k: (result or {}).get(k) for k in MODE_FIELDS}


def _status(entry: dict) -> str:
    if entry["status"] in ("done", "pending"):
        return {"done": "done", "pending": "not run yet"}[entry["status"]]
    return f"{entry['status']}: {entry['note']}" if entry.get("note") else entry["status"]


def cpu_bound_note(modes: dict) -> str | None:
    """Said plainly, from the default mode's profile (or tritune's same-process baseline)."""
    default = modes["default"] if modes["default"].get("step_ms") else modes["tritune"].get("same_process_baseline")
    if not default or not default.get("step_ms") or default.get("gpu_busy") is None:
        return None
    return bound(default["step_ms"], default["gpu_ms"], default["kernel_ms"])["note"]


def goals(modes: dict) -> dict:
    """The issue's goals, as measured (None where not measured yet)."""
    tuned, default, cd = modes["tritune"], modes["default"], modes["coordinate_descent"]
    speedup = (tuned.get("speedup") or {}).get("speedup")
    verdict = (tuned.get("speedup") or {}).get("verdict")
    vs_cd = cd["step_ms"] / tuned["step_ms"] if cd.get("step_ms") and tuned.get("step_ms") else None
    check = tuned.get("loss_check") or {}
    return {
        "tritune_step_speedup_ge_1.05": None if speedup is None else speedup >= 1.05 and verdict == "faster",
        "tritune_step_speedup": speedup,
        "tritune_at_least_coordinate_descent": None if vs_cd is None else vs_cd >= 1.0,
        "coordinate_descent_over_tritune_step": vs_cd,
        "tritune_kernel_speedup_ge_1.10": None if tuned.get("kernel_speedup") is None else tuned["kernel_speedup"] >= 1.10,
        "losses_equal_within_tolerance": check.get("ok"),
        "default_step_ms": default.get("step_ms"),
        "default_from": default.get("source") or "a process of its own",
        "coordinate_descent_plus_tritune_step_speedup": ((modes["coordinate_descent+tritune"].get("speedup") or {})
                                                         .get("speedup")),
        "coordinate_descent_plus_tritune_kernel_speedup": modes["coordinate_descent+tritune"].get("kernel_speedup"),
    }
