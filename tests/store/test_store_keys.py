"""Decision keys: stable for one launch, different for another GPU / Triton / dtype / shape
bucket / specialization, and the same from live arguments as from the captured spec."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune.capture.jit_launch import Kernel
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.model.key import DecisionKey
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.target import Target
from tritune.store import LiveKeyer, key_for, size_bucket, triton_int_class
from tritune.store.keys import constexpr_value

KERNELS = Path(__file__).parents[1] / "programs" / "capture_kernels.py"
H100 = Target("NVIDIA H100 80GB HBM3", 90, "3.6.0")


def tensor(name, shape, dtype="float32", offset=0) -> ArgSpec:
    stride = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        stride[i] = stride[i + 1] * shape[i + 1]
    return ArgSpec(name, "tensor", shape=list(shape), stride=stride, dtype=dtype, device="cuda:0",
                   storage_offset=offset)


def spec(n=1000, dtype="float32", block=128, offset=0, scale=2.0, **changes) -> LaunchSpec:
    fields = dict(kernel="add_kernel", kind="jit", module="m", source_file="m.py", source="sources/m.py",
                  source_hash="a" * 64,
                  args=[tensor("x_ptr", [n], dtype, offset), ArgSpec("none_ptr", "none"),
                        ArgSpec("one", "scalar", value=1, type="int"), tensor("out_ptr", [n], dtype),
                        ArgSpec("n", "scalar", value=n, type="int"),
                        ArgSpec("scale", "scalar", value=scale, type="float"),
                        ArgSpec("BLOCK", "constexpr")],
                  constexprs={"BLOCK": block}, options={"num_warps": 4}, grid=[-(-n // block)])
    fields.update(changes)
    return LaunchSpec(**fields)


def test_size_bucket_and_triton_int_class():
    assert [size_bucket(n) for n in (0, 1, 2, 3, 1000, 1024, 1025)] == [0, 1, 2, 4, 1024, 1024, 2048]
    assert size_bucket(-5) == -8
    assert [triton_int_class(v) for v in (1, 16, 17, 0, 2**31, 2**40 + 1, 2**63)] == \
        ["1", "i32D", "i32", "i32D", "i64D", "i64", "u64D"]


def test_same_spec_same_key_and_json_round_trip(tmp_path):
    one, two = key_for(spec(), H100), key_for(spec(), H100)
    assert one == two and one.sha == two.sha and len(one.sha) == 64
    again = key_for(LaunchSpec.from_json(json.loads(json.dumps(spec().to_json()))), H100)
    assert again.sha == one.sha
    assert DecisionKey.from_json(one.to_json()).sha == one.sha
    body = json.loads(one.specialization)
    assert body["constexprs"] == {"BLOCK": 128}
    assert body["args"][0] == ["x_ptr", "T", "float32", [1024], 1]


@pytest.mark.parametrize("change", [
    {"gpu": "NVIDIA A100-SXM4-80GB"}, {"capability": 80}, {"triton_version": "3.5.0"},
])
def test_target_changes_the_key(change):
    assert key_for(spec(), dataclasses.replace(H100, **change)).sha != key_for(spec(), H100).sha


@pytest.mark.parametrize("other", [
    spec(dtype="float16"),              # dtype
    spec(n=1025),                       # next shape bucket
    spec(block=256),                    # constexpr
    spec(offset=1),                     # pointer no longer 16-byte aligned
    spec(source_hash="b" * 64),         # edited kernel
    spec(kernel="other_kernel"),
])
def test_specialization_changes_the_key(other):
    assert key_for(other, H100).sha != key_for(spec(), H100).sha


def test_nearby_shapes_and_float_values_share_a_key():
    base = key_for(spec(n=1000), H100).sha
    assert key_for(spec(n=1000, scale=3.5), H100).sha == base  # floats are not specialized
    assert key_for(spec(n=993), H100).sha == base  # same bucket (1024), neither divisible by 16
    assert key_for(spec(n=1008), H100).sha != base  # 1008 = 63 * 16: Triton's class differs
    assert key_for(spec(offset=4), H100).sha == base  # 4 floats = 16 bytes: still aligned


def test_int_one_is_its_own_class():
    ones = spec(args=[ArgSpec("n", "scalar", value=1, type="int")], constexprs={})
    twos = spec(args=[ArgSpec("n", "scalar", value=2, type="int")], constexprs={})
    bools = spec(args=[ArgSpec("n", "scalar", value=True, type="bool")], constexprs={})
    assert len({key_for(s, H100).sha for s in (ones, twos, bools)}) == 3


# ----------------------------------------------------------------------- live arguments

@pytest.fixture(scope="module")
def k():
    return import_interpreted(KERNELS, "store_capture_kernels")


def launches(k):
    """(kernel, args, kwargs, grid) of launches covering views, None, ints == 1, floats, defaults."""
    base = torch.randn(2100)
    half = torch.randn(64).half()
    return [
        (k.add_kernel, (base[3:1003], None, 1, torch.empty(1000), 1000, 2.0), {"BLOCK": 128}),
        (k.add_kernel, (base[4:1004], None, 1, torch.empty(1000), 1000, 0.5), {"BLOCK": 128}),
        (k.add_kernel, (base[:1025], None, 1, torch.empty(1025), 1025, 2.0), {"BLOCK": 256}),
        (k.add_kernel, (half, None, 1, torch.empty(64).half(), 64, 2.0), {"BLOCK": 64}),
        (k.inplace_kernel, (torch.zeros(100), 100), {}),  # BLOCK from its default
    ]


def test_live_key_equals_captured_key(k, tmp_path):
    keyers, shas = {}, set()
    for index, (fn, args, kwargs) in enumerate(launches(k)):
        with capture(tmp_path / str(index)):
            fn[(4,)](*args, **kwargs)
        [captured] = read_launches(tmp_path / str(index))
        kernel = Kernel(fn)
        keyer = keyers.setdefault(id(fn), LiveKeyer.for_kernel(fn, H100))  # shared: its cache too
        live = keyer(kernel.bind(args, kwargs))
        assert live == key_for(captured, H100), (live.specialization, key_for(captured, H100).specialization)
        assert keyer(kernel.bind(args, kwargs)) is live  # cached
        shas.add(live.sha)
    assert len(shas) == 5  # every launch above is its own specialization


def test_live_keyer_cache_separates_what_the_key_separates():
    keyer = LiveKeyer("kern", "a" * 64, ["x", "n", "B"], ["B"], H100)
    x = torch.empty(16)
    seen = [keyer({"x": x, "n": n, "B": b}) for n, b in ((1, 4), (True, 4), (17, 4), (16, 4), (1, True), (1, 1.0))]
    assert len({key.sha for key in seen}) == len(seen)  # 1 vs True vs 17 vs 16; constexpr 1 vs True vs 1.0
    assert keyer({"x": x, "n": 2.0, "B": 4}).sha == keyer({"x": x, "n": 3.0, "B": 4}).sha
    assert keyer({"x": x.half(), "n": 1, "B": 4}).sha != seen[0].sha
    assert keyer({"x": object(), "n": 1, "B": 4}) is None  # not describable: no decision applies
    assert keyer({"x": x, "n": 1}) is None  # a constexpr missing


def test_live_key_is_cheap():
    keyer = LiveKeyer("kern", "a" * 64, ["x", "y", "n", "s", "B"], ["B"], H100)
    bound = {"x": torch.empty(4096), "y": torch.empty(4096), "n": 4096, "s": 0.5, "B": 1024}
    keyer(bound)
    start = time.perf_counter()
    for _ in range(2000):
        keyer(bound)
    per_call = (time.perf_counter() - start) / 2000
    assert per_call < 100e-6, f"{per_call * 1e6:.1f} us per live key"  # ~2-5 us measured on a CPU runner


def test_key_is_frozen():
    key = key_for(spec(), H100)
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.gpu_name = "other"  # type: ignore[misc]
    assert "sm_90" in key.describe()


def test_constexpr_objects_key_as_capture_records_them():
    import triton.language as tl

    from tritune.model.constexprs import encode

    values = [tl.constexpr(128), tl.float16, 128, None, True, 0.5, "evict_first", tl.pointer_type(tl.bfloat16)]
    assert [constexpr_value(v) for v in values] == [encode(v) for v in values]
    assert [constexpr_value(encode(v)) for v in values] == [encode(v) for v in values]  # recorded: unchanged
    keyer = LiveKeyer("kern", "a" * 64, ["x", "B", "T"], ["B", "T"], H100)
    live = keyer({"x": torch.empty(16), "B": tl.constexpr(128), "T": tl.float16})
    captured = spec(args=[tensor("x", [16]), ArgSpec("B", "constexpr"), ArgSpec("T", "constexpr")],
                    constexprs={"B": 128, "T": {"tl_dtype": "fp16"}}, kernel="kern")
    assert live == key_for(captured, H100)
    # the dtype is in the key: another dtype, or its name as a string (a constexpr the kernel
    # compares), is another key
    assert keyer({"x": torch.empty(16), "B": 128, "T": tl.bfloat16}) != live
    assert keyer({"x": torch.empty(16), "B": 128, "T": "fp16"}) != live


def test_a_constexpr_capture_cannot_record_has_no_key():
    keyer = LiveKeyer("kern", "a" * 64, ["x", "T"], ["T"], H100)
    assert keyer({"x": torch.empty(16), "T": object()}) is None


def test_current_target_under_the_interpreter(monkeypatch):
    from tritune.store import current_target

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert current_target() == Target("interpreter", 0, triton.__version__)
