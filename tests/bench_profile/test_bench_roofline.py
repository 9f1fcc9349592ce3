"""Bytes moved per launch, checked by hand on specs with views, broadcasts, in-out tensors and
Inductor's own count; and the bandwidth arithmetic."""

from __future__ import annotations

import pytest

from tritune.bench import roofline
from tritune.model.launch import ArgSpec, LaunchSpec


def tensor(name, shape, stride=None, dtype="float32", **kw) -> ArgSpec:
    if stride is None:
        stride, step = [], 1
        for size in reversed(shape):
            stride.insert(0, step)
            step *= size
    return ArgSpec(name, "tensor", shape=list(shape), stride=list(stride), dtype=dtype, device="cuda:0", **kw)


def spec(*args: ArgSpec, **changes) -> LaunchSpec:
    fields = dict(kernel="k", kind="jit", module="m", source_file="m.py", source="sources/m.py",
                  source_hash="0" * 64, args=list(args), constexprs={}, options={}, grid=[1])
    fields.update(changes)
    return LaunchSpec(**fields)


def test_elementwise_reads_inputs_once_and_writes_the_output_once():
    moved = roofline.traffic(spec(tensor("x", [1000]), tensor("y", [1000], dtype="float16"),
                                  tensor("out", [1000], written=True), ArgSpec("n", "scalar", value=1000, type="int")))
    assert moved == roofline.Traffic(bytes=4000 + 2000 + 4000, source="estimate", read_bytes=6000, write_bytes=4000)
    assert moved.estimated


def test_a_slice_of_a_big_buffer_counts_the_slice_not_the_storage():
    # x[:, :10] of a [100, 1000] fp32 buffer: 1000 elements addressed, storage 100 000.
    column_slice = tensor("x", [100, 10], stride=[1000, 1], storage_size=100_000)
    offset_view = tensor("y", [10], storage_offset=5000, storage_size=100_000)
    assert roofline.view_bytes(column_slice) == 100 * 10 * 4
    assert roofline.view_bytes(offset_view) == 10 * 4


def test_broadcast_dimensions_add_nothing_and_overlap_is_capped_by_the_span():
    bias = tensor("b", [512, 64], stride=[0, 1])  # one row of 64, broadcast over 512 rows
    assert roofline.view_elements(bias) == 64
    windows = tensor("w", [97, 8], stride=[1, 1])  # unfold(0, 8, 1) of 104 elements
    assert roofline.view_elements(windows) == 104
    transposed = tensor("t", [64, 32], stride=[1, 64])
    assert roofline.view_elements(transposed) == 64 * 32
    empty = tensor("e", [0, 5])
    assert roofline.view_elements(empty) == 0


def test_in_out_tensors_count_twice():
    # Inductor's in-place buffer: the name says it is read and written.
    inductor_style = spec(tensor("in_out_ptr0", [256], written=True), tensor("in_ptr0", [256]))
    assert roofline.traffic(inductor_style).bytes == 1024 * 2 + 1024
    # Written and not named in-out: written only.
    plain = spec(tensor("out", [256], written=True), tensor("x", [256]))
    assert roofline.traffic(plain).bytes == 1024 + 1024
    # The capture's own list of loaded arguments wins over the name.
    told = spec(tensor("out", [256], written=True), tensor("x", [256]), extra={"reads": ["out", "x"]})
    assert roofline.traffic(told).bytes == 1024 * 2 + 1024
    told_not = spec(tensor("in_out_ptr0", [256], written=True), extra={"reads": []})
    assert roofline.traffic(told_not).bytes == 1024


def test_inductor_kernel_num_gb_wins_and_is_not_an_estimate():
    moved = roofline.traffic(spec(tensor("x", [1000]), extra={"kernel_num_gb": 0.0125}))
    assert moved.bytes == 12_500_000 and moved.source == "inductor" and not moved.estimated
    assert moved.read_bytes is None


def test_unknown_dtype_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown tensor dtype 'float4'"):
        roofline.traffic(spec(tensor("x", [4], dtype="float4")))


def test_bandwidth_arithmetic():
    assert roofline.achieved_gbps(3_000_000_000, 1.0) == pytest.approx(3000.0)
    assert roofline.achieved_gbps(1000, None) is None and roofline.achieved_gbps(1000, 0.0) is None
    assert roofline.roofline_fraction(1500.0, 3000.0) == pytest.approx(0.5)
    assert roofline.roofline_fraction(1500.0, None) is None
    assert roofline.floor_ms(3_000_000_000, 3000.0) == pytest.approx(1.0)


def test_io_bytes_reads_each_input_once_and_writes_each_output_once():
    """A function's live tensors (``tritune generate``'s floor): a tensor passed twice counts once,
    scalars nothing."""
    torch = pytest.importorskip("torch")
    x, bias = torch.empty(6, 40, dtype=torch.float16), torch.empty(40)
    out = torch.empty(6, 40, dtype=torch.float16)
    assert roofline.distinct_tensors((x, x, 0.5)) == [x] and roofline.distinct_tensors(out) == [out]
    assert roofline.io_bytes((x, bias), out) == 480 + 160 + 480
    assert roofline.io_bytes((x, x, 0.5), (out, bias)) == 480 + 480 + 160
