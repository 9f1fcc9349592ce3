"""Issue 24, section 3, on the CPU: a program whose kernel takes Triton dtypes as constexprs (the
output type, passed positionally, and a stream-K-style accumulator type, by keyword) is captured,
replayed, a knob variant of it verified, and the decision applied in the running program, each
program writing its BLOCK into ``seen[pid]`` so the test sees the decision land."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tritune import config
from tritune.boot import BOOT_DIR
from tritune.capture.spec import read_launches
from tritune.model.variant import Variant
from tritune.replay import Replay, make_args
from tritune.store import DecisionStore, current_target, key_for

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def cast_scale_kernel(x_ptr, out_ptr, seen_ptr, n, OUT_DTYPE: tl.constexpr, ACC_DTYPE: tl.constexpr,
                      BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.full([BLOCK], 0, ACC_DTYPE)  # tl.zeros is a jit function, which an in-process interpreter refuses
    acc += tl.load(x_ptr + offs, mask=mask).to(ACC_DTYPE) * 2
    tl.store(out_ptr + offs, acc.to(OUT_DTYPE), mask=mask)
    tl.store(seen_ptr + offs // BLOCK, BLOCK)
"""
PROGRAM = """
import os, sys
import torch, triton
import triton.language as tl
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtype_kernels import cast_scale_kernel

x = torch.arange(100.0)
out, seen = torch.zeros(100, dtype=torch.float16), torch.zeros(64, dtype=torch.int32)
cast_scale_kernel[(triton.cdiv(100, 32),)](x, out, seen, 100, tl.float16, ACC_DTYPE=tl.float32, BLOCK=32)
assert torch.equal(out, (x * 2).half())
ran = seen[seen != 0]
print(len(ran), sorted(set(ran.tolist())))
"""
BOOT_PATH = config.python_path_first(str(BOOT_DIR))


def interpreted(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    root = tmp_path_factory.mktemp("dtype_e2e")
    (root / "dtype_kernels.py").write_text(KERNEL)
    (root / "prog.py").write_text(PROGRAM)
    done = interpreted(sys.executable, "-m", "tritune", "capture", "--out", str(root / "cap"), "--",
                       sys.executable, str(root / "prog.py"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (root / "cap" / "skipped.jsonl").exists()
    return root


def test_a_dtype_kernel_captured_from_a_program_replays_verifies_a_variant_and_the_decision_applies(
        captured, monkeypatch):
    from tritune.verify import verify

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cap = captured / "cap"
    (spec,) = read_launches(cap)
    assert spec.constexprs == {"OUT_DTYPE": {"tl_dtype": "fp16"}, "ACC_DTYPE": {"tl_dtype": "fp32"}, "BLOCK": 32}
    baseline = Replay(spec, root=cap)
    args = make_args(spec, cap)
    baseline(args)
    assert args["out_ptr"].dtype.is_floating_point and args["seen_ptr"].tolist()[:4] == [32] * 4

    knob = Variant(name="2 warps", options={"num_warps": 2})
    checked = verify(spec, knob, cap, input_sets=1, draws=())
    assert checked.ok, checked.message
    # BLOCK 64 computes the same output; only the planted marker tells it apart (it must: the
    # variant ran with the dtype constexprs decoded and the new block)
    variant = Variant(name="block 64", constexprs={"BLOCK": 64}, options={"num_warps": 2})
    marked = verify(spec, variant, cap, input_sets=1, draws=())
    assert not marked.ok and "seen_ptr[2]: baseline 32, candidate unwritten" in marked.message

    store_path = captured / "decisions.db"
    key = key_for(spec, current_target("cpu"))
    with DecisionStore(store_path) as store:
        run = store.start_run({})
        cand = store.add_candidate(run, key, variant)
        store.finish_candidate(cand.id, "verified", verification={"ok": True})
        store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)

    done = interpreted(sys.executable, "-c", "from tritune.commands.run import run; run(prog_name='tritune run')",
                       "--store", str(store_path), "--", sys.executable, str(captured / "prog.py"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "2 [64]"  # cdiv(100, 64) programs of BLOCK 64: the decision ran
    assert "decisions applied to 1 of 1 launches" in done.stderr
