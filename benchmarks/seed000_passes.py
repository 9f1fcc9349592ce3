"""Seed 000's patterns as Inductor-style micro kernels: do tritune's passes fire, are the results
right, and how much faster is the rewritten binary?

    PYTHONPATH=src python benchmarks/seed000_passes.py --out $OUT          # GPU, ~2-3 min on H100
    PYTHONPATH=src python benchmarks/seed000_passes.py --quick --out $OUT  # one shape per pattern
    python benchmarks/seed000_passes.py --dry-run                          # CPU: compile for sm_90 only

Cases (seed 000 = the mission's seeds/000_*.txt):
- redundant loads (Table I/III, fp16): Inductor's two-loop reduction with R0_BLOCK >= r0_numel, so
  each loop runs once and the evict_last and evict_first loads of one pointer share a block;
  passes merge-redundant-loads + merge-redundant-reduces only (exact, checked bitwise);
- division chains (Table II/IV, fp32): per-row ``x / a / b (/ c)``, with ``/`` (arith.divf) and
  ``tl.div_rn`` (tt.precise_divf); tritune's ``fast`` set under fast-math (checked: max relative
  error <= 1e-4 and NaN/Inf parity, including an input set with inf/nan/zero planted);
- division by a constant: a power of two (``exact``, bitwise) and 3.0 (``fast``);
- planted wrong candidates (a load shifted by one element; a divisor off by 2^-12) that the
  bitwise and the fast-math gate must reject: ``planted_wrong_detected``.

A case is timed only if the passes fired with the expected counts on a fresh compilation.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

_common.bootstrap()  # before triton is imported: fresh cache dir, tritune importable

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import tritune.compiler  # noqa: E402
from tritune.passes import preview  # noqa: E402

# ------------------------------------------------------------------------------------- kernels
# Written the way Inductor writes them (triton_red_* / triton_per_* / triton_poi_*), with shapes as
# constexprs where Inductor hard-codes ``xnumel = ...; r0_numel = ...`` in the body.


@triton.jit
def red_logsumexp(in_ptr0, out_ptr0, xnumel: tl.constexpr, r0_numel: tl.constexpr,
                  XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr, SHIFT: tl.constexpr):
    # amax in loop 1 (evict_last: loop 2 reads x again), sum(exp(x - amax)) in loop 2 (evict_first).
    # SHIFT=1 is the planted wrong candidate: loop 2 reads each row's next element.
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], float("-inf"), tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, eviction_policy="evict_last",
                       other=0.0).to(tl.float32)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = tl.maximum(_tmp2, tmp1)
        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)
    tmp2 = tl.max(_tmp2, 1)[:, None]
    _tmp8 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        if SHIFT:
            r0_index = r0_index + 1
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp4 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, eviction_policy="evict_first",
                       other=0.0).to(tl.float32)
        tmp5 = tmp4 - tmp2
        tmp6 = tl.exp(tmp5)
        tmp7 = tl.broadcast_to(tmp6, [XBLOCK, R0_BLOCK])
        tmp9 = _tmp8 + tmp7
        _tmp8 = tl.where(r0_mask & xmask, tmp9, _tmp8)
    tmp8 = tl.sum(_tmp8, 1)[:, None]
    tmp10 = tl.log(tmp8) + tmp2
    tl.store(out_ptr0 + x0, tmp10, xmask)


@triton.jit
def red_var_two_loops(in_ptr0, out_ptr0, out_ptr1, xnumel: tl.constexpr, r0_numel: tl.constexpr,
                      XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    # sum(x) in loop 1; sum(x) again and sum(x*x) in loop 2 (Table III: 1 redundant load and
    # 1 redundant reduce). The two sum(x) only become identical once the loads are one.
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, eviction_policy="evict_last",
                       other=0.0).to(tl.float32)
        tmp1 = tl.broadcast_to(tmp0, [XBLOCK, R0_BLOCK])
        tmp3 = _tmp2 + tmp1
        _tmp2 = tl.where(r0_mask & xmask, tmp3, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    _tmp6 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    _tmp10 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp4 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, eviction_policy="evict_first",
                       other=0.0).to(tl.float32)
        tmp5 = tl.broadcast_to(tmp4, [XBLOCK, R0_BLOCK])
        tmp7 = _tmp6 + tmp5
        _tmp6 = tl.where(r0_mask & xmask, tmp7, _tmp6)
        tmp8 = tmp4 * tmp4
        tmp9 = tl.broadcast_to(tmp8, [XBLOCK, R0_BLOCK])
        tmp11 = _tmp10 + tmp9
        _tmp10 = tl.where(r0_mask & xmask, tmp11, _tmp10)
    tmp6 = tl.sum(_tmp6, 1)[:, None]
    tmp10 = tl.sum(_tmp10, 1)[:, None]
    tmp12 = tmp2 / r0_numel
    tmp13 = (tmp10 - tmp6 * tmp12) / r0_numel
    tl.store(out_ptr0 + x0, tmp12, xmask)
    tl.store(out_ptr1 + x0, tmp13, xmask)


@triton.jit
def _load_sum(in_ptr0, in_ptr1, in_ptr2, in_ptr3, offset, mask, EVICT: tl.constexpr, NUM_INPUTS: tl.constexpr):
    # x = in0 + in1 + ... : the residual adds Inductor fuses into a norm's input
    tmp = tl.load(in_ptr0 + offset, mask, eviction_policy=EVICT, other=0.0).to(tl.float32)
    if NUM_INPUTS >= 2:
        tmp = tmp + tl.load(in_ptr1 + offset, mask, eviction_policy=EVICT, other=0.0).to(tl.float32)
    if NUM_INPUTS >= 3:
        tmp = tmp + tl.load(in_ptr2 + offset, mask, eviction_policy=EVICT, other=0.0).to(tl.float32)
    if NUM_INPUTS >= 4:
        tmp = tmp + tl.load(in_ptr3 + offset, mask, eviction_policy=EVICT, other=0.0).to(tl.float32)
    return tmp


@triton.jit
def red_layernorm(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, xnumel: tl.constexpr, r0_numel: tl.constexpr,
                  XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr, NUM_INPUTS: tl.constexpr):
    # Statistics of x = sum of NUM_INPUTS inputs in loop 1 (evict_last), normalised output in loop 2
    # (evict_first): NUM_INPUTS redundant loads (Table III: 2 botnet26t, 3 eca_botnet26ts, 4 beit).
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp1 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    _tmp3 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp0 = _load_sum(in_ptr0, in_ptr1, in_ptr2, in_ptr3, r0_1 + r0_numel * x0, r0_mask & xmask,
                         "evict_last", NUM_INPUTS)
        _tmp1 = tl.where(r0_mask & xmask, _tmp1 + tmp0, _tmp1)
        _tmp3 = tl.where(r0_mask & xmask, _tmp3 + tmp0 * tmp0, _tmp3)
    tmp1 = tl.sum(_tmp1, 1)[:, None]
    tmp3 = tl.sum(_tmp3, 1)[:, None]
    tmp4 = tmp1 / r0_numel
    tmp5 = tmp3 / r0_numel - tmp4 * tmp4
    tmp6 = tl.rsqrt(tmp5 + 1e-05)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
        tmp7 = _load_sum(in_ptr0, in_ptr1, in_ptr2, in_ptr3, r0_1 + r0_numel * x0, r0_mask & xmask,
                         "evict_first", NUM_INPUTS)
        tmp8 = (tmp7 - tmp4) * tmp6
        tl.store(out_ptr0 + (r0_1 + r0_numel * x0), tmp8.to(tl.float16), r0_mask & xmask)


@triton.jit
def _div(a, b, PRECISE: tl.constexpr):
    # PRECISE: tl.div_rn (tt.precise_divf), what Inductor emits with
    # TORCHINDUCTOR_EMULATE_DIVISION_ROUNDING=1; else `/` (arith.divf -> div.full.f32)
    if PRECISE:
        out = tl.div_rn(a, tl.broadcast_to(b, a.shape))
    else:
        out = a / b
    return out


@triton.jit
def per_div_chain(in_ptr0, in_ptr1, in_ptr2, out_ptr0, xnumel: tl.constexpr, r0_numel: tl.constexpr,
                  XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr, NUM_DIV: tl.constexpr,
                  PRECISE: tl.constexpr, PLANTED: tl.constexpr):
    # x / a / b (/ c): a, c loaded per-row scalars, b a per-row reduction, all broadcast
    # (seed 000 Table IV: BERT triton_per_7 has 2 divisions, triton_per_8 has 3).
    # PLANTED=1 is the wrong candidate: b off by a factor 1 + 2^-12 (rel. error 2.4e-4 > 1e-4).
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_index = tl.arange(0, R0_BLOCK)[None, :]
    r0_mask = r0_index < r0_numel
    r0_1 = r0_index
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (r0_1 + r0_numel * x0), r0_mask & xmask, other=0.0)
    tmp1 = tmp0 * tmp0
    tmp2 = tl.broadcast_to(tmp1, [XBLOCK, R0_BLOCK])
    tmp4 = tl.where(r0_mask & xmask, tmp2, 0)
    tmp5 = tl.sum(tmp4, 1)[:, None]
    if PLANTED:
        tmp5 = tmp5 * 1.000244140625
    tmp6 = tl.load(in_ptr1 + x0, xmask, eviction_policy="evict_last")
    tmp7 = _div(tmp0, tmp6, PRECISE)
    tmp8 = _div(tmp7, tmp5, PRECISE)
    if NUM_DIV >= 3:
        tmp9 = tl.load(in_ptr2 + x0, xmask, eviction_policy="evict_last")
        tmp8 = _div(tmp8, tmp9, PRECISE)
    tl.store(out_ptr0 + (r0_1 + r0_numel * x0), tmp8, r0_mask & xmask)


@triton.jit
def poi_div_constant(in_ptr0, out_ptr0, xnumel: tl.constexpr, XBLOCK: tl.constexpr,
                     DIVISOR: tl.constexpr, PRECISE: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + x0, xmask)
    tmp1 = tl.full([XBLOCK], DIVISOR, tl.float32)
    tmp2 = _div(tmp0, tmp1, PRECISE)
    tl.store(out_ptr0 + x0, tmp2, xmask)


# --------------------------------------------------------------------------------------- cases

LOAD_PASSES = ("merge-redundant-loads", "merge-redundant-reduces")  # isolated: exact set minus
# constant-division, which would also rewrite `/ r0_numel` where the row length is a power of two


@dataclasses.dataclass
class Case:
    name: str
    group: str                  # redundant-loads | division-chain | constant-division | planted
    source: str                 # the seed-000 table row it reproduces
    kernel: triton.runtime.JITFunction
    inputs: list[tuple[str, tuple, torch.dtype]]   # (kind, shape, dtype); kind: randn | scale | unused
    outputs: list[tuple[tuple, torch.dtype]]
    constexprs: dict
    grid: tuple                 # 3 entries: CompiledKernel[grid] wants all of them
    num_warps: int
    passes: tuple[str, ...] = ()
    fast_math: bool = False
    expected: dict = dataclasses.field(default_factory=dict)   # pass -> count; others must be 0
    gate: str = "bitwise"       # bitwise | fast-math
    candidate_overrides: dict = dataclasses.field(default_factory=dict)  # planted wrong candidates
    plant_specials: bool = False  # add an input set with inf/nan/zero (and extremes) planted
    extremes: bool = False        # also plant subnormal and near-overflow values

    @property
    def candidate_constexprs(self) -> dict:
        return {**self.constexprs, **self.candidate_overrides}

    def bytes_moved(self) -> int:
        sizes = [(s, d) for _, s, d in self.inputs] + self.outputs
        return sum(_numel(s) * torch.empty((), dtype=d).element_size() for s, d in sizes)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _red_config(cols: int) -> tuple[int, int, int]:
    """R0_BLOCK = next_pow2(row): each reduction loop runs once; ~4096 elements per program."""
    r0_block = triton.next_power_of_2(cols)
    xblock = max(1, 4096 // r0_block)
    return xblock, r0_block, 8 if xblock * r0_block >= 4096 else 4


def _per_config(cols: int) -> tuple[int, int, int]:
    r0_block = triton.next_power_of_2(cols)
    xblock = max(1, 2048 // r0_block)
    return xblock, r0_block, 8 if xblock * r0_block >= 2048 else 4


def red_case(pattern: str, rows: int, cols: int, source: str, num_inputs: int = 1) -> Case:
    xblock, r0_block, warps = _red_config(cols)
    cx = {"xnumel": rows, "r0_numel": cols, "XBLOCK": xblock, "R0_BLOCK": r0_block}
    x = ("randn", (rows, cols), torch.float16)
    row = ((rows,), torch.float32)
    if pattern == "logsumexp":
        kernel, ins, outs, cx = red_logsumexp, [x], [row], {**cx, "SHIFT": 0}
        expected = {"merge-redundant-loads": 1, "merge-redundant-reduces": 0}
    elif pattern == "var_two_loops":
        kernel, ins, outs = red_var_two_loops, [x], [row, row]
        expected = {"merge-redundant-loads": 1, "merge-redundant-reduces": 1}
    else:
        unused = ("unused", (8,), torch.float16)  # pointer slots past NUM_INPUTS are never read
        kernel, outs = red_layernorm, [((rows, cols), torch.float16)]
        ins = [x] * num_inputs + [unused] * (4 - num_inputs)
        cx = {**cx, "NUM_INPUTS": num_inputs}
        expected = {"merge-redundant-loads": num_inputs, "merge-redundant-reduces": 0}
        pattern = f"layernorm_x{num_inputs}"
    return Case(f"{pattern}[{rows},{cols}]", "redundant-loads", source, kernel, ins, outs, cx,
                (triton.cdiv(rows, xblock), 1, 1), warps, LOAD_PASSES, False, expected)


def div_case(rows: int, cols: int, num_div: int, precise: bool, source: str, planted: bool = False) -> Case:
    xblock, r0_block, warps = _per_config(cols)
    cx = {"xnumel": rows, "r0_numel": cols, "XBLOCK": xblock, "R0_BLOCK": r0_block,
          "NUM_DIV": num_div, "PRECISE": int(precise), "PLANTED": 0}
    scale = ("scale", (rows,), torch.float32)
    name = f"div{num_div}_{'div_rn' if precise else 'divf'}[{rows},{cols}]"
    case = Case(name, "division-chain", source, per_div_chain,
                [("randn", (rows, cols), torch.float32), scale, scale], [((rows, cols), torch.float32)],
                cx, (triton.cdiv(rows, xblock), 1, 1), warps, ("fast",), True,
                {"reassociate-division": num_div - 1}, "fast-math", plant_specials=True)
    if planted:
        case.name, case.group, case.passes, case.expected = "planted_" + name, "planted", (), {}
        case.candidate_overrides = {"PLANTED": 1}
    return case


def constant_case(divisor: float, precise: bool, shape=(16384, 2560)) -> Case:
    numel = _numel(shape)
    exact = divisor == 4.0
    name = f"div_const_{divisor:g}_{'div_rn' if precise else 'divf'}[{shape[0]},{shape[1]}]"
    return Case(name, "constant-division", "Inductor `x / C` (seed 003 peephole)", poi_div_constant,
                [("randn", (numel,), torch.float32)], [((numel,), torch.float32)],
                {"xnumel": numel, "XBLOCK": 1024, "DIVISOR": divisor, "PRECISE": int(precise)},
                (triton.cdiv(numel, 1024), 1, 1), 4, ("exact",) if exact else ("fast",), not exact,
                {"constant-division": 1}, "bitwise" if exact else "fast-math",
                plant_specials=True, extremes=exact)


TABLE3 = [  # (pattern, rows, cols, redundant loads, model / kernel in seed 000 Table III)
    ("logsumexp", 8192, 3137, 1, "coat_lite_mini triton_red_8: 1 load, 0 reduce"),
    ("var_two_loops", 182784, 476, 1, "fastNLP_Bert triton_red_3: 1 load, 1 reduce"),
    ("var_two_loops", 65536, 2048, 1, "fastNLP_Bert triton_red_7: 1 load, 1 reduce"),
    ("layernorm", 131072, 256, 3, "eca_botnet26ts triton_red_24: 3 loads"),
    ("logsumexp", 16384, 785, 1, "coat_lite_mini triton_red_29: 1 load"),
    ("logsumexp", 401408, 196, 1, "convit_base triton_red_5: 1 load"),
    ("layernorm", 131072, 256, 2, "botnet26t_256 triton_red_25: 2 loads"),
    ("layernorm", 302592, 197, 4, "beit_base_patch16 triton_red_6: 4 loads"),
]
TABLE4 = [  # (rows, cols, divisions): BERT_pytorch triton_per_7 (2) and triton_per_8 (3)
    (65536, 256, 2), (262114, 512, 2), (1048576, 1024, 2),
    (16384, 2560, 3), (1024, 3200, 3), (4096, 1330, 3), (4096, 640, 3), (16384, 1280, 3),
    (16384, 768, 3), (65536, 2000, 3),
]
QUICK = {"logsumexp[8192,3137]", "var_two_loops[65536,2048]", "layernorm_x3[131072,256]",
         "div2_divf[65536,256]", "div2_div_rn[65536,256]", "div3_divf[16384,2560]", "div3_div_rn[16384,2560]"}


def build_cases(quick: bool) -> list[Case]:
    cases = [red_case(p, r, c, src, n) for p, r, c, n, src in TABLE3]
    for rows, cols, num_div in TABLE4:
        kernel = "triton_per_7" if num_div == 2 else "triton_per_8"
        for precise in (False, True):
            cases.append(div_case(rows, cols, num_div, precise, f"BERT_pytorch {kernel}: {num_div} divisions"))
    if quick:
        cases = [c for c in cases if c.name in QUICK]
    cases += [constant_case(d, p) for d in (4.0, 3.0) for p in (False, True)]
    planted_load = red_case("logsumexp", 8192, 3137, "planted: loop-2 load shifted by one element")
    planted_load.name, planted_load.group, planted_load.passes, planted_load.expected = (
        "planted_shifted_load[8192,3137]", "planted", (), {})
    planted_load.candidate_overrides = {"SHIFT": 1}
    cases += [planted_load, div_case(16384, 768, 3, False, "planted: divisor off by 2^-12", planted=True)]
    return cases


def fired_status(case: Case, counts: dict | None) -> str:
    """'fired' if the fresh compilation changed exactly what the case expects."""
    if not case.passes:
        return "n/a"
    if counts is None:
        return "did not fire (no fresh compilation seen by the hook)"
    wrong = {p: n for p, n in counts.items() if n != case.expected.get(p, 0)}
    if not any(counts.values()):
        return "did not fire"
    return "fired" if not wrong else f"fired with unexpected counts {wrong}"


# ------------------------------------------------------------------------------------- dry run

def compile_sm90(case: Case, constexprs: dict):
    """The case's kernel compiled for sm_90 without a GPU, as the JIT would specialise it."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    pointers = [d for _, _, d in case.inputs] + [d for _, d in case.outputs]
    names = case.kernel.arg_names
    signature = {n: ("*fp16" if d == torch.float16 else "*fp32") for n, d in zip(names, pointers)}
    signature.update({n: "constexpr" for n in names[len(pointers):]})
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(pointers))}  # torch allocations
    source = ASTSource(case.kernel, signature, constexprs, attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": case.num_warps})


def dry_run(cases: list[Case]) -> int:
    """Compile every case for sm_90 on this machine (no GPU), with and without the passes."""
    failures = 0
    _common.log(f"dry run: compiling {len(cases)} cases for sm_90 (no GPU needed)")
    for case in cases:
        base = compile_sm90(case, case.constexprs)
        counts = None
        if case.passes:
            with tritune.compiler.enabled(case.passes, fast_math=case.fast_math) as hook:
                seen = len(hook.history)
                cand = compile_sm90(case, case.candidate_constexprs)
                counts = hook.history[-1].counts if len(hook.history) > seen else None
        else:
            cand = compile_sm90(case, case.candidate_constexprs)
        status = fired_status(case, counts)
        failures += status.startswith(("did not", "fired with"))
        ops_b, ops_c = _common.ttir_op_counts(base.asm["ttir"]), _common.ttir_op_counts(cand.asm["ttir"])
        changed = {k: f"{ops_b[k]}->{ops_c[k]}" for k in ops_b if ops_b[k] != ops_c[k]}
        would = {k: v for k, v in preview(base.asm["ttir"], fast_math=case.fast_math).items() if v}
        hooked = {k: v for k, v in (counts or {}).items() if v}
        _common.log(f"{case.name:34s} {status:5s} passes={','.join(case.passes) or '-'} "
                    f"hook={hooked} preview={would} ttir={changed}")
    _common.log(f"dry run: {len(cases) - failures}/{len(cases)} cases as expected")
    return 1 if failures else 0


# ------------------------------------------------------------------------------------- GPU run

def make_inputs(case: Case, seed: int, specials: bool = False) -> list[torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    tensors = []
    for kind, shape, dtype in case.inputs:
        if kind in ("randn", "unused"):
            t = torch.randn(shape, generator=gen, device="cuda", dtype=dtype)
        else:  # per-row scale in +-[0.5, 2]
            t = torch.rand(shape, generator=gen, device="cuda", dtype=dtype) * 1.5 + 0.5
            t *= torch.randint(0, 2, shape, generator=gen, device="cuda").to(dtype) * 2 - 1
        if specials:
            _plant(t, gen, case.extremes)
        tensors.append(t)
    if specials and case.group in ("division-chain", "planted") and len(case.inputs) > 1:
        tensors[0][0].zero_()  # a whole row of zeros: its reduction is 0, so x / a / 0
    return tensors


def _plant(t: torch.Tensor, gen: torch.Generator, extremes: bool) -> None:
    flat = t.view(-1)
    specials = [float("inf"), float("-inf"), float("nan"), 0.0, -0.0]
    if extremes:  # subnormal and near-overflow: where a power-of-two reciprocal must still be exact
        specials += [1e-40, -3e-39, 1.5e-45, 3.0e38, -2.5e38, 1.2e-38]
    k = max(len(specials), min(4096, flat.numel() // 100))
    idx = torch.randint(0, flat.numel(), (k,), generator=gen, device=t.device)
    values = torch.tensor(specials, dtype=t.dtype, device=t.device).repeat(k // len(specials) + 1)[:k]
    flat[idx] = values


def launch_args(case: Case, constexprs: dict, ins, outs) -> list:
    return [*ins, *outs, *constexprs.values()]


def run_case(case: Case, bandwidth: float) -> dict:
    rec = {"case": case.name, "group": case.group, "source": case.source, "passes": ",".join(case.passes),
           "fast_math": case.fast_math, "gate": case.gate, "expected": case.expected,
           "config": {**case.constexprs, "num_warps": case.num_warps}, "grid": case.grid,
           "bytes": case.bytes_moved()}
    t0 = time.time()
    ins = make_inputs(case, seed=1)
    outs = [torch.empty(s, dtype=d, device="cuda") for s, d in case.outputs]
    jit_args = [*ins, *outs]
    base = case.kernel.warmup(*jit_args, **case.constexprs, grid=case.grid, num_warps=case.num_warps)
    counts = None
    if case.passes:
        with tritune.compiler.enabled(case.passes, fast_math=case.fast_math) as hook:
            seen = len(hook.history)
            cand = case.kernel.warmup(*jit_args, **case.candidate_constexprs, grid=case.grid,
                                      num_warps=case.num_warps)
            counts = hook.history[-1].counts if len(hook.history) > seen else None
    else:
        cand = case.kernel.warmup(*jit_args, **case.candidate_constexprs, grid=case.grid,
                                  num_warps=case.num_warps)
    rec["pass_counts"] = counts
    rec["fired"] = fired_status(case, counts)
    rec["preview"] = preview(base.asm["ttir"], fast_math=case.fast_math)
    rec["ttir_base"] = _common.ttir_op_counts(base.asm["ttir"])
    rec["ttir_cand"] = _common.ttir_op_counts(cand.asm["ttir"])
    del ins, outs, jit_args

    # correctness: 3 fresh random input sets (+ one with specials planted), outputs poisoned
    check = _common.bitwise_check if case.gate == "bitwise" else _common.fast_math_check
    rec["checks"] = []
    seeds = [(11, False), (12, False), (13, False)] + ([(14, True)] if case.plant_specials else [])
    for seed, specials in seeds:
        ins = make_inputs(case, seed, specials)
        out_b = [torch.empty(s, dtype=d, device="cuda") for s, d in case.outputs]
        out_c = [torch.empty_like(t) for t in out_b]
        _common.poison([*out_b, *out_c])
        base[case.grid](*launch_args(case, case.constexprs, ins, out_b))
        cand[case.grid](*launch_args(case, case.candidate_constexprs, ins, out_c))
        torch.cuda.synchronize()
        rec["checks"].append({"seed": seed, "specials": specials, **check(out_b, out_c)})
        del ins, out_b, out_c
    rec["check_ok"] = all(c["ok"] for c in rec["checks"])
    rec["regs_spills"] = {"base": (base.n_regs, base.n_spills), "cand": (cand.n_regs, cand.n_spills)}
    rec["check"] = "pass" if rec["check_ok"] else "FAIL"
    if case.group == "planted":
        rec["planted_wrong_detected"] = not rec["check_ok"]
        rec["check"] = "rejected (good)" if not rec["check_ok"] else "NOT DETECTED"
    elif rec["fired"] == "fired" and rec["check_ok"]:
        rec.update(time_case(case, base, cand, bandwidth))
    torch.cuda.empty_cache()
    rec["seconds"] = round(time.time() - t0, 1)
    return rec


def time_case(case: Case, base, cand, bandwidth: float) -> dict:
    sets = _common.rotation_count(case.bytes_moved())
    arg_sets = []
    for i in range(sets):
        ins = make_inputs(case, seed=100 + i)
        outs = [torch.empty(s, dtype=d, device="cuda") for s, d in case.outputs]
        arg_sets.append((launch_args(case, case.constexprs, ins, outs),
                         launch_args(case, case.candidate_constexprs, ins, outs)))
    run_b, run_c = base[case.grid], cand[case.grid]
    counter = itertools.count()

    def bench(which: int):
        return _common.do_bench_median(lambda: (run_b, run_c)[which](*arg_sets[next(counter) % sets][which]))

    base_ms = bench(0)
    cand_ms = bench(1)
    base2_ms = bench(0)
    paired = _common.paired_ratio(lambda k: run_b(*arg_sets[k % sets][0]), lambda k: run_c(*arg_sets[k % sets][1]))
    roofline_ms = case.bytes_moved() / (bandwidth * 1e9) * 1e3
    return {"input_sets_rotated": sets, "base_ms": base_ms, "cand_ms": cand_ms, "base2_ms": base2_ms,
            "noise": abs(base_ms - base2_ms) / base_ms, "speedup_median": base_ms / cand_ms,
            **paired, "roofline_ms": roofline_ms, "base_frac_of_copy_bw": roofline_ms / base_ms}


COLUMNS = ["case", "group", "passes", "fired", "check", "base_ms", "base2_ms", "cand_ms", "speedup_median",
           "speedup_mean50", "noise", "base_frac_of_copy_bw", "input_sets_rotated", "source", "error"]
TABLE = ["case", "fired", "check", "base_ms", "base2_ms", "cand_ms", "speedup_median", "speedup_mean50"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=_common.default_out_dir(),
                        help="result dir (default $OUT, else benchmarks/results)")
    parser.add_argument("--quick", action="store_true", help="one shape per pattern")
    parser.add_argument("--dry-run", action="store_true", help="CPU only: compile for sm_90, show what fires")
    args = parser.parse_args()
    cases = build_cases(args.quick)
    if args.dry_run:
        return dry_run(cases)
    _common.require_cuda("seed000_passes.py")
    env = _common.environment()
    _common.log(f"{env['gpu']} (sm_{env['capability']}), torch {env['torch']}, triton {env['triton']}")
    bandwidth = _common.copy_bandwidth_gbps()
    _common.log(f"device-to-device copy: {bandwidth:.0f} GB/s (read + write)")
    records = []
    for i, case in enumerate(cases, 1):
        try:
            rec = run_case(case, bandwidth)
        except Exception as error:  # noqa: BLE001 - one case failing must not stop the others
            rec = {"case": case.name, "group": case.group, "fired": "error", "check": "error",
                   "error": f"{type(error).__name__}: {error}"}
            torch.cuda.empty_cache()
        records.append(rec)
        _common.log(f"[{i}/{len(cases)}] {case.name}: {rec['fired']}, check {rec['check']}, "
                    f"speedup {rec.get('speedup_median', float('nan')):.3f} (median) "
                    f"{rec.get('speedup_mean50', float('nan')):.3f} (mean of 50), {rec.get('seconds', '?')} s"
                    + (f" ERROR {rec['error']}" if rec.get("error") else ""))
    planted = [r for r in records if r["group"] == "planted"]
    extra = {"copy_gbps": bandwidth, "planted_wrong_detected": all(r.get("planted_wrong_detected") for r in planted)}
    json_path, csv_path = _common.write_results(args.out, "seed000_passes", env, records, COLUMNS, extra)
    _common.log(f"\nwrote {json_path} and {csv_path}")
    _common.log(f"planted_wrong_detected: {str(extra['planted_wrong_detected']).lower()}; "
                f"copy bandwidth {bandwidth:.0f} GB/s; {env['gpu']}\n")
    _common.print_table(records, TABLE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
