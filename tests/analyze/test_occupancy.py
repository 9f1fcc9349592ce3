"""Occupancy numbers worked out by hand (CUDA occupancy-calculator model, seed 003's formula)."""

import pytest

from tritune.analyze.occupancy import seed003_occupancy, theoretical_occupancy
from tritune.analyze.targets import SPECS, parse_target

SM90, SM80, SM86 = SPECS[90], SPECS[80], SPECS[86]


@pytest.mark.parametrize("registers, expected", [
    (32, 1.0),            # 65536 / 1024 = 64 warps (seed 003's own example)
    (128, 0.25),          # 65536 / 4096 = 16 warps (seed 003: "Occupancy = 25%")
    (12, 1.0),            # 170 warps, capped at 64 (seed 003's GELU example)
    (96, 21 / 64),        # floor(65536 / 3072) = 21 warps
    (255, 8 / 64),        # floor(65536 / 8160) = 8
    (0, 1.0),
])
def test_seed003_formula(registers, expected):
    assert seed003_occupancy(registers) == pytest.approx(expected)


def test_register_allocation_granularity_binds_below_seed003():
    # 33 regs * 32 = 1056 -> rounded up to 1280 per warp -> 51 warps -> 12 blocks of 4 -> 48 warps
    occ = theoretical_occupancy(SM90, registers=33, num_warps=4, shared_bytes=0)
    assert occ.seed003 == pytest.approx(62 / 64)  # floor(65536 / 1056) = 62
    assert occ.real == pytest.approx(48 / 64)
    assert occ.occupancy == pytest.approx(0.75)
    assert occ.limiter == "registers"
    assert occ.blocks_by == {"warps": 16, "blocks": 32, "registers": 12, "shared": 228}  # 233472 // 1024


def test_whole_blocks_only():
    # 96 regs: 3072 per warp -> 21 warps fit, but blocks of 8 warps: 2 blocks = 16 warps
    occ = theoretical_occupancy(SM90, registers=96, num_warps=8, shared_bytes=0)
    assert (occ.blocks_per_sm, occ.active_warps) == (2, 16)
    assert occ.occupancy == pytest.approx(0.25)
    assert occ.limiter == "registers"


def test_shared_memory_limit_sm90_and_sm80():
    # 100000 B + 1 KiB reserve = 101024 -> 101120 (x128); 228 KiB = 233472 -> 2 blocks; 164 KiB -> 1
    occ90 = theoretical_occupancy(SM90, registers=32, num_warps=4, shared_bytes=100_000)
    assert (occ90.blocks_per_sm, occ90.occupancy, occ90.limiter) == (2, 8 / 64, "shared")
    occ80 = theoretical_occupancy(SM80, registers=32, num_warps=4, shared_bytes=100_000)
    assert (occ80.blocks_per_sm, occ80.occupancy, occ80.limiter) == (1, 4 / 64, "shared")


def test_block_slots_limit_small_blocks():
    # 1 warp per block: 32 blocks per SM at most -> 32 of 64 warps
    occ = theoretical_occupancy(SM90, registers=16, num_warps=1, shared_bytes=0)
    assert (occ.occupancy, occ.limiter) == (0.5, "blocks")


def test_full_occupancy_ties_are_reported():
    occ = theoretical_occupancy(SM90, registers=32, num_warps=4, shared_bytes=0)
    assert occ.occupancy == 1.0
    assert occ.limiter == "warps+registers"


def test_seed003_binds_on_48_warp_sms():
    # sm_86 has 48 warp slots; seed 003 assumes 64: 64 regs -> 32/64 = 0.5 < real 32/48
    occ = theoretical_occupancy(SM86, registers=64, num_warps=4, shared_bytes=0)
    assert occ.real == pytest.approx(32 / 48)
    assert (occ.occupancy, occ.limiter) == (0.5, "registers(seed003)")


@pytest.mark.parametrize("text", ["sm_90", "90", "sm90", "SM_90", "sm_90a", 90])
def test_parse_target(text):
    assert parse_target(text).capability == 90


@pytest.mark.parametrize("text", ["sm_75", "hopper", "", "sm_"])
def test_parse_target_rejects(text):
    with pytest.raises(ValueError, match="unknown target"):
        parse_target(text)
