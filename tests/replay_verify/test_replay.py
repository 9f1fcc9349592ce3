"""Replay under the interpreter: fresh inputs in the captured layout, variants, clear errors."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch

from conftest import kernel_hash

from tritune.allowlist.sandbox import Unsafe
from tritune.capture.spec import read_launches, write_launches
from tritune.model.launch import ArgSpec, LaunchSpec, SpecError
from tritune.model.variant import Variant
from tritune.replay import KernelLoadError, Replay, load_kernel, make_args, outputs
from tritune.worker import failures

KERNELS = Path(__file__).parents[1] / "programs" / "replay_kernels.py"


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def capture_dir(tmp_path: Path, spec: LaunchSpec) -> Path:
    (tmp_path / "sources").mkdir(exist_ok=True)
    shutil.copy(KERNELS, tmp_path / spec.source)
    write_launches(tmp_path, [spec])
    return tmp_path


def tensor(name, n, dtype="float32", **kw) -> ArgSpec:
    return ArgSpec(name, "tensor", shape=[n], stride=[1], dtype=dtype, device="cuda:0", **kw)


def add_spec(n=1000, block=128, **changes) -> LaunchSpec:
    fields = dict(
        kernel="add_kernel", kind="jit", module="replay_kernels", source_file=str(KERNELS),
        source="sources/replay_kernels.py",
        args=[tensor("x_ptr", n), tensor("y_ptr", n), tensor("out_ptr", n, written=True),
              ArgSpec("n", "scalar", value=n, type="int"), ArgSpec("BLOCK", "constexpr")],
        constexprs={"BLOCK": block}, options={"num_warps": 4}, grid=[-(-n // block)],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}]},
    )
    fields.update(changes)
    fields.setdefault("source_hash", kernel_hash(KERNELS.read_text(), fields["kernel"]))
    return LaunchSpec(**fields)


def test_baseline_replay_computes_the_kernel(tmp_path):
    root = capture_dir(tmp_path, add_spec(n=1023))
    [spec] = read_launches(root)
    args = make_args(spec, root, seed=3)
    assert args["x_ptr"].device.type == "cpu" and args["n"] == 1023 and "BLOCK" not in args
    Replay(spec, root=root)(args)
    torch.testing.assert_close(args["out_ptr"], args["x_ptr"] + args["y_ptr"], rtol=0, atol=0)
    assert list(outputs(spec, args)) == ["out_ptr"]


def test_inputs_are_fresh_per_seed_and_repeatable(tmp_path):
    root = capture_dir(tmp_path, add_spec())
    spec = read_launches(root)[0]
    one, again, other = (make_args(spec, root, seed=s) for s in (1, 1, 2))
    assert torch.equal(one["x_ptr"], again["x_ptr"]) and not torch.equal(one["x_ptr"], other["x_ptr"])
    assert not torch.equal(one["x_ptr"], one["y_ptr"])


def test_layout_strides_and_offset_are_rebuilt(tmp_path):
    arg = ArgSpec("x_ptr", "tensor", shape=[6, 42], stride=[1, 7], dtype="float16", storage_offset=5,
                  storage_size=400)
    root = capture_dir(tmp_path, add_spec(args=[arg]))
    x = make_args(read_launches(root)[0], root)["x_ptr"]
    margin = 32768  # guard margins of 64 KiB (tritune.replay.guard) on each side of the storage
    assert x.shape == (6, 42) and x.stride() == (1, 7) and x.storage_offset() == margin + 5
    assert x.untyped_storage().nbytes() == (400 + 2 * margin) * 2 and x.dtype == torch.float16


def test_variant_constexpr_recomputes_the_grid_and_stays_correct(tmp_path):
    root = capture_dir(tmp_path, add_spec(n=1000, block=128))
    spec = read_launches(root)[0]
    replay = Replay(spec, Variant(constexprs={"BLOCK": 256}), root=root)
    assert replay.grid == (4, 1, 1) and Replay(spec, root=root).grid == (8, 1, 1)
    args = make_args(spec, root)
    replay(args)
    assert torch.equal(args["out_ptr"], args["x_ptr"] + args["y_ptr"])


def test_fixed_grid_without_rule_is_kept(tmp_path):
    root = capture_dir(tmp_path, add_spec(grid_rule=None))
    assert Replay(read_launches(root)[0], Variant(constexprs={"BLOCK": 256}), root=root).grid == (8, 1, 1)


def test_variant_source_replaces_the_kernel(tmp_path):
    root = capture_dir(tmp_path, add_spec(n=1000))
    spec = read_launches(root)[0]
    wrong = KERNELS.read_text().replace("mask = offs < n\n    tl.store(out_ptr + offs, tl.load(x_ptr",
                                        "mask = offs < n - 1\n    tl.store(out_ptr + offs, tl.load(x_ptr")
    assert wrong != KERNELS.read_text()
    args = make_args(spec, root)
    args["out_ptr"].fill_(0)
    Replay(spec, Variant(name="tail-bug", source=wrong), root=root)(args)
    expected = args["x_ptr"] + args["y_ptr"]
    assert torch.equal(args["out_ptr"][:-1], expected[:-1]) and args["out_ptr"][-1] == 0


def test_saved_and_ranged_index_tensors_stay_in_range(tmp_path):
    n = 300
    idx = torch.randint(0, 50, (n,), dtype=torch.int64)
    (tmp_path / "tensors").mkdir()
    torch.save(idx, tmp_path / "tensors" / "idx.pt")
    args = [tensor("src_ptr", 50), tensor("idx_ptr", n, "int64", values="saved", data="tensors/idx.pt"),
            tensor("out_ptr", n, written=True), ArgSpec("n", "scalar", value=n, type="int"),
            ArgSpec("BLOCK", "constexpr")]
    root = capture_dir(tmp_path, add_spec(kernel="gather_kernel", args=args, grid=[3]))
    spec = read_launches(root)[0]
    values = make_args(spec, root)
    assert torch.equal(values["idx_ptr"], idx)
    Replay(spec, root=root)(values)
    assert torch.equal(values["out_ptr"], values["src_ptr"][idx])

    args[1] = tensor("idx_ptr", n, "int32", values="range", low=10, high=12)
    ranged = make_args(add_spec(kernel="gather_kernel", args=args), root)["idx_ptr"]
    assert ranged.dtype == torch.int32 and set(ranged.tolist()) == {10, 11, 12}


def test_saved_values_of_the_wrong_size_are_refused(tmp_path):
    (tmp_path / "tensors").mkdir()
    torch.save(torch.zeros(7, dtype=torch.int64), tmp_path / "tensors" / "idx.pt")
    spec = add_spec(args=[tensor("idx_ptr", 300, "int64", values="saved", data="tensors/idx.pt")])
    with pytest.raises(SpecError, match="hold 7 elements, the argument needs 300"):
        make_args(spec, tmp_path)


def test_wrapped_kernel_is_found_by_its_jit_name(tmp_path):
    root = capture_dir(tmp_path, add_spec(kind="heuristics"))
    assert Replay(read_launches(root)[0], root=root).fn.fn.__name__ == "add_kernel"


RULED = {"rule": "pipeline-loop", "exact": "exact", "params": {}}  # a source a rule of tritune's made


def test_a_models_source_is_checked_against_the_capture_before_it_runs(tmp_path):
    """A source no rule of tritune's made (``llm``, or none named) is refused before its top level
    runs; a rule's keeps its path (and this payload would run: the sample is a real threat)."""
    root = capture_dir(tmp_path, add_spec())
    spec = read_launches(root)[0]
    sentinel = tmp_path / "sentinel"
    text = KERNELS.read_text() + f"\nopen({str(sentinel)!r}, 'w').write('ran')\n"
    for rewrite in ({"rule": "llm", "exact": "tolerance", "params": {}}, None, {"rule": "made-up"}):
        with pytest.raises(Unsafe, match="a call at module level is not allowed") as info:
            Replay(spec, Variant(source=text, rewrite=rewrite), root=root)
        assert failures.from_exception(info.value).kind == "unsafe"
    assert not sentinel.exists()
    Replay(spec, Variant(source=text, rewrite=RULED), root=root)
    assert sentinel.read_text() == "ran"


def test_load_errors_are_clear(tmp_path):
    root = capture_dir(tmp_path, add_spec())
    spec = read_launches(root)[0]
    with pytest.raises(KernelLoadError, match="no @triton.jit kernel named 'missing'"):
        Replay(add_spec(kernel="missing"), root=root)
    with pytest.raises(KernelLoadError, match="import failed: SyntaxError"):
        Replay(spec, Variant(source="def broken(:\n", rewrite=RULED), root=root)
    with pytest.raises(SpecError, match="not constexprs of add_kernel"):
        Replay(spec, Variant(constexprs={"XBLOCK": 64}), root=root)
    (root / spec.source).unlink()
    with pytest.raises(SpecError, match="missing from the capture directory"):
        Replay(spec, root=root)


def test_a_kernel_file_runs_its_top_level_once_per_process_and_content(tmp_path):
    counter = tmp_path / "runs.txt"
    text = KERNELS.read_text() + f"\nwith open({str(counter)!r}, 'a') as _runs:\n    _runs.write('ran\\n')\n"
    root = capture_dir(tmp_path, add_spec(n=300))
    (root / "sources" / "replay_kernels.py").write_text(text)
    [spec] = read_launches(root)
    args = make_args(spec, root)
    for variant in (Variant(), Variant(constexprs={"BLOCK": 64}), Variant(options={"num_warps": 2}),
                    Variant(constexprs={"BLOCK": 256}), Variant()):
        Replay(spec, variant, root=root)(args)
    assert len(counter.read_text().splitlines()) == 1
    source = Variant(name="same kernel, other text", source=text + "\n# another text\n")
    for _ in range(3):
        Replay(spec, source, root=root)(args)
    load_kernel(spec, root)
    assert len(counter.read_text().splitlines()) == 2  # the variant's text is its own module, once
    torch.testing.assert_close(args["out_ptr"], args["x_ptr"] + args["y_ptr"], rtol=0, atol=0)


def test_a_source_that_exits_on_import_is_one_line(tmp_path, capsys):
    root = capture_dir(tmp_path, add_spec())
    spec = read_launches(root)[0]
    text = KERNELS.read_text() + "\nprint('running the script')\nimport sys\nsys.exit(3)\n"
    with pytest.raises(KernelLoadError) as info:
        Replay(spec, Variant(source=text, rewrite=RULED), root=root)
    assert str(info.value) == ('replay_kernels.py: import failed: calls sys.exit(3) on import: '
                               'guard its top level with `if __name__ == "__main__":`')
    out, err = capsys.readouterr()
    assert out == "" and "prints on import (1 line); its top level ran once here" in err


def test_variant_round_trips_and_describes_itself():
    variant = Variant(name="v", options={"num_warps": 8}, constexprs={"BLOCK": 64}, passes=["exact"])
    assert Variant.from_json(variant.to_json()) == variant
    assert variant.describe() == "num_warps=8, BLOCK=64, passes=exact" and Variant().is_baseline


# ------------------------------------------------------------------- what a capture may name

@pytest.mark.parametrize("source, why", [("../replay_kernels.py", "is outside the capture directory"),
                                         ("/etc/replay_kernels.py", "is outside the capture directory"),
                                         ("sources/../../replay_kernels.py", "is outside the capture directory"),
                                         ("sources/link.py", "leads outside the capture directory")])
def test_a_launch_file_may_only_name_kernel_files_under_its_directory(tmp_path, source, why):
    (tmp_path / "cap").mkdir()
    root = capture_dir(tmp_path / "cap", add_spec())
    outside = tmp_path / "replay_kernels.py"
    outside.write_text("open(__file__ + '.ran', 'w')\n")
    (root / "sources" / "link.py").symlink_to(outside)
    write_launches(root, [add_spec(source=source)])
    with pytest.raises(SpecError, match=f"kernel source '{source}' {why}: refused"):
        read_launches(root)
    with pytest.raises(SpecError, match=why):  # a spec that reached a worker by another road
        load_kernel(add_spec(source=source), root)
    assert not Path(str(outside) + ".ran").exists()


@pytest.mark.parametrize("data, why", [("../secret.pt", "is outside the capture directory"),
                                       ("{outside}", "is outside the capture directory"),
                                       ("tensors/../../secret.pt", "is outside the capture directory"),
                                       ("tensors/link.pt", "leads outside the capture directory")])
def test_a_launch_file_may_only_name_saved_tensors_under_its_directory(tmp_path, data, why):
    """A saved tensor's path is confined as the kernel file's is, on both roads: reading the
    launches file, and making the inputs of a spec that reached a worker another way."""
    (tmp_path / "cap").mkdir()
    root = capture_dir(tmp_path / "cap", add_spec())
    outside = tmp_path / "secret.pt"
    torch.save(torch.arange(300, dtype=torch.int64), outside)  # fits: only the check stops it
    (root / "tensors").mkdir()
    (root / "tensors" / "link.pt").symlink_to(outside)
    data = data.format(outside=outside)
    spec = add_spec(args=[tensor("idx_ptr", 300, "int64", values="saved", data=data)])
    write_launches(root, [spec])
    with pytest.raises(SpecError, match=f"argument 'idx_ptr': saved values '{data}' {why}: refused"):
        read_launches(root)
    with pytest.raises(SpecError, match=why):
        make_args(spec, root)


def whole(spec: LaunchSpec, root: Path) -> LaunchSpec:
    """``spec`` with the whole-file hash a capture records for its copy under ``root``."""
    spec.file_hash = hashlib.sha256((root / spec.source).read_bytes()).hexdigest()
    return spec


def test_a_top_level_added_after_capture_is_refused_by_the_whole_file_hash(tmp_path):
    """The kernel's own text is unchanged, so only the whole-file hash sees the new top level."""
    root = capture_dir(tmp_path, add_spec())
    spec = whole(add_spec(), root)
    load_kernel(spec, root)  # as captured: loads
    mark = tmp_path / "top-level.ran"
    path = root / spec.source
    path.write_text(path.read_text() + f"open({str(mark)!r}, 'w').write('ran')\n")
    with pytest.raises(SpecError, match="is not the file captured .*file_hash.*refused; capture again"):
        load_kernel(spec, root)
    assert not mark.exists()
    spec.file_hash = None  # a capture from before file_hash: the kernel's hash alone, as documented
    load_kernel(spec, root)
    assert mark.exists()


def test_the_kernel_file_is_read_once_and_what_runs_is_what_was_checked(tmp_path, monkeypatch):
    """The file is replaced right after it is read and checked (a race): neither its new top
    level nor its new kernel body runs, and Triton (the interpreter reads the kernel's lines
    through ``inspect``) sees the lines that were checked."""
    import inspect

    from tritune.replay import kernel as kernel_module

    root = capture_dir(tmp_path, add_spec(n=300))
    spec = whole(add_spec(n=300), root)
    path, mark = root / spec.source, tmp_path / "swapped.ran"
    swapped = (KERNELS.read_text().replace("tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr",
                                           "tl.load(x_ptr + offs, mask=mask) - tl.load(y_ptr")
               + f"open({str(mark)!r}, 'w').write('ran')\n")
    assert swapped.count(" - tl.load(y_ptr") == 1
    checked = kernel_module.declared_hashes

    def check_then_swap(*args):
        found = checked(*args)
        path.write_text(swapped)
        return found

    monkeypatch.setattr(kernel_module, "declared_hashes", check_then_swap)
    replay = Replay(spec, root=root)
    assert path.read_text() == swapped and not mark.exists()
    assert " - tl.load(y_ptr" not in inspect.getsource(replay.fn.fn)
    args = make_args(spec, root)
    replay(args)
    torch.testing.assert_close(args["out_ptr"], args["x_ptr"] + args["y_ptr"], rtol=0, atol=0)


def test_a_kernel_edited_after_capture_or_without_a_hash_is_refused(tmp_path):
    root = capture_dir(tmp_path, add_spec())
    load_kernel(add_spec(), root)  # as captured: loads
    path = root / "sources" / "replay_kernels.py"
    path.write_text(path.read_text().replace("mask = offs < n", "mask = offs < n - 1"))
    with pytest.raises(SpecError, match="holds another add_kernel than the one captured .*refused; capture again"):
        load_kernel(add_spec(), root)
    path.write_text(KERNELS.read_text() + "open(__file__ + '.ran', 'w')\n")
    with pytest.raises(SpecError, match="names no source_hash for add_kernel: refused"):
        load_kernel(add_spec(source_hash=""), root)
    assert not Path(str(path) + ".ran").exists()  # refused before anything was imported


def test_replay_sets_a_scratch_allocator_only_where_none_is_set():
    from triton.runtime import _allocation

    from tritune.replay.launch import ensure_allocator

    token = _allocation._allocator.set(_allocation._NULL_ALLOCATOR)
    try:
        assert ensure_allocator("cpu")  # none was set: replay's
        buffer = _allocation._allocator.get()(64, 16, None)
        assert buffer.numel() == 64 and buffer.dtype.itemsize == 1
        mine = _allocation._allocator.get()
        assert not ensure_allocator("cpu") and _allocation._allocator.get() is mine  # one set is kept
    finally:
        _allocation._allocator.reset(token)


@pytest.mark.parametrize("variant, names", [
    (Variant(passes=("exact", "noalias"), assumes=("noalias",)), ("exact", "noalias")),  # the proposer's
    (Variant(passes=("exact",), assumes=("noalias",)), ("exact",)),  # an imported decision's guard: no new binary
    (Variant(passes=("exact",)), ("exact",)),
    (Variant(constexprs={"BLOCK": 256}, assumes=("noalias",)), None),  # no passes: the hook is not entered
])
def test_the_compiler_hook_builds_what_the_pass_list_says(tmp_path, monkeypatch, variant, names):
    """Replay (verification, timing) and apply build a variant from its pass list alone, so the
    binary applied is the binary verified; ``assumes`` alone is the applier's guard."""
    import tritune.compiler
    from tritune.apply.kernels import Passes

    seen = []
    monkeypatch.setattr(tritune.compiler, "enabled", lambda passes, fast_math=False: seen.append(tuple(passes)))
    spec = add_spec()
    Replay(spec, variant, root=capture_dir(tmp_path, spec))._passes()
    assert seen == ([names] if names else [])
    assert Passes(variant).names == (names or ())


def test_an_imported_pass_decision_keeps_the_pass_list_it_was_verified_with():
    """``store import`` adds the no-alias guard to a foreign variant; its binary stays the one built
    from its passes (it was verified and timed so)."""
    from tritune.loop.imports import as_imported

    imported = as_imported(Variant(name="p", passes=("exact",)))
    assert imported.assumes == ("noalias",) and imported.passes == ("exact",)
