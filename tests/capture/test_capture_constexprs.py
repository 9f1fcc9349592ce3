"""Constexprs that are not JSON scalars (Triton dtypes, pointer dtypes, ``tl.constexpr`` wrappers,
tuples, jit functions) round-trip through capture, ``launches.jsonl`` and replay; older captures
that wrote them as text still read; launches capture cannot describe are named with why."""

from __future__ import annotations

import json

import pytest
import torch
import triton
import triton.language as tl

from conftest import import_interpreted
from tritune.capture import skipped
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.model import constexprs as codec
from tritune.model.launch import LaunchSpec, SpecError
from tritune.model.variant import Variant
from tritune.replay import Replay, make_args

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def triple(x):
    return x * 3


@triton.jit
def cast_kernel(x_ptr, out_ptr, n, OUT_DTYPE: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(ACC)
    tl.store(out_ptr + offs, (x * 2).to(OUT_DTYPE), mask=mask)


@triton.jit
def odd_kernel(x_ptr, out_ptr, n, PTR: tl.constexpr, SHIFT: tl.constexpr, MODE: tl.constexpr,
               SKIP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr.to(PTR) + offs, mask=mask)
    if MODE == "triple":
        x = x * 3
    if SKIP is None:
        x = x + SHIFT[1]
    tl.store(out_ptr + offs, x, mask=mask)


@triton.jit
def apply_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs, mask=mask)), mask=mask)


@triton.heuristics({"ACC": lambda args: tl.float32})
@triton.jit
def heur_kernel(x_ptr, out_ptr, n, OUT_DTYPE: tl.constexpr, ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, (tl.load(x_ptr + offs, mask=mask).to(ACC) * 2).to(OUT_DTYPE), mask=mask)


def fake_bench(fn, quantiles=None, **_):
    fn()
    return [1.0] * len(quantiles) if quantiles else 1.0


@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32})], key=["n"],
                 do_bench=fake_bench)
@triton.jit
def tuned_kernel(x_ptr, out_ptr, n, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, (tl.load(x_ptr + offs, mask=mask) * 2).to(OUT_DTYPE), mask=mask)
'''
N = 50


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # replay runs the kernels on the CPU


@pytest.fixture(scope="module")
def k(tmp_path_factory):
    path = tmp_path_factory.mktemp("constexpr_kernels") / "constexpr_kernels.py"
    path.write_text(KERNELS)
    return import_interpreted(path, "constexpr_kernels")


# ---------------------------------------------------------------------------------- the codec

@pytest.mark.parametrize("value, encoded", [
    (tl.float16, {"tl_dtype": "fp16"}),
    (tl.bfloat16, {"tl_dtype": "bf16"}),
    (tl.float32, {"tl_dtype": "fp32"}),
    (tl.int8, {"tl_dtype": "int8"}),
    (tl.constexpr(tl.float16), {"tl_dtype": "fp16"}),
    (tl.constexpr(64), 64),
    (tl.pointer_type(tl.bfloat16), {"tl_pointer": {"tl_dtype": "bf16"}, "address_space": 1, "const": False}),
    ((2, tl.float16), {"tuple": [2, {"tl_dtype": "fp16"}]}),
    (None, None), (True, True), (0.5, 0.5), ("gelu", "gelu"),
])
def test_values_encode_as_tagged_json_and_decode_to_what_triton_compares_equal(value, encoded):
    assert codec.encode(value) == encoded
    assert json.loads(json.dumps(encoded)) == encoded  # plain JSON
    plain = value.value if isinstance(value, tl.constexpr) else value
    assert codec.decode(encoded) == plain and type(codec.decode(encoded)) is type(plain)
    assert codec.encode(codec.decode(encoded)) == encoded
    assert codec.encode(encoded) == encoded  # the key takes recorded values as they are


def test_a_jit_function_is_found_by_name_in_the_kernel_s_module(k):
    encoded = codec.encode(k.triple)
    assert encoded == {"tl_jit": "triple", "module": "constexpr_kernels"}
    assert codec.decode(encoded, scope=vars(k)) is k.triple
    with pytest.raises(codec.ConstexprError, match="constexpr 'FN': jit function constexpr_kernels.triple is not"):
        codec.decode(encoded, "FN", scope={})


def test_what_cannot_be_encoded_or_decoded_is_one_line_naming_the_parameter():
    with pytest.raises(codec.UnsupportedConstexpr, match="constexpr 'MODE' is a builtins.object"):
        codec.encode(object(), "MODE")
    with pytest.raises(codec.UnsupportedConstexpr, match="torch.dtype"):
        codec.encode(torch.float16, "T")  # a torch dtype is not a Triton one: never guessed
    with pytest.raises(codec.ConstexprError, match="'fp7' is not a Triton dtype"):
        codec.decode({"tl_dtype": "fp7"}, "T")
    with pytest.raises(codec.ConstexprError, match="not a constexpr encoding"):
        codec.decode({"torch_dtype": "float16"}, "T")
    with pytest.raises(codec.ConstexprError, match="a list \\[1, 2\\] is not a constexpr value"):
        codec.decode([1, 2], "T")
    assert codec.key_value([1, {"tl_dtype": "fp16"}]) == [1, {"tl_dtype": "fp16"}]  # still keyed: no crash


# ------------------------------------------------------------------ capture, the file, replay

def _replayed_outputs(spec, root, variant=Variant()):
    replay = Replay(spec, variant, root=root)
    args = make_args(spec, root, seed=1)
    replay(args)
    return args


def test_dtype_constexprs_round_trip_through_capture_and_replay(k, tmp_path):
    x = torch.randn(N)
    with capture(tmp_path):
        out16 = torch.empty(N, dtype=torch.float16)
        k.cast_kernel[(triton.cdiv(N, 16),)](x, out16, N, tl.float16, ACC=tl.float32, BLOCK=16)  # dtype positional
        outb = torch.empty(N, dtype=torch.bfloat16)
        k.heur_kernel[(triton.cdiv(N, 16),)](x, outb, N, tl.bfloat16, BLOCK=16)  # heuristics sets ACC
        out8 = torch.empty(N, dtype=torch.int8)
        k.tuned_kernel[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x.mul(3), out8, N, OUT_DTYPE=tl.int8)
    line = (tmp_path / "launches.jsonl").read_text()
    assert '{"tl_dtype": "fp16"}' in line and '"fp16"' not in line.replace('{"tl_dtype": "fp16"}', "")
    specs = {s.kernel: s for s in read_launches(tmp_path)}
    cast, heur, tuned = specs["cast_kernel"], specs["heur_kernel"], specs["tuned_kernel"]
    assert cast.constexprs == {"OUT_DTYPE": {"tl_dtype": "fp16"}, "ACC": {"tl_dtype": "fp32"}, "BLOCK": 16}
    assert heur.kind == "heuristics" and heur.constexprs["ACC"] == {"tl_dtype": "fp32"}
    assert tuned.kind == "autotune" and tuned.constexprs["OUT_DTYPE"] == {"tl_dtype": "int8"}
    assert "constexprs_as_text" not in cast.extra
    for spec, dtype in ((cast, torch.float16), (heur, torch.bfloat16), (tuned, torch.int8)):
        args = _replayed_outputs(spec, tmp_path)
        assert args["out_ptr"].dtype == dtype
        expected = (args["x_ptr"].float() * 2).to(dtype)
        # the interpreter rounds fp32 -> bf16 its own way: one bf16 step apart at most
        torch.testing.assert_close(args["out_ptr"].float(), expected.float(), rtol=2 ** -7 if dtype == torch.bfloat16
                                   else 0, atol=0)
    # a knob variant of a dtype kernel replays too (the grid follows BLOCK)
    wide = Replay(cast, Variant(name="block 64", constexprs={"BLOCK": 64}), root=tmp_path)
    assert wide.grid == (1, 1, 1) and wide.constexprs["OUT_DTYPE"] == tl.float16
    # a variant may set a dtype constexpr itself (as the store keeps it: encoded)
    acc16 = Replay(cast, Variant(name="fp16 acc", constexprs={"ACC": {"tl_dtype": "fp16"}}), root=tmp_path)
    assert acc16.constexprs["ACC"] == tl.float16 and acc16.grid == tuple(cast.grid)
    with pytest.raises(SpecError, match="'ACC': 'half' is not a Triton dtype"):
        Replay(cast, Variant(name="bad", constexprs={"ACC": {"tl_dtype": "half"}}), root=tmp_path)


def test_pointer_dtypes_tuples_strings_and_none_replay(k, tmp_path):
    x = torch.randn(N)
    with capture(tmp_path):
        out = torch.empty(N)
        k.odd_kernel[(1,)](x, out, N, tl.pointer_type(tl.float32), (1, 5), "triple", None, BLOCK=64)
    assert torch.equal(out, x * 3 + 5)
    (spec,) = read_launches(tmp_path)
    assert spec.constexprs["PTR"] == {"tl_pointer": {"tl_dtype": "fp32"}, "address_space": 1, "const": False}
    assert spec.constexprs["SHIFT"] == {"tuple": [1, 5]} and spec.constexprs["MODE"] == "triple"
    assert spec.constexprs["SKIP"] is None
    args = _replayed_outputs(spec, tmp_path)
    assert torch.equal(args["out_ptr"], args["x_ptr"] * 3 + 5)


JIT_FN_SCRIPT = """
import sys
import torch, triton.language as tl
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.replay import Replay, make_args
sys.path.insert(0, sys.argv[1])
import constexpr_kernels as k

x = torch.randn(50)
with capture(sys.argv[2]):
    k.apply_kernel[(1,)](x, torch.empty(50), 50, k.triple, BLOCK=64)
(spec,) = read_launches(sys.argv[2])
replay = Replay(spec, root=sys.argv[2])
args = make_args(spec, sys.argv[2], seed=1)
replay(args)
assert torch.equal(args["out_ptr"], args["x_ptr"] * 3)
print(spec.constexprs["FN"])
"""


def test_a_jit_function_constexpr_replays_from_the_kernel_s_own_file(k, tmp_path):
    # its own process: an interpreted jit helper leaves triton.language patched for later compiles
    import os
    import subprocess
    import sys

    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "constexpr_kernels.py").write_text(KERNELS)
    done = subprocess.run([sys.executable, "-c", JIT_FN_SCRIPT, str(folder), str(tmp_path / "cap")],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "{'tl_jit': 'triple', 'module': 'constexpr_kernels'}"


OLD_SPEC = {  # a launch as a capture made before the tagged encoding wrote it
    "kernel": "cast_kernel", "kind": "jit", "module": "m", "source_file": "m.py", "source": "sources/m.py",
    "source_hash": "0" * 64, "args": [{"name": "OUT_DTYPE", "kind": "constexpr"}, {"name": "P", "kind": "constexpr"},
                                      {"name": "FN", "kind": "constexpr"}],
    "constexprs": {"OUT_DTYPE": "fp16", "P": "pointer<bf16>", "FN": "JITFunction(m:triple)"}, "options": {},
    "grid": [1, 1, 1], "extra": {"constexprs_as_text": ["OUT_DTYPE", "P", "FN"]},
}


def test_an_older_capture_s_dtype_text_reads_as_dtypes_and_what_is_left_is_refused_by_name(tmp_path):
    spec = LaunchSpec.from_json(OLD_SPEC)
    assert spec.constexprs["OUT_DTYPE"] == {"tl_dtype": "fp16"}
    assert spec.constexprs["P"] == {"tl_pointer": {"tl_dtype": "bf16"}, "address_space": 1, "const": False}
    assert spec.constexprs["FN"] == "JITFunction(m:triple)" and spec.extra["constexprs_as_text"] == ["FN"]
    assert OLD_SPEC["constexprs"]["OUT_DTYPE"] == "fp16"  # the caller's dict is left alone
    with pytest.raises(SpecError, match=r"constexpr\(s\) \['FN'\] were recorded as text .* capture again"):
        Replay(spec, root=tmp_path)
    (tmp_path / "launches.jsonl").write_text('{"tritune_launches": 1}\n' + json.dumps(OLD_SPEC) + "\n")
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "m.py").write_text("")
    assert read_launches(tmp_path)[0].constexprs["OUT_DTYPE"] == {"tl_dtype": "fp16"}


# ------------------------------------------------------------------------------------ skipped

def test_a_launch_capture_cannot_describe_is_recorded_as_skipped_with_why(k, tmp_path, capfd):
    x = torch.randn(N)

    class Mode:  # a constexpr Triton runs (the kernel only compares it) but capture cannot write
        def __eq__(self, other):
            return False

        __hash__ = object.__hash__

    mode = Mode()
    with capture(tmp_path):
        for _ in range(3):
            k.odd_kernel[(1,)](x, torch.empty(N), N, tl.pointer_type(tl.float32), (0, 0), mode, 1, BLOCK=64)
        k.cast_kernel[(1,)](x, torch.empty(N), N, tl.float32, ACC=tl.float32, BLOCK=64)
    assert [s.kernel for s in read_launches(tmp_path)] == ["cast_kernel"]
    (record,) = skipped.read(tmp_path)
    assert (record.kernel, record.module, record.kind, record.count) == ("odd_kernel", "constexpr_kernels",
                                                                         "unsupported", 3)
    assert "constexpr 'MODE' is a" in record.reason and "Mode" in record.reason
    lines = skipped.lines([record])
    assert lines[0] == "3 launch(es) of 1 kernel(s) were not captured (skipped.jsonl):"
    assert "odd_kernel: unsupported: constexpr 'MODE'" in lines[1] and lines[1].endswith("(3 launch(es))")
    assert "kernel odd_kernel not recorded" in capfd.readouterr().err


def test_skipped_records_of_several_parts_and_an_earlier_capture_add_up(tmp_path):
    from tritune.capture import recorder

    first = skipped.Skipped("k", "m", "m.py", "unsupported", "argument 'd' is a TensorDescriptor", 2)
    skipped.write(tmp_path, [first])
    for count in (1, 4):
        rec = recorder.Recorder(tmp_path)
        rec.skip(("fast", count), skipped.Skipped("k", "m", "m.py", "unsupported", first.reason))
        for _ in range(count - 1):
            assert rec.bump(("fast", count))  # repeats only count
        rec.close()
        rec._part = None  # the next Recorder is another process's part
    recorder.finalize(tmp_path)
    (merged,) = skipped.read(tmp_path)
    assert merged.count == 2 + 1 + 4
    assert not (tmp_path / "parts").exists()


def test_capture_and_optimize_print_the_skipped_launches(tmp_path, capsys):
    from tritune.commands.capture import _skipped
    from tritune.commands.optimize import _not_captured

    record = skipped.Skipped("k", "m", "m.py", "unsupported", "argument 'd' is a TensorDescriptor", 5)
    skipped.write(tmp_path, [record])
    _not_captured(tmp_path)
    _skipped(skipped.read(tmp_path), "tritune capture")
    err = capsys.readouterr().err.splitlines()
    assert err == ["tritune optimize: 5 launch(es) of 1 kernel(s) were not captured (skipped.jsonl):",
                   "  k: unsupported: argument 'd' is a TensorDescriptor (5 launch(es))",
                   "tritune capture: 5 launch(es) of 1 kernel(s) were not captured (skipped.jsonl):",
                   "  k: unsupported: argument 'd' is a TensorDescriptor (5 launch(es))"]
    skipped.write(tmp_path, [])
    _not_captured(tmp_path)  # nothing skipped: nothing said
    assert capsys.readouterr().err == "" and not (tmp_path / skipped.SKIPPED).exists()


def test_decisions_on_autotune_and_heuristics_kernels_with_dtype_constexprs_apply(k, tmp_path):
    from tritune import apply
    from tritune.store import DecisionStore, current_target, key_for

    x = torch.randn(N)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK"]),)  # noqa: E731
    with capture(tmp_path / "cap"):
        k.heur_kernel[grid](x, torch.empty(N, dtype=torch.bfloat16), N, tl.bfloat16, BLOCK=16)
        k.tuned_kernel[grid](x, torch.empty(N, dtype=torch.float16), N, OUT_DTYPE=tl.float16)
    variant = Variant(name="2 warps", options={"num_warps": 2})
    with DecisionStore(tmp_path / "decisions.db") as store:
        for spec in read_launches(tmp_path / "cap"):
            key = key_for(spec, current_target("cpu"))
            run = store.start_run({})
            cand = store.add_candidate(run, key, variant)
            store.finish_candidate(cand.id, "verified", verification={"ok": True})
            store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)
        applier = apply.enable(store, device="cpu")
        try:
            k.heur_kernel[grid](x, torch.empty(N, dtype=torch.bfloat16), N, tl.bfloat16, BLOCK=16)
            k.tuned_kernel[grid](x, torch.empty(N, dtype=torch.float16), N, OUT_DTYPE=tl.float16)
            k.tuned_kernel[grid](x, torch.empty(N), N, OUT_DTYPE=tl.float32)  # another dtype: another key
            stats = applier.stats()
        finally:
            apply.disable()
    assert (stats["heur_kernel"]["applied"], stats["heur_kernel"]["launches"]) == (1, 1)
    # the fp32 launch (the autotuner tunes it anew: its trials count as launches) has no decision
    assert stats["tuned_kernel"]["applied"] == 1 and stats["tuned_kernel"]["launches"] >= 2


def test_a_launch_whose_kernel_file_capture_could_not_copy_is_refused_saying_so(tmp_path):
    body = {**OLD_SPEC, "source": "", "source_file": "", "constexprs": {}, "extra": {},
            "args": [{"name": "n", "kind": "scalar", "value": 1, "type": "int"}]}
    spec = LaunchSpec.from_json(body)
    with pytest.raises(SpecError, match="capture kept no copy of cast_kernel's file .the program named none.: "
                                        "nothing to replay"):
        Replay(spec, root=tmp_path)



SKIPPED_PROGRAM = '''
import triton
import triton.language as tl
import torch


@triton.jit
def mode_kernel(x_ptr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


class Mode:  # a constexpr Triton runs (the kernel never reads it) and capture cannot write
    pass


if __name__ == "__main__":
    x = torch.ones(16)
    for _ in range(2):
        mode_kernel[(1,)](x, Mode(), BLOCK=16)
    assert torch.equal(x, torch.full((16,), 4.0))
'''


def test_optimize_names_the_launches_it_could_not_capture(tmp_path, capsys, monkeypatch):
    import sys

    from tritune.commands.optimize import _launches_from

    (tmp_path / "prog.py").write_text(SKIPPED_PROGRAM)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the program, run by optimize's capture, inherits it
    with pytest.raises(SystemExit) as stopped:
        _launches_from((sys.executable, str(tmp_path / "prog.py")), None, tmp_path / "out")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "tritune optimize: 2 launch(es) of 1 kernel(s) were not captured (skipped.jsonl):" in err
    assert "  mode_kernel: unsupported: constexpr 'MODE' is a __main__.Mode" in err
    assert "the command launched no Triton kernel that could be captured; nothing to optimize" in err
