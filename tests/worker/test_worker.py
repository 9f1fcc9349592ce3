"""Worker isolation: each failure kind is classified, the right ones restart the child, and no
child outlives its parent. Jobs live in tests/worker_jobs.py and misbehave on purpose."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tritune.worker import (
    COMPILE_ERROR,
    CRASH,
    ERROR,
    RUNTIME_FAULT,
    TIMEOUT,
    Failure,
    Worker,
    classify,
    describe_exit,
    run_isolated,
)
from tritune.worker.failures import from_exception

TESTS = Path(__file__).resolve().parents[1]
JOBS = "worker_jobs"


@pytest.fixture(scope="module")
def worker():
    with Worker(timeout_s=30) as w:
        yield w


def alive(pid: int) -> bool:
    """Running and not a zombie (a container's init may never reap an orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


# --- jobs that work, or fail without harming the child -------------------------------------------

def test_ok_job_returns_its_value_and_the_child_stays_warm(worker):
    first = worker.call(f"{JOBS}:echo", {"a": [1, 2]})
    second = worker.call(f"{JOBS}:echo", "again")
    assert first.ok and first.failure is None
    assert first.value["got"] == {"a": [1, 2]} and second.value["got"] == "again"
    assert first.value["pid"] == second.value["pid"] == worker.pid != os.getpid()
    assert 0 <= second.seconds < 0.5


def test_exception_is_an_error_and_the_child_is_reused(worker):
    before = worker.call(f"{JOBS}:pid").value
    out = worker.call(f"{JOBS}:raise_value_error", 7)
    assert not out.ok and out.failure.kind == ERROR
    assert out.failure.message == "ValueError: bad payload 7"
    assert "raise_value_error" in out.failure.detail and "Traceback" in out.failure.detail
    assert worker.call(f"{JOBS}:pid").value == before


def test_triton_compile_error_is_a_compile_error(worker):
    before = worker.call(f"{JOBS}:pid").value
    out = worker.call(f"{JOBS}:compile_type_error")
    assert not out.ok and out.failure.kind == COMPILE_ERROR, out.failure
    assert out.failure.message.startswith("CompilationError: at 3:")
    assert "invalid operands" in out.failure.message
    assert worker.call(f"{JOBS}:pid").value == before


def test_unknown_job_and_unpicklable_result_are_errors(worker):
    missing = worker.call(f"{JOBS}:no_such_job")
    assert missing.failure.kind == ERROR and "cannot load job worker_jobs:no_such_job" in missing.failure.message
    malformed = worker.call("worker_jobs.echo")
    assert malformed.failure.kind == ERROR and "package.module:function" in malformed.failure.message
    lam = worker.call(f"{JOBS}:unpicklable_result")
    assert lam.failure.kind == ERROR and "cannot be sent" in lam.failure.message
    assert worker.call(f"{JOBS}:echo", 1).ok


def test_unpicklable_payload_raises_in_the_caller_and_keeps_the_child(worker):
    before = worker.call(f"{JOBS}:pid").value
    with pytest.raises(Exception, match="pickle"):
        worker.call(f"{JOBS}:echo", lambda: None)
    assert worker.call(f"{JOBS}:pid").value == before


def test_child_output_lands_in_the_detail_not_in_ours(worker, capfd):
    out = worker.call(f"{JOBS}:stderr_then_fail")
    assert out.failure.kind == ERROR
    assert "C-level stderr line" in out.failure.detail
    assert "python stdout line" in out.failure.detail
    assert "KeyError" in out.failure.detail.split("--- worker output")[0]
    assert "C-level" not in capfd.readouterr().err
    # The next job's failure shows only its own output.
    again = worker.call(f"{JOBS}:raise_value_error", 1)
    assert "C-level" not in again.failure.detail


def test_output_tail_is_bounded(worker):
    out = worker.call(f"{JOBS}:flood_then_fail")
    log = out.failure.detail.split("--- worker output (tail) ---\n")[1]
    assert "last words" in log and "first words" not in log
    assert len(log) <= worker.log_kb * 1024


# --- jobs that end the child ---------------------------------------------------------------------

def test_segfault_is_a_crash_and_the_next_call_works(worker):
    before = worker.call(f"{JOBS}:pid").value
    out = worker.call(f"{JOBS}:segfault")
    assert not out.ok and out.failure.kind == CRASH
    assert "SIGSEGV" in out.failure.message
    assert "about to read address 0" in out.failure.detail  # stdout before the crash
    assert "segfault" in out.failure.detail  # faulthandler's stack of the crashing job
    assert not alive(before)
    assert worker.call(f"{JOBS}:pid").value != before


def test_exit_is_a_crash_with_its_code(worker):
    out = worker.call(f"{JOBS}:exit_code", 3)
    assert out.failure.kind == CRASH and "exit code 3" in out.failure.message
    assert worker.call(f"{JOBS}:echo", 1).ok


def test_hang_times_out_near_the_limit_and_the_next_call_works(worker):
    before = worker.call(f"{JOBS}:pid").value
    start = time.perf_counter()
    out = worker.call(f"{JOBS}:hang", timeout_s=1.0)
    elapsed = time.perf_counter() - start
    assert not out.ok and out.failure.kind == TIMEOUT
    assert 1.0 <= elapsed < 2.5, elapsed
    assert "1 s limit" in out.failure.message
    assert "in hang" in out.failure.detail  # where it hung, dumped by faulthandler before the kill
    assert wait_gone(before)
    assert worker.call(f"{JOBS}:pid").value != before


def test_timeout_kills_the_jobs_own_children(worker, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    out = worker.call(f"{JOBS}:hang_with_grandchild", str(pid_file), timeout_s=1.5)
    assert out.failure.kind == TIMEOUT
    grandchild = int(pid_file.read_text())
    assert wait_gone(grandchild)


def test_cuda_fault_is_a_runtime_fault_and_restarts(worker):
    before = worker.call(f"{JOBS}:pid").value
    out = worker.call(f"{JOBS}:cuda_fault")
    assert not out.ok and out.failure.kind == RUNTIME_FAULT
    assert "illegal memory access" in out.failure.message
    assert wait_gone(before)
    assert worker.call(f"{JOBS}:pid").value != before


# --- environment, start and shutdown -------------------------------------------------------------

def test_env_is_in_place_before_the_child_interpreter_starts():
    env = {"TRITUNE_WORKER_TEST": "yes", "PYTHONDONTWRITEBYTECODE": "1", "TRITUNE_ABSENT": None}
    os.environ["TRITUNE_ABSENT"] = "set in the parent"
    try:
        with Worker(timeout_s=10, env=env) as w:
            out = w.call(f"{JOBS}:env", ["TRITUNE_WORKER_TEST", "TRITUNE_ABSENT"])
    finally:
        del os.environ["TRITUNE_ABSENT"]
    assert out.value["TRITUNE_WORKER_TEST"] == "yes"
    assert out.value["TRITUNE_ABSENT"] is None
    # Read by the interpreter at startup: only an env set before it starts can change it.
    assert out.value["dont_write_bytecode"] == 1


def test_close_reaps_the_child_and_refuses_calls():
    w = Worker(timeout_s=10)
    pid = w.call(f"{JOBS}:pid").value
    w.close()
    assert not alive(pid)
    with pytest.raises(RuntimeError, match="closed"):
        w.call(f"{JOBS}:pid")


def test_ctrl_c_in_the_parent_kills_the_child():
    w = Worker(timeout_s=30)
    pid = w.call(f"{JOBS}:pid").value
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            w.call(f"{JOBS}:hang")
    finally:
        timer.cancel()
    assert not alive(pid) and w.pid is None
    assert w.call(f"{JOBS}:echo", 1).ok  # the worker itself goes on
    w.close()


def test_child_exits_when_its_parent_is_killed(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from tritune.worker import Worker
        w = Worker(timeout_s=100)
        w.start()
        print(w.pid, w._child.cwd, w._child.log_path, flush=True)
        w.call("worker_jobs:hang")
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child, scratch, log = parent.stdout.readline().split()
        assert alive(int(child)) and Path(scratch).is_dir() and Path(log).is_file()
    finally:
        parent.kill()
        parent.wait()
    assert wait_gone(int(child)), "orphaned worker child still running"
    # nobody else removes them (a killed optimize, a Ray lane's killed actor): the child does
    assert not Path(scratch).exists() and not Path(log).exists()


def test_preload_failure_is_reported_not_raised():
    with Worker(timeout_s=10, preload=("no_such_module_for_tritune",)) as w:
        out = w.call(f"{JOBS}:pid")
    assert not out.ok and out.failure.kind == ERROR
    assert "preload failed" in out.failure.message and "no_such_module_for_tritune" in out.failure.message


def test_extend_imports_into_the_live_child_at_once_and_a_fresh_one_starts_with_the_new_settings(tmp_path):
    """``Worker.extend`` (a lane's head start): the live child imports the new preload and warm
    modules in place (no restart), a warm import that fails is a line in its log, and a child
    started after has them from its start."""
    names = ["colorsys", "wave"]
    with Worker(timeout_s=30) as w:
        before = w.call(f"{JOBS}:imported", names).value
        assert not any(before["modules"].values())
        done = w.extend(preload=("colorsys",), warm=("wave", "no_such_module_for_tritune"))
        assert done.ok, done.failure
        now = w.call(f"{JOBS}:imported", names).value
        assert now["pid"] == before["pid"] and all(now["modules"].values())
        assert w.preload == ("colorsys",) and w.warm == ("wave", "no_such_module_for_tritune")
        w.restart()
        fresh = w.call(f"{JOBS}:imported", names).value
        assert fresh["pid"] != before["pid"] and all(fresh["modules"].values())
        bad = w.extend(preload=("no_such_module_for_tritune",))
        assert not bad.ok and bad.failure.kind == ERROR and "no_such_module_for_tritune" in bad.failure.message
        assert w.pid is None  # ended: a child that failed its imports is not reused
        assert w.warm == ()  # as after a start that failed with them: the next start goes without
        again = w.call(f"{JOBS}:pid")
        assert not again.ok and "preload failed" in again.failure.message  # a fresh start has them too
    closed = w.extend(preload=("colorsys",))
    assert not closed.ok and "closed" in closed.failure.message


def test_extend_changes_a_childs_bytecode_folder_only_where_the_new_env_does(tmp_path):
    """``extend``: the child's ``PYTHONPYCACHEPREFIX`` follows the new environment where it changes
    it (an unjailed child reads any folder: the jailed case is in test_worker_bytecode.py)."""
    prefix = "PYTHONPYCACHEPREFIX"
    folder, other = str(tmp_path / "a"), str(tmp_path / "b")
    with Worker(timeout_s=30, env={prefix: folder}) as w:
        assert w.call(f"{JOBS}:imported", []).value["pycache_prefix"] == folder
        assert w.extend(env={prefix: folder, "TRITUNE_WORKER_TEST": "yes"}).ok  # not changed: kept
        assert w.call(f"{JOBS}:imported", []).value["pycache_prefix"] == folder
        assert w.extend(env={}).ok
        assert w.call(f"{JOBS}:imported", []).value["pycache_prefix"] is None
        assert w.extend(env={prefix: other}).ok
        assert w.call(f"{JOBS}:imported", []).value["pycache_prefix"] == other
        w.restart()  # a fresh child starts with the new settings
        assert w.call(f"{JOBS}:imported", []).value["pycache_prefix"] == other


@pytest.mark.parametrize("how", ["close", "abort"])
def test_close_and_abort_end_an_extension_under_way_rather_than_wait_for_it(tmp_path, monkeypatch, how):
    """A head lane's workers import the capture's libraries through ``extend`` (up to its start
    limit): Ctrl-C or closing the run must not wait for an import that hangs."""
    (tmp_path / "tritune_test_sleepy.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the child's path is the parent's
    w = Worker(timeout_s=30)
    w.start()
    found = {}
    thread = threading.Thread(target=lambda: found.setdefault("outcome", w.extend(warm=("tritune_test_sleepy",))))
    thread.start()
    time.sleep(1.5)
    begin = time.monotonic()
    try:
        getattr(w, how)()
        thread.join(20)
        assert time.monotonic() - begin < 10 and not thread.is_alive()
        assert not found["outcome"].ok
        if how == "abort":  # Ctrl-C: the worker goes on, with the settings it was given
            assert w.warm == ("tritune_test_sleepy",)
    finally:
        w.close()


def test_run_isolated_one_shot():
    out = run_isolated(f"{JOBS}:echo", 5, timeout_s=10)
    assert out.ok and out.value["got"] == 5
    assert not alive(out.value["pid"])


def test_env_must_be_strings():
    with pytest.raises(TypeError, match="str"):
        Worker(env={"X": 1})


# --- classification, in this process ------------------------------------------------------------

def _raised(exc: BaseException, cause: BaseException | None = None) -> BaseException:
    try:
        raise exc from cause
    except BaseException as caught:  # noqa: BLE001
        return caught


def test_classify_triton_errors():
    from triton.runtime.errors import InterpreterError, OutOfResources, PTXASError

    assert classify(OutOfResources(300000, 232448, "shared memory")) == COMPILE_ERROR
    assert classify(PTXASError("ptxas /tmp/x.ptx, line 4; error   : bad")) == COMPILE_ERROR
    # The interpreter wraps what the kernel raised: an index error is a fault, the rest compile.
    assert classify(_raised(InterpreterError("IndexError()"), IndexError("index 99"))) == RUNTIME_FAULT
    assert classify(_raised(InterpreterError("ValueError()"), ValueError("shapes"))) == COMPILE_ERROR


def test_resource_failures_reach_the_search_as_text_it_reads():
    from triton.runtime.errors import PTXASError

    from tritune.errors import resource_failure_text

    # Triton's PTXASError holds ptxas's stderr; CUDA refuses a launch asking too many registers x threads
    ptxas = PTXASError("Internal Triton PTX codegen error\n`ptxas` stderr:\nptxas error   : Entry function "
                       "'matmul_kernel' uses too much shared data (0x30000 bytes, 0x28400 max)\n"
                       "ptxas fatal   : Ptx assembly aborted due to errors\n")
    launch = RuntimeError("Triton Error [CUDA]: too many resources requested for launch")
    for exc, kind in ((ptxas, COMPILE_ERROR), (launch, RUNTIME_FAULT)):
        failure = Failure.from_json(from_exception(_raised(exc)).to_json())
        assert failure.kind == kind and resource_failure_text(failure.message), failure


def test_classify_index_error_by_where_it_was_raised():
    assert classify(_raised_in_file("/site-packages/triton/runtime/interpreter.py")) == RUNTIME_FAULT
    assert classify(_raised_in_file("/elsewhere/job.py")) == ERROR


def _raised_in_file(filename: str) -> BaseException:
    try:
        exec(compile("raise IndexError('index 10 is out of bounds for axis 0 with size 8')", filename, "exec"))
    except IndexError as exc:
        return exc
    raise AssertionError("no IndexError")


def test_classify_runtime_faults_by_text_and_type():
    for text in ("CUDA error: misaligned address", "Triton Error [CUDA]: unspecified launch failure",
                 "an illegal instruction was encountered"):
        assert classify(RuntimeError(text)) == RUNTIME_FAULT, text
    accelerator = type("AcceleratorError", (RuntimeError,), {"__module__": "torch"})
    assert classify(accelerator("device fault")) == RUNTIME_FAULT
    assert classify(RuntimeError("shape mismatch")) == ERROR


def test_classify_candidate_source_errors_and_causes():
    assert classify(SyntaxError("invalid syntax")) == COMPILE_ERROR
    assert classify(ImportError("cannot import name 'x' from 'y'")) == COMPILE_ERROR
    assert classify(ModuleNotFoundError("No module named 'transformers'")) == ERROR
    # A loader that wraps the candidate's SyntaxError keeps the kind.
    assert classify(_raised(RuntimeError("import failed"), SyntaxError("bad"))) == COMPILE_ERROR
    assert classify(_raised(RuntimeError("import failed"), ValueError("x"))) == ERROR

    class Declared(Exception):
        failure_kind = COMPILE_ERROR

    assert classify(Declared("anything")) == COMPILE_ERROR


def test_failure_kinds_are_checked_and_round_trip():
    with pytest.raises(ValueError, match="unknown failure kind"):
        Failure("oops", "m")
    failure = from_exception(_raised(ValueError("one\ntwo")))
    assert failure.message == "ValueError: one" and failure.kind == ERROR
    assert Failure.from_json(failure.to_json()) == failure
    assert Failure(TIMEOUT, "t").restarts_worker and not Failure(COMPILE_ERROR, "c").restarts_worker


def test_describe_exit():
    assert describe_exit(-11) == "killed by SIGSEGV"
    assert describe_exit(2) == "exit code 2"
    assert describe_exit(None) == "still running"


def test_interpreted_kernel_runs_in_a_worker_and_its_out_of_bounds_read_is_contained():
    """The CPU path: TRITON_INTERPRET reaches the child before the kernel is decorated."""
    with Worker(timeout_s=30, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton")) as w:
        good = w.call(f"{JOBS}:interpreted_kernel", 0)
        assert good.ok, good.failure
        assert good.value == {"out": [2.0 * i for i in range(8)], "interpreted": "InterpretedFunction"}
        # The interpreter reads through raw pointers: far out of bounds it segfaults.
        bad = w.call(f"{JOBS}:interpreted_kernel", 10**8)
        assert bad.failure.kind == CRASH
        assert w.call(f"{JOBS}:interpreted_kernel", 0).ok


def test_abort_from_another_thread_ends_the_running_call_at_once():
    w = Worker(timeout_s=30)
    try:
        pid = w.call(f"{JOBS}:pid").value
        timer = threading.Timer(0.5, w.abort)
        timer.start()
        begin = time.monotonic()
        out = w.call(f"{JOBS}:hang")
        assert out.failure.kind == CRASH and "SIGKILL" in out.failure.message
        assert time.monotonic() - begin < 10 and wait_gone(pid)
        idle = w.call(f"{JOBS}:pid").value
        w.abort()  # an idle child: the next call must not fail on the dead one, it starts anew
        assert wait_gone(idle)
        again = w.call(f"{JOBS}:echo", 1)
        assert again.ok and again.value["pid"] not in (pid, idle)
    finally:
        w.close()
