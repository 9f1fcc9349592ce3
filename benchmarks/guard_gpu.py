"""Guard regions on the GPU: the planted out-of-bounds candidates of tests/replay_verify/test_verify_guard.py,
verified with CUDA on 10 seeds each (the CPU test runs them under the interpreter, on 3: ``--seeds``).

On a GPU, PyTorch's caching allocator rounds blocks up, so a kernel that writes past a tensor's
end hits padding or a neighbour and nothing crashes: before guard regions such a candidate
passed verification. Each case must end as expected on every seed: the planted bugs rejected
(``wrong_result``; the overrunning baseline as ``baseline_out_of_bounds``), the correct variants
verified.

    PYTHONPATH=src python3 benchmarks/guard_gpu.py --json OUT.json
    PYTHONPATH=src python3 benchmarks/guard_gpu.py --control DIR   # a positive control for sanitize_store.py
    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/guard_gpu.py     # the same cases on the CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "src")]

from _common import environment  # noqa: E402

SOURCE = (REPO / "tests" / "programs" / "guarded.py").read_text()
SEEDS = range(10)
STORE = "tl.store(out_ptr + offs, x * 3.0, mask=mask)"

# name: (kernel, n, variant, what every seed must give)
CASES = {
    "store mask removed (write past the end)": ("scale", 200, {"source": (STORE, "tl.store(out_ptr + offs, x * 3.0)")},
                                                "wrong_result"),
    "write before the start (offset -2)": ("scale", 200, {"source": (STORE, "tl.store(out_ptr + offs - 2, x * 3.0, "
                                                                            "mask=mask)")}, "wrong_result"),
    "unmasked neighbour load (reads past the end)": ("neighbours", 200,
                                                     {"source": ("mask=offs + 1 < n, other=0.0)", "mask=mask)")},
                                                     "wrong_result"),
    "kernel without masks, BLOCK 64 -> 128": ("unmasked", 192, {"constexprs": {"BLOCK": 128}}, "wrong_result"),
    "kernel without masks, BLOCK 64 -> 32 (correct)": ("unmasked", 192, {"constexprs": {"BLOCK": 32}}, "ok"),
    "scale, BLOCK 256 (correct)": ("scale", 1000, {"constexprs": {"BLOCK": 256}}, "ok"),
    "neighbours, 2 warps (correct)": ("neighbours", 1000, {"options": {"num_warps": 2}}, "ok"),
    "a baseline that overruns (n % BLOCK != 0)": ("unmasked", 200, {"constexprs": {"BLOCK": 8}},
                                                  "baseline_out_of_bounds"),
    # 50 x 2048 fp32 in 32 x 256 tiles: without the row mask the last tile writes 14 rows (112 KiB)
    # past the end, beyond a 64 KiB margin: the margin is one block of strides
    "2-D tile store without its row mask": ("tiles", (50, 2048), {"source": ("x * 3.0, mask=rows & cols)",
                                                                            "x * 3.0, mask=cols)")}, "wrong_result"),
    "2-D tiles 16 x 512 (correct)": ("tiles", (50, 2048), {"constexprs": {"BLOCK_M": 16, "BLOCK_N": 512}}, "ok"),
}


def spec_of(root: Path, kernel: str, n):
    """A launch of ``kernel`` built by hand, with the source hash capture would record: 1-D
    kernels on ``n`` fp32 elements (BLOCK 64), ``tiles`` on an ``n = (m, cols)`` matrix (32 x 256)."""
    from triton.runtime.jit import JITFunction

    from tritune.capture.spec import source_hash
    from tritune.imports import import_file
    from tritune.model.launch import ArgSpec, LaunchSpec

    (root / "sources").mkdir(exist_ok=True)
    (root / "sources" / "guarded.py").write_text(SOURCE)
    fn = getattr(import_file(root / "sources" / "guarded.py"), kernel)
    shape = list(n) if isinstance(n, tuple) else [n]
    stride = [shape[1], 1] if len(shape) == 2 else [1]
    tensors = [ArgSpec("x_ptr", "tensor", shape=shape, stride=stride, dtype="float32", device="cuda:0"),
               ArgSpec("out_ptr", "tensor", shape=shape, stride=stride, dtype="float32", device="cuda:0",
                       written=True)]
    if len(shape) == 2:
        scalars = {"m": shape[0], "n": shape[1], "stride": shape[1]}
        blocks, dims = {"BLOCK_M": 32, "BLOCK_N": 256}, [("m", "BLOCK_M"), ("n", "BLOCK_N")]
    else:
        scalars, blocks, dims = {"n": n}, {"BLOCK": 64}, [("n", "BLOCK")]
    args = [*tensors, *(ArgSpec(k, "scalar", value=v, type="int") for k, v in scalars.items()),
            *(ArgSpec(k, "constexpr") for k in blocks)]
    return LaunchSpec(kernel=kernel, kind="jit", module="guarded", source_file="", source="sources/guarded.py",
                      source_hash=source_hash(JITFunction(fn.fn).src), args=args, constexprs=blocks, options={},
                      grid=[-(-scalars[numel] // blocks[block]) for numel, block in dims],
                      grid_rule={"kind": "cdiv", "dims": [{"numel": k, "block": b} for k, b in dims]})


def variant_of(change: dict):
    from tritune.model.variant import Variant

    if "source" in change:
        old, new = change["source"]
        assert SOURCE.count(old) == 1, old
        return Variant(name="planted", source=SOURCE.replace(old, new))
    return Variant(constexprs=change.get("constexprs", {}), options=change.get("options", {}))


def write_control(root: Path) -> None:
    """``root/capture`` (the unmasked kernel launched at n=192, BLOCK 64) and ``root/control.db``,
    a store holding BLOCK 128 for it, planted without verification: a variant that writes 64
    elements past ``out``. compute-sanitizer must report it (``sanitize_store.py`` on this store
    must find errors), or its clean reports on real stores prove nothing."""
    from tritune.capture.spec import write_launches
    from tritune.model.variant import Variant
    from tritune.store import DecisionStore, current_target, key_for

    capture = root / "capture"
    capture.mkdir(parents=True, exist_ok=True)
    spec = spec_of(capture, "unmasked", 192)
    write_launches(capture, [spec])
    key, variant = key_for(spec, current_target()), Variant(name="planted overrun", constexprs={"BLOCK": 128})
    with DecisionStore(root / "control.db") as store:
        candidate = store.add_candidate(store.start_run({"planted": "sanitizer control"}), key, variant)
        store.finish_candidate(candidate.id, "verified", verification={"ok": True, "planted": True})
        store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0, evidence={"planted": "sanitizer control"})
    print(f"control: {capture} and {root / 'control.db'} (BLOCK 128 writes 64 elements past out_ptr)")


def outcome(result) -> str:
    return "ok" if result.ok else result.failure or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--control", type=Path, default=None, help="only write the sanitizer's control store here")
    parser.add_argument("--seeds", type=_positive, default=len(SEEDS), help="seeds per case (default: %(default)s)")
    args = parser.parse_args()
    if args.control:
        write_control(args.control)
        return 0
    import torch

    from tritune import config

    if not torch.cuda.is_available() and not config.interpreting():
        print("guard_gpu.py: no CUDA GPU here (TRITON_INTERPRET=1 runs the cases on the CPU)", file=sys.stderr)
        return 2
    from tritune.verify import verify

    rows, root = [], Path(tempfile.mkdtemp(prefix="guard-gpu-"))
    for name, (kernel, n, change, expected) in CASES.items():
        spec, variant = spec_of(root, kernel, n), variant_of(change)
        results = [verify(spec, variant, root, input_sets=1, seed=seed) for seed in range(args.seeds)]
        got = [outcome(r) for r in results]
        example = next((r.message for r in results if outcome(r) == expected), results[0].message)
        rows.append({"case": name, "kernel": kernel, "n": n, "expected": expected,
                     "as_expected": sum(g == expected for g in got), "runs": len(got), "outcomes": got,
                     "message": example})
        print(f"{name:48s} {rows[-1]['as_expected']:2d}/{len(got)} {expected:24s} {example[:110]}", flush=True)
    body = {"environment": environment(), "cases": rows}
    if args.json:
        args.json.write_text(json.dumps(body, indent=1))
    failed = [r["case"] for r in rows if r["as_expected"] != r["runs"]]
    print(f"{len(rows) - len(failed)}/{len(rows)} cases as expected on every seed" +
          (f"; NOT: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def _positive(text: str) -> int:
    """``--seeds``: at least 1 (none would report every case as expected on every one of no seeds)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


if __name__ == "__main__":
    sys.exit(main())
