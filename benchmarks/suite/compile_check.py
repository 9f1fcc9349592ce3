"""Compile suite kernels for sm_90 on a machine without a GPU, with the arguments their own
wrappers pass, and print registers and spills:

    python benchmarks/suite/compile_check.py                 # GPU sizes (inputs are built on the CPU)
    python benchmarks/suite/compile_check.py --small --only gemv,dropout

Each case's wrapper runs once with its kernel replaced by a recorder, so the launch's arguments
(pointer dtypes, integers, block sizes the wrapper derives from the shapes) are what the user's
program passes; the kernel itself never runs. Run it without TRITON_INTERPRET (it needs the
kernels as ``triton.jit`` functions, not interpreted ones), with tritune's ``src`` on PYTHONPATH
(its ptxas log parser counts registers and spills).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import pathlib
import pkgutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if pathlib.Path(p or ".").resolve() != HERE]  # see run.py
if str(HERE.parent.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent.parent))

import torch  # noqa: E402
import triton  # noqa: E402

from benchmarks.suite import Case, by_name  # noqa: E402

TORCH_TO_TRITON = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
                   torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
                   torch.bool: "i1", torch.float8_e4m3fn: "fp8e4nv", torch.float8_e5m2: "fp8e5"}


@dataclasses.dataclass(frozen=True)
class Launch:
    kernel: triton.runtime.JITFunction
    grid: tuple
    arguments: dict          # parameter name -> value, as the wrapper passed them


def kernel_module(case: Case):
    """The module under benchmarks/suite/kernels that defines ``case.kernel``."""
    import benchmarks.suite.kernels as package

    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if hasattr(module, case.kernel):
            return module
    raise LookupError(f"no kernel module defines {case.kernel}")


class _Recorder:
    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


def record_launch(case: Case, size: tuple[int, ...], seed: int = 0) -> Launch:
    """The one launch ``case.run`` makes at ``size``, recorded instead of run (inputs on the CPU)."""
    module = kernel_module(case)
    kernel = getattr(module, case.kernel)
    recorder = _Recorder()
    setattr(module, case.kernel, recorder)
    try:
        case.run(case.make_inputs(size, "cpu", seed))
    finally:
        setattr(module, case.kernel, kernel)
    if len(recorder.launches) != 1:
        raise RuntimeError(f"{case.name}: expected one launch of {case.kernel}, got {len(recorder.launches)}")
    grid, args, kwargs = recorder.launches[0]
    arguments = dict(inspect.signature(kernel.fn).bind(*args, **kwargs).arguments)
    return Launch(kernel, tuple(grid(arguments) if callable(grid) else grid), arguments)


def _type_of(name: str, value) -> str:
    if isinstance(value, torch.Tensor):
        return "*" + TORCH_TO_TRITON[value.dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -2 ** 31 <= value < 2 ** 31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"argument {name}: no Triton type for {type(value).__name__}")


def compile_sm90(launch: Launch):
    """``triton.compile`` of the recorded launch for sm_90 (no GPU needed)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    constexpr_names = {p.name for p in launch.kernel.params if p.is_constexpr}
    signature, constexprs = {}, {}
    for name, value in launch.arguments.items():
        if name in constexpr_names:
            signature[name], constexprs[name] = "constexpr", value
        else:
            signature[name] = _type_of(name, value)
    source = ASTSource(launch.kernel, signature=signature, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="the small sizes (default: GPU sizes)")
    parser.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    args = parser.parse_args(argv)
    if triton.knobs.runtime.interpret:
        print("compile_check.py: unset TRITON_INTERPRET (it compiles, it does not run)", file=sys.stderr)
        return 2
    try:
        cases = by_name([name.strip() for name in args.only.split(",") if name.strip()])
    except ValueError as exc:
        print(f"compile_check.py: {exc}", file=sys.stderr)
        return 2
    from tritune.analyze.resources import measure

    failed = 0
    for case in cases:
        try:
            launch = record_launch(case, case.size(args.small))
            compiled = compile_sm90(launch)
            used = measure(compiled.asm["ptx"], 90)  # registers and spills as ptxas -v reports them
        except Exception as exc:  # noqa: BLE001 - report the kernel and go on with the next
            failed += 1
            print(f"{case.kernel:32s} ERROR {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[-1]}")
            continue
        print(f"{case.kernel:32s} registers {used.registers:4d}  spill bytes {used.spill_bytes:5d}  grid {launch.grid}",
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
