"""The suite's LLM training and inference kernels (issue 12): they are in ``SUITE`` (so
test_suite_kernels' ``run.py --small --check`` compares every one with its float64 reference),
the check catches a planted bug in each kernel below, the dropout reference draws a real mask,
and the constructs the interpreter cannot vouch for compile for sm_90."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from test_suite_kernels import PLANT_SCRIPT, _python  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.suite import SUITE, by_name  # noqa: E402
from benchmarks.suite.cases_train import philox_uniform  # noqa: E402
from benchmarks.suite.compile_check import compile_sm90, record_launch  # noqa: E402

TRAIN = ["rope", "rms_norm_bwd", "layer_norm_bwd", "swiglu_bwd", "cross_entropy_fwd_bwd", "dropout", "embedding_bwd",
         "clip_grad_scale", "linear_recurrence", "chunk_local_cumsum"]
INFER = ["rope_heads_loop", "fused_add_rms_norm", "rms_norm_persistent", "silu_and_mul", "bias_gelu", "softcap",
         "reshape_and_cache", "destindex_copy_kv", "paged_decode_attention", "decode_attention", "temperature_softmax",
         "argmax_sample", "quantize_int8_group", "dequantize_fp8_block", "gemv", "gemv_w8a16", "batched_vecmat"]


def test_the_new_kernels_are_in_the_suite_after_the_first_30():
    names = [case.name for case in SUITE]
    assert names[30:] == TRAIN + INFER and len(TRAIN + INFER) >= 20
    assert len({case.kernel for case in SUITE}) == len(SUITE)


PLANTS = {
    # name: (kernel file, original text, planted text); each bug one that only a reference can see
    "dropout": ("training.py", "random = tl.rand(seed, offsets)", "random = tl.rand(seed + 1, offsets)"),
    "cross_entropy_fwd_bwd": ("logits.py", "tl.exp(X_block - m) / d / n_non_ignore", "tl.exp(X_block - m) / d"),
    # rows share the GROUP_SIZE_M partial rows at the small size: without the accumulation some are lost
    "layer_norm_bwd": ("norm_bwd.py", "        partial_dw += tl.load(DW, mask=mask)\n", ""),
    "embedding_bwd": ("training.py", "tl.atomic_add(grad_weight_ptr + grad_weight_offsets",
                      "tl.store(grad_weight_ptr + grad_weight_offsets"),
    # a padding token's slot -1 then writes before the cache: the guard margins see it
    "reshape_and_cache": ("kv_cache.py", "    if slot_idx < 0:\n        return\n", ""),
    "paged_decode_attention": ("decode.py", '        qk = tl.where(valid, qk, float("-inf"))\n', ""),
    "temperature_softmax": ("logits.py", 'x = tl.load(logits_row + cols, mask=mask, other=float("-inf")) / temperature',
                            'x = tl.load(logits_row + cols, mask=mask, other=float("-inf"))'),
    "quantize_int8_group": ("quant_group.py", "    y_q = tl.where(y_q >= 0, y_q + 0.5, y_q - 0.5)\n", ""),
    # only the last K block accumulated
    "batched_vecmat": ("gemv.py", "acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)",
                       "acc = tl.sum(a[:, :, None] * b[None, :, :], axis=1)"),
}


def test_check_catches_planted_bugs_in_the_new_kernels():
    """``run.py --check`` (in a TRITON_INTERPRET=1 process: an interpreted kernel calling tl.sum
    needs triton.language imported under the interpreter) fails each planted kernel and passes the
    kernel as written."""
    done = _python("-c", PLANT_SCRIPT, json.dumps(PLANTS))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert {name: results[name] for name in PLANTS} == {name: [1, 0] for name in PLANTS}, done.stdout
    assert done.stdout.count("MISMATCH") == len(PLANTS), done.stdout


def test_the_dropout_reference_drops_about_p_of_the_elements():
    """The reference's Philox is uniform, so a kernel that kept everything could not match it."""
    u = philox_uniform(1234, 200_000)
    assert u.min() >= 0 and u.max() < 1 and abs(float(u.mean()) - 0.5) < 0.01
    assert abs(float((u <= 0.1).mean()) - 0.1) < 0.005
    assert (philox_uniform(1235, 1000) != u[:1000]).mean() > 0.99  # another seed, another mask


# Constructs the CPU interpreter runs but Triton's sm_90 lowering might not take: an early return,
# a spin lock with atomics, an associative scan with a user combine function, Philox, an fp8 load,
# block pointers, a grid-stride loop over tl.num_programs.
RISKY = ["reshape_and_cache", "cross_entropy_fwd_bwd", "layer_norm_bwd", "linear_recurrence", "dropout",
         "dequantize_fp8_block", "chunk_local_cumsum", "rms_norm_persistent"]


@pytest.mark.skipif(bool(os.environ.get("TRITON_INTERPRET")), reason="needs the kernels as jit functions")
@pytest.mark.parametrize("name", RISKY)
def test_kernel_compiles_for_sm90_with_its_wrappers_arguments(name):
    case = by_name([name])[0]
    launch = record_launch(case, case.small_size)
    compiled = compile_sm90(launch)
    assert ".target sm_90" in compiled.asm["ptx"] and compiled.asm["cubin"]
    assert case.kernel in compiled.asm["ptx"]
