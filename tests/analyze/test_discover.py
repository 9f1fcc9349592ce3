"""tritune.analyze.discover: plain, autotuned, heuristics and Inductor kernels; import errors."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tritune import _inductor_shim
from tritune.analyze.discover import discover, discover_file, python_files

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PLAIN = '''
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))

def not_a_kernel():
    return 1
'''

WRAPPED = '''
import triton
import triton.language as tl
from plain import add_kernel  # a helper from another file: reported there, not here

@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=2, num_stages=2),
                          triton.Config({"BLOCK": 512}, num_warps=8)], key=["n"])
@triton.jit
def tuned_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)

@triton.heuristics({"EVEN": lambda args: args["BLOCK"] % 64 == 0})
@triton.jit
def heuristic_kernel(x_ptr, n, BLOCK: tl.constexpr = 128, EVEN: tl.constexpr = False):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)

bare = heuristic_kernel.fn  # the same JITFunction again: reported once, as the wrapper
'''


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_plain_kernel(tmp_path):
    kernels, error = discover_file(write(tmp_path, "plain.py", PLAIN))
    assert error is None
    assert [(k.name, k.kind, k.configs, k.signature) for k in kernels] == [("add_kernel", "jit", [], None)]
    assert kernels[0].fn.arg_names == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]


def test_wrappers_and_no_double_counting(tmp_path):
    write(tmp_path, "plain.py", PLAIN)
    kernels, error = discover_file(write(tmp_path, "wrapped.py", WRAPPED))
    assert error is None
    by_name = {k.name: k for k in kernels}
    assert sorted(by_name) == ["heuristic_kernel", "tuned_kernel"]  # add_kernel is plain.py's
    tuned = by_name["tuned_kernel"]
    assert tuned.kind == "autotune"
    assert [(c.kwargs, c.num_warps, c.num_stages) for c in tuned.configs] == [
        ({"BLOCK": 256}, 2, 2), ({"BLOCK": 512}, 8, 3)]
    heuristic = by_name["heuristic_kernel"]
    assert heuristic.kind == "heuristics"
    assert heuristic.heuristics["EVEN"]({"BLOCK": 128}) is True


def test_directory_reports_each_kernel_once_and_skips_pycache(tmp_path):
    write(tmp_path, "plain.py", PLAIN)
    write(tmp_path, "wrapped.py", WRAPPED)
    write(tmp_path, "__pycache__/stale.py", PLAIN)
    write(tmp_path, "sub/again.py", PLAIN.replace("add_kernel", "sub_kernel"))
    assert [p.relative_to(tmp_path).as_posix() for p in python_files(tmp_path)] == [
        "plain.py", "sub/again.py", "wrapped.py"]
    kernels, errors = discover(tmp_path)
    assert errors == []
    assert sorted(k.name for k in kernels) == ["add_kernel", "heuristic_kernel", "sub_kernel", "tuned_kernel"]


@pytest.mark.parametrize("source, expected", [
    ("import no_such_module_xyz\n", "ModuleNotFoundError: No module named 'no_such_module_xyz'"),
    ("def broken(:\n    pass\n", "SyntaxError: invalid syntax (line 1)"),
    ("raise SystemExit(3)\n",
     'calls sys.exit(3) on import: guard its top level with `if __name__ == "__main__":`'),
    ("raise RuntimeError('first line\\nsecond line')\n", "RuntimeError: first line"),
])
def test_import_errors_are_one_line_records(tmp_path, source, expected):
    kernels, error = discover_file(write(tmp_path, "bad.py", source))
    assert kernels == []
    assert error.error == expected
    assert "\n" not in error.error


def test_import_output_is_one_warning_on_stderr(tmp_path, capsys):
    noisy = write(tmp_path, "noisy.py", "print('hello from import')\nprint('twice')\n" + PLAIN)
    kernels, error = discover_file(noisy)
    assert error is None and [k.name for k in kernels] == ["add_kernel"]
    out, err = capsys.readouterr()
    assert out == ""  # stdout is the report's (--json)
    assert err == f"tritune: {noisy}: prints on import (2 lines); its top level ran once here\n"


def test_inductor_modules():
    kernels, errors = discover(EXAMPLES / "inductor")
    assert errors == []
    by_name = {k.name: k for k in kernels}
    assert sorted(by_name) == [
        "triton_per_fused__softmax_add_exp_gelu_prepare_softmax_online_sub_1",
        "triton_per_fused_native_layer_norm_0",
        "triton_poi_fused_add_gelu_mul_0",
        "triton_red_fused_native_layer_norm_0",
    ]
    red = by_name["triton_red_fused_native_layer_norm_0"]
    assert red.kind == "inductor"
    assert red.signature["in_ptr0"] == "*fp16"
    assert red.signature["R0_BLOCK"] == "constexpr"
    assert [(c.kwargs, c.num_warps) for c in red.configs] == [({"XBLOCK": 2, "R0_BLOCK": 2048}, 16)]
    assert red.attrs[(0,)] == [["tt.divisibility", 16]]
    poi = by_name["triton_poi_fused_add_gelu_mul_0"]
    assert [c.kwargs["XBLOCK"] for c in poi.configs] == [1024, 512]


def test_inductor_shim_targets_exist():
    """Fails if torch renames what _inductor_shim patches."""
    import torch
    from torch._inductor.runtime import triton_helpers

    assert callable(triton_helpers.set_driver_to_gpu)
    had_stream = hasattr(torch._C, "_cuda_getCurrentRawStream")
    original = triton_helpers.set_driver_to_gpu
    with _inductor_shim.inductor_without_gpu():
        triton_helpers.set_driver_to_gpu()  # no raise, GPU or not
        from torch._C import _cuda_getCurrentRawStream  # noqa: F401
    assert triton_helpers.set_driver_to_gpu is original
    assert hasattr(torch._C, "_cuda_getCurrentRawStream") == had_stream


def test_plain_files_do_not_import_torch(tmp_path):
    write(tmp_path, "plain.py", PLAIN)
    code = (
        "import sys\nfrom tritune.analyze.report import analyze_path\n"
        f"records = analyze_path({str(tmp_path)!r})\n"
        "assert records[0]['error'] is None, records\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
