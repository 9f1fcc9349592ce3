"""The static cost model (``search.cost``) on hand-made specs: only the order it gives is asserted."""

from __future__ import annotations

from tritune.analyze.targets import SPECS
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.search import cost

M = 2 ** 20


def vector_add(n: int = 64 * M, block: int = 16, warps: int | None = None) -> LaunchSpec:
    tensors = [ArgSpec(name, "tensor", shape=[n], stride=[1], dtype="float32", written=name == "out_ptr")
               for name in ("x_ptr", "y_ptr", "out_ptr")]
    return LaunchSpec(
        kernel="add_kernel", kind="jit", module="m", source_file="m.py", source="sources/m.py", source_hash="0" * 64,
        args=[*tensors, ArgSpec("n", "scalar", value=n, type="int"), ArgSpec("BLOCK", "constexpr")],
        constexprs={"BLOCK": block}, options={} if warps is None else {"num_warps": warps}, grid=[-(-n // block)],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}, {"const": 1}, {"const": 1}]})


def row_softmax(rows: int = 64 * 1024, cols: int = 1024, block_m: int = 16) -> LaunchSpec:
    """A user kernel: ``BLOCK_M`` rows a program (the grid's block), ``BLOCK_N`` covers a row (no knob)."""
    tensors = [ArgSpec(name, "tensor", shape=[rows, cols], stride=[cols, 1], dtype="float32",
                       written=name == "out_ptr") for name in ("x_ptr", "out_ptr")]
    return LaunchSpec(
        kernel="softmax_kernel", kind="jit", module="m", source_file="m.py", source="sources/m.py",
        source_hash="0" * 64,
        args=[*tensors, ArgSpec("n_rows", "scalar", value=rows, type="int"),
              ArgSpec("BLOCK_M", "constexpr"), ArgSpec("BLOCK_N", "constexpr")],
        constexprs={"BLOCK_M": block_m, "BLOCK_N": cols}, options={}, grid=[rows // block_m],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n_rows", "block": "BLOCK_M"}, {"const": 1}, {"const": 1}]})


def inductor_softmax(rows: int = 64 * 1024, cols: int = 1024, r0_block: int = 16) -> LaunchSpec:
    """Inductor's looped reduction over each row: ``R0_BLOCK`` columns an iteration, a row a program."""
    return LaunchSpec(
        kernel="triton_red_fused__softmax_0", kind="inductor", module="m", source_file="m.py",
        source="sources/m.py", source_hash="0" * 64,
        args=[ArgSpec("in_ptr0", "tensor", shape=[rows, cols], stride=[cols, 1], dtype="float32"),
              ArgSpec("out_ptr0", "tensor", shape=[rows, cols], stride=[cols, 1], dtype="float32", written=True),
              ArgSpec("xnumel", "scalar", value=rows, type="int"),
              ArgSpec("r0_numel", "scalar", value=cols, type="int"),
              ArgSpec("XBLOCK", "constexpr"), ArgSpec("R0_BLOCK", "constexpr")],
        constexprs={"XBLOCK": 1, "R0_BLOCK": r0_block}, options={"num_warps": 4, "num_stages": 1}, grid=[rows],
        grid_rule={"kind": "inductor", "grid_type": "Grid1D", "inductor_meta": {"grid_type": "Grid1D"},
                   "scalars": {"xnumel": rows, "r0_numel": cols}})


def blocks(configs) -> list:
    return [c.get("BLOCK", c.get("BLOCK_M", c.get("R0_BLOCK"))) for c in configs]


BASELINE = cost.Baseline(registers=20)


def test_fuller_programs_rank_above_tiny_ones_on_a_far_off_vector_add():
    spec = vector_add()  # BLOCK=16 over 64M elements, 4 warps: ~2 KiB in flight an SM
    ranked = cost.rank(spec, [{"BLOCK": b} for b in (16, 32, 8192, 1024)], baseline=BASELINE)
    assert blocks(ranked) == [1024, 8192, 32, 16]
    tiny, full = cost.estimate(spec, {}, baseline=BASELINE), cost.estimate(spec, {"BLOCK": 1024}, baseline=BASELINE)
    assert tiny.programs == 4 * M and full.programs == 64 * 1024
    assert tiny.score < 0.1 < 0.9 < full.score  # about the 7% of the roofline measured at BLOCK=16


def test_a_block_whose_registers_cut_occupancy_ranks_below_one_that_keeps_it():
    spec = vector_add()
    big = cost.estimate(spec, {"BLOCK": 8192}, baseline=BASELINE)  # 64 elements a thread at 4 warps
    assert big.registers > 128 and big.blocks_per_sm * big.warps < cost.LATENCY_WARPS
    assert blocks(cost.rank(spec, [{"BLOCK": 8192}, {"BLOCK": 1024}], baseline=BASELINE)) == [1024, 8192]
    # the same block with warps to spread it over keeps its occupancy
    assert cost.estimate(spec, {"BLOCK": 8192, "num_warps": 16}, baseline=BASELINE).score > big.score
    # registers past the hardware's 255 spill: one warp for 8192 elements ranks below 16 warps
    spilled = cost.estimate(spec, {"BLOCK": 8192, "num_warps": 1}, baseline=BASELINE)
    assert spilled.registers > 255
    assert spilled.score < cost.estimate(spec, {"BLOCK": 8192, "num_warps": 16}, baseline=BASELINE).score


def test_a_wave_starved_grid_ranks_below_one_that_fills_the_sms():
    spec = vector_add(n=M)  # BLOCK=8192: 128 programs for 132 SMs, one 4-warp program an SM
    assert cost.estimate(spec, {"BLOCK": 8192}, baseline=BASELINE).waves < 1
    assert blocks(cost.rank(spec, [{"BLOCK": 8192}, {"BLOCK": 1024}], baseline=BASELINE)) == [1024, 8192]
    # the balance alone: one config, on 16 programs for 132 SMs and on a grid of many waves
    starved = cost.estimate(vector_add(n=128 * 1024), {"BLOCK": 8192, "num_warps": 16}, baseline=BASELINE)
    full = cost.estimate(vector_add(n=64 * M), {"BLOCK": 8192, "num_warps": 16}, baseline=BASELINE)
    assert starved.programs == 16 and full.score > 5 * starved.score


def test_a_looped_row_softmax_ranks_a_row_wide_iteration_above_tiny_ones():
    spec = inductor_softmax()  # 65536 rows of 1024, R0_BLOCK=16: 64 bytes an iteration a program
    ranked = cost.rank(spec, [{"R0_BLOCK": b} for b in (16, 64, 1024, 256)], baseline=BASELINE)
    assert blocks(ranked) == [1024, 256, 64, 16]
    assert {cost.programs(spec, {"R0_BLOCK": b}) for b in (16, 1024)} == {64 * 1024}  # rows, whatever R0
    assert cost.programs(spec, {"XBLOCK": 16}) == 4 * 1024  # an Inductor grid: scaled by its blocks


def test_a_row_softmax_with_a_row_per_thread_block_wants_its_warps():
    spec = row_softmax()  # 16 rows of 1024 a program: 128 elements a thread at 4 warps
    baseline = cost.Baseline(registers=200)  # what that holds: two 4-warp programs an SM
    wide = cost.estimate(spec, {"num_warps": 16}, baseline=baseline)
    narrow = cost.estimate(spec, {}, baseline=baseline)
    assert narrow.tile == wide.tile == 16 * 1024 and narrow.registers == 200 > wide.registers
    assert narrow.blocks_per_sm * narrow.warps < cost.LATENCY_WARPS <= wide.blocks_per_sm * wide.warps
    ranked = cost.rank(spec, [{"BLOCK_M": 256}, {}, {"num_warps": 16}], baseline=baseline)
    assert ranked == [{"num_warps": 16}, {}, {"BLOCK_M": 256}]  # 256 rows a program spill


def test_shared_memory_past_the_sm_ranks_last_and_the_gpu_comes_from_the_facts():
    spec = vector_add(block=1024)
    baseline = cost.Baseline(registers=32, shared_bytes=64 * 1024)  # 3 stages of a 1024 tile
    too_big = cost.estimate(spec, {"BLOCK": 8192}, baseline=baseline)  # 8x the tile: 512 KiB
    assert too_big.blocks_per_sm == 0 and too_big.score == 0.0
    assert cost.rank(spec, [{"BLOCK": 8192}, {"BLOCK": 2048}], baseline=baseline)[0] == {"BLOCK": 2048}
    machine = cost.Machine.from_facts({"capability": 80, "sm_count": 108})
    assert machine.sm is SPECS[80] and machine.sm_count == 108
    assert cost.Machine.from_facts({}) == cost.Machine(SPECS[90], 132)
    assert cost.Baseline.from_facts({"registers": 40, "shared_bytes": 0}, None) == cost.Baseline(40, 0)
    starved = vector_add(n=132 * 1024, block=1024)  # one program an SM
    assert cost.estimate(starved, {}, machine=machine).programs == 132
    assert cost.estimate(starved, {}, machine=machine).waves > cost.estimate(starved, {}).waves  # fewer SMs


def test_a_dtype_it_does_not_know_ranks_as_four_bytes_and_never_fails():
    odd = vector_add()
    odd.args[0].dtype = "complex_thing"
    assert cost.estimate(odd, {"BLOCK": 1024}).score == cost.estimate(vector_add(), {"BLOCK": 1024}).score
