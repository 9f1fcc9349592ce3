"""The worker jail (``tritune.worker.jail``): a real jailed worker, jobs that try each escape a
model's code would (tests/jail_jobs.py), and jobs that must still work. Run as root, as CI does:
a root worker that kept its capabilities would read everything.

Each escape is stopped by the mechanism named in its test; the tests with one mechanism turned
off (``Policy(landlock=False)``...) show that another holds alone where two overlap, and the
``open`` control shows that the harness sees an escape when nothing stops it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import site
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tritune import config
from tritune.worker import SharedCache, Worker, jail, landlock, seccomp
from tritune.worker.gpulock import GpuLock

TESTS = Path(__file__).parents[1]
HERE = jail.status()
needs_jail = pytest.mark.skipif(not HERE.usable, reason=f"this kernel lacks it: {HERE.describe()}")
needs_net = pytest.mark.skipif(HERE.landlock_abi < 4, reason="Landlock ABI < 4: no TCP rules on this kernel")
needs_scopes = pytest.mark.skipif(HERE.landlock_abi < 6, reason="Landlock ABI < 6: no signal scope on this kernel")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A TRITUNE_HOME with a store.key, a fake user home with a secret, a capture directory; the
    environment pointing at them while the module runs."""
    root = tmp_path_factory.mktemp("jail")
    home, user, capture = root / "tritune-home", root / "user", root / "capture"
    for folder in (home, user, capture):
        folder.mkdir()
    (home / "store.key").write_bytes(b"SENTINEL-KEY")
    (home / "store.key").chmod(0o600)
    (user / "secret.txt").write_text("SENTINEL-HOME")
    (capture / "kernel.py").write_text("# captured\n")
    # the user's own variables: none reaches a jailed worker (its environment is an allowlist)
    users = {"SENTINEL_CLOUD_CREDS": "SENTINEL-ENV", "TRITUNE_SENTINEL_TOKEN": "SENTINEL-ENV",
             "TRITON_SENTINEL_PASSWORD": "SENTINEL-ENV"}
    with config.override({config.ENV_HOME: str(home), config.ENV_USER_HOME: str(user), **users}):
        yield {"home": home, "user": user, "capture": capture, "outside": root, "env": users}


@pytest.fixture(scope="module")
def worker(planted):
    policy = jail.for_workers(planted["capture"], untrusted=True, program_dirs=())
    with Worker(30, jail=policy) as w:
        yield w


def refused(outcome, *errors: str) -> str:
    assert not outcome.ok, f"the escape worked: {outcome.value!r}"
    assert any(e in outcome.failure.message for e in errors), outcome.failure.message
    return outcome.failure.message


# ----------------------------------------------------------------------------- files

@needs_jail
def test_the_signing_key_is_out_of_reach(worker, planted):
    refused(worker.call("jail_jobs:read_file", str(planted["home"] / "store.key")), "PermissionError")
    refused(worker.call("jail_jobs:list_dir", str(planted["home"])), "PermissionError")


@needs_jail
def test_the_user_home_is_out_of_reach(worker, planted):
    refused(worker.call("jail_jobs:read_file", str(planted["user"] / "secret.txt")), "PermissionError")


@needs_jail
def test_writes_land_nowhere_but_scratch(worker, planted):
    outside = planted["outside"] / "evidence.txt"
    refused(worker.call("jail_jobs:write_file", str(outside)), "PermissionError")
    refused(worker.call("jail_jobs:write_file", str(planted["capture"] / "kernel.py")), "PermissionError")
    pth = Path(site.getsitepackages()[0]) / f"tritune-jail-{uuid.uuid4().hex}.pth"
    try:
        refused(worker.call("jail_jobs:write_file", str(pth)), "PermissionError")
    finally:
        pth.unlink(missing_ok=True)
    assert not outside.exists()
    assert (planted["capture"] / "kernel.py").read_text() == "# captured\n"
    assert worker.call("jail_jobs:read_file", str(planted["capture"] / "kernel.py")).value == b"# captured\n"


@needs_jail
def test_no_file_in_dev_shm(worker):
    path = Path("/dev/shm") / f"tritune-jail-{uuid.uuid4().hex}"
    try:
        refused(worker.call("jail_jobs:write_file", str(path)), "PermissionError")
        assert not path.exists()
    finally:
        path.unlink(missing_ok=True)


@needs_jail
def test_the_gpu_locks_are_taken_but_no_file_is_made_in_locks(worker, planted):
    locks = planted["home"] / "locks"
    refused(worker.call("jail_jobs:write_file", str(locks / "gpu-made-by-a-job.lock")), "PermissionError")
    assert not (locks / "gpu-made-by-a-job.lock").exists()
    cpu = str(config.gpu_lock_path("cpu"))
    assert worker.call("jail_jobs:try_gpu_lock", cpu).value is True  # the lock works in the jail
    held = GpuLock(cpu)
    with held.exclusive():  # and excludes the parent's holder as before
        assert worker.call("jail_jobs:try_gpu_lock", cpu).value is False


@needs_jail
def test_scratch_is_writable_and_is_tmpdir(worker):
    outcome = worker.call("jail_jobs:write_in_scratch")
    assert outcome.ok, outcome.failure
    assert outcome.value["read"] == "fine"
    assert outcome.value["tmp"].startswith(outcome.value["cwd"] + "/")


@needs_jail
def test_the_users_environment_does_not_reach_the_worker(worker, planted):
    names = [*planted["env"], "PATH", config.ENV_HOME, config.ENV_USER_HOME, config.ENV_TMPDIR]
    outcome = worker.call("worker_jobs:env", names)
    assert outcome.ok, outcome.failure
    got = outcome.value
    assert all(got[name] is None for name in planted["env"]), got
    assert got["PATH"] and got[config.ENV_HOME] == str(planted["home"].resolve())
    assert got[config.ENV_USER_HOME] == got[config.ENV_TMPDIR] != str(planted["user"])  # its scratch folder
    unjailed = Worker(30)
    try:  # the control: an unjailed worker (the user's own capture) has the user's environment
        assert unjailed.call("worker_jobs:env", list(planted["env"])).value["SENTINEL_CLOUD_CREDS"] == "SENTINEL-ENV"
    finally:
        unjailed.close()


def test_the_jail_environment_keeps_what_the_tools_read_and_nothing_else(tmp_path):
    environ = {"PATH": "/bin", "LC_ALL": "C", "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "0",
               "PYTHONPATH": "/x", "TORCHINDUCTOR_CACHE_DIR": "/c", "TRITUNE_STAGES": "3",
               "AWS_SECRET_ACCESS_KEY": "s", "GITHUB_TOKEN": "s", "HTTPS_PROXY": "http://u:p@proxy",
               config.ENV_LLM_KEY: "s", config.ENV_OPENAI_KEY: "s", "TRITUNE_SOME_TOKEN": "s", "HOME": "/home/u"}
    kept = config.jail_environment({**environ, config.ENV_HOME: str(tmp_path)})
    assert set(kept) == {"PATH", "LC_ALL", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "PYTHONPATH",
                         "TORCHINDUCTOR_CACHE_DIR", "TRITUNE_STAGES", config.ENV_HOME}
    assert kept[config.ENV_HOME] == str(tmp_path)


# ----------------------------------------------------------------------------- network

@pytest.fixture
def listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    yield server
    server.close()


def no_connection(server: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        server.accept()


@needs_jail
def test_no_tcp_connection(worker, listener):
    refused(worker.call("jail_jobs:connect_tcp", listener.getsockname()[1]), "PermissionError")
    no_connection(listener)


@needs_jail
@needs_net
def test_landlock_alone_refuses_tcp(planted, listener):
    """seccomp off: the socket is made, Landlock refuses its connect."""
    policy = dataclasses.replace(jail.policy(planted["capture"]), seccomp=False)
    with Worker(30, jail=policy) as w:
        refused(w.call("jail_jobs:connect_tcp_socket_allowed", listener.getsockname()[1]), "PermissionError")
    no_connection(listener)


@needs_jail
def test_no_udp(worker):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(0.3)
        refused(worker.call("jail_jobs:send_udp", server.getsockname()[1]), "PermissionError")
        with pytest.raises(socket.timeout):
            server.recv(64)


@needs_jail
@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_no_unix_socket(worker, tmp_path, abstract):
    address = f"\0tritune-jail-{uuid.uuid4().hex}" if abstract else str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(address)
        server.listen()
        server.setblocking(False)
        # the socket is made (CUDA's driver needs one), its connect refused by seccomp
        refused(worker.call("jail_jobs:connect_unix", address), "ConnectionRefusedError")
        no_connection(server)


# ----------------------------------------------------------------------------- privileges

@needs_jail
def test_no_capabilities_no_new_privs_a_filter(worker):
    outcome = worker.call("jail_jobs:capabilities")
    assert outcome.ok, outcome.failure
    found = outcome.value
    assert (found["CapEff"], found["CapPrm"], found["CapInh"], found["CapAmb"]) == (0, 0, 0, 0)
    assert found["NoNewPrivs"] == 1 and found["Seccomp"] == 2
    if found["uid"] == 0:  # as root the bounding set goes too: an exec of a root binary gains nothing
        assert found["CapBnd"] == 0


def run_parent(mode: str, *jobs: str) -> dict:
    """tests/jail_parent.py with a sentinel in its starting environment (module docstring there)."""
    # the sentinel first: a job returns the head of what it read, and a GPU machine's environment
    # is long (seen on an H200: the sentinel was past the head when it came last)
    env = {"TRITUNE_JAIL_SENTINEL": "SENTINEL-ENV",
           **config.environment({config.ENV_PYTHONPATH: config.python_path_first(str(TESTS))})}
    done = subprocess.run([sys.executable, str(TESTS / "jail_parent.py"), mode, *jobs], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"the parent died ({done.returncode}): {done.stderr[-2000:]}"
    return json.loads(done.stdout.splitlines()[-1])


PARENT_JOBS = ("proc_file=/proc/PPID/environ", "proc_file=/proc/PPID/mem", "ptrace_parent")


@needs_jail
@needs_scopes
def test_the_parent_is_out_of_reach():
    """As tritune runs it: a jailed worker, the parent protected. No environ, no memory, no
    ptrace, no signal (Landlock's scope: the parent would otherwise die of SIGTERM)."""
    found = run_parent("jail,protect", *PARENT_JOBS, "kill_parent")
    for job, result in found.items():
        assert not result["ok"] and "SENTINEL" not in json.dumps(result), (job, result)
        assert "PermissionError" in result["error"], (job, result)


@needs_jail
@pytest.mark.parametrize("mode", ["jail,protect,nocaps,off=landlock", "jail,nocaps"],
                         ids=["not-dumpable-alone", "landlock-alone"])
def test_each_mechanism_alone_keeps_the_parent_out(mode):
    """The parent without capabilities of its own (as any user but root is): then the worker's
    dropped capabilities no longer refuse it (a root worker may only reach processes whose
    capabilities it holds), and each of the two left holds alone: the parent not dumpable
    (Landlock off), or Landlock (the parent dumpable). Without both, the environ is read:
    ``jail,nocaps,off=landlock`` gives the sentinel."""
    found = run_parent(mode, *PARENT_JOBS)
    assert not any(result["ok"] for result in found.values()), found


def test_the_harness_sees_an_open_parent():
    """The control: no jail, parent dumpable: the sentinel comes back (so the tests above can fail)."""
    found = run_parent("open", "proc_file=/proc/PPID/environ")
    assert found["proc_file=/proc/PPID/environ"]["ok"]
    assert "SENTINEL-ENV" in found["proc_file=/proc/PPID/environ"]["value"]


def test_protect_parent_makes_it_not_dumpable():
    code = ("import ctypes; from tritune.worker import jail; assert jail.protect_parent(); "
            "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "0", done.stderr


# ----------------------------------------------------------------------------- processes

def alive(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry))
    return found


@needs_jail
def test_setsid_is_refused(worker):
    refused(worker.call("jail_jobs:setsid"), "PermissionError")


@needs_jail
@pytest.mark.parametrize("job", ["detach_with_setsid", "fork_setsid", "double_fork"])
def test_nothing_a_job_starts_outlives_its_call(worker, job):
    marker = f"tritune-jail-{uuid.uuid4().hex}"
    try:
        outcome = worker.call(f"jail_jobs:{job}", marker)
        assert outcome.ok, outcome.failure
        assert worker.pid is not None  # the worker lives on: only what its job started is gone
        assert alive(marker) == []
    finally:
        for pid in alive(marker):  # a failed test leaves nothing behind either
            os.kill(pid, 9)


def test_end_strays_kills_the_group_but_the_one_kept():
    sleeper = [sys.executable, "-c", "import os, subprocess, sys, time; "
               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"]
    leader = subprocess.Popen(sleeper, start_new_session=True)
    try:
        for _ in range(100):
            if len(jail._members(leader.pid)) == 2:
                break
            subprocess.run(["sleep", "0.05"])
        assert jail.end_strays(leader.pid, keep=leader.pid) == 1
        assert jail._members(leader.pid) == [leader.pid]
    finally:
        leader.kill()
        leader.wait()


# ----------------------------------------------------------------------------- what still works

@pytest.fixture(scope="module")
def torch_worker(planted):
    policy = jail.for_workers(planted["capture"], untrusted=True, program_dirs=())
    with Worker(120, env={config.ENV_INTERPRET: "1"}, preload=("torch", "triton"), jail=policy) as w:
        yield w


@needs_jail
def test_torch_and_triton_work_jailed(torch_worker):
    outcome = torch_worker.call("jail_jobs:torch_and_triton")
    assert outcome.ok, outcome.failure
    scratch = outcome.value["env"][config.ENV_TMPDIR]
    assert outcome.value["env"][config.ENV_TRITON_CACHE].startswith(scratch + "/")
    assert outcome.value["env"][config.ENV_INDUCTOR_CACHE].startswith(scratch + "/")
    added = torch_worker.call("jail_jobs:interpreted_add")
    assert added.ok, added.failure
    assert added.value == [float(i + 1) for i in range(16)]


@needs_jail
def test_triton_compiles_for_a_gpu_jailed(torch_worker):
    """ptxas from Triton's package runs, the private cache is written."""
    outcome = torch_worker.call("jail_jobs:compile_for_h100")
    assert outcome.ok, outcome.failure
    assert "cubin" in outcome.value["kinds"]


@needs_jail
def test_workers_sharing_a_cache_build_a_kernel_once(planted):
    """An evaluator's workers share one Triton cache (``SharedCache``): what one builds, the next
    loads, nothing built again; the control, two workers with caches of their own, build twice.
    The shared folder is the only one outside its scratch folder a worker writes."""
    policy = jail.for_workers(planted["capture"], untrusted=True, program_dirs=())
    shared = SharedCache()
    try:
        def built(cache):
            with Worker(120, env={config.ENV_INTERPRET: "1"}, preload=("triton",), jail=policy, cache=cache) as w:
                outcome = w.call("jail_jobs:compile_for_h100_files")
            assert outcome.ok, outcome.failure
            return outcome.value

        first, second = built(shared.path), built(shared.path)
        assert first["cache"][config.ENV_TRITON_CACHE] == second["cache"][config.ENV_TRITON_CACHE] == str(shared.path)
        assert set(first["after"]) - set(first["before"])  # built
        assert second["before"] == second["after"] == first["after"]  # loaded: nothing new
        own = [built(None), built(None)]
        assert all(set(o["after"]) - set(o["before"]) for o in own)  # each built it again
    finally:
        shared.remove()
    assert not shared.path.exists()


# ----------------------------------------------------------------------------- the pieces

@pytest.mark.parametrize("arch", sorted(seccomp.AUDIT_ARCH))
def test_the_filter_refuses_what_it_names_and_allows_the_rest(arch):
    program = seccomp.program(arch)
    column = 0 if arch == "x86_64" else 1
    native = seccomp.AUDIT_ARCH[arch]
    deny = seccomp.RET_ERRNO | 1
    for name, numbers in seccomp.REFUSED.items():
        assert seccomp.run(program, numbers[column], native) == deny, name
    for allowed in (0, 1, 2, 3, 39, 56, 57, 59, 61, 62, 220, 231):  # read, write, open(at), getpid, clone, kill...
        if allowed not in {numbers[column] for numbers in seccomp.REFUSED.values()} | {41, 42, 198, 203}:
            assert seccomp.run(program, allowed, native) == seccomp.RET_ALLOW, allowed
    socket, connect = seccomp.SOCKET[column], seccomp.CONNECT[column]
    assert seccomp.run(program, socket, native, seccomp.AF_UNIX) == seccomp.RET_ALLOW  # CUDA's
    for family in (2, 10, 16, 17):  # AF_INET, AF_INET6, AF_NETLINK, AF_PACKET
        assert seccomp.run(program, socket, native, family) == deny, family
    assert seccomp.run(program, connect, native) == seccomp.RET_ERRNO | seccomp.ECONNREFUSED
    assert seccomp.run(program, 0, 0x40000003) == deny  # i386's read: another arch, refused whole
    if arch == "x86_64":
        assert seccomp.run(program, seccomp.X32_SYSCALL_BIT | 41, native) == deny  # x32's socket
    assert len(seccomp.pack(program)) == 8 * len(program)


def test_landlock_rights():
    assert landlock.fs_rights(1) == (1 << 13) - 1
    assert landlock.fs_rights(7) == (1 << 16) - 1
    assert not landlock.READ_WRITE & (landlock.MAKE_CHAR | landlock.MAKE_BLOCK | landlock.IOCTL_DEV)
    assert landlock.READ == landlock.EXECUTE | landlock.READ_FILE | landlock.READ_DIR
    assert landlock.DEVICE & ~landlock.FILE_RIGHTS == 0


def test_the_policy_leaves_the_key_and_the_home_out(planted, monkeypatch, tmp_path):
    home = str(planted["home"].resolve())
    user = str(planted["user"].resolve())
    inside = planted["user"] / "project"
    inside.mkdir(exist_ok=True)
    monkeypatch.setattr(sys, "path", [*sys.path, "/", user, str(planted["home"]), str(inside), str(tmp_path)])
    policy = jail.policy(planted["capture"], program_dir=user, extra_read=[planted["outside"]])
    granted = [*policy.read, *policy.read_write]
    for path in granted:
        assert not jail._holds(path, home) and not jail._holds(path, user), path
        assert not jail._holds(home, path), path
    assert str(inside.resolve()) in policy.read  # a folder inside the home is fine
    assert str(planted["capture"].resolve()) in policy.read
    locks = (planted["home"] / "locks").resolve()
    assert {locks / "gpu-cpu.lock", locks / "gpu-cpu.lock.gate"} <= {Path(p) for p in policy.locks}
    assert all(Path(p).parent == locks and Path(p).is_file() for p in policy.locks)  # files, not the folder


def test_lock_files_are_made_for_the_cpu_and_each_gpu_the_driver_lists(planted, tmp_path):
    gpus = tmp_path / "gpus"
    for bus, uuid_ in (("0000:00:06.0", "GPU-6eac016f-b72d"), ("0000:00:07.0", "GPU-0123abcd-ef45")):
        (gpus / bus).mkdir(parents=True)
        (gpus / bus / "information").write_text(f"Model: \t\t NVIDIA H200\nGPU UUID: \t {uuid_}\nIRQ: 41\n")
    names = {Path(p).name for p in jail.lock_files(str(gpus))}
    assert names == {f"gpu-{n}.lock{g}" for n in ("cpu", "6eac016f-b72d", "0123abcd-ef45") for g in ("", ".gate")}
    assert all(config.gpu_lock_path(n).exists() for n in ("cpu", "6eac016f-b72d"))


def test_a_missing_mechanism_refuses_untrusted_code(planted, capsys):
    with config.override({config.ENV_JAIL_MISSING: "seccomp"}):
        found = jail.status()
        assert "seccomp" in found.missing and not found.usable
        with pytest.raises(jail.JailUnavailable, match="seccomp.*--unsafe-no-jail"):
            jail.for_workers(planted["capture"], untrusted=True)
        assert jail.for_workers(planted["capture"], untrusted=False) is None
        assert jail.for_workers(planted["capture"], untrusted=False) is None
    assert capsys.readouterr().err.count("unjailed") == 1  # said once
    assert jail.for_workers(planted["capture"], untrusted=True, unsafe_no_jail=True) is None


@needs_jail
def test_a_jail_that_cannot_be_entered_fails_the_start(planted):
    """The child finds seccomp missing (as a kernel without it would): the start fails, no job runs."""
    policy = jail.policy(planted["capture"])
    with Worker(30, env={config.ENV_JAIL_MISSING: "seccomp"}, jail=policy) as w:
        outcome = w.call("jail_jobs:read_file", str(planted["home"] / "store.key"))
    assert not outcome.ok and "jail: missing seccomp" in outcome.failure.message


def test_enter_refuses_a_process_with_threads():
    code = ("import threading, time; from tritune.worker import jail\n"
            "threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
            "try:\n    jail.enter(jail.Policy())\nexcept jail.JailError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert "already runs 2 threads" in done.stdout, done.stderr


# ----------------------------------------------------------------------------- ncu

@needs_jail
def test_ncu_does_not_run_in_a_jailed_worker(worker):
    """ncu needs sockets to reach its target: a jailed worker falls back to timing + static."""
    outcome = worker.call("jail_jobs:ncu_refusal")
    assert outcome.ok and outcome.value == "jailed", outcome


def test_a_model_variant_never_runs_under_ncu():
    from tritune.model.variant import Variant
    from tritune.profile.ncu import NcuUnavailable
    from tritune.profile.runner import run_ncu

    with pytest.raises(NcuUnavailable) as raised:
        run_ncu(None, "/nonexistent", Variant(source="", rewrite={"rule": "llm", "exact": "tolerance"}))
    assert raised.value.kind == "model-variant"


# ----------------------------------------------------------------------------- the commands

@pytest.mark.parametrize("command", ["optimize", "generate"])
def test_llm_is_refused_where_the_jail_is_missing(command, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tritune.commands.generate import generate
    from tritune.commands.optimize import optimize

    monkeypatch.setenv(config.ENV_JAIL_MISSING, "landlock")
    spec = tmp_path / "spec.py"
    spec.write_text("# not read: the refusal comes first\n")
    (tmp_path / "capture").mkdir()
    llm = ["--llm", "http://127.0.0.1:9/v1", "--llm-model", "m"]
    if command == "optimize":
        run, args = optimize, ["--out", str(tmp_path / "out"), "--launches", str(tmp_path / "capture"), *llm]
    else:
        run, args = generate, [str(spec), "--out", str(tmp_path / "out"), *llm]
    refused_run = CliRunner().invoke(run, args)
    assert refused_run.exit_code == 2, refused_run.output
    assert "missing: landlock" in refused_run.output and "--unsafe-no-jail" in refused_run.output
    allowed = CliRunner().invoke(run, [*args, "--unsafe-no-jail"])
    assert "refusing" not in allowed.output  # it goes on (and fails later, on these empty inputs)


def test_store_import_of_source_is_refused_where_the_jail_is_missing(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tritune.commands.store import store as store_command
    from tritune.model.key import DecisionKey
    from tritune.model.variant import Variant
    from tritune.store import DecisionStore

    monkeypatch.setenv(config.ENV_JAIL_MISSING, "seccomp")
    monkeypatch.setenv(config.ENV_HOME, str(tmp_path / "home"))  # a key of its own, whatever ran before
    other = tmp_path / "other.db"
    key = DecisionKey(source_hash="s", kernel="k", specialization="{}", gpu_name="cpu", capability=0,
                      triton_version="3")
    variant = Variant(source="def k():\n    pass\n")
    with DecisionStore(other) as db:
        cand = db.add_candidate(db.start_run({}), key, variant)
        db.finish_candidate(cand.id, "verified", verification={"ok": True}, timings={"time_ms": 0.01})
        db.set_decision(key, variant, baseline_ms=2.0, best_ms=0.02)
    (tmp_path / "capture").mkdir()
    (tmp_path / "capture" / "launches.jsonl").write_text("")
    result = CliRunner().invoke(store_command, ["import", str(other), "--into", str(tmp_path / "mine.db"),
                                                "--launches", str(tmp_path / "capture")])
    assert result.exit_code == 2, result.output
    assert "missing: seccomp" in result.output and "--unsafe-no-jail" in result.output


def test_a_compiler_outside_the_system_folders_is_readable(tmp_path, monkeypatch):
    """Triton builds its launchers with the C compiler on PATH: one installed under /opt (the GPU
    machine's /opt/gcc) is granted with its whole install folder, a system one adds nothing."""
    import shutil

    gcc = tmp_path / "gcc-13" / "bin" / "gcc"
    gcc.parent.mkdir(parents=True)
    gcc.write_text("")
    monkeypatch.setattr(shutil, "which", lambda name: str(gcc) if name == "gcc" else "/usr/bin/cc")
    monkeypatch.delenv(config.ENV_CC, raising=False)
    assert jail._toolchains() == [str(tmp_path / "gcc-13")]
    cc = tmp_path / "clang" / "bin" / "clang"  # CC names one that PATH does not hold
    cc.parent.mkdir(parents=True)
    cc.write_text("")
    monkeypatch.setattr(shutil, "which", lambda name: name if name == str(cc) else "/usr/bin/cc")
    monkeypatch.setenv(config.ENV_CC, str(cc))
    assert jail._toolchains() == [str(tmp_path / "clang")]
    assert str(tmp_path / "clang") in jail.policy().read


@needs_jail
def test_inductor_modules_load_in_a_jailed_worker(tmp_path):
    """optimize --inductor-dir imports the modules it finds (their top level runs): in a jailed
    worker, so a module that writes outside the capture it makes writes nothing."""
    from tritune.commands.optimize import _inductor

    modules, evidence = tmp_path / "modules", tmp_path / "evidence"
    modules.mkdir()
    (modules / "triton_poi_planted.py").write_text(  # what kernel_files takes for a kernel module
        f"open({str(evidence)!r}, 'w').write('ran')\n# triton_heuristics\ndef get_args():\n    pass\n"
        "def triton_poi_fused_planted_0(x):\n    pass\n")
    with pytest.raises(SystemExit):  # nothing loaded: no kernel module
        _inductor(modules, tmp_path / "capture")
    assert not evidence.exists()
