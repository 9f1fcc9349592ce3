"""Bytecode for jailed workers (``tritune.worker.bytecode``): the parent compiles only what they
may read already, they read it and cannot write it, and Python loads it. Each check is attacked
with a payload it must stop."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritune import config
from tritune.worker import Worker, bytecode, jail

TESTS = Path(__file__).parents[1]
HERE = jail.status()
needs_jail = pytest.mark.skipif(not HERE.usable, reason=f"this kernel lacks it: {HERE.describe()}")
TAG = sys.implementation.cache_tag


@pytest.fixture
def tree(tmp_path):
    """A root the workers may read (``lib``, a module in it), a secret outside it, a link from
    inside to the secret, and an empty bytecode folder."""
    lib, outside, folder = tmp_path / "lib", tmp_path / "home", tmp_path / "bytecode"
    for f in (lib, outside, folder):
        f.mkdir()
    (lib / "mod.py").write_text("VALUE = 1\n")
    (lib / "notes.txt").write_text("VALUE = 3\n")
    (outside / "secret.py").write_text("KEY = 'SENTINEL-SECRET'\n")
    (lib / "linked.py").symlink_to(outside / "secret.py")
    return {"lib": lib, "outside": outside, "folder": folder}


def compiled(folder: Path, source: Path) -> Path:
    real = os.path.realpath(source)
    return Path(str(folder) + os.path.dirname(real)) / f"{Path(real).stem}.{TAG}.pyc"


def run_compiler(tree, sources) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tritune.worker.bytecode", str(tree["folder"]), str(tree["lib"])],
                          input="\n".join(map(str, sources)), text=True, capture_output=True, check=True,
                          cwd=tree["folder"])


def test_only_readable_python_sources_are_eligible(tree):
    lib, outside = tree["lib"], tree["outside"]
    planted = [str(outside / "secret.py"),  # outside the roots
               str(lib / "linked.py"),  # a link from inside to outside
               str(lib / "notes.txt"),  # not Python
               "mod.py",  # relative
               str(lib / "mod.py\0x"),  # a NUL
               str(lib) + "/../home/secret.py",  # dot-dot out of the root
               42, None, str(lib)]
    assert bytecode.eligible([*planted, str(lib / "mod.py"), str(lib / "mod.py")], [str(lib)]) == \
        [os.path.realpath(lib / "mod.py")]


@needs_jail
def test_the_compiler_writes_what_python_loads_and_nothing_else(tree):
    lib, folder = tree["lib"], tree["folder"]
    run_compiler(tree, [lib / "mod.py", tree["outside"] / "secret.py", lib / "linked.py"])
    target = compiled(folder, lib / "mod.py")
    assert target.is_file()
    written = [p for p in folder.rglob("*") if p.is_file() and p.name != bytecode.FILLED]
    assert written == [target]
    assert not any(b"SENTINEL-SECRET" in p.read_bytes() for p in written)
    # Python reads it: the source changed to 2 with its time and size kept, the bytecode still says 1
    stat = (lib / "mod.py").stat()
    (lib / "mod.py").write_text("VALUE = 2\n")
    os.utime(lib / "mod.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    code = "import mod; print(mod.VALUE, mod.__cached__)"
    env = {**os.environ, config.ENV_PYCACHE_PREFIX: str(folder), "PYTHONPATH": str(lib)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          cwd=tree["outside"])
    assert done.stdout.split() == ["1", str(target)]


@needs_jail
def test_current_bytecode_is_not_written_again(tree):
    lib = tree["lib"]
    run_compiler(tree, [lib / "mod.py"])
    target = compiled(tree["folder"], lib / "mod.py")
    first = target.stat().st_mtime_ns
    os.utime(target, ns=(first - 10**9, first - 10**9))
    run_compiler(tree, [lib / "mod.py"])
    assert target.stat().st_mtime_ns == first - 10**9  # current: left alone
    (lib / "mod.py").write_text("VALUE = 22\n")  # another size: stale
    run_compiler(tree, [lib / "mod.py"])
    assert target.stat().st_mtime_ns != first - 10**9


@needs_jail
def test_the_parent_compiles_only_under_the_roots_every_run_shares(tree, monkeypatch):
    """``fill`` filters a worker's list by ``roots`` (the interpreter, site-packages, tritune:
    never a program's folder, which another run's workers may not read) before anything runs:
    a source outside them never reaches the compiler; one fill of a folder at a time."""
    monkeypatch.setattr(bytecode, "roots", lambda: [str(tree["lib"])])
    assert bytecode.fill(tree["folder"], [str(tree["outside"] / "secret.py")]) is None
    proc = bytecode.fill(tree["folder"], [str(tree["lib"] / "mod.py"), str(tree["outside"] / "secret.py")])
    assert proc is not None and proc.wait(60) == 0
    assert [p.name for p in tree["folder"].rglob("*.pyc")] == [f"mod.{TAG}.pyc"]
    assert bytecode.filled(tree["folder"])


def test_the_roots_are_the_same_for_every_run(monkeypatch, tmp_path):
    """A program's folder on ``sys.path`` (and the working folder) is no root: its bytecode would
    be read by the workers of another run, whose jail does not let them read its sources."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    found = bytecode.roots()
    assert not any(os.path.realpath(tmp_path).startswith(r.rstrip("/") + "/") or r == os.path.realpath(tmp_path)
                   for r in found)
    assert os.path.realpath(sys.base_prefix) in found


@needs_jail
@pytest.mark.parametrize("jailed", [True, False])
def test_the_compilers_jail_refuses_what_the_check_let_through(tree, jailed):
    """The compiler's own jail is a second wall: with its list check defeated (as a link swapped
    after the check would), the jailed compiler still cannot read a source outside its roots.
    The control, without the jail, compiles it: the harness sees a leak when nothing stops it."""
    script = ("import sys; from tritune.worker import bytecode, jail\n"
              "bytecode.eligible = lambda files, allowed: [f for f in files if f]\n"
              + ("" if jailed else "jail.enter = lambda policy: None\n")
              + "sys.exit(bytecode.main(sys.argv[1:]))\n")
    sources = [tree["lib"] / "mod.py", tree["outside"] / "secret.py"]
    subprocess.run([sys.executable, "-c", script, str(tree["folder"]), str(tree["lib"])],
                   input="\n".join(map(str, sources)), text=True, capture_output=True, check=True,
                   cwd=tree["folder"])
    leaked = compiled(tree["folder"], tree["outside"] / "secret.py").exists()
    assert compiled(tree["folder"], tree["lib"] / "mod.py").exists()
    assert leaked is not jailed


@pytest.mark.parametrize("planted", ["foreign", "writable", "link"])
def test_a_folder_tritune_cannot_trust_is_not_used(tmp_path, monkeypatch, planted):
    """``TRITUNE_BYTECODE`` naming a folder that holds other files (``/etc``, a shared folder), one
    others may write, or a link: no bytecode folder."""
    monkeypatch.setattr(bytecode, "carried", lambda module="torch": False)
    folder = tmp_path / "bc"
    if planted == "link":
        (tmp_path / "real").mkdir()
        folder.symlink_to(tmp_path / "real")
    else:
        folder.mkdir()
        (folder / "passwd").write_text("x") if planted == "foreign" else folder.chmod(0o777)
    monkeypatch.setenv(config.ENV_BYTECODE, str(folder))
    assert bytecode.prefix() is None
    control = tmp_path / "fresh"
    monkeypatch.setenv(config.ENV_BYTECODE, str(control))
    assert bytecode.prefix() == control and (control / bytecode.MARKER).is_file()


def test_carried_bytecode_is_found_in_pycache(tmp_path, monkeypatch):
    package = tmp_path / "pkg_tritune_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not bytecode.carried("pkg_tritune_probe")
    subprocess.run([sys.executable, "-m", "py_compile", str(package / "__init__.py")], check=True)
    assert bytecode.carried("pkg_tritune_probe")
    assert bytecode.carried("no_such_module_tritune")  # not installed: nothing to do


def test_prefix_only_where_packages_carry_none(monkeypatch, tmp_path):
    monkeypatch.setattr(bytecode, "carried", lambda module="torch": True)
    assert bytecode.prefix() is None
    monkeypatch.setattr(bytecode, "carried", lambda module="torch": False)
    monkeypatch.setenv(config.ENV_BYTECODE, str(tmp_path / "bc"))
    assert bytecode.prefix() == tmp_path / "bc" and (tmp_path / "bc").is_dir()
    monkeypatch.setenv(config.ENV_BYTECODE, "off")
    assert bytecode.prefix() is None


def test_a_jailed_lanes_workers_read_it_and_an_unjailed_lanes_are_not_given_it(monkeypatch, tmp_path):
    from tritune.loop.lanes import LocalLane

    capture, folder = tmp_path / "capture", tmp_path / "bytecode"
    capture.mkdir()
    folder.mkdir()
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: folder)
    policy = jail.policy(capture)
    lane = LocalLane(None, capture, jail=policy)
    try:  # not filled yet: an empty prefix would make the workers compile what __pycache__ holds
        assert config.ENV_PYCACHE_PREFIX not in lane.evaluator.worker.env
        assert str(folder) not in lane.evaluator.worker.jail.read
    finally:
        lane.close()
    (folder / bytecode.FILLED).touch()
    lane = LocalLane(None, capture, jail=policy)
    try:
        assert lane.evaluator.worker.env[config.ENV_PYCACHE_PREFIX] == str(folder)
        assert str(folder) in lane.evaluator.worker.jail.read
        assert str(folder) not in lane.evaluator.worker.jail.read_write
    finally:
        lane.close()
    lane = LocalLane(None, capture, jail=None)
    try:
        assert config.ENV_PYCACHE_PREFIX not in lane.evaluator.worker.env
    finally:
        lane.close()


def test_a_lane_gives_a_first_filled_folder_where_its_captures_fill_finished(monkeypatch, tmp_path):
    """The lane asks ``usable`` with its capture's folder: a library of the capture's kernels that
    carries its own bytecode is compiled in the folder, but the capture's fill did not finish
    (no ``COMPLETE``): no prefix; once it did: the prefix."""
    from tritune.loop import lanes
    from tritune.loop.lanes import LocalLane

    capture, folder, site = tmp_path / "capture", tmp_path / "bytecode", tmp_path / "site"
    (site / "ownpkg" / "__pycache__").mkdir(parents=True)
    (site / "ownpkg" / "__init__.py").write_text("")
    (site / "ownpkg" / "__pycache__" / f"__init__.{TAG}.pyc").write_bytes(b"")
    capture.mkdir(), folder.mkdir()
    compiled(folder, site / "ownpkg" / "__init__.py").parent.mkdir(parents=True)
    compiled(folder, site / "ownpkg" / "__init__.py").write_bytes(b"")
    (folder / bytecode.FIRST).touch()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: folder)
    monkeypatch.setattr(lanes, "kernel_imports", lambda root: ("math", "ownpkg.ops"))
    policy = jail.policy(capture)
    for finished in (False, True):
        if finished:
            (capture / bytecode.COMPLETE).touch()
        lane = LocalLane(None, capture, jail=policy)
        try:
            assert (config.ENV_PYCACHE_PREFIX in lane.evaluator.worker.env) is finished
        finally:
            lane.close()


def test_a_folder_no_worker_may_see_is_not_granted(tmp_path, monkeypatch):
    """``TRITUNE_BYTECODE`` pointed at ``TRITUNE_HOME`` (the signing key), the home, or a folder
    holding one: the lane gives its workers no bytecode folder, and the jail grants nothing."""
    from tritune.loop.lanes import LocalLane

    capture = tmp_path / "capture"
    capture.mkdir()
    policy = jail.policy(capture)
    home = config.home()
    for folder in (home, home.parent, Path(config.user_home())):
        assert policy.with_read(folder) == policy
        monkeypatch.setattr(bytecode, "prefix", lambda environ=None, folder=folder: folder)
        lane = LocalLane(None, capture, jail=policy)
        try:
            assert config.ENV_PYCACHE_PREFIX not in lane.evaluator.worker.env
            assert lane.evaluator.worker.jail.read == policy.read
        finally:
            lane.close()
    granted = policy.with_read(tmp_path)
    assert granted.read[-1] == os.path.realpath(tmp_path)  # the control: an ordinary folder is granted


@needs_jail
def test_a_jailed_worker_reads_the_folder_and_cannot_write_it(tree):
    (tree["folder"] / "present.txt").write_text("readable")
    policy = jail.for_workers(tree["lib"], untrusted=True, program_dirs=()).with_read(tree["folder"])
    with Worker(30, jail=policy, env={"PYTHONPATH": str(TESTS)}) as worker:
        assert worker.call("jail_jobs:read_file", str(tree["folder"] / "present.txt")).value == b"readable"
        wrote = worker.call("jail_jobs:write_file", str(tree["folder"] / "planted.pyc"))
        assert not wrote.ok and "PermissionError" in wrote.failure.message
    assert not (tree["folder"] / "planted.pyc").exists()


@needs_jail
def test_extend_gives_a_jailed_child_a_bytecode_folder_only_where_its_jail_reads_it(tree, tmp_path):
    """``Worker.extend`` (a head lane's workers, ``loop.lanes.HeadStart``): a child started before
    the capture takes the folder the lane decides on after it, where its jail was granted that
    folder; one it cannot read, it does not take (Python would find nothing there)."""
    prefix = config.ENV_PYCACHE_PREFIX
    policy = jail.for_workers(tree["lib"], untrusted=True, program_dirs=()).with_read(tree["folder"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with Worker(30, jail=policy, env={"PYTHONPATH": str(TESTS)}) as worker:
        assert worker.call("worker_jobs:imported", []).value["pycache_prefix"] is None
        assert worker.extend(env={"PYTHONPATH": str(TESTS), prefix: str(elsewhere)}).ok
        assert worker.call("worker_jobs:imported", []).value["pycache_prefix"] is None
        assert worker.extend(env={"PYTHONPATH": str(TESTS), prefix: str(tree["folder"])}).ok
        assert worker.call("worker_jobs:imported", []).value["pycache_prefix"] == str(tree["folder"])


@needs_jail
def test_a_lane_compiles_its_timing_workers_imports_after_the_ranking(monkeypatch, tmp_path):
    """``LocalLane.baselines``: then the timing worker's imports (tritune's jobs among them) are
    compiled into the folder for the next run's workers."""
    from tritune.loop.lanes import LocalLane

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    capture, folder = tmp_path / "capture", tmp_path / "bytecode"
    capture.mkdir()
    folder.mkdir()
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: folder)
    lane = LocalLane(None, capture, jobs=1, jail=jail.for_workers(capture, untrusted=False))
    try:
        lane.start()
        assert lane._filling is None  # not before the ranking: the timing worker imports more for it
        lane.baselines([])
        assert lane._filling is not None and lane._filling.wait(120) == 0
    finally:
        lane.close()
    import tritune.loop.jobs

    assert compiled(folder, Path(tritune.loop.jobs.__file__)).is_file() and bytecode.filled(folder)


# ------------------------------------------------------- a capture compiles it for the first run

def test_a_packages_sources_are_listed_without_importing_it_and_only_under_the_roots(tmp_path, monkeypatch):
    """Found on the ``sys.path`` entries inside the roots: a package of the same name in a folder
    outside them (a program's working directory) is not the one listed."""
    for where in ("site", "cwd"):
        package = tmp_path / where / "plantedpkg"
        (package / "sub").mkdir(parents=True)
        (package / "__pycache__").mkdir()
        (package / "__init__.py").write_text("raise RuntimeError('imported')\n")
        (package / "sub" / "mod.py").write_text("X = 1\n")
        (package / "__pycache__" / "stray.py").write_text("")
        (package / "data.txt").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(tmp_path / "cwd"))  # first on the path, outside the roots
    monkeypatch.setattr(bytecode, "roots", lambda: [str(tmp_path / "site")])
    found = bytecode.package_sources(["plantedpkg", "no_such_package_here"])
    package = tmp_path / "site" / "plantedpkg"
    assert sorted(found) == [str(package / "__init__.py"), str(package / "sub" / "mod.py")]
    assert "plantedpkg" not in sys.modules


@needs_jail
def test_a_capture_compiles_the_workers_packages_while_its_program_runs(tree, monkeypatch):
    """``filled_meanwhile``: the fill runs during the block (the program), through the same
    jailed compiler and the same roots as a lane's; the block's end waits for it, and the
    folder is then first-filled (``FIRST``, not ``FILLED``). A source outside the roots is not
    compiled, here too."""
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tree["folder"])
    monkeypatch.setattr(bytecode, "roots", lambda: [str(tree["lib"])])
    monkeypatch.setattr(bytecode, "package_sources",
                        lambda names: [str(tree["lib"] / "mod.py"), str(tree["outside"] / "secret.py")])
    with bytecode.filled_meanwhile(lambda line: None):
        assert "--first" in bytecode._FILLING[str(tree["folder"])].args  # under way, as a first fill
    assert (tree["folder"] / bytecode.FIRST).is_file() and not bytecode.filled(tree["folder"])
    assert [p.name for p in tree["folder"].rglob("*.pyc")] == [f"mod.{TAG}.pyc"]


@needs_jail
def test_a_capture_compiles_what_its_program_imported_after_it_from_the_roots_only(tree, tmp_path, monkeypatch):
    """After the program, what its processes listed (numpy, its libraries) is compiled too, by
    the same jailed compiler, and said so also when the first fill ended during the program: a
    line outside the roots, a link out of them, garbage, are not; the folder of lists, which the
    fill made, is removed."""
    lib, outside, folder = tree["lib"], tree["outside"], tree["folder"]
    (lib / "numpyish.py").write_text("VALUE = 4\n")
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: folder)
    monkeypatch.setattr(bytecode, "roots", lambda: [str(lib)])
    monkeypatch.setattr(bytecode, "package_sources", lambda names: [str(lib / "mod.py")])
    said, complete = [], tmp_path / "capture" / bytecode.COMPLETE
    complete.parent.mkdir()
    with bytecode.filled_meanwhile(said.append, complete) as imports:
        assert imports.is_dir() and not any(imports.iterdir()) and not complete.exists()
        bytecode._FILLING[str(folder)].wait()  # the program outlasts the first fill
        (imports / "1-0.txt").write_text("\n".join([str(lib / "mod.py"), str(lib / "numpyish.py")]))
        (imports / "2-0.txt").write_bytes(b"\xff\xfe not utf-8\n" + str(outside / "secret.py").encode()
                                         + b"\n" + str(lib / "linked.py").encode())
    assert not imports.exists()
    assert sorted(p.name for p in folder.rglob("*.pyc")) == [f"mod.{TAG}.pyc", f"numpyish.{TAG}.pyc"]
    assert (folder / bytecode.FIRST).is_file()
    assert len(said) == 2 and said[-1].startswith("compiled in")  # the second fill is no silent pause
    assert complete.is_file()  # all of it finished: a lane of this capture may give the folder


def test_a_program_is_asked_for_its_imports_only_while_a_fill_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: None)  # packages carry their bytecode
    with bytecode.filled_meanwhile(print) as imports:
        assert imports is None
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
    monkeypatch.setattr(bytecode, "fill", lambda folder, files, first=False: None)  # one under way already
    with bytecode.filled_meanwhile(print) as imports:
        assert imports is None


def test_the_second_fill_gets_what_is_left_of_the_wait(tmp_path, monkeypatch):
    """``FILL_WAIT_S`` bounds both fills together: the lists' fill is waited for what the first
    left of it, then stopped."""
    fills, waits = [], []
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
    monkeypatch.setattr(bytecode, "fill", lambda folder, files, first=False: fills.pop(0))
    monkeypatch.setattr(bytecode, "FILL_WAIT_S", 2.0)
    real = bytecode._waited
    monkeypatch.setattr(bytecode, "_waited", lambda proc, seconds: waits.append(seconds) or real(proc, seconds))
    fills += [PlantedFill(0.8), PlantedFill(60)]
    said = []
    complete = tmp_path / "capture" / bytecode.COMPLETE
    complete.parent.mkdir()
    complete.touch()  # an earlier program's
    with bytecode.filled_meanwhile(said.append, complete) as imports:
        (imports / "1-0.txt").write_text("/x.py\n")
        (tmp_path / bytecode.FIRST).touch()  # what the first compiler writes at its end
    assert waits[0] == 2.0 and 0 < waits[1] < 1.5 and said[-1] == bytecode.UNFINISHED
    assert not complete.exists()  # a part-filled folder is not given to this capture's workers


def test_complete_is_said_only_of_a_fill_that_ran_to_its_end(tmp_path, monkeypatch):
    """The program's fill could not start (no process left): not complete. A capture refused
    before its program (the folder holds one, no --force) keeps the note of the one it holds."""
    from click.testing import CliRunner

    from tritune.commands.capture import capture

    (tmp_path / bytecode.FIRST).touch()
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)

    def failing(folder, files, first=False):
        raise BlockingIOError("no process left")

    monkeypatch.setattr(bytecode, "fill", failing)
    complete = tmp_path / "capture" / bytecode.COMPLETE
    complete.parent.mkdir()
    complete.touch()
    with bytecode.filled_meanwhile(print, complete) as imports:
        (imports / "1-0.txt").write_text("/x.py\n")
    assert not complete.exists()
    out = tmp_path / "held"
    out.mkdir()
    (out / "launches.jsonl").write_text("")
    (out / bytecode.COMPLETE).touch()
    done = CliRunner().invoke(capture, ["--out", str(out), "--", sys.executable, "-c", "pass"])
    assert done.exit_code == 2 and (out / bytecode.COMPLETE).is_file()


def test_a_programs_lists_are_read_within_bounds(tmp_path, monkeypatch):
    """The program writes the lists: at most ``MAX_LISTS`` files and ``MAX_LISTED_BYTES`` in all
    are read, lines longer than a path dropped, what is not a regular file skipped."""
    monkeypatch.setattr(bytecode, "MAX_LISTS", 4)
    monkeypatch.setattr(bytecode, "MAX_LISTED_BYTES", 20)
    (tmp_path / "0.txt").write_text("/a0.py\n/" + "x" * bytecode.PATH_MAX + ".py\n")  # 4,104 bytes: 20 read
    (tmp_path / "1.txt").write_text("/a1.py\n")  # beyond the 20 bytes
    assert bytecode.listed_imports(tmp_path) == ["/a0.py", "/xxxxxxxxxxxx"]
    monkeypatch.setattr(bytecode, "MAX_LISTED_BYTES", 1 << 20)
    assert bytecode.listed_imports(tmp_path) == ["/a0.py", "/a1.py"]  # the long line dropped
    (tmp_path / "0a.txt").mkdir()  # not a file: skipped, and counted (of 4)
    (tmp_path / "2.txt").write_text("/a2.py")
    (tmp_path / "3.txt").write_text("/a3.py")
    assert bytecode.listed_imports(tmp_path) == ["/a0.py", "/a1.py", "/a2.py"]
    assert bytecode.listed_imports(tmp_path / "none") == []


def _unblock(fifo: Path) -> None:
    """A reader blocked in ``open`` of ``fifo`` goes on (a writer comes and goes)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.mark.parametrize("how", ["fifo", "link to a fifo", "link to a file", "linked folder"])
def test_a_planted_file_among_the_lists_neither_hangs_nor_is_followed(tmp_path, how):
    """A FIFO named ``x.txt`` (or a link to one, ``/dev/tty``...) would block ``open`` until a
    writer comes; a link is not followed, to a file or as the folder itself."""
    import threading

    lists, elsewhere = tmp_path / "imported", tmp_path / "elsewhere"
    lists.mkdir(), elsewhere.mkdir()
    (lists / "0.txt").write_text("/a.py\n")
    os.mkfifo(elsewhere / "pipe")
    (elsewhere / "b.txt").write_text("/b.py\n")
    where = lists
    if how == "fifo":
        os.mkfifo(lists / "x.txt")
    elif how == "link to a fifo":
        (lists / "x.txt").symlink_to(elsewhere / "pipe")
    elif how == "link to a file":
        (lists / "x.txt").symlink_to(elsewhere / "b.txt")
    else:
        where = tmp_path / "link"
        where.symlink_to(lists)
    found = []
    reader = threading.Thread(target=lambda: found.append(bytecode.listed_imports(where)), daemon=True)
    reader.start()
    reader.join(10)
    hung = reader.is_alive()
    _unblock(lists / "x.txt"), _unblock(elsewhere / "pipe")
    reader.join(10)
    assert not hung and found == [[] if how == "linked folder" else ["/a.py"]]


def test_ctrl_c_after_the_program_stops_the_fill_and_the_capture_goes_on(tmp_path, monkeypatch):
    """Ctrl-C while the lists are read (or the second fill starts): the fill is stopped, the lists
    removed, the capture goes on (it has its launches)."""
    fills = []

    def interrupted(folder):
        raise KeyboardInterrupt

    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
    monkeypatch.setattr(bytecode, "fill", lambda folder, files, first=False: fills[-1])
    monkeypatch.setattr(bytecode, "listed_imports", interrupted)
    fills.append(PlantedFill(60))
    monkeypatch.setitem(bytecode._FILLING, str(tmp_path), fills[-1])
    said = []
    with bytecode.filled_meanwhile(said.append) as imports:
        pass
    assert fills[-1].returncode not in (None, 0) and said == [bytecode.UNFINISHED] and not imports.exists()


def test_a_capture_removes_only_the_folder_of_lists_it_made(tmp_path, monkeypatch):
    """The folder is the fill's own (``mkdtemp``): a folder named ``imported`` of the user's
    beside or inside the capture is never touched, fill or none."""
    from click.testing import CliRunner

    from tritune.commands.capture import capture

    out = tmp_path / "project"
    (out / "imported").mkdir(parents=True)
    (out / "imported" / "keep.csv").write_text("the user's data\n")
    for where in (None, tmp_path / "bytecode"):
        monkeypatch.setattr(bytecode, "prefix", lambda environ=None: where)
        monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
        monkeypatch.setattr(bytecode, "fill", lambda folder, files, first=False: PlantedFill(0))
        done = CliRunner().invoke(capture, ["--out", str(out), "--", sys.executable, "-c", "pass"])
        assert "no Triton launches" in done.output, done.output
        assert (out / "imported" / "keep.csv").is_file()


def test_a_first_filled_folder_is_given_to_workers_only_where_it_holds_each_library_that_carries_its_own(
        tmp_path, monkeypatch):
    """With the prefix set Python ignores every ``__pycache__``: a package the capture's kernels
    import that carries its own bytecode (a library, the standard library's ``typing``) would be
    compiled in every worker, unless this capture's fill finished (``COMPLETE`` in the capture)
    and put it in the folder (``compiled_in``). Modules Python never compiles (built in, frozen,
    extensions) do not count."""
    site, folder, capture = tmp_path / "site", tmp_path / "bytecode", tmp_path / "capture"
    for name, own in (("ownpkg", True), ("barepkg", False)):
        (site / name / "__pycache__").mkdir(parents=True)
        (site / name / "__init__.py").write_text("")
        if own:
            (site / name / "__pycache__" / f"__init__.{TAG}.pyc").write_bytes(b"")
    folder.mkdir(), capture.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert bytecode.carried("ownpkg") and not bytecode.carried("barepkg")
    assert not bytecode.usable(folder, ["barepkg"], capture)  # nothing filled yet
    (folder / bytecode.FIRST).touch()
    assert bytecode.usable(folder, ["barepkg.ops", "math", "sys", "itertools", "os"], capture)
    assert not bytecode.usable(folder, ["barepkg", "ownpkg.ops"], capture)
    assert not bytecode.compiled_in(folder, "ownpkg")
    compiled(folder, site / "ownpkg" / "__init__.py").parent.mkdir(parents=True)
    compiled(folder, site / "ownpkg" / "__init__.py").write_bytes(b"")  # what the capture's fill writes
    assert bytecode.compiled_in(folder, "ownpkg") and not bytecode.compiled_in(folder, "no_such_package_here")
    assert not bytecode.usable(folder, ["barepkg", "ownpkg.ops"], capture)  # its fill did not finish
    assert not bytecode.usable(folder, ["ownpkg.ops"])  # no capture to tell
    (capture / bytecode.COMPLETE).touch()
    assert bytecode.usable(folder, ["barepkg", "ownpkg.ops"], capture)
    (site / "nspkg" / "__pycache__").mkdir(parents=True)  # a namespace package: its modules are compiled
    (site / "nspkg" / "sub.py").write_text("")
    (site / "nspkg" / "__pycache__" / f"sub.{TAG}.pyc").write_bytes(b"")
    assert not bytecode.usable(folder, ["nspkg.sub"], capture)
    (capture / bytecode.COMPLETE).unlink()
    if bytecode.carried("triton"):  # FIRST says FIRST_FILL's fill finished: no capture needed for them
        import triton

        pyc = compiled(folder, Path(triton.__file__))
        assert not bytecode.usable(folder, ["triton.language"], capture)
        pyc.parent.mkdir(parents=True, exist_ok=True)
        pyc.write_bytes(b"")
        assert bytecode.usable(folder, ["triton.language"], capture)
        assert not bytecode.usable(folder, ["triton.language", "ownpkg"], capture)
    (folder / bytecode.FIRST).unlink()
    (folder / bytecode.FILLED).touch()  # a lane's fill: what its workers imported, libraries too
    assert bytecode.usable(folder, ["ownpkg.ops", "barepkg"])


@needs_jail
def test_bytecode_under_a_linked_path_entry_is_not_taken_for_what_python_reads(tmp_path, monkeypatch):
    """A venv whose ``lib64`` links to ``lib``, a PYTHONPATH under a link: the compiler writes under
    the real path, Python looks under the path it imported the module by; ``compiled_in`` says
    what Python finds (checked with ``python -v``)."""
    real, folder = tmp_path / "lib", tmp_path / "bytecode"
    (real / "ownpkg" / "__pycache__").mkdir(parents=True)
    (real / "ownpkg" / "__init__.py").write_text("VALUE = 1\n")
    (real / "ownpkg" / "__pycache__" / f"__init__.{TAG}.pyc").write_bytes(b"")
    folder.mkdir()
    linked = tmp_path / "lib64"
    linked.symlink_to("lib")
    subprocess.run([sys.executable, "-m", "tritune.worker.bytecode", "--first", str(folder), str(real)],
                   input=str(linked / "ownpkg" / "__init__.py"), text=True, capture_output=True, check=True,
                   cwd=folder)

    def python_reads(entry):
        env = {**os.environ, config.ENV_PYCACHE_PREFIX: str(folder), "PYTHONPATH": str(entry),
               "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([sys.executable, "-v", "-c", "import ownpkg"], env=env, capture_output=True,
                              text=True, check=True, cwd=tmp_path)
        return any("code object from" in line and str(folder) in line for line in done.stderr.splitlines())

    assert python_reads(real) and not python_reads(linked)
    for entry in (real, linked):
        monkeypatch.syspath_prepend(str(entry))
        import importlib

        importlib.invalidate_caches()
        sys.modules.pop("ownpkg", None)
        assert bytecode.compiled_in(folder, "ownpkg") == python_reads(entry)


def test_nothing_is_compiled_where_it_cannot_help(tmp_path, monkeypatch):
    """Packages carry their bytecode (or TRITUNE_BYTECODE off), a lane's fill finished before, no
    jail for the compiler, a folder no worker may be granted: no fill, nothing listed. A capture
    after the first (``FIRST``) compiles only what its program imported, not ``FIRST_FILL`` again."""
    fills = []

    def refused(folder, files, first=False):
        fills.append(list(files))
        raise AssertionError("filled")

    monkeypatch.setattr(bytecode, "fill", refused)
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: None)
    with bytecode.filled_meanwhile(print) as imports:
        assert imports is None
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
    (tmp_path / bytecode.FILLED).touch()
    with bytecode.filled_meanwhile(print) as imports:
        assert imports is None
    (tmp_path / bytecode.FILLED).unlink()
    (tmp_path / bytecode.FIRST).touch()
    monkeypatch.setattr(bytecode, "fill", lambda folder, files, first=False: fills.append(list(files)) or PlantedFill(0))
    with bytecode.filled_meanwhile(print) as imports:
        assert fills == []  # FIRST_FILL is there already
        (imports / "1-0.txt").write_text("/its/library.py")
    assert fills == [["/its/library.py"]]
    (tmp_path / bytecode.FIRST).unlink()
    monkeypatch.setattr(bytecode, "fill", refused)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: False)
    with bytecode.filled_meanwhile(print) as imports:
        assert imports is None
    assert fills == [["/its/library.py"]]


def test_a_fill_that_cannot_start_is_no_failure_of_the_capture(tmp_path, monkeypatch):
    def failing(folder, files, first=False):
        raise BlockingIOError("no process left")

    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
    monkeypatch.setattr(bytecode, "fill", failing)
    ran = []
    with bytecode.filled_meanwhile(print):
        ran.append("program")
    assert ran == ["program"]


class PlantedFill:
    """A fill process: ``seconds`` of sleep, or a wait that raises ``interrupt``."""

    def __init__(self, seconds, interrupt=None):
        self.proc = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
        self.interrupt = interrupt
        self.args = self.proc.args

    def poll(self):
        return self.proc.poll()

    def wait(self, timeout=None):
        interrupt, self.interrupt = self.interrupt, None  # once: the wait after the kill returns
        if interrupt is not None:
            raise interrupt
        return self.proc.wait(timeout)

    def kill(self):
        self.proc.kill()

    @property
    def returncode(self):
        return self.proc.returncode


def test_a_fill_still_going_is_waited_for_at_most_a_while_and_ctrl_c_in_the_program_kills_it(tmp_path, monkeypatch):
    fills = []
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
    monkeypatch.setattr(bytecode, "fill", lambda folder, files, first=False: fills[-1])
    monkeypatch.setattr(bytecode, "FILL_WAIT_S", 0.5)
    said = []
    fills.append(PlantedFill(60))  # past the wait: stopped, the capture goes on
    with bytecode.filled_meanwhile(said.append):
        pass
    assert fills[-1].returncode not in (None, 0) and said[-1].startswith("left unfinished")
    fills.append(PlantedFill(60, interrupt=KeyboardInterrupt()))  # Ctrl-C while waiting: the same
    with bytecode.filled_meanwhile(said.append):
        pass
    assert fills[-1].returncode not in (None, 0) and said[-1].startswith("left unfinished")
    fills.append(PlantedFill(60))
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C in the program: killed, and the capture's own way
        with bytecode.filled_meanwhile(said.append):
            raise KeyboardInterrupt
    assert fills[-1].returncode not in (None, 0) and len(said) == 4


def test_a_finished_fill_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: tmp_path)
    monkeypatch.setattr(bytecode, "_grantable", lambda folder: True)
    planted = PlantedFill(0.3)
    monkeypatch.setattr(bytecode, "fill", lambda folder, files, first=False: planted)
    said = []
    with bytecode.filled_meanwhile(said.append):
        (tmp_path / bytecode.FIRST).touch()  # what the real compiler writes at its end
    assert planted.returncode == 0 and len(said) == 2 and said[-1].startswith("compiled in")


def test_a_capture_fills_unless_its_workers_run_unjailed(tmp_path, monkeypatch):
    """``tritune capture`` and ``optimize -- COMMAND`` run the program inside ``filled_meanwhile``;
    ``--unsafe-no-jail``'s workers are never given the folder: nothing is compiled for them."""
    import contextlib

    from tritune.capture import program
    from tritune.commands import optimize as optimize_command

    entered = []

    @contextlib.contextmanager
    def recording(say, complete=None):
        assert complete.name == bytecode.COMPLETE and complete.parent.name in ("capture", "cap")
        entered.append("fill")
        try:
            yield tmp_path / "lists"
        finally:
            entered.append("filled")

    def failing(command, out_dir, mode="new", imports=None):
        entered.append("program" if imports == tmp_path / "lists" else "program, not listing")
        raise program.CaptureError("planted", exit_code=3)

    monkeypatch.setattr(bytecode, "filled_meanwhile", recording)
    monkeypatch.setattr(program, "run", failing)
    for unjailed in (False, True):
        with pytest.raises(SystemExit):
            optimize_command._launches_from(("python3", "x.py"), None, tmp_path / str(unjailed),
                                            unsafe_no_jail=unjailed)
    assert entered == ["fill", "program", "filled", "program, not listing"]
    from click.testing import CliRunner

    from tritune.commands.capture import capture

    entered.clear()
    done = CliRunner().invoke(capture, ["--out", str(tmp_path / "cap"), "--", "python3", "x.py"])
    assert done.exit_code == 3 and entered == ["fill", "program", "filled"]
