"""The figures of ``docs/scale.md`` (issue 15, section 3), counted from committed results: no GPU.

What a model zoo gives tritune to do, and what that costs, from the runs committed under
``benchmarks/results/``:

- kernels, distinct kernel sources and distinct decision keys per model: from
  ``inductor_passes.json`` (harvested Inductor modules: Inductor names each module file by a hash
  of its text, so equal file names are equal kernels), the ``timed`` list of each
  ``e2e/optimize/*.json`` (every key of a running program's capture, with its launches) and the
  ``keys`` count of each ``optimize/*.json`` (harvested captures, one launch per module);
- how far deduplication by source hash goes across models (modules and keys found in two models);
- how many keys a dropout kernel becomes, since Inductor passes the seed index as an int argument
  (``load_seed_offset``) and a key buckets int values (``tritune.store.keys.scalar_desc``);
- the loop's throughput per GPU (candidates, keys, seconds per key) of each committed run, and the
  GPUs an overnight run needs at a given number of keys and seconds per key;
- with ``--store DB``: the bytes a store spends per key, candidate, decision and profile;
- with ``--contention N``: commits per second of N processes writing one store on this machine
  (the ``DecisionStore`` calls a candidate makes: add, claim, finish);
- with ``--triton-cache``: the bytes a compiled variant leaves in Triton's cache (example kernels
  compiled for sm_90 on the CPU).

    PYTHONPATH=src python3 benchmarks/scale_estimate.py
    PYTHONPATH=src python3 benchmarks/scale_estimate.py --store runs/opt/decisions.db --contention 8 --triton-cache
    PYTHONPATH=src python3 benchmarks/scale_estimate.py --json scale.json
"""

from __future__ import annotations

import argparse
import collections
import datetime
import importlib.util
import json
import math
import os
import pathlib
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterable, Mapping, Sequence

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
if importlib.util.find_spec("tritune") is None:  # not installed: this tree's
    sys.path.insert(0, str(HERE.parent / "src"))

# The captures a model's key count is read from: a running program's capture where one was
# optimized end to end (every launch of 3 training steps), else the harvest (one launch per module).
CAPTURES = {  # model -> committed optimize.json
    "bert": "e2e/optimize/bert.json",
    "gpt2": "e2e/optimize/gpt2.json",
    "resnet50": "e2e/optimize/resnet50.json",
    "coat_lite_mini": "optimize/coat_lite_mini.json",
    "botnet26t_256": "optimize/botnet26t_256.json",
    "convit_base": "optimize/convit_base.json",
    "beit_base_patch16_224": "optimize/beit_base_patch16_224.json",
}
HARVESTS = {"bert (harvest)": "optimize/bert.json"}  # counted, not used twice in the zoo estimate
SUITE = "rewrites/suite-knobs.json"
# Runs whose throughput is reported: each optimized keys on one H100 with the loop of its commit.
RUNS = ("e2e/optimize/gpt2.json", "e2e/optimize/gpt2-coordinate_descent.json",
        "e2e/optimize/bert-coordinate_descent.json", "rewrites/suite-knobs.json", "rewrites/suite-rewrites.json",
        "optimize/coat_lite_mini.json", "optimize/botnet26t_256.json", "optimize/convit_base.json")
NIGHT_H = 12.0
ZOO_MODELS = 100
KEYS = 10_000  # the corpus
# The per-key costs an overnight plan is priced at: a measured run (its seconds from start to end,
# ranking included, over the keys it optimized) or a budget taken as a bound (every key spends it).
PLANS = (("measured: suite, --budget-s 10 --max-candidates 16", "rewrites/suite-knobs.json"),
         ("measured: gpt2, --budget-s 60 --deadline-s 300", "e2e/optimize/gpt2.json"),
         ("bound: --budget-s 10", 10.0), ("bound: --budget-s 60", 60.0))
CAPTURE_FROM = ("e2e/gpt2.json", "optimize:default", "e2e/optimize/gpt2.json")  # capture = command - run


# ------------------------------------------------------------------------ kernels and keys

def harvest_counts(records: Iterable[Mapping]) -> list[dict]:
    """Per (model, mode) of ``inductor_passes.json``'s records: kernels (records), distinct module
    files (Inductor's content hash) and distinct kernel names."""
    groups: dict[tuple[str, str], list[Mapping]] = collections.defaultdict(list)
    for r in records:
        groups[(r["model"], r["mode"])].append(r)
    return [{"model": model, "mode": mode, "kernels": len(rs), "modules": len({_module(r) for r in rs}),
             "names": len({r["kernel"] for r in rs})} for (model, mode), rs in groups.items()]


def cross_model(records: Iterable[Mapping]) -> dict:
    """What deduplication by kernel text finds across models: module files that two (model, mode)s
    share, and kernel names they share whose files differ (``other_bytes``: those that also move a
    different number of bytes, so their baked-in sizes differ)."""
    records = list(records)
    where: dict[str, set] = collections.defaultdict(set)
    named: dict[str, list[Mapping]] = collections.defaultdict(list)
    for r in records:
        where[_module(r)].add((r["model"], r["mode"]))
        named[r["kernel"]].append(r)
    shared_names = {n: rs for n, rs in named.items() if len({(r["model"], r["mode"]) for r in rs}) > 1}
    other_file = {n: rs for n, rs in shared_names.items() if len({_module(r) for r in rs}) > 1}
    other_bytes = [n for n, rs in other_file.items() if len({r.get("kernel_num_gb") for r in rs}) > 1]
    return {"kernels": len(records), "distinct_modules": len(where),
            "shared_modules": sorted(m for m, owners in where.items() if len(owners) > 1),
            "shared_names": len(shared_names), "shared_names_other_file": len(other_file),
            "shared_names_other_bytes": len(other_bytes)}


def _module(record: Mapping) -> str:
    return pathlib.PurePosixPath(record["file"]).name


def capture_counts(result: Mapping, cover: float = 0.95) -> dict:
    """Keys of one optimize.json. Format 2 (a ``timed`` list: every key of the capture): launches,
    keys, kernel names, the names holding several keys, the keys of kernels named ``*dropout*``
    beyond one each, and the keys needed to hold ``cover`` of the kernel time. Format 1: the key
    count only (its ``kernels`` list is the sample that was optimized)."""
    timed = result.get("timed")
    if not timed:
        return {"keys": int(result["keys"]), "launches": None, "names": None, "multi": {}, "dropout_extra": None,
                "cover_keys": None}
    by_name = collections.Counter(t["kernel"] for t in timed)
    multi = {name: n for name, n in sorted(by_name.items()) if n > 1}
    times = [t["baseline_ms"] * t["launches"] for t in timed if t.get("baseline_ms")]
    return {"keys": len({t["key_sha"] for t in timed}), "launches": sum(t["launches"] for t in timed),
            "names": len(by_name), "multi": multi,
            "dropout_extra": sum(n - 1 for name, n in multi.items() if "dropout" in name),
            "cover_keys": keys_to_cover(times, cover)}


def keys_to_cover(times: Sequence[float], cover: float) -> int:
    """The fewest keys, costliest first, whose times add up to ``cover`` of the total."""
    total, held = sum(times), 0.0
    for n, t in enumerate(sorted(times, reverse=True), 1):
        held += t
        if held >= cover * total * (1 - 1e-12):
            return n
    return len(times)


def shared_keys(key_sets: Mapping[str, set]) -> dict[str, int]:
    """Keys (sha) that appear under more than one model: ``{sha: models}``."""
    owners: dict[str, int] = collections.Counter()
    for keys in key_sets.values():
        owners.update(set(keys))
    return {sha: n for sha, n in owners.items() if n > 1}


def key_shas(result: Mapping) -> set:
    return {t["key_sha"] for t in result.get("timed") or result["kernels"] if t.get("key_sha")}


def int_key_classes(values: Iterable[int]) -> int:
    """Distinct key descriptors of an int argument taking ``values`` (tritune's own ``scalar_desc``:
    Triton's class and the power-of-two bucket). A dropout kernel's seed index 0..N-1 gives this
    many keys of one kernel source."""
    from tritune.store.keys import scalar_desc

    return len({json.dumps(scalar_desc(int(v))) for v in values})


def zoo_estimate(per_model: Mapping[str, int], models: int, shared_fraction: float) -> dict:
    """Distinct keys of a zoo of ``models`` models like these: mean and median keys per model times
    ``models``, less the fraction found shared across models."""
    counts = list(per_model.values())
    mean, median = statistics.mean(counts), statistics.median(counts)
    return {"models_seen": len(counts), "keys_seen": sum(counts), "mean": mean, "median": median,
            "min": min(counts), "max": max(counts), "shared_fraction": shared_fraction,
            "zoo_mean": models * mean * (1 - shared_fraction), "zoo_median": models * median * (1 - shared_fraction)}


# --------------------------------------------------------------------------------- throughput

def throughput(result: Mapping) -> dict:
    """One optimize run: keys optimized, candidates evaluated in it (not reused from the store),
    decisions, the loop's seconds (sum of the keys' wall times: the ranking and the capture are
    not in it), the run's seconds where it finished in one call, seconds per key and candidates
    per second, the median round share and own time of a candidate (format 2), and the failure
    kinds of its candidates."""
    kernels = [k for k in result["kernels"] if isinstance(k, Mapping)]
    fresh = [c for k in kernels for c in k.get("candidates", []) if not c.get("reused")]
    loop_s = sum(k.get("wall_s") or 0.0 for k in kernels)
    run_s = None
    if result.get("started") and result.get("finished"):
        run_s = (datetime.datetime.fromisoformat(result["finished"])
                 - datetime.datetime.fromisoformat(result["started"])).total_seconds()
    share = [c["share_s"] for c in fresh if c.get("share_s") is not None]
    own = [c["seconds"] for c in fresh if c.get("share_s") is not None]
    settings = result.get("settings", {})
    return {"keys": len(kernels), "candidates": len(fresh), "decisions": sum(bool(k.get("accepted")) for k in kernels),
            "loop_s": loop_s, "run_s": run_s, "jobs": result.get("jobs"), "budget_s": settings.get("budget_s"),
            "max_candidates": settings.get("max_candidates"),
            "s_per_key": loop_s / len(kernels) if kernels else None,
            "median_key_s": statistics.median(k["wall_s"] for k in kernels) if kernels else None,
            "candidates_per_s": len(fresh) / loop_s if loop_s else None,
            "candidates_per_key": len(fresh) / len(kernels) if kernels else None,
            "median_share_s": statistics.median(share) if share else None,
            "median_own_s": statistics.median(own) if own else None,
            "failures": dict(collections.Counter(c["failure"] for c in fresh if c.get("failure")))}


def gpus_needed(keys: float, seconds_per_key: float, *, hours: float = NIGHT_H, extra_s: float = 0.0) -> dict:
    """GPU-hours for ``keys`` keys at ``seconds_per_key`` each plus ``extra_s`` (captures), and the
    whole GPUs that fit it into ``hours``, assuming keys spread evenly over GPUs (one lane each)."""
    gpu_s = keys * seconds_per_key + extra_s
    return {"gpu_hours": gpu_s / 3600, "gpus": max(1, math.ceil(gpu_s / (hours * 3600) - 1e-9))}


def capture_seconds(e2e: Mapping, task: str, result: Mapping) -> float:
    """The capture part of an ``optimize -- PROGRAM`` call: the task's seconds (e2e.py's record of
    the whole command) less the run's (ranking and loop, from its optimize.json)."""
    run = throughput(result)["run_s"]
    return e2e["tasks"][task]["seconds"] - run


def overnight(plans: Sequence[tuple[str, float]], keys: Sequence[int], capture_s: float, models: int,
              hours: float = NIGHT_H) -> list[dict]:
    """GPUs for one night per plan (name, seconds per key) and key count, with ``models`` captures
    of ``capture_s`` each."""
    return [{"plan": name, "s_per_key": per_key, "keys": n,
             **gpus_needed(n, per_key, hours=hours, extra_s=models * capture_s)}
            for name, per_key in plans for n in keys]


# ---------------------------------------------------------------------------------- the store

TABLES = ("keys", "candidates", "decisions", "profiles", "runs", "llm_exchanges")


def store_bytes(path: str | os.PathLike) -> dict:
    """Rows and bytes per table of a store: ``pages`` is what the table and its indexes occupy in
    the file (SQLite's ``dbstat``; None where SQLite was built without it), ``data`` the bytes of
    its values. Per row of keys, candidates, decisions and profiles, and the file's size."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        pages = _pages(conn)
        out: dict[str, Any] = {"file_bytes": os.path.getsize(path), "tables": {}}
        for table in TABLES:
            columns = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            if not columns:
                continue
            rows = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            data = conn.execute("SELECT coalesce(sum(" + " + ".join(f"coalesce(length({c}), 0)" for c in columns)
                                + f"), 0) FROM {table}").fetchone()[0]
            used = None if pages is None else sum(size for name, size in pages.items()
                                                  if name == table or name in _indexes(conn, table))
            out["tables"][table] = {"rows": rows, "data": data, "pages": used,
                                    "per_row": (used if used is not None else data) / rows if rows else None}
        out["tensors_per_key"] = _tensors_per_key(conn)
        out["check_bytes"] = _check_bytes(conn)
        return out
    finally:
        conn.close()


def _pages(conn: sqlite3.Connection) -> dict[str, int] | None:
    try:
        return {name: size for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")}
    except sqlite3.OperationalError:
        return None


def _indexes(conn: sqlite3.Connection, table: str) -> set:
    return {row[1] for row in conn.execute(f"PRAGMA index_list({table})")}


def _check_bytes(conn: sqlite3.Connection) -> dict:
    """The verification records' checks (one per tensor and input set or transformed draw): how many, mean JSON bytes."""
    sizes = [len(json.dumps(check)) for (text,) in conn.execute("SELECT verification FROM candidates "
                                                                "WHERE verification IS NOT NULL")
             for check in (json.loads(text) or {}).get("checks", [])]
    return {"checks": len(sizes), "mean": statistics.mean(sizes) if sizes else None}


def _tensors_per_key(conn: sqlite3.Connection) -> list[dict]:
    """Per key: tensor arguments, candidates and their mean bytes (verification records grow with
    the tensors: one check per tensor and input set)."""
    cols = [row[1] for row in conn.execute("PRAGMA table_info(candidates)")]
    size = " + ".join(f"coalesce(length({c}), 0)" for c in cols)
    out = []
    for sha, kernel, spec in conn.execute("SELECT sha, kernel, specialization FROM keys ORDER BY kernel"):
        n, mean = conn.execute(f"SELECT count(*), avg({size}) FROM candidates WHERE key_sha = ?", (sha,)).fetchone()
        tensors = sum(1 for arg in json.loads(spec)["args"] if len(arg) > 1 and arg[1] == "T")
        out.append({"kernel": kernel, "tensors": tensors, "candidates": n, "mean_bytes": mean})
    return out


# ------------------------------------------------------------------------------ Triton's cache

# Kernels compiled for sm_90 on the CPU (DESIGN.md: triton.compile runs without a GPU), at two
# block sizes and three warp counts each, the variants a launch-config search builds.
CACHE_PROBE = (
    ("examples/vector_add.py", "add_kernel", {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                              "n_elements": "i32", "BLOCK_SIZE": "constexpr"}, "BLOCK_SIZE", (256, 1024)),
    ("examples/layernorm.py", "layernorm_kernel", {"x_ptr": "*fp16", "w_ptr": "*fp16", "b_ptr": "*fp16", "y_ptr": "*fp16",
                                                   "n_cols": "i32", "eps": "fp32", "BLOCK_N": "constexpr"},
     "BLOCK_N", (1024, 4096)),
    ("examples/softmax.py", "softmax_kernel", {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32",
                                               "out_row_stride": "i32", "n_cols": "i32", "BLOCK_N": "constexpr"},
     "BLOCK_N", (1024, 4096)),
)


def triton_cache_bytes(cache_dir: str | os.PathLike, probe: Sequence = CACHE_PROBE,
                       warps: Sequence[int] = (2, 4, 8)) -> dict:
    """Bytes each compiled variant adds to a fresh Triton cache (what every candidate a worker
    builds leaves in ``TRITON_CACHE_DIR``): mean, min, max over the probe's variants. Run in a
    child process, since Triton reads ``TRITON_CACHE_DIR`` once."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[2]); import scale_estimate as s; "
            "print(json.dumps(s._compile_probe(sys.argv[1], json.loads(sys.argv[3]), json.loads(sys.argv[4]))))")
    env = dict(_child_env(), TRITON_CACHE_DIR=str(cache_dir))
    env.pop("TRITON_INTERPRET", None)
    done = subprocess.run([sys.executable, "-c", code, str(cache_dir), str(HERE), json.dumps(list(probe)),
                           json.dumps(list(warps))], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"compiling the probe failed: {done.stderr.strip().splitlines()[-1:]}")
    sizes = json.loads(done.stdout)
    return {"variants": len(sizes), "mean": statistics.mean(sizes), "min": min(sizes), "max": max(sizes)}


def _compile_probe(cache_dir: str, probe: Sequence, warps: Sequence[int]) -> list[int]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    def size() -> int:
        return sum(f.stat().st_size for f in pathlib.Path(cache_dir).rglob("*") if f.is_file())

    sizes = []
    for n, (path, name, signature, block, values) in enumerate(probe):
        spec = importlib.util.spec_from_file_location(f"_probe{n}", HERE.parent / path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn = getattr(module, name)
        while not isinstance(fn, triton.runtime.jit.JITFunction):  # autotune / heuristics wrappers
            fn = fn.fn
        for value in values:
            for w in warps:
                before = size()
                triton.compile(ASTSource(fn, signature=signature, constexprs={block: value}),
                               target=GPUTarget("cuda", 90, 32), options={"num_warps": w})
                sizes.append(size() - before)
    return sizes


# ---------------------------------------------------------------------------------- contention

VERIFICATION_CHECKS = 12  # one check per tensor and input set: 4 tensors x 3 input sets


def write_rate(path: str | os.PathLike, writers: int, per_writer: int, *, timeout_s: float = 300) -> dict:
    """``writers`` processes each take ``per_writer`` candidates of their own through
    ``add_candidate``, ``claim`` and ``finish_candidate`` on one store at once. Returns the
    commits, the seconds from the first start to the last end, commits per second, and each
    writer's slowest call."""
    procs = [subprocess.Popen([sys.executable, __file__, "--_writer", str(path), str(w), str(per_writer)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_child_env())
             for w in range(writers)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"writer failed ({proc.returncode}): {err.strip().splitlines()[-1:]}")
        reports.append(json.loads(out))
    start, end = min(r["start"] for r in reports), max(r["end"] for r in reports)
    commits = sum(r["commits"] for r in reports)
    return {"writers": writers, "per_writer": per_writer, "commits": commits, "seconds": end - start,
            "commits_per_s": commits / (end - start), "slowest_call_s": max(r["slowest_s"] for r in reports)}


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent / "src"), env.get("PYTHONPATH")]))
    return env


def _writer(path: str, index: int, count: int) -> None:
    from tritune.model.key import DecisionKey
    from tritune.store import DecisionStore

    check = {"name": "out_ptr0", "ok": True, "mode": "bitwise", "bad": 0, "elements": 3145728,
             "max_abs_err": 0.0, "max_rel_err": 0.0, "shape": [8, 512, 768], "dtype": "bfloat16",
             "tolerance": {"atol": 0.0, "rtol": 0.0, "exact": True,
                           "reason": "exact rewrites must leave every bit unchanged (DESIGN.md numerics policy)"}}
    verification = {"ok": True, "checks": [dict(check, input_set=i % 3) for i in range(VERIFICATION_CHECKS)]}
    timings = {"median_ms": 0.0234, "p50_ms": 0.0234, "p95_ms": 0.0251, "graph_ms": 0.0121, "noise": 0.004}
    store = DecisionStore(path)
    run = store.start_run({"writer": index}, f"scale_estimate writer {index}")
    commits, slowest = 1, 0.0

    def timed(call):
        nonlocal slowest
        t0 = time.perf_counter()
        value = call()
        slowest = max(slowest, time.perf_counter() - t0)
        return value

    start = time.time()
    for n in range(count):
        key = DecisionKey(f"{index:064x}", f"triton_poi_fused_{index}_{n}", json.dumps({"n": n}),
                          "NVIDIA H100 80GB HBM3", 90, "3.6.0")
        variant = {"name": f"num_warps={n}", "options": {"num_warps": n}, "constexprs": {}, "passes": [],
                   "fast_math": False, "source": None}
        cand = timed(lambda: store.add_candidate(run, key, variant))
        timed(lambda: store.claim(cand.id, run))
        timed(lambda: store.finish_candidate(cand.id, "verified", verification=verification, timings=timings))
        commits += 3
    end = time.time()
    store.close()
    print(json.dumps({"start": start, "end": end, "commits": commits, "slowest_s": slowest}))


# -------------------------------------------------------------------------------------- report

def load(name: str, root: pathlib.Path = RESULTS) -> dict:
    return json.loads((root / name).read_text())


def collect(root: pathlib.Path = RESULTS) -> dict:
    passes = load("inductor_passes.json", root)
    per_model = {model: capture_counts(load(name, root)) for model, name in CAPTURES.items()}
    extra = {model: capture_counts(load(name, root)) for model, name in {**HARVESTS, "suite": SUITE}.items()}
    cross = cross_model(passes["records"])
    key_sets = {model: key_shas(load(name, root)) for model, name in {**CAPTURES, **HARVESTS}.items()}
    shared = shared_keys({m: s for m, s in key_sets.items() if m != "bert (harvest)"})
    zoo = zoo_estimate({m: c["keys"] for m, c in per_model.items()}, ZOO_MODELS,
                       len(cross["shared_modules"]) / cross["kernels"])
    runs = {name: throughput(load(name, root)) for name in RUNS}
    e2e, task, result = CAPTURE_FROM
    capture_s = capture_seconds(load(e2e, root), task, load(result, root))
    plans = [(name, source if isinstance(source, float) else runs[source]["run_s"] / runs[source]["keys"])
             for name, source in PLANS]
    return {"harvest": harvest_counts(passes["records"]), "harvest_env": _env(passes["environment"]),
            "cross_model": cross, "captures": per_model, "other_captures": extra, "shared_keys": len(shared),
            "seed_offsets": {n: int_key_classes(range(n)) for n in (4, 13, 25, 37, 49)},
            "zoo": zoo, "runs": runs, "capture_s": capture_s,
            "overnight": overnight(plans, [KEYS, round(zoo["zoo_mean"])], capture_s, ZOO_MODELS)}


def _env(env: Mapping) -> str:
    return f"{env.get('gpu')}, {env.get('utc', '')[:10]}, torch {env.get('torch')}, `{env.get('command')}`"


def _f(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render(found: Mapping, store: Mapping | None = None, contention: Mapping | None = None,
           cache: Mapping | None = None) -> str:
    lines = [f"## Harvested Inductor modules (results/inductor_passes.json: {found['harvest_env']})", "",
             "| model | mode | kernels | distinct module files (= sources) | distinct names |", "|---|---|---|---|---|"]
    lines += [f"| {h['model']} | {h['mode']} | {h['kernels']} | {h['modules']} | {h['names']} |" for h in found["harvest"]]
    c = found["cross_model"]
    lines += ["", f"Across them: {c['kernels']} kernels, {c['distinct_modules']} distinct module files; "
              f"{len(c['shared_modules'])} files in two models ({100 * len(c['shared_modules']) / c['kernels']:.2f}%); "
              f"{c['shared_names']} names in two models, {c['shared_names_other_file']} of them other files, "
              f"{c['shared_names_other_bytes']} of those moving other byte counts.", "",
              "## Keys per model (committed optimize.json)", "",
              "| model | file | launches | distinct keys | kernel names | names with >1 key | extra keys of dropout kernels | keys for 95% of time |",
              "|---|---|---|---|---|---|---|---|"]
    for model, row in {**found["captures"], **found["other_captures"]}.items():
        name = CAPTURES.get(model) or HARVESTS.get(model) or SUITE
        multi = ", ".join(f"{n}" for n in row["multi"].values()) or "-"
        lines.append(f"| {model} | {name} | {_f(row['launches'])} | {row['keys']} | {_f(row['names'])} | "
                     f"{multi if row['names'] is not None else '-'} | {_f(row['dropout_extra'])} | {_f(row['cover_keys'])} |")
    z = found["zoo"]
    lines += ["", f"Keys found under two models (all files above): {found['shared_keys']}.",
              "Keys of one int argument taking the values 0..N-1 (seed index of N dropout sites): "
              + ", ".join(f"N={n}: {k}" for n, k in found["seed_offsets"].items()) + ".", "",
              f"Zoo of 100 models: {z['models_seen']} models seen, {z['keys_seen']} keys, {z['min']}-{z['max']} a model, "
              f"mean {z['mean']:.1f}, median {z['median']:.0f}; less {100 * z['shared_fraction']:.2f}% shared: "
              f"{z['zoo_mean']:.0f} keys (mean), {z['zoo_median']:.0f} (median) per GPU kind and Triton version.", "",
              "## Throughput per run (one H100 each)", "",
              "| run | jobs | budget s / max cand. | keys | candidates | decisions | loop s | last call s | s per key (mean / median) "
              "| candidates per s | cand. per key | share / own s | failures |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, t in found["runs"].items():
        fails = ", ".join(f"{k} {v}" for k, v in sorted(t["failures"].items())) or "-"
        lines.append(f"| {name} | {_f(t['jobs'])} | {_f(t['budget_s'], 0)} / {t['max_candidates']} | {t['keys']} | "
                     f"{t['candidates']} | {t['decisions']} | {t['loop_s']:.0f} | {_f(t['run_s'], 0)} | "
                     f"{_f(t['s_per_key'])} / {_f(t['median_key_s'])} | {_f(t['candidates_per_s'], 2)} | "
                     f"{_f(t['candidates_per_key'])} | {_f(t['median_share_s'], 2)} / {_f(t['median_own_s'], 2)} | {fails} |")
    lines += ["", f"## One night ({NIGHT_H:.0f} h), {ZOO_MODELS} captures of {found['capture_s']:.0f} s each "
              f"({CAPTURE_FROM[0]} task {CAPTURE_FROM[1]} less {CAPTURE_FROM[2]}'s run)", "",
              "| plan | s per key | keys | GPU-hours | GPUs |", "|---|---|---|---|---|"]
    lines += [f"| {o['plan']} | {o['s_per_key']:.2f} | {o['keys']} | {o['gpu_hours']:.1f} | {o['gpus']} |"
              for o in found["overnight"]]
    if store:
        lines += ["", f"## Store: {store['path']} ({store['file_bytes']} bytes)", "",
                  "| table | rows | value bytes | file bytes (pages) | per row |", "|---|---|---|---|---|"]
        for table, t in store["tables"].items():
            lines.append(f"| {table} | {t['rows']} | {t['data']} | {_f(t['pages'])} | {_f(t['per_row'], 0)} |")
        checks = store["check_bytes"]
        lines += ["", f"Verification checks (one per tensor and input set or transformed draw): {checks['checks']}, "
                  f"{_f(checks['mean'], 0)} bytes each (mean).",
                  "", "| kernel | tensors | candidates | mean candidate bytes |", "|---|---|---|---|"]
        lines += [f"| {k['kernel']} | {k['tensors']} | {k['candidates']} | {_f(k['mean_bytes'], 0)} |"
                  for k in store["tensors_per_key"]]
    if cache:
        lines += ["", f"## Triton cache: {cache['variants']} variants compiled for sm_90", "",
                  f"{cache['mean']:.0f} bytes a variant (min {cache['min']}, max {cache['max']})."]
    if contention:
        lines += ["", f"## Contention: {contention['writers']} writers x {contention['per_writer']} candidates",
                  "", f"{contention['commits']} commits in {contention['seconds']:.2f} s: "
                  f"{contention['commits_per_s']:.0f} commits/s; slowest call {contention['slowest_call_s']:.3f} s."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=pathlib.Path, default=RESULTS, help="the committed results folder")
    parser.add_argument("--store", type=pathlib.Path, help="also measure this decision store's bytes")
    parser.add_argument("--contention", type=int, metavar="N", help="also time N processes writing one fresh store")
    parser.add_argument("--per-writer", type=int, default=200, help="candidates each writer records (default 200)")
    parser.add_argument("--triton-cache", action="store_true",
                        help="also compile the probe kernels for sm_90 into a fresh Triton cache and measure it")
    parser.add_argument("--json", type=pathlib.Path, help="write the figures here too")
    args = parser.parse_args(argv)
    found = collect(args.results)
    store = None
    if args.store:
        if not args.store.is_file():
            parser.error(f"{args.store}: no such decision store")
        store = {"path": str(args.store), **store_bytes(args.store)}
    contention = None
    if args.contention:
        with tempfile.TemporaryDirectory(prefix="tritune-scale-") as folder:
            os.environ.setdefault("TRITUNE_HOME", os.path.join(folder, "home"))
            os.makedirs(os.environ["TRITUNE_HOME"], mode=0o700, exist_ok=True)
            contention = write_rate(os.path.join(folder, "store.db"), args.contention, args.per_writer)
    cache = None
    if args.triton_cache:
        with tempfile.TemporaryDirectory(prefix="tritune-scale-cache-") as folder:
            cache = triton_cache_bytes(folder)
    sys.stdout.write(render(found, store, contention, cache))
    if args.json:
        args.json.write_text(json.dumps({**found, "store": store, "contention": contention, "triton_cache": cache},
                                        indent=1, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--_writer":
        _writer(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(main())
