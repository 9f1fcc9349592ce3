"""The no-alias assumption as a value: tensors' address ranges, the per-launch check, what capture
records, and ``Variant.assumes`` in the store's JSON (old variants unchanged)."""

from __future__ import annotations

import json

import pytest
import torch

from tritune import aliasing
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.variant import Variant
from tritune.store.records import variant_hash


def test_span_is_the_bytes_a_view_covers():
    base = torch.zeros(100)  # float32: 4 bytes an element
    start = base.data_ptr()
    assert aliasing.span(base) == (start, start + 400)
    assert aliasing.span(base[10:20]) == (start + 40, start + 80)
    assert aliasing.span(base.view(10, 10)[:, 2]) == (start + 8, start + 8 + (1 + 9 * 10) * 4)  # strided
    assert aliasing.span(base.view(10, 10)[2:4, :3]) == (start + 80, start + 80 + (1 + 10 + 2) * 4)
    first, stop = aliasing.span(base[5:5])
    assert first == stop  # empty (torch gives an empty view data_ptr 0)
    one = torch.zeros(1)
    assert aliasing.span(one.expand(8)) == (one.data_ptr(), one.data_ptr() + 4)  # stride 0: one element


@pytest.mark.parametrize("make, expected", [
    (lambda b: [b[:50], b[50:]], True),  # neighbours that touch, never share a byte
    (lambda b: [b[:51], b[50:]], False),
    (lambda b: [b, b], False),  # one buffer as input and output: an in-place call
    (lambda b: [b[10:20], b[:100]], False),  # one inside the other
    (lambda b: [b.view(10, 10)[:, 0], b.view(10, 10)[:, 1]], False),  # interleaved columns: ranges overlap
    (lambda b: [b[:0], b[:10]], True),  # an empty tensor covers nothing
    (lambda b: [b[:10], torch.zeros(10), b[20:30]], True),
    (lambda b: [b[:10], torch.zeros(10), b[5:30]], False),  # the overlapping pair not adjacent in the list
])
def test_disjoint(make, expected):
    assert aliasing.disjoint(make(torch.zeros(100))) is expected


def test_overlapping_names_each_pair_in_argument_order():
    base = torch.zeros(100)
    named = {"in_out_ptr0": base, "in_ptr0": torch.zeros(4), "out_ptr0": base[40:60], "out_ptr1": base[50:]}
    assert aliasing.overlapping(named) == [["in_out_ptr0", "out_ptr0"], ["in_out_ptr0", "out_ptr1"],
                                           ["out_ptr0", "out_ptr1"]]
    assert aliasing.overlapping({"x": base[:10], "y": base[10:]}) == []


def spec(extra: dict) -> LaunchSpec:
    return LaunchSpec(kernel="k", kind="jit", module="m", source_file="m.py", source="sources/m.py",
                      source_hash="0" * 64, args=[ArgSpec("x", "tensor", shape=[4], stride=[1], dtype="float32")],
                      constexprs={}, options={}, grid=[1], extra=extra)


def test_capture_records_overlaps_and_an_unknown_is_never_disjoint():
    extra: dict = {}
    aliasing.record(extra, {"x": torch.zeros(4), "y": torch.zeros(4)})
    assert extra == {"overlapping": []} and aliasing.disjoint_at_capture(spec(extra))
    x = torch.zeros(4)
    aliasing.record(extra, {"x": x, "y": x})
    assert extra == {"overlapping": [["x", "y"]]} and not aliasing.disjoint_at_capture(spec(extra))
    aliasing.record(extra, {"x": object()})  # no address to read: unknown
    assert extra == {} and not aliasing.disjoint_at_capture(spec(extra))  # a capture older than the field too


def test_guard_looks_at_the_tensors_where_the_signature_put_them():
    x, out = torch.zeros(8), torch.zeros(8)
    guard = aliasing.Guard((x, 8, out), {"w": torch.zeros(2), "BLOCK": 4}, torch.Tensor)
    assert (guard.positions, guard.names) == ((0, 2), ("w",))
    assert guard((x, 8, out), {"w": torch.zeros(2), "BLOCK": 4})
    assert not guard((x, 8, x), {"w": torch.zeros(2), "BLOCK": 4})
    assert not guard((x, 8, out), {"w": out[2:4], "BLOCK": 4})


PAIRS = [  # two tensors of 50 float32 elements each (200 bytes), as one signature fixes them
    (lambda b: (b[:50], b[25:75]), False),  # partial overlap, the first starts lower
    (lambda b: (b[25:75], b[:50]), False),  # the same pair the other way round
    (lambda b: (b[:50], b[49:99]), False),  # one element shared, at the end of the first
    (lambda b: (b[49:99], b[:50]), False),  # one element shared, at the start of the first
    (lambda b: (b[:50], b[50:]), True),  # neighbours that touch, never share a byte
    (lambda b: (b[50:], b[:50]), True),
    (lambda b: (b[:50], b[:50]), False),  # the same start: an in-place call
    (lambda b: (b.view(50, 2)[:, 0], b.view(50, 2)[:, 1]), False),  # interleaved, 4 bytes apart
    (lambda b: (b.view(50, 2)[:, 1], b.view(50, 2)[:, 0]), False),
    (lambda b: (b[:50], torch.zeros(50)), True),  # separate buffers
]


@pytest.mark.parametrize("make, expected", PAIRS)
def test_guard_with_two_tensors_sees_partial_overlaps(make, expected):
    """Two tensors take the guard's fast path (no sort): views of one buffer at different starts
    overlap when their byte ranges do, whichever comes first, and not when they only touch."""
    base = torch.zeros(100)
    pair = make(base)
    guard = aliasing.Guard((torch.zeros(50), 50, torch.zeros(50)), {}, torch.Tensor)
    assert guard((pair[0], 50, pair[1]), {}) is expected
    keyword = aliasing.Guard((torch.zeros(50),), {"out": torch.zeros(50)}, torch.Tensor)
    assert keyword((pair[0],), {"out": pair[1]}) is expected  # one positional, one keyword: same path
    assert aliasing.disjoint(pair) is expected  # the general check agrees


def test_variant_assumes_round_trips_and_old_variants_keep_their_json_and_hash():
    old = {"name": "passes=exact", "options": {}, "constexprs": {}, "passes": ["exact"], "fast_math": False,
           "source": None}  # what a store held before the field existed
    loaded = Variant.from_json(old)
    assert loaded.assumes == () and loaded.to_json() == old and loaded.key() == json.dumps(old, sort_keys=True)
    assert variant_hash(loaded) == variant_hash(old)
    noalias = Variant(name="passes=exact-noalias", passes=("exact-noalias",), assumes=["noalias"])
    body = noalias.to_json()
    assert body["assumes"] == ["noalias"] and Variant.from_json(json.loads(json.dumps(body))) == noalias
    assert noalias.key() != Variant(name="passes=exact-noalias", passes=("exact-noalias",)).key()
    assert noalias.describe() == "passes=exact-noalias, assumes noalias" and not noalias.is_baseline
    assert Variant(assumes=("noalias",)).is_baseline and Variant(assumes=("noalias",)).describe() == "baseline"


def test_a_variant_needs_the_check_when_it_says_so_or_its_passes_run_under_the_assumption():
    assert aliasing.assumes_noalias(Variant(constexprs={"BLOCK": 64}, assumes=("noalias",)))
    assert aliasing.assumes_noalias(Variant(passes=("exact-noalias",)))  # forgot to say so: still checked
    assert aliasing.assumes_noalias(Variant(passes=("merge-redundant-loads", "noalias")))
    assert not aliasing.assumes_noalias(Variant(passes=("exact",)))
    assert not aliasing.assumes_noalias(Variant(constexprs={"BLOCK": 64}))
