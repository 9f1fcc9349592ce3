"""The recorder: part files that survive a crash, counts, merging, and the after-import hook."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from tritune.capture import _after_import
from tritune.capture.recorder import PARTS, Recorder, finalize, read_part
from tritune.capture.spec import read_launches
from tritune.model.launch import ArgSpec, LaunchSpec, SpecError


def make_spec(n: int = 8, source_file: str = "") -> LaunchSpec:
    return LaunchSpec(
        kernel="k", kind="jit", module="m", source_file=source_file, source="sources/m.py" if not source_file else "",
        source_hash="0" * 64,
        args=[ArgSpec("x", "tensor", shape=[n], stride=[1], dtype="float32", device="cpu", written=True),
              ArgSpec("n", "scalar", value=n, type="int")],
        constexprs={}, options={}, grid=[1])


def test_new_launches_reach_the_part_file_at_once(tmp_path):
    rec = Recorder(tmp_path)
    rec.add(make_spec())
    parts = list((tmp_path / PARTS).glob("*.jsonl"))
    assert len(parts) == 1
    assert read_part(parts[0])[0].key() == make_spec().key()


def test_counts_are_flushed_and_summed_across_processes(tmp_path):
    first = Recorder(tmp_path)
    for _ in range(3):
        first.add(make_spec())
    first.add(make_spec(16))
    first.close()
    second = Recorder(tmp_path)  # another process: another part file
    second._open()
    second.add(make_spec())
    second.add(make_spec())
    second.close()
    assert len(list((tmp_path / PARTS).glob("*.jsonl"))) == 2
    specs = finalize(tmp_path)
    assert sorted((s.arg("n").value, s.count) for s in specs) == [(8, 5), (16, 1)]
    assert not (tmp_path / PARTS).exists()
    assert sorted(s.count for s in read_launches(tmp_path)) == [1, 5]


def test_finalize_appends_to_an_existing_capture(tmp_path):
    rec = Recorder(tmp_path)
    rec.add(make_spec())
    rec.close()
    finalize(tmp_path)
    again = Recorder(tmp_path)
    again.add(make_spec())
    again.add(make_spec())
    again.close()
    assert [s.count for s in finalize(tmp_path)] == [3]


def test_a_killed_process_leaves_usable_parts(tmp_path):
    rec = Recorder(tmp_path)
    rec.add(make_spec())
    rec.add(make_spec())  # counted, never flushed: the process dies here
    part = next((tmp_path / PARTS).glob("*.jsonl"))
    with part.open("a") as handle:
        handle.write('{"spec": {"kernel": "k", "ki')  # torn last line
    assert [s.count for s in read_part(part)] == [1]
    with part.open("a") as handle:
        handle.write('\n{"counts": {}}\n')
    with pytest.raises(SpecError, match=r":2: not JSON"):
        read_part(part)


def test_forked_child_writes_its_own_part(tmp_path):
    rec = Recorder(tmp_path)
    rec.add(make_spec())
    rec._open()  # what os.register_at_fork runs in the child
    rec.add(make_spec())
    rec.close()
    assert len(list((tmp_path / PARTS).glob("*.jsonl"))) == 2
    assert [s.count for s in finalize(tmp_path)] == [2]


def test_hot_path_counts_known_keys_only(tmp_path):
    rec = Recorder(tmp_path)
    assert not rec.bump(("fast",))
    rec.add(make_spec(), fast_key=("fast",))
    assert rec.bump(("fast",)) and rec.bump(("fast",))
    rec.close()
    assert [s.count for s in finalize(tmp_path)] == [3]


def test_sources_are_copied_once_under_their_hash(tmp_path):
    source = tmp_path / "kernels_src.py"
    source.write_text("# a kernel file\n")
    out = tmp_path / "out"
    rec = Recorder(out)
    spec = rec.add(make_spec(source_file=str(source)))
    assert spec.source.startswith("sources/") and spec.source.endswith("_kernels_src.py")
    assert (out / spec.source).read_text() == "# a kernel file\n"
    assert spec.file_hash == hashlib.sha256((out / spec.source).read_bytes()).hexdigest()  # the whole file
    again = rec.add(make_spec(16, source_file=str(source)))
    assert (again.source, again.file_hash) == (spec.source, spec.file_hash)
    rec.close()
    assert {s.file_hash for s in finalize(out)} == {spec.file_hash}  # kept through the part files


def test_nothing_captured_writes_nothing(tmp_path):
    assert finalize(tmp_path) == []
    assert not (tmp_path / "launches.jsonl").exists()


def test_after_import_runs_callbacks_once_imported(tmp_path, monkeypatch):
    (tmp_path / "tritune_probe_mod.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    callback = _after_import.when_imported("tritune_probe_mod", lambda m: seen.append(m.VALUE + 1))
    cancelled = _after_import.when_imported("tritune_probe_mod", lambda m: seen.append("cancelled"))
    _after_import.cancel("tritune_probe_mod", cancelled)
    assert seen == []
    import tritune_probe_mod  # noqa: F401

    assert seen == [42]
    assert tritune_probe_mod.__loader__.__class__.__name__ != "_Loader"
    _after_import.when_imported("tritune_probe_mod", lambda m: seen.append("now"))  # already imported
    assert seen == [42, "now"]
    assert _after_import._finder not in sys.meta_path
    sys.modules.pop("tritune_probe_mod")
    del callback


def test_counts_line_is_cumulative(tmp_path):
    rec = Recorder(tmp_path)
    rec.add(make_spec())
    rec.flush()
    rec.add(make_spec())
    rec.flush()
    part = next((tmp_path / PARTS).glob("*.jsonl"))
    counts = [json.loads(line)["counts"] for line in part.read_text().splitlines() if "counts" in line]
    assert [list(c.values()) for c in counts] == [[1], [2]]
