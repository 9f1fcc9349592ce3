"""broadcast-sum-to-dot (``rewrites/broadcast_sum_to_dot.py``): broadcast-reduce kernels become
``tl.dot``, byte-exact outside the rewritten sum, compile for sm_90 and match the original under
the interpreter within the tolerance table; the cases that must not fire say why."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys

import pytest
import torch

from tritune.rewrites import FAST_MATH, RULES, TOLERANCE, KernelSource, NotRewritable
from tritune.rewrites.base import TF32
from tritune.verify import tolerance_for

RULE = RULES["broadcast-sum-to-dot"]

KERNELS = '''\
import triton
import triton.language as tl


@triton.jit
def matmul(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    c = tl.sum(a[:, :, None] * b[None, :, :], axis=1)  # [M, K, N] in registers
    tl.store(c_ptr + m[:, None] * N + n[None, :], c)


@triton.jit
def matmul_nt(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + n[:, None] * K + k[None, :])  # b is [N, K]
    tl.store(c_ptr + m[:, None] * N + n[None, :], tl.sum(a[:, None, :] * b[None, :, :], axis=-1))


@triton.jit
def matmul_commuted(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    c = tl.sum(b[None, :, :] * a[:, :, None], 1)
    tl.store(c_ptr + m[:, None] * N + n[None, :], c)


@triton.jit
def bmm(a_ptr, b_ptr, c_ptr, B: tl.constexpr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    i = tl.arange(0, B)[:, None, None]
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + i * M * K + m[None, :, None] * K + k[None, None, :])
    b = tl.load(b_ptr + i * N * K + n[None, :, None] * K + k[None, None, :])  # [B, N, K]
    c = tl.sum(a[:, :, None, :] * b[:, None, :, :], axis=3)
    tl.store(c_ptr + i * M * N + m[None, :, None] * N + n[None, None, :], c)


@triton.jit
def gemv(x_ptr, w_ptr, y_ptr, N: tl.constexpr, K: tl.constexpr):
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    x = tl.load(x_ptr + k)
    w = tl.load(w_ptr + n[:, None] * K + k[None, :])
    tl.store(y_ptr + n, tl.sum(x[None, :] * w, axis=1))


@triton.jit
def vecmat(x_ptr, w_ptr, y_ptr, N: tl.constexpr, K: tl.constexpr):
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    x = tl.load(x_ptr + k)
    w = tl.load(w_ptr + k[:, None] * N + n[None, :])  # w is [K, N]
    tl.store(y_ptr + n, tl.sum(w * x[:, None], axis=0))


@triton.jit
def batched_matvec(x_ptr, w_ptr, y_ptr, B: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    i = tl.arange(0, B)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    x = tl.load(x_ptr + i[:, None] * K + k[None, :])
    w = tl.load(w_ptr + i[:, None, None] * N * K + n[None, :, None] * K + k[None, None, :])
    y = tl.sum(x[:, None, :] * w, axis=2)
    tl.store(y_ptr + i[:, None] * N + n[None, :], y)


@triton.jit
def looped(a_ptr, b_ptr, c_ptr, KT, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    m = tl.arange(0, BM)
    n = tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, KT, BK):
        k = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + m[:, None] * KT + k[None, :])
        b = tl.load(b_ptr + n[:, None] * KT + k[None, :])
        acc += tl.sum(a[:, None, :] * b[None, :, :], axis=2)
    tl.store(c_ptr + m[:, None] * BN + n[None, :], acc)


@triton.jit
def gemv_masked(x_ptr, w_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # as GEMV kernels are commonly written: a program per row block, a loop over K, masked edges
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0)
        w = tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0.0)
        acc += tl.sum(w * x[None, :], axis=1)
    tl.store(y_ptr + offs_n, acc, mask=offs_n < N)
'''

# kernel -> (the text the rule replaces, what the replacement must contain, constexprs,
#            pointer shapes by parameter, the output parameter)
CASES = {
    "matmul": ("tl.sum(a[:, :, None] * b[None, :, :], axis=1)", 'tl.dot(a, b, input_precision="ieee")',
               {"M": 16, "N": 32, "K": 16}, {"a_ptr": (16, 16), "b_ptr": (16, 32), "c_ptr": (16, 32)}, "c_ptr"),
    "matmul_nt": ("tl.sum(a[:, None, :] * b[None, :, :], axis=-1)", 'tl.dot(a, tl.trans(b), input_precision="ieee")',
                  {"M": 32, "N": 16, "K": 16}, {"a_ptr": (32, 16), "b_ptr": (16, 16), "c_ptr": (32, 16)}, "c_ptr"),
    "matmul_commuted": ("tl.sum(b[None, :, :] * a[:, :, None], 1)", 'tl.dot(a, b, input_precision="ieee")',
                        {"M": 16, "N": 16, "K": 32}, {"a_ptr": (16, 32), "b_ptr": (32, 16), "c_ptr": (16, 16)},
                        "c_ptr"),
    "bmm": ("tl.sum(a[:, :, None, :] * b[:, None, :, :], axis=3)",
            'tl.dot(a, tl.permute(b, (0, 2, 1)), input_precision="ieee")', {"B": 2, "M": 16, "N": 16, "K": 16},
            {"a_ptr": (2, 16, 16), "b_ptr": (2, 16, 16), "c_ptr": (2, 16, 16)}, "c_ptr"),
    "gemv": ("tl.sum(x[None, :] * w, axis=1)",
             "tl.sum(tl.where(tl.arange(0, 16)[None, :] == 0, tl.dot(w, tl.where(tl.arange(0, 16)[None, :] == 0, "
             'x[:, None], 0), input_precision="ieee"), 0.0), axis=1)',
             {"N": 32, "K": 64}, {"x_ptr": (64,), "w_ptr": (32, 64), "y_ptr": (32,)}, "y_ptr"),
    "vecmat": ("tl.sum(w * x[:, None], axis=0)",
               "tl.sum(tl.where(tl.arange(0, 16)[:, None] == 0, tl.dot(tl.where(tl.arange(0, 16)[:, None] == 0, "
               'x[None, :], 0), w, input_precision="ieee"), 0.0), axis=0)',
               {"N": 16, "K": 32}, {"x_ptr": (32,), "w_ptr": (32, 16), "y_ptr": (16,)}, "y_ptr"),
    "batched_matvec": ("tl.sum(x[:, None, :] * w, axis=2)",
                       "tl.sum(tl.where(tl.arange(0, 16)[None, None, :] == 0, tl.dot(w, tl.where(tl.arange(0, 16)"
                       '[None, None, :] == 0, x[:, :, None], 0), input_precision="ieee"), 0.0), axis=2)',
                       {"B": 4, "N": 16, "K": 32}, {"x_ptr": (4, 32), "w_ptr": (4, 16, 32), "y_ptr": (4, 16)},
                       "y_ptr"),
    "looped": ("acc += tl.sum(a[:, None, :] * b[None, :, :], axis=2)",
               'acc = tl.dot(a, tl.trans(b), acc, input_precision="ieee")', {"BM": 16, "BN": 16, "BK": 16},
               {"a_ptr": (16, 64), "b_ptr": (16, 64), "c_ptr": (16, 16)}, "c_ptr"),
    "gemv_masked": ("tl.sum(w * x[None, :], axis=1)",
                    "tl.sum(tl.where(tl.arange(0, 16)[None, :] == 0, tl.dot(w, tl.where(tl.arange(0, 16)[None, :] "
                    '== 0, x[:, None], 0), input_precision="ieee"), 0.0), axis=1)',
                    {"BLOCK_N": 32, "BLOCK_K": 16}, {"x_ptr": (40,), "w_ptr": (24, 40), "y_ptr": (24,)}, "y_ptr"),
}
SCALARS = {"looped": {"KT": 64}, "gemv_masked": {"N": 24, "K": 40, "stride_wn": 40}}
TRITON_TYPES = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16", "int8": "*i8"}


def launch(constexprs: dict, dtype: str = "float32", pointers=("a_ptr", "b_ptr", "x_ptr", "w_ptr")) -> dict:
    return {"constexprs": constexprs, "dtypes": {p: dtype for p in pointers}}


def rewritten(text: str, kernel: str, facts: dict | None, **params):
    source = KernelSource.parse(text, kernel, launch=facts)
    return RULE.apply(source, params) if params else RULE.rewrites(source)[0]


_counter = itertools.count()


def load(tmp_path, text: str):
    """The kernels of ``text`` as a module of JITFunctions, to compile."""
    name = f"bsd_kernels_{next(_counter)}"
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compile_sm90(module, kernel: str, constexprs: dict, dtype: str | dict, scalars: dict):
    """``dtype``: of every pointer, or {pointer: dtype} (float32 for the others)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(module, kernel)
    dtypes = dtype if isinstance(dtype, dict) else {p: dtype for p in fn.arg_names}
    signature = {p: "constexpr" if p in constexprs else "i32" if p in scalars
                 else TRITON_TYPES[dtypes.get(p, "float32")] for p in fn.arg_names}
    return triton.compile(ASTSource(fn, signature=signature, constexprs=constexprs), target=GPUTarget("cuda", 90, 32))


# tl.sum is itself a jit function, interpreted only when TRITON_INTERPRET=1 was set before triton
# was imported (tests/capture/test_capture_launch.py): every interpreted run happens in one fresh process
RUNNER = """
import importlib.util, json, sys, torch
jobs = json.load(open(sys.argv[1]))
results = {}
for key, job in jobs.items():
    spec = importlib.util.spec_from_file_location(key, job["path"])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generator = torch.Generator().manual_seed(12)
    dtype = getattr(torch, job["dtype"])
    if job["inputs"] == "integers":  # small integers: every product and partial sum exact in fp16
        args = {p: torch.randint(-4, 5, shape, generator=generator).to(dtype) for p, shape in job["shapes"].items()}
    else:
        args = {p: torch.randn(shape, generator=generator).to(dtype) for p, shape in job["shapes"].items()}
    if job["inputs"] == "inf":  # every product with the inf is +inf: positive x, one inf in row 3 of w
        args["x_ptr"].abs_().add_(0.5)
        args["w_ptr"][3, 5] = float("inf")
    getattr(module, job["kernel"])[(1,)](**args, **job["scalars"], **job["constexprs"])
    results[key] = args
torch.save(results, sys.argv[2])
"""


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """Arguments after the run under TRITON_INTERPRET=1, by kernel, dtype, "before" or "after" the
    rewrite, and inputs ("randn", "integers", "inf": randn with an inf planted)."""
    root = tmp_path_factory.mktemp("interpreted")
    original = root / "original.py"
    original.write_text(KERNELS)
    # bf16 is left out: Triton 3.6's interpreter read garbage here for bf16 tensors (NaN, 1e30)
    runs = [(kernel, "float32", "randn") for kernel in CASES]
    runs += [("gemv", "float32", "inf"), ("matmul", "float16", "randn"), ("matmul", "float16", "integers")]
    jobs = {}
    for i, (kernel, dtype, inputs) in enumerate(runs):
        _, _, constexprs, shapes, out = CASES[kernel]
        after = root / f"rewritten_{i}.py"
        after.write_text(rewritten(KERNELS, kernel, launch(constexprs, dtype)).source)
        for when, path in (("before", original), ("after", after)):
            jobs[f"{kernel}-{dtype}-{when}-{inputs}"] = {
                "path": str(path), "kernel": kernel, "shapes": shapes, "constexprs": constexprs, "dtype": dtype,
                "scalars": SCALARS.get(kernel, {}), "inputs": inputs}
    (root / "jobs.json").write_text(json.dumps(jobs))
    done = subprocess.run([sys.executable, "-c", RUNNER, str(root / "jobs.json"), str(root / "out.pt")],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = torch.load(root / "out.pt")
    return lambda kernel, dtype, when, inputs="randn": results[f"{kernel}-{dtype}-{when}-{inputs}"]


def assert_byte_exact(text: str, new: str, old_span: str, replacement: str):
    before, after = text.split(old_span)  # the rewritten text occurs once in the file
    assert new == before + replacement + after


# ----------------------------------------------------------------------------- rewrites

@pytest.mark.parametrize("kernel", list(CASES))
def test_rewrite_is_a_dot_byte_exact_outside_the_sum_and_compiles_for_sm90(kernel, tmp_path):
    old, new, constexprs, _, _ = CASES[kernel]
    rw = rewritten(KERNELS, kernel, launch(constexprs))
    assert (rw.rule, rw.exact, rw.params["precision"]) == ("broadcast-sum-to-dot", TOLERANCE, "ieee")
    assert_byte_exact(KERNELS, rw.source, old, new)
    module = load(tmp_path, rw.source)
    ttir = compile_sm90(module, kernel, constexprs, "float32", SCALARS.get(kernel, {})).asm["ttir"]
    dots = [line for line in ttir.splitlines() if "tt.dot" in line]
    assert dots and not any("inputPrecision" in line for line in dots)  # ieee: the default, not printed


@pytest.mark.parametrize("kernel", list(CASES))
def test_rewrite_matches_the_original_under_the_interpreter(kernel, interpreted):
    out = CASES[kernel][4]
    before, after = interpreted(kernel, "float32", "before")[out], interpreted(kernel, "float32", "after")[out]
    tol = tolerance_for("float32")
    assert before.abs().max() > 1  # a real result, not zeros on both sides
    torch.testing.assert_close(after, before, rtol=tol.rtol, atol=tol.atol)


def test_gemv_padding_columns_are_masked_so_an_inf_stays_inf(interpreted):
    # W @ 0 is NaN in a row that holds an inf: the rewrite masks the padding columns before it
    # sums them away; without the mask row 3 would read NaN where the original has +inf
    for when in ("before", "after"):
        y = interpreted("gemv", "float32", when, "inf")["y_ptr"]
        assert y[3] == float("inf") and torch.isfinite(y[torch.arange(32) != 3]).all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_factors_accumulate_in_fp32_and_cast_back(dtype, tmp_path):
    constexprs = CASES["matmul"][2]
    rws = RULE.rewrites(KernelSource.parse(KERNELS, "matmul", launch=launch(constexprs, dtype)))
    assert [r.params["precision"] for r in rws] == ["ieee"]  # no tf32 variants: they only change fp32 factors
    assert_byte_exact(KERNELS, rws[0].source, CASES["matmul"][0],
                      f'tl.dot(a, b, input_precision="ieee").to(tl.{dtype})')
    ttir = compile_sm90(load(tmp_path, rws[0].source), "matmul", constexprs, dtype, {}).asm["ttir"]
    assert "tt.dot" in ttir
    # a GEMV's padded operand keeps the vector's dtype (tl.dot wants both alike), the sum is cast back
    old, new, constexprs, _, _ = CASES["gemv_masked"]
    rw = rewritten(KERNELS, "gemv_masked", launch(constexprs, dtype))
    assert_byte_exact(KERNELS, rw.source, old, f"{new}.to(tl.{dtype})")
    module = load(tmp_path, rw.source)
    assert "tt.dot" in compile_sm90(module, "gemv_masked", constexprs, dtype, SCALARS["gemv_masked"]).asm["ttir"]


def test_fp16_result_keeps_its_dtype_and_is_at_least_as_accurate(interpreted):
    # exact inputs: the same fp16 result; random ones: fp32 accumulation is closer to float64
    # than the original's fp16 sums (it may differ from them by more than the fp16 entry allows:
    # the gate then rejects it, which is safe)
    exact = [interpreted("matmul", "float16", when, "integers") for when in ("before", "after")]
    assert exact[1]["c_ptr"].dtype == torch.float16 and torch.equal(exact[0]["c_ptr"], exact[1]["c_ptr"])
    before, after = (interpreted("matmul", "float16", when) for when in ("before", "after"))
    reference = before["a_ptr"].double() @ before["b_ptr"].double()
    errors = [(run["c_ptr"].double() - reference).abs().max() for run in (before, after)]
    assert errors[1] <= errors[0] / 2
    tol = tolerance_for("float16")
    torch.testing.assert_close(after["c_ptr"].double(), reference, rtol=tol.rtol, atol=tol.atol)


def test_a_16_bit_sum_added_to_an_fp32_accumulator_keeps_its_rounding():
    # acc += <fp16 sum> rounds the sum to fp16 before the add: not fused into tl.dot's acc
    rw = rewritten(KERNELS, "looped", launch(CASES["looped"][2], "float16"))
    assert_byte_exact(KERNELS, rw.source, "tl.sum(a[:, None, :] * b[None, :, :], axis=2)",
                      'tl.dot(a, tl.trans(b), input_precision="ieee").to(tl.float16)')


def test_mixed_factors_are_cast_to_fp32_as_the_product_promotes(tmp_path):
    constexprs = CASES["matmul"][2]
    facts = {"constexprs": constexprs, "dtypes": {"a_ptr": "float16", "b_ptr": "float32"}}
    rw = rewritten(KERNELS, "matmul", facts)
    assert_byte_exact(KERNELS, rw.source, CASES["matmul"][0], 'tl.dot(a.to(tl.float32), b, input_precision="ieee")')
    module = load(tmp_path, rw.source)
    assert "tt.dot" in compile_sm90(module, "matmul", constexprs, {"a_ptr": "float16"}, {}).asm["ttir"]


def test_a_sum_asked_for_fp32_is_not_cast_back():
    text = KERNELS.replace(CASES["matmul"][0], "tl.sum(a[:, :, None] * b[None, :, :], axis=1, dtype=tl.float32)")
    rw = rewritten(text, "matmul", launch(CASES["matmul"][2], "float16"))
    assert 'c = tl.dot(a, b, input_precision="ieee")  #' in rw.source


def test_the_files_own_name_for_triton_language_is_used():
    text = KERNELS.replace("import triton.language as tl", "import triton.language as lang").replace("tl.", "lang.")
    rw = rewritten(text, "gemv", launch(CASES["gemv"][2]))
    assert "lang.dot(w, lang.where(lang.arange(0, 16)[None, :] == 0, x[:, None], 0)" in rw.source
    assert "tl." not in rw.source


def test_fp32_offers_tf32_variants_as_fast_math(tmp_path):
    rws = RULE.rewrites(KernelSource.parse(KERNELS, "matmul", launch=launch(CASES["matmul"][2])))
    assert [(r.params["precision"], r.exact) for r in rws] == [("ieee", TOLERANCE), ("tf32x3", FAST_MATH),
                                                               ("tf32", TF32)]
    assert 'tl.dot(a, b, input_precision="tf32")' in rws[2].source and "fast-math" in rws[2].why
    module = load(tmp_path, rws[1].source)
    assert "inputPrecision = tf32x3" in compile_sm90(module, "matmul", CASES["matmul"][2], "float32", {}).asm["ttir"]


def test_without_a_launch_the_shape_condition_is_stated():
    rw = RULE.rewrites(KernelSource.parse(KERNELS, "matmul"))[0]
    assert "if M >= 16, N >= 16, K >= 16" in rw.why and "dtype not known" in rw.why
    assert 'tl.dot(a, b, input_precision="ieee")' in rw.source


def test_apply_checks_its_parameters():
    source = KernelSource.parse(KERNELS, "gemv", launch=launch(CASES["gemv"][2]))
    assert RULE.apply(source, {"precision": "tf32x3", "sites": [0]}).exact == FAST_MATH
    with pytest.raises(NotRewritable, match="precision 'fp8'"):
        RULE.apply(source, {"precision": "fp8"})
    with pytest.raises(NotRewritable, match="no such tl.sum"):
        RULE.apply(source, {"sites": [3]})
    with pytest.raises(NotRewritable, match="no parameter 'block'"):
        RULE.apply(source, {"block": 16})


# ------------------------------------------------------------------------- must not fire

REFUSED = '''\
import triton
import triton.language as tl


@triton.jit
def helper(x):
    return x * 2


@triton.jit
def refused(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, AXIS: tl.constexpr):
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    a2 = tl.load(b_ptr + m[:, None] * K + k[None, :])
    a3 = tl.load(a_ptr + m[:, None, None] * K + k[None, :, None] + n[None, None, :])
    row = tl.load(a_ptr + k[None, :])  # [1, K]
    c = SUM
    tl.store(c_ptr + m[:, None] * N + n[None, :], c)
'''
SIZES = {"M": 16, "N": 16, "K": 16, "AXIS": 1}
MATMUL = "tl.sum(a[:, :, None] * b[None, :, :], axis=1)"


@pytest.mark.parametrize("sum_, facts, reason", [
    ("tl.sum(a[:, :, None] * b[None, :, :], axis=0)", launch(SIZES), "axis 0 is not an axis of both factors"),
    ("tl.sum(a[:, :, None] * b[None, :, :], axis=2)", launch(SIZES), "axis 2 is not an axis of both factors"),
    ("tl.sum(a * a2, axis=1)", launch(SIZES), "not a matrix or matrix-vector product"),  # not a broadcast
    ("tl.sum(a3[:, :, :, None] * b[None, None, :, :], axis=2)", launch(SIZES),  # a 3-D factor
     "not a matrix or matrix-vector product"),
    ("tl.sum(a[:, :, None] * b[None, :, :, :], axis=1)", launch(SIZES), "rank 2, its subscript 3 axes"),
    ("tl.sum(a[:, :, None] * b[None, :, :, None], axis=1)", launch(SIZES), "an axis of neither factor"),
    (MATMUL, launch({**SIZES, "M": 8}), "M = 8 < 16"),
    (MATMUL, launch({**SIZES, "K": 8}), "K = 8 < 16"),
    (MATMUL, launch(SIZES, "int8"), "integer factors"),
    (MATMUL, launch(SIZES, "float64"), "float64 factors"),
    ("tl.sum(a[:, :, None] * b[None, :, :], axis=1, keep_dims=True)", launch(SIZES), "keep_dims"),
    ("tl.sum(a[:, :, None] * b[None, :, :], axis=AXIS)", launch(SIZES), "not a literal int"),
    ("tl.sum(helper(a)[:, :, None] * b[None, :, :], axis=1)", launch(SIZES), "shape is not known"),
    ("tl.sum(a[:, :, None] * b[None, :, :] * 2.0, axis=1)", launch(SIZES), "not an axis of both factors"),
    ("tl.sum(a[:, :, None] + b[None, :, :], axis=1)", launch(SIZES), "not a product"),
    ("tl.sum(row * a2, axis=1)", launch(SIZES), "axis 0 has sizes 1 and 16: a broadcast"),  # [1, K] * [M, K]
    ("tl.max(a[:, :, None] * b[None, :, :], axis=1)", launch(SIZES), "no tl.sum"),
])
def test_must_not_fire(sum_, facts, reason):
    text = REFUSED.replace("SUM", sum_)
    with pytest.raises(NotRewritable, match=reason) as refused:
        RULE.rewrites(KernelSource.parse(text, "refused", launch=facts))
    assert "\n" not in str(refused.value)
    # the same kernel with the plain matmul sum is rewritten: the refusal is the case's doing
    assert "tl.dot(a, b" in RULE.rewrites(KernelSource.parse(REFUSED.replace("SUM", MATMUL), "refused",
                                                            launch=launch(SIZES)))[0].source


def test_a_product_bound_to_a_name_first_is_not_followed():
    text = REFUSED.replace("c = SUM", "p = a[:, :, None] * b[None, :, :]\n    c = tl.sum(p, axis=1)")
    with pytest.raises(NotRewritable, match="not a product written in the call"):
        RULE.rewrites(KernelSource.parse(text, "refused", launch=launch(SIZES)))


def test_branches_that_disagree_on_a_shape_leave_it_unknown():
    text = REFUSED.replace("c = SUM", "if M > 16:\n        a = a2\n    else:\n        a = a3\n"
                                      f"    c = {MATMUL}")
    with pytest.raises(NotRewritable, match="left factor's shape is not known"):
        RULE.rewrites(KernelSource.parse(text, "refused", launch=launch(SIZES)))


def test_each_sum_is_judged_alone_and_a_refused_one_cannot_be_asked_for():
    text = REFUSED.replace("c = SUM", "d = tl.sum(a[:, :, None] * b[None, :, :], axis=0)\n"
                                      f"    c = {MATMUL} + tl.sum(d[None, :, :], axis=1)")
    source = KernelSource.parse(text, "refused", launch=launch(SIZES))
    rw = RULE.rewrites(source)[0]
    assert rw.params["sites"] == [1] and rw.source.count("tl.dot(") == 1 and rw.source.count("tl.sum(") == 2
    with pytest.raises(NotRewritable, match=r"tl.sum #0: line 20: axis 0 is not an axis of both factors"):
        RULE.apply(source, {"sites": [0]})
