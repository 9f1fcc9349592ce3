"""The launch spec format: round trip, identity, and clear errors for files that cannot be used."""

from __future__ import annotations

import json

import pytest

from tritune.capture.spec import read_launches, write_launches
from tritune.model.launch import ArgSpec, LaunchSpec, SpecError, min_storage_size


def make_spec(**changes) -> LaunchSpec:
    fields = dict(
        kernel="add_kernel", kind="jit", module="prog", source_file="prog.py", source="sources/prog.py",
        source_hash="ab" * 32,
        args=[ArgSpec("x_ptr", "tensor", shape=[6, 42], stride=[42, 1], dtype="float16", device="cuda:0"),
              ArgSpec("out_ptr", "tensor", shape=[6, 42], stride=[1, 6], dtype="float32", device="cuda:0",
                      written=True),
              ArgSpec("n", "scalar", value=252, type="int"), ArgSpec("bias", "none"),
              ArgSpec("BLOCK", "constexpr")],
        constexprs={"BLOCK": 128}, options={"num_warps": 4, "num_stages": 3}, grid=[2],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}]},
    )
    fields.update(changes)
    return LaunchSpec(**fields)


def test_round_trip_keeps_every_field(tmp_path):
    spec = make_spec(count=7, extra={"kernel_num_gb": 0.5})
    write_launches(tmp_path, [spec])
    [back] = read_launches(tmp_path)
    assert back.to_json() == spec.to_json()
    assert back.grid == [2, 1, 1] and back.count == 7 and back.arg("out_ptr").written


def test_identity_ignores_count_but_not_shapes_or_scalars():
    base = make_spec()
    assert make_spec(count=9).key() == base.key() and make_spec(count=9).id == base.id
    other_shape = make_spec(args=[ArgSpec("x_ptr", "tensor", shape=[6, 43], stride=[43, 1], dtype="float16")])
    other_scalar = make_spec(args=[*base.args[:2], ArgSpec("n", "scalar", value=253, type="int"), *base.args[3:]])
    assert len({base.key(), other_shape.key(), other_scalar.key(), make_spec(constexprs={"BLOCK": 64}).key()}) == 4


def test_storage_size_defaults_to_what_the_view_reaches():
    assert min_storage_size([6, 42], [42, 1]) == 252
    assert min_storage_size([6, 42], [1, 6], 10) == 10 + 1 + 5 + 41 * 6
    assert min_storage_size([0, 5], [5, 1]) == 0
    assert make_spec().arg("out_ptr").storage_size == 252


@pytest.mark.parametrize("bad, message", [
    (dict(kind="cuda"), "unknown kind"),
    (dict(grid=[1, 2, 3, 4]), "grid"),
    (dict(grid=[-1]), "grid"),
])
def test_invalid_specs_name_the_problem(bad, message):
    with pytest.raises(SpecError, match=message):
        make_spec(**bad)


def test_tensor_args_need_a_layout():
    with pytest.raises(SpecError, match="needs shape, stride and dtype"):
        ArgSpec("x", "tensor", shape=[3])
    with pytest.raises(SpecError, match="differ in rank"):
        ArgSpec("x", "tensor", shape=[3], stride=[1, 1], dtype="float32")
    with pytest.raises(SpecError, match="without data"):
        ArgSpec("x", "tensor", shape=[3], stride=[1], dtype="int64", values="saved")


def _write(tmp_path, text: str):
    (tmp_path / "launches.jsonl").write_text(text)
    return tmp_path


def test_truncated_file_is_reported_with_its_line(tmp_path):
    write_launches(tmp_path, [make_spec(), make_spec(grid=[3])])
    text = (tmp_path / "launches.jsonl").read_text()
    with pytest.raises(SpecError, match=r"launches.jsonl:3: .*truncated"):
        read_launches(_write(tmp_path, text[:-40]))


def test_file_from_another_version_is_refused(tmp_path):
    body = json.dumps(make_spec().to_json())
    with pytest.raises(SpecError, match="version 99.*upgrade tritune"):
        read_launches(_write(tmp_path, '{"tritune_launches": 99}\n' + body + "\n"))
    with pytest.raises(SpecError, match="version 0.*capture again"):
        read_launches(_write(tmp_path, '{"tritune_launches": 0}\n' + body + "\n"))


def test_missing_header_missing_field_and_missing_file(tmp_path):
    body = make_spec().to_json()
    with pytest.raises(SpecError, match="no tritune_launches header"):
        read_launches(_write(tmp_path, json.dumps(body) + "\n"))
    del body["grid"]
    with pytest.raises(SpecError, match=r":2: missing field\(s\) \['grid'\]"):
        read_launches(_write(tmp_path, '{"tritune_launches": 1}\n' + json.dumps(body) + "\n"))
    with pytest.raises(SpecError, match="no such file"):
        read_launches(tmp_path / "elsewhere")
    with pytest.raises(SpecError, match="empty file"):
        read_launches(_write(tmp_path, ""))
