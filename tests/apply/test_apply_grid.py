"""The fixed-grid rule of apply (``tritune.apply.grid``): recomputed where capture's rule explains
a dimension, kept where it does not, refused where a smaller block could leave work undone."""

from __future__ import annotations

from tritune.apply.grid import recompute


def test_an_explained_dimension_follows_the_block():
    assert recompute((4,), {"BLOCK": 32}, {"BLOCK": 64}, {"n": 100}) == (2,)
    assert recompute((4,), {"BLOCK": 32}, {"BLOCK": 16}, {"n": 100}) == (7,)
    assert recompute([4], {"BLOCK": 32}, {"BLOCK": 32}, {"n": 100}) == (4,)  # no change: as given


def test_two_dimensions_each_follow_their_block():
    before = {"BLOCK_M": 16, "BLOCK_N": 32}
    assert recompute((7, 4, 1), before, {"BLOCK_M": 32, "BLOCK_N": 64}, {"M": 100, "N": 100}) == (4, 2, 1)


def test_one_program_per_row_is_kept():
    # grid (rows,), BLOCK_SIZE covers a row of 300 columns: nothing explains 6 by a block
    assert recompute((6,), {"BLOCK_SIZE": 512}, {"BLOCK_SIZE": 1024}, {"n_cols": 300, "rows": 6}) == (6,)
    assert recompute((6,), {"BLOCK_SIZE": 512}, {"BLOCK_SIZE": 256}, {"n_cols": 300, "rows": 6}) == (6,)


def test_a_smaller_block_on_an_unexplained_dimension_of_one_is_refused():
    assert recompute((1,), {"BLOCK": 32}, {"BLOCK": 16}, {"n": 20}) is None
    assert recompute((1,), {"BLOCK": 32}, {"BLOCK": 64}, {"n": 20}) == (1,)  # larger: safe either way
    assert recompute((5, 1), {"BLOCK": 32}, {"BLOCK": 16}, {"rows": 5, "n": 20}) is None
    # a block that is not named *BLOCK* is kept as replay kept it (verification ran that grid)
    assert recompute((1,), {"TILE": 32}, {"TILE": 16}, {"n": 20}) == (1,)


def test_only_integer_changes_move_a_grid():
    assert recompute((4,), {"BLOCK": 32, "DTYPE": "fp16"}, {"DTYPE": "fp32"}, {"n": 100}) == (4,)
    assert recompute((4,), {"BLOCK": 32, "EVEN": False}, {"EVEN": True}, {"n": 100}) == (4,)
