"""Element-wise comparison, poison and the tolerance table, on synthetic tensors (no kernel)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from tritune.verify import compare, poison, spread, tolerance_for, unwritten, widen  # noqa: E402
from tritune.verify.compare import Worst, chunks, depends_on_initial, holds_poison, worst_of  # noqa: E402
from tritune.verify.tolerances import FAST_MATH, NONDETERMINISM_FACTOR, TABLE  # noqa: E402

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool]


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def poisoned_like(t, which=1):
    out = torch.empty_like(t)
    poison([out], which)
    return out


# ----------------------------------------------------------------------------------- table

def test_table_has_the_seed_tolerances_and_a_reason_for_each():
    assert (TABLE["float32"].rtol, TABLE["float32"].atol) == (1e-4, 1e-5)
    for name in ("float16", "bfloat16"):
        assert (TABLE[name].rtol, TABLE[name].atol) == (1e-2, 1e-3)
    assert TABLE["float64"].rtol < TABLE["float32"].rtol and TABLE["float64"].atol < TABLE["float32"].atol
    assert FAST_MATH["float32"].rtol == 1e-4 and FAST_MATH["float32"].atol == 0
    assert all(t.reason for t in [*TABLE.values(), *FAST_MATH.values()])
    for name in ("int32", "int8", "uint8", "bool", "int64"):
        assert tolerance_for(name).exact and tolerance_for(name, "fast_math").exact
    assert tolerance_for("float32", "bitwise").exact


def test_a_tolerance_states_its_rule():
    assert TABLE["float32"].rule() == "|got - expected| <= 1e-05 + 0.0001 * |expected|"
    assert tolerance_for("int32").rule() == "exact"


def test_unknown_mode_and_dtype_fail_in_one_line():
    with pytest.raises(ValueError, match="unknown verification mode 'close'"):
        tolerance_for("float32", "close")
    with pytest.raises(ValueError, match="no tolerance for dtype 'complex64'"):
        tolerance_for("complex64")


# ----------------------------------------------------------------------------------- poison

@pytest.mark.parametrize("dtype", FLOATS)
def test_float_poison_is_a_signalling_nan_no_arithmetic_produces(dtype):
    t = poisoned_like(torch.zeros(5, dtype=dtype))
    assert t.isnan().all() and unwritten(t) == 5
    assert unwritten(t * 1) == 0 and unwritten(t + 0) == 0  # arithmetic quiets it
    assert unwritten(torch.full((5,), math.nan, dtype=dtype)) == 0  # the canonical NaN is not poison
    two = poisoned_like(t, 2)
    assert two.isnan().all() and unwritten(two, 1) == 0 and unwritten(two, 2) == 5


@pytest.mark.parametrize("dtype", INTS)
def test_integer_and_bool_poison_uses_two_different_sentinels(dtype):
    t = torch.zeros(7, dtype=dtype)
    poison([t], 1)
    assert holds_poison(t, 1).all() and not holds_poison(t, 2).any()
    poison([t], 2)
    assert holds_poison(t, 2).all()


def test_poison_fills_only_the_view():
    storage = torch.zeros(20)
    view = storage.as_strided((3, 4), (6, 1), 2)
    poison([view])
    assert unwritten(storage) == 12 and unwritten(view) == 12 and storage[0] == 0 and storage[6] == 0


# ---------------------------------------------------------------------------------- compare

def test_identical_outputs_pass_with_no_worst_element():
    base = torch.randn(37, 129)
    result = compare("out", base, base.clone(), "bitwise")
    assert result.ok and result.bad == 0 and result.worst is None
    assert "identical" in result.message()


def test_worst_element_has_its_multi_dim_index_and_both_values():
    base = torch.randn(37, 129)
    cand = base.clone()
    cand[36, 128] += 0.5
    cand[3, 7] += 1e-7 * abs(float(base[3, 7]))  # inside the fp32 tolerance
    result = compare("out", base, cand)
    assert not result.ok and result.bad == 1
    w = result.worst
    assert w.index == (36, 128) and w.base == pytest.approx(float(base[36, 128]))
    assert w.cand == pytest.approx(float(cand[36, 128])) and w.abs_err == pytest.approx(0.5, rel=1e-5)
    assert w.reason == "value"
    assert "out[36, 128]: baseline" in result.message() and "1 of 4773 elements bad" in result.message()


def test_a_worst_element_comes_back_from_its_json_and_reads_the_same():
    """``Worst.from_json`` (a report reads verification's JSON): NaN and Inf came as strings."""
    base = torch.tensor([1.0, 2.0, 3.0])
    cand = torch.tensor([1.0, float("nan"), 3.5])
    result = compare("out", base, cand)
    body = result.to_json()["worst"]
    assert body["abs_err"] == "inf" and body["score"] == "inf"  # what JSON holds
    back = Worst.from_json({**body, "unknown": 1})
    assert back.index == (1,) and back.abs_err == math.inf and back.score == math.inf
    assert back.describe("out") == result.worst.describe("out")
    assert math.isnan(Worst.from_json({**body, "score": None}).score)


def test_worst_of_is_the_check_with_the_highest_score():
    base = torch.randn(8, 16)
    near, far = base.clone(), base.clone()
    near[0, 0] += 0.01
    far[7, 15] += 1.0
    checks = [compare("same", base, base.clone()), compare("near", base, near), compare("far", base, far),
              compare("far again", base, far)]
    assert worst_of(checks).name == "far"  # the first of equal scores
    assert worst_of(checks[:1]) is None and worst_of([]) is None


@pytest.mark.parametrize("dtype,rtol", [(torch.float32, 1e-4), (torch.float16, 1e-2), (torch.bfloat16, 1e-2)])
def test_tolerance_mode_is_the_table_and_can_fail(dtype, rtol):
    base = (torch.rand(1000) + 1).to(dtype)
    inside = (base.double() * (1 + rtol / 4)).to(dtype)
    outside = (base.double() * (1 + rtol * 4)).to(dtype)
    assert compare("out", base, inside).ok
    result = compare("out", base, outside)
    assert not result.ok and result.bad == 1000 and result.worst.score > 1


def test_bitwise_mode_catches_one_flipped_bit_a_signed_zero_and_a_nan_payload():
    base = torch.randn(1000)
    base[10] = 0.0
    base[20] = math.nan
    for index, change in ((500, lambda c: c.view(torch.int32).__setitem__(500, c.view(torch.int32)[500] ^ 1)),
                          (10, lambda c: c.__setitem__(10, -0.0)),
                          (20, lambda c: c.view(torch.int32).__setitem__(20, 0x7FC00001))):
        cand = base.clone()
        change(cand)
        result = compare("out", base, cand, "bitwise")
        assert not result.ok and result.bad == 1 and result.worst.index == (index,), index
        assert compare("out", base, cand).ok  # the same values under the tolerance


def test_fast_math_mode_limits_relative_error_and_checks_nan_inf_parity():
    base = torch.randn(10000).abs() + 0.1
    assert compare("out", base, base * (1 + 1e-6), "fast_math").ok
    assert not compare("out", base, base * (1 + 1e-6), "bitwise").ok
    result = compare("out", base, base * (1 + 2**-12), "fast_math")  # 2.4e-4 > 1e-4
    assert not result.ok and result.max_rel_err > 1e-4
    zero = base.clone()
    zero[0] = 0.0
    assert compare("out", zero, zero.clone(), "fast_math").ok
    off = zero.clone()
    off[0] = 1e-30  # anything but zero where the baseline is zero: infinite relative error
    assert compare("out", zero, off, "fast_math").worst.index == (0,)


@pytest.mark.parametrize("mode", ["tolerance", "fast_math", "bitwise"])
def test_nan_and_inf_parity(mode):
    base = torch.randn(1000)
    base[100] = math.inf
    base[200] = math.nan
    same = compare("out", base, base.clone(), mode)
    assert same.ok and same.nan_mismatch == 0 and same.inf_mismatch == 0
    inf = base.clone()
    inf[5] = math.inf  # baseline finite there
    result = compare("out", base, inf, mode)
    assert not result.ok and result.inf_mismatch == 1 and result.worst.index == (5,)
    assert result.worst.reason == "inf"
    nan = base.clone()
    nan[7] = math.nan
    result = compare("out", base, nan, mode)
    assert not result.ok and result.nan_mismatch == 1 and result.worst.reason == "nan"
    finite = base.clone()
    finite[200] = 1.0  # the baseline's NaN must stay NaN
    assert compare("out", base, finite, mode).nan_mismatch == 1
    neg = base.clone()
    neg[100] = -math.inf
    assert compare("out", base, neg, mode).inf_mismatch == 1


def test_unwritten_candidate_elements_fail_and_both_unwritten_is_fine():
    base = poisoned_like(torch.zeros(1000))
    base[::2] = torch.randn(500)  # the baseline writes half, by design
    cand = base.clone()
    assert compare("out", base, cand, "bitwise").ok
    assert compare("out", base, cand).both_unwritten == 500
    poison([cand[998:999]])  # the candidate forgets one the baseline wrote
    result = compare("out", base, cand)
    assert not result.ok and result.unwritten == 1
    assert result.worst.index == (998,) and result.worst.reason == "unwritten" and result.worst.cand_unwritten
    assert "candidate unwritten" in result.message()
    extra = base.clone()
    extra[1] = 5.0  # the candidate writes where the baseline did not
    result = compare("out", base, extra)
    assert not result.ok and result.extra_writes == 1 and result.worst.reason == "extra_write"


def test_computed_nan_is_not_unwritten():
    base = torch.full((10,), math.nan)
    result = compare("out", base, poisoned_like(base))
    assert not result.ok and result.unwritten == 10


def test_without_poison_a_sentinel_is_just_a_value():
    base = poisoned_like(torch.zeros(10))
    assert compare("out", base, base.clone(), poisoned=False).ok
    assert compare("out", base, base.clone(), poisoned=False).both_unwritten == 0


def test_integer_outputs_are_exact_and_need_the_second_sentinel_to_be_sound():
    # the baseline legitimately writes sentinel 1 at element 3; the candidate never writes it
    def run(which, write_all):
        out = poisoned_like(torch.zeros(10, dtype=torch.int32), which)
        s1 = int(poisoned_like(torch.zeros(1, dtype=torch.int32), 1)[0])
        out[:] = torch.arange(10, dtype=torch.int32) if write_all else out
        out[3] = s1 if write_all else out[3]
        if not write_all:
            out[:3] = torch.arange(3, dtype=torch.int32)
            out[4:] = torch.arange(4, 10, dtype=torch.int32)
        return out

    base1, base2, cand1, cand2 = run(1, True), run(2, True), run(1, False), run(2, False)
    assert compare("q", base1, cand1).ok  # one sentinel cannot tell: the value matches
    result = compare("q", base1, cand1, base_alt=base2, cand_alt=cand2)
    assert not result.ok and result.unwritten == 1 and result.worst.index == (3,)
    wrong = base1.clone()
    wrong[9] += 1
    assert compare("q", base1, wrong, base_alt=base2, cand_alt=base2).worst.index == (9,)


def test_mismatched_shapes_are_an_error():
    with pytest.raises(ValueError, match="out: baseline float32\\[4\\] and candidate float32\\[5\\]"):
        compare("out", torch.zeros(4), torch.zeros(5))


# --------------------------------------------------------------------------------- chunking

@pytest.mark.parametrize("shape,limit", [((1000,), 7), ((37, 129), 50), ((37, 129), 1000), ((3, 5, 7), 4),
                                         ((), 1)])
def test_chunks_cover_every_element_in_order(shape, limit):
    t = torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape)
    seen = torch.cat([part[0] for _, part in chunks([t], limit)]) if t.dim() else t.reshape(-1)
    assert torch.equal(seen, t.reshape(-1))
    assert all(start == int(part[0][0]) for start, part in chunks([t], limit))
    assert all(part[0].numel() <= max(limit, 1) for _, part in chunks([t], limit))


def test_chunked_compare_finds_the_same_worst_element():
    base = torch.randn(37, 129).t()  # non-contiguous
    cand = base.clone()
    cand[100, 20] += 1.0
    cand[5, 30] = math.inf
    whole = compare("out", base, cand)
    small = compare("out", base, cand, limit=10)
    assert whole.worst.index == small.worst.index == (5, 30)
    assert (whole.bad, whole.max_abs_err) == (small.bad, small.max_abs_err)


# ----------------------------------------------------------------------------- nondeterminism

def test_spread_and_widened_tolerance_for_a_nondeterministic_baseline():
    base1 = torch.randn(1000) * 100
    base2 = base1 + torch.randn(1000) * 1e-2  # two runs of an atomic reduction
    seen = spread(base1, base2)
    assert not seen.deterministic and seen.differing > 900 and 0 < seen.max_abs < 0.1
    assert spread(base1, base1.clone()).deterministic
    tol = widen(tolerance_for("float32"), seen.max_abs)
    assert tol.atol == pytest.approx(NONDETERMINISM_FACTOR * seen.max_abs) and "nondeterministic" in tol.reason
    near = base1.clone()
    near[0] += 2 * seen.max_abs  # within the widened tolerance, outside the table's
    assert not compare("out", base1, near).ok and compare("out", base1, near, tolerance=tol).ok
    far = base1.clone()
    far[0] += 100 * seen.max_abs + 1
    assert not compare("out", base1, far, tolerance=tol).ok
    exact = widen(tolerance_for("float32", "bitwise"), seen.max_abs)
    assert not exact.exact and compare("out", base1, near, "bitwise", exact).ok
    assert widen(tolerance_for("float32"), 0.0) == tolerance_for("float32")


def test_spread_leaves_out_elements_unwritten_in_both_runs():
    first, second = poisoned_like(torch.zeros(10), 1), poisoned_like(torch.zeros(10), 2)
    first[:5] = second[:5] = torch.arange(5.0)
    assert spread(first, second, poisoned=True).deterministic
    assert not spread(first, second).deterministic


def test_depends_on_initial_tells_in_out_from_pure_outputs():
    x = torch.randn(100)
    start, other = torch.randn(100), torch.randn(100)
    pure = x * 2
    assert not depends_on_initial(pure, start, pure.clone(), other)
    partial_a, partial_b = start.clone(), other.clone()
    partial_a[::2] = partial_b[::2] = x[::2]  # writes half, never reads
    assert not depends_on_initial(partial_a, start, partial_b, other)
    assert depends_on_initial(start + x, start, other + x, other)  # acc += x
