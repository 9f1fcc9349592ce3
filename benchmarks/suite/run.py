"""Run every kernel of the suite once, as a user's program would (the program that
``tritune capture -- python benchmarks/suite/run.py`` and ``tritune optimize -- ...`` run):

    python benchmarks/suite/run.py                          # GPU sizes, on CUDA
    TRITON_INTERPRET=1 python benchmarks/suite/run.py --small --check   # CPU interpreter, tiny sizes
    python benchmarks/suite/run.py --only matmul,attention --check --repeat 3

Each kernel runs ``--repeat`` times (default once) on fresh inputs of its size; nothing is timed
beyond the wall seconds of each case. ``--check`` compares the first run's output with the torch
reference (computed in float64 before the kernel runs, so in-place kernels are checked too),
prints the table and exits 1 on any mismatch. A kernel that raises is reported and also exits 1.
Under ``--check`` every input tensor sits inside guard margins (``tritune.replay.guard``): a read
past a tensor gets NaN, whatever the allocator put there, and a write outside one is a mismatch.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
# Run as a script, sys.path[0] is this directory: drop it (its `kernels` must not shadow an
# installed package of that name) and import the suite as a package from the repository root.
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != HERE]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import triton  # noqa: E402

from benchmarks.suite import Case, by_name, compare  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny odd sizes (for TRITON_INTERPRET=1 on the CPU)")
    parser.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    parser.add_argument("--check", action="store_true", help="compare with the torch reference; exit 1 on mismatch")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each kernel (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    parser.add_argument("--list", action="store_true", help="list the kernels and exit")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")
    return args


def pick_device() -> str | None:
    """The CPU under TRITON_INTERPRET=1 (the interpreter's own device), else CUDA when there is one."""
    if triton.knobs.runtime.interpret:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


def run_case(case: Case, device: str, small: bool, check: bool, repeat: int, seed: int) -> tuple[str, str]:
    """(status, detail) of one case: status is "ran", "ok", "MISMATCH" or "ERROR"."""
    try:
        inputs = case.make_inputs(case.size(small), device, seed)
        guards = guard_inputs(inputs) if check else {}
        expected = case.reference(inputs) if check else None
        output = case.run(inputs)
        comparison = compare(output, expected, case.tolerance) if check else None
        outside = written_outside(inputs, guards)
        for _ in range(repeat - 1):
            case.run(inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - report the kernel and go on with the next
        first = (str(exc).strip().splitlines() or [""])[-1]
        return "ERROR", f"{type(exc).__name__}: {first}"[:200]
    if comparison is None:
        return "ran", ""
    if outside:
        return "MISMATCH", "wrote outside " + "; ".join(outside)
    if comparison.ok:
        return "ok", f"max|err| {comparison.max_abs_err:.2e} ({comparison.worst:.2f} of tolerance)"
    return "MISMATCH", comparison.message


def guard_inputs(inputs: dict) -> dict:
    """Replace every tensor of ``inputs`` by a copy inside guard margins; their guards by name.
    Each margin is the tensor's own size (at least 64 KiB, at most guard's cap): the suite knows no
    block sizes, and an overrun by a tile of rows (the planted matmul's BLOCK_K x N read of B) can
    reach that far. (tritune is imported here only: without --check the suite is a program like
    any other.)"""
    from tritune.replay.guard import Guard, guarded, margin_elements

    guards = {}
    for tag, (name, value) in enumerate((k, v) for k, v in inputs.items() if isinstance(v, torch.Tensor)):
        size = value.untyped_storage().nbytes() // value.element_size()
        margin = margin_elements(value.element_size(), size)
        inputs[name] = guarded(value, margin, tag)
        guards[name] = Guard(margin, size, tag)
    return guards


def written_outside(inputs: dict, guards: dict) -> list[str]:
    """One line per guarded input whose margins changed."""
    from tritune.replay.guard import breach

    return [found.describe() for name, g in guards.items() if (found := breach(name, inputs[name], g))]


def list_cases(cases: list[Case], small: bool) -> None:
    for case in cases:
        size = "x".join(map(str, case.size(small)))
        print(f"{case.name:20s} {case.category:12s} {case.dtype:28s} {size:22s} {case.block}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        cases = by_name([name.strip() for name in args.only.split(",") if name.strip()])
    except ValueError as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    if args.list:
        list_cases(cases, args.small)
        return 0
    device = pick_device()
    if device is None:
        print("run.py: no CUDA GPU here; set TRITON_INTERPRET=1 (and pass --small) to run the kernels on the CPU",
              file=sys.stderr)
        return 2
    if device == "cpu" and not args.small:
        print("run.py: the CPU interpreter needs --small (GPU sizes would take hours there)", file=sys.stderr)
        return 2
    failed = 0
    print(f"{len(cases)} kernels on {device} ({'small' if args.small else 'GPU'} sizes, repeat {args.repeat})")
    for case in cases:
        start = time.perf_counter()
        status, detail = run_case(case, device, args.small, args.check, args.repeat, args.seed)
        failed += status in ("MISMATCH", "ERROR")
        size = "x".join(map(str, case.size(args.small)))
        print(f"{case.name:20s} {case.dtype:28s} {size:22s} {status:8s} {time.perf_counter() - start:7.2f}s  {detail}",
              flush=True)
    print(f"{len(cases) - failed}/{len(cases)} kernels {'match their reference' if args.check else 'ran'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
