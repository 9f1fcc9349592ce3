"""What a job's code reaches in a worker: no secrets, a scratch working directory, CPU-time and
memory limits. The jobs are the functions at the top of this module (the child imports it)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tritune import config
from tritune.worker import CRASH, TIMEOUT, Worker
from tritune.worker import limits as limits_module

JOBS = "test_worker_limits"
MIB = 1 << 20


# --- jobs (run in the child) ----------------------------------------------------------------------

def environ(_payload=None):
    return dict(os.environ)


def where(_payload=None):
    """The working directory, after writing a file there by a relative path."""
    Path("written-by-job.txt").write_text("scratch")
    return os.getcwd()


def spin(_payload=None):
    while True:
        pass


def spin_for(cpu_s):
    """Burns ``cpu_s`` seconds of CPU time, then returns."""
    start = time.process_time()
    while time.process_time() - start < cpu_s:
        pass
    return "done"


def hold_memory(mib):
    """Allocates ``mib`` MiB, touches every page (so it is resident) and holds it."""
    block = bytearray(mib * MIB)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(60)
    return len(block)


def echo(payload):
    return payload


# --- tests ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def worker():
    with Worker(timeout_s=30) as w:
        yield w


def test_secrets_never_reach_a_child_whatever_the_parent_or_env_holds():
    with config.override({config.ENV_LLM_KEY: "sk-llm-7f3a", config.ENV_OPENAI_KEY: "sk-openai-9c1e"}):
        # even an explicit env entry cannot hand a secret to the child
        with Worker(timeout_s=30, env={config.ENV_OPENAI_KEY: "sk-given", "TRITUNE_TEST_MARK": "seen"}) as w:
            out = w.call(f"{JOBS}:environ")
    assert out.ok, out.failure
    assert out.value.get("TRITUNE_TEST_MARK") == "seen"  # the environment did travel
    assert not set(config.SECRET_ENV) & set(out.value)
    assert not {"sk-llm-7f3a", "sk-openai-9c1e", "sk-given"} & set(out.value.values())


def test_child_runs_in_its_own_scratch_directory_removed_at_close(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Worker(timeout_s=30) as w:
        out = w.call(f"{JOBS}:where")
        assert out.ok, out.failure
        cwd = Path(out.value)
        assert cwd != tmp_path and cwd.is_dir()
        assert cwd.is_relative_to(os.path.realpath(tempfile.gettempdir()))
        assert (cwd / "written-by-job.txt").exists() and not (tmp_path / "written-by-job.txt").exists()
        first = cwd
        w.restart()  # a fresh child gets a fresh directory, the old one goes with its child
        again = Path(w.call(f"{JOBS}:where").value)
        assert again != first and not first.exists()
    assert not again.exists()


def test_relative_sys_path_and_path_variables_still_mean_the_parents_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "relative_job_module.py").write_text("def hello(_payload=None):\n    return 'from cwd'\n")
    monkeypatch.setattr(sys, "path", ["", *sys.path])  # as `python -c` or `python -m` have it
    with config.override({config.ENV_HOME: "relative-home"}):
        with Worker(timeout_s=30) as w:
            imported = w.call("relative_job_module:hello")
            env = w.call(f"{JOBS}:environ")
    assert imported.ok and imported.value == "from cwd", imported.failure
    assert env.value[config.ENV_HOME] == str(tmp_path / "relative-home")


def test_cpu_time_limit_kills_a_spinning_job_and_the_worker_goes_on(worker):
    begin = time.monotonic()
    out = worker.call(f"{JOBS}:spin", cpu_s=0.5, timeout_s=30)
    assert not out.ok and out.failure.kind == TIMEOUT
    assert out.failure.message == "CPU-time limit of 0.5 s exceeded"
    assert time.monotonic() - begin < 15  # far below the 30 s wall-clock limit (2 shared cores)
    assert worker.call(f"{JOBS}:echo", 1).value == 1


def test_memory_limit_kills_a_growing_job_and_the_worker_goes_on(worker):
    out = worker.call(f"{JOBS}:hold_memory", 300, memory_mb=150, timeout_s=30)
    assert not out.ok and out.failure.kind == CRASH
    assert out.failure.message.startswith("memory limit of 150 MiB exceeded (resident ")
    resident = float(out.failure.message.rsplit("(resident ", 1)[1].split()[0])
    assert 150 <= resident < 400  # over the limit; the message rounds to 0.1 MiB
    assert out.seconds < 15
    assert worker.call(f"{JOBS}:echo", 2).value == 2


def test_jobs_within_generous_limits_run_and_cpu_time_counts_per_call(worker):
    out = worker.call(f"{JOBS}:echo", {"x": 1}, cpu_s=30, memory_mb=4096)
    assert out.ok and out.value == {"x": 1}
    pid = worker.pid
    for _ in range(2):  # 0.8 s in all, over the limit only if the first call's time were counted
        spun = worker.call(f"{JOBS}:spin_for", 0.4, cpu_s=0.7)
        assert spun.ok and spun.value == "done", spun.failure
    assert worker.pid == pid  # never restarted


def test_limits_must_be_positive(worker):
    with pytest.raises(ValueError, match="cpu_s must be positive"):
        worker.call(f"{JOBS}:echo", 1, cpu_s=0)
    with pytest.raises(ValueError, match="memory_mb must be positive"):
        worker.call(f"{JOBS}:echo", 1, memory_mb=-1)


def test_without_proc_limits_are_not_enforced_and_that_is_said_once(worker, monkeypatch, capsys):
    monkeypatch.setattr(limits_module, "PROC", Path("/nonexistent-proc"))
    monkeypatch.setattr(limits_module, "_warned", False)
    assert worker.call(f"{JOBS}:echo", 3, cpu_s=1).value == 3
    assert worker.call(f"{JOBS}:echo", 4, memory_mb=10).value == 4  # 10 MiB would have killed it
    err = capsys.readouterr().err
    assert err.count("limits need /proc") == 1 and len(err.strip().splitlines()) == 1
