"""tritune.analyze.launch: which signature and constexprs a kernel is compiled with, and why."""

import textwrap

import pytest

from tritune.analyze.discover import Config, discover_file
from tritune.analyze.launch import LaunchError, infer_launch, parse_assignment, parse_value

SOURCE = '''
import triton
import triton.language as tl

@triton.jit
def k(x_ptr, in_ptr0, out_ptr1, n, stride, scale, BLOCK_M: tl.constexpr, ALPHA: tl.constexpr = 2.5):
    tl.store(x_ptr + tl.arange(0, BLOCK_M), tl.load(in_ptr0 + tl.arange(0, BLOCK_M)) * ALPHA)

@triton.jit
def needs_mode(x_ptr, MODE: tl.constexpr):
    tl.store(x_ptr, MODE)

@triton.heuristics({"BLOCK": lambda args: 64 if args["WIDE"] else 32})
@triton.jit
def heuristic(x_ptr, WIDE: tl.constexpr = True, BLOCK: tl.constexpr = 16):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    path = tmp_path_factory.mktemp("launch") / "kernels.py"
    path.write_text(textwrap.dedent(SOURCE))
    found, error = discover_file(path)
    assert error is None
    return {kernel.name: kernel for kernel in found}


def test_inferred_defaults(kernels):
    launch = infer_launch(kernels["k"])
    assert launch.signature == {
        "x_ptr": "*fp32", "in_ptr0": "*fp32", "out_ptr1": "*fp32", "n": "i32", "stride": "i32",
        "scale": "i32", "BLOCK_M": "constexpr", "ALPHA": "constexpr"}
    assert launch.constexprs == {"BLOCK_M": 128, "ALPHA": 2.5}
    assert launch.sources == {"BLOCK_M": "fallback", "ALPHA": "default"}
    assert launch.inferred == ["BLOCK_M", "ALPHA"]
    assert (launch.num_warps, launch.num_stages) == (4, 3)
    # pointers assumed 16-byte aligned, integers not
    assert launch.attrs == {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                            (2,): [["tt.divisibility", 16]]}


def test_given_values_win(kernels):
    launch = infer_launch(kernels["k"], constexprs={"BLOCK_M": 64, "n": 1, "UNRELATED": 3},
                          signature={"x_ptr": "*fp16", "scale": "fp32"}, num_warps=8)
    assert launch.constexprs == {"BLOCK_M": 64, "ALPHA": 2.5, "n": 1}  # n specialized like the JIT's ==1
    assert launch.signature["n"] == "constexpr"
    assert (launch.signature["x_ptr"], launch.signature["scale"]) == ("*fp16", "fp32")
    assert launch.sources["BLOCK_M"] == "given"
    assert launch.inferred == ["ALPHA"]
    assert launch.num_warps == 8


def test_config_and_inductor_constants(kernels):
    kernel = kernels["k"]
    kernel_cfg = type(kernel)(**{**vars(kernel), "configs": [Config({"BLOCK_M": 256}, 2, 1)],
                                 "constants": {"ALPHA": 1.0},
                                 "signature": {"x_ptr": "*bf16", "BLOCK_M": "constexpr"}})
    launch = infer_launch(kernel_cfg)
    assert launch.constexprs == {"BLOCK_M": 256, "ALPHA": 1.0}
    assert launch.sources == {"BLOCK_M": "config", "ALPHA": "inductor"}
    assert (launch.num_warps, launch.num_stages) == (2, 1)
    assert launch.signature["x_ptr"] == "*bf16"


def test_heuristics_see_known_values(kernels):
    launch = infer_launch(kernels["heuristic"])
    assert launch.constexprs == {"WIDE": True, "BLOCK": 64}
    assert launch.sources == {"WIDE": "default", "BLOCK": "heuristic"}
    narrow = infer_launch(kernels["heuristic"], constexprs={"WIDE": False})
    assert narrow.constexprs["BLOCK"] == 32


def test_uninferable_constexpr_names_the_flag(kernels):
    with pytest.raises(LaunchError, match=r"cannot infer constexpr 'MODE' of needs_mode: pass --constexpr MODE=VALUE"):
        infer_launch(kernels["needs_mode"])
    assert infer_launch(kernels["needs_mode"], constexprs={"MODE": 3}).constexprs == {"MODE": 3}


@pytest.mark.parametrize("text, value", [
    ("128", 128), ("0x40", 64), ("-3", -3), ("2.5", 2.5), ("1e-5", 1e-5), ("true", True), ("False", False)])
def test_parse_value(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("text", ["abc", "1.2.3", ""])
def test_parse_value_rejects(text):
    with pytest.raises(ValueError, match="is not an int, a float or true/false"):
        parse_value(text)


@pytest.mark.parametrize("text", ["BLOCK", "=3", "BLOCK=", "1X=2", "A B=1"])
def test_parse_assignment_rejects(text):
    with pytest.raises(ValueError, match="expected NAME=VALUE"):
        parse_assignment(text)


def test_parse_assignment():
    assert parse_assignment(" x_ptr = *fp16 ") == ("x_ptr", "*fp16")
