"""Lanes on a Ray cluster: ``tritune optimize --ray ADDRESS`` (``auto``, ``local``).

``RayLane`` is one more ``loop.lanes.Lane``: the session hands it keys exactly as it hands them to
a ``LocalLane``. Each lane is a Ray actor that holds one GPU of the cluster (``num_gpus=1``) for
the run, and inside it a ``LocalLane`` with its own warm workers: the actor's process sees only
its GPU (Ray sets ``CUDA_VISIBLE_DEVICES``), so its workers do too. An actor rather than a task
per key: a task could land on another node, another kind of GPU than the one the lane's
``start`` reported (decisions are keyed by it), and each would start its workers cold.

What travels (the cluster needs no shared file system, and the same tritune on every node):

- to the lane, once per file: the kernel source and the saved tensors its keys' launch specs
  name, read from the capture here and written into a capture folder of the actor's own;
- per key: the launch spec, the decision key, the loop settings with the key's budget, its
  category and baseline, and the key's records in the driver's store (``DecisionStore.
  key_records``: the candidates evaluated so far, profiles, decision, signed by this user), so
  that a key resumed after an interruption reuses them as a local lane would, and the variants
  that timed out on its sibling keys (``DecisionStore.timed_out_on_siblings``), which it skips
  as a local lane does (the actor's store holds this key alone), and the configs its search
  starts from (``search.prior.prior_configs`` of the driver's store, for the same reason);
- back: the key's result (``KernelResult`` JSON), its records after the loop, and the loop's log
  lines (said here when the key is back, not while it runs).

The actor runs the key's loop against a temporary store of its own, signed with a throwaway
secret made in the actor: the user's signing secret never leaves this host, nor does the LLM key
(``--ray`` refuses ``--llm``: the model's session stays here; a ``local`` instance is started
without ``config.SECRET_ENV`` in its environment, and workers never get those anyway). The
driver alone owns the SQLite store (never SQLite over a network file system): ``run_key``, in the
lane's thread here, writes what came back in one transaction per key (``DecisionStore.adopt``),
signed by this user. That makes the cluster trusted as the user: whoever controls its nodes can
put code into this user's decisions. Point ``--ray`` only at a cluster you would let run as you.
What the driver checks of a reply is its form, not its truth: ``start``'s must name a version,
a node, a folder and a full target (``start_problem``), ``baselines``' a (timing, failure) pair
for exactly the launches sent, each time a positive number (``baselines_problem``), and
``run_key``'s result must be for the key it sent, with records that agree with it (the same
candidates, verdicts and times, the result's decision and no other: ``loop.ray_records``) and
that ``adopt`` takes whole (only evaluated candidates, a decision only with its candidate among
them, accepted); a reply not so formed makes the lane dead, and nothing of it is recorded. It does
not derive the variants' sources again (that is the proposers' whole search, run again here) nor
verify a decision again (that needs the GPU; ``tritune store import`` does it for a store made
by someone else).
An interrupted driver resumes as with local lanes: finished keys are in ``OUT/kernels.jsonl``,
their records in the store; a key in flight is lost with its actor.

Death: an actor whose process or node dies (``ActorDiedError``, ``NodeDiedError``, any other
``RayError`` but the job's own), that gives no answer in the key's budget plus ``HANG_S``, whose
workers cannot be started again (``LaneDied`` inside it), that answers for another key than it
was sent, whose records disagree with its result, or that finds no GPU its workers can use
raises ``LaneDied``: the session gives the key to another lane. An error of the job itself is raised here as the job raised it (the run
stops, as with a local lane). ``interrupt`` kills the actor (``ray.kill``: a running method of
an actor cannot be cancelled, ``ray.cancel`` only stops tasks), so nothing it was doing is
recorded; a killed actor's folder on its node (the capture's copy) is removed by the next lane
that starts there (``_folder``), its workers' own by the workers as they exit.

How many lanes (``ray_lanes``): one per GPU the cluster offers (``ray.cluster_resources()``);
``--workers N`` takes N of them. Under ``TRITON_INTERPRET=1`` (here, or ``interpret=True``) the
lanes are interpreter lanes of one CPU each (``num_cpus=1``), ``INTERPRETER_LANES`` by default
(at most the cluster's CPUs), ``--workers N`` for N; the actors interpret whatever their nodes'
environment says. Each lane's verify workers: ``--jobs``, else the node's usable cores shared by
its GPUs (``evaluate.default_jobs``), one for an interpreter lane.

Ray is optional (``pip install 'tritune[ray]'``) and imported only when a Ray lane is made or a
cluster connected: this module imports without it, and ``import_ray`` says how to install it.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import threading
from pathlib import Path, PurePath
from typing import Any, Callable, Iterator, Sequence

from tritune import config
from tritune.model.results import KernelResult
from tritune.capture.spec import confined_source
from tritune.errors import one_line
from tritune.loop.evaluate import BASELINE_TIMEOUT_S, Interrupted, default_jobs
from tritune.loop.lanes import KeyJob, LaneDied, LaneError, LocalLane, close_lanes
from tritune.loop.ray_records import records_problem
from tritune.model.key import DecisionKey
from tritune.model.launch import LaunchSpec, SpecError
from tritune.model.settings import LoopSettings
from tritune.model.target import Target
from tritune.search.prior import prior_configs
from tritune.store import DecisionStore, StoreError
from tritune.store.signing import Signer
from tritune.version import __version__
from tritune.worker import jail
from tritune.worker.failures import Failure
from tritune.worker.pool import process_folder

INSTALL = "pip install 'tritune[ray]'"
INTERPRETER_LANES = 2  # interpreter lanes by default: each runs torch and the interpreter in 2+ processes
START_TIMEOUT_S = 600.0  # an actor waits this long for its GPU, then for its workers to start
HANG_S = 1800.0  # past a key's budget, how long a lane may stay silent before it counts as dead
CLOSE_S = 30.0
CONNECT_S = 10.0  # how long the cluster's address may take to answer at all
FOLDER_PREFIX = "tritune-ray-lane-"  # an actor's folder: FOLDER_PREFIX + its process id + "-" + random


def import_ray() -> Any:
    """The ``ray`` module; ``LaneError`` (one line) saying how to install it when it is missing."""
    try:
        import ray
    except ImportError:
        raise LaneError(f"--ray needs Ray, which is not installed here: {INSTALL}") from None
    return ray


@contextlib.contextmanager
def connected(address: str) -> Iterator[Any]:
    """Ray, connected for the block to the cluster at ``address`` (``host:6379``, ``ray://host:10001``;
    ``auto``: the one ``ray start`` runs on this host; ``local``: a Ray instance of this host's
    own, started and stopped here), then disconnected; ``LaneError`` when it cannot be reached.
    A connection this process already has is used as it is, and kept."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    options: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    if address == "local":
        options["include_dashboard"] = False
    _answering(address)
    try:
        with config.override(dict.fromkeys(config.SECRET_ENV)):  # a local instance's processes inherit these
            ray.init(address=address, **options)
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds for an unreachable cluster
        raise LaneError(f"--ray {address}: cannot connect to the Ray cluster: {one_line(exc)}") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _answering(address: str) -> None:
    """``LaneError`` when nothing answers at the cluster's address (as Ray resolves ``address``:
    ``auto`` included), before ``ray.init``, which would try to reach it for many minutes (20
    tries of ~40 s each in Ray 2.60), printing its warnings. ``local`` and Ray Client addresses
    (``ray://``) are left to Ray."""
    if address == "local" or address.startswith("ray://"):
        return
    try:
        from ray._private.services import canonicalize_bootstrap_address  # what ray.init resolves it to
    except ImportError:  # another Ray: it says for itself
        return
    try:
        found = canonicalize_bootstrap_address(address)
    except Exception as exc:  # noqa: BLE001 - a bad address, or no cluster to find for ``auto``
        raise LaneError(f"--ray {address}: cannot connect to the Ray cluster: {one_line(exc)}") from None
    if found is None:  # Ray starts an instance of its own
        return
    host, _, port = found.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
    except (OSError, ValueError) as exc:
        raise LaneError(f"--ray {address}: cannot connect to the Ray cluster: nothing answers at {found} "
                        f"({one_line(exc)}); is it up (`ray status` on its head)?") from None


def ray_lanes(root: str | Path, settings: LoopSettings, *, workers: int | None = None, interpret: bool | None = None,
              jobs: int | None = None, retime: Callable | None = None,
              families: Callable[[LaunchSpec], list] | None = None) -> list["RayLane"]:
    """A ``RayLane`` per GPU the connected cluster offers, or ``workers`` of them; interpreter lanes
    when ``interpret`` (default: ``TRITON_INTERPRET`` here). ``LaneError`` for what the cluster
    cannot meet. ``retime``/``families``: the tests' scripted times and planted families, made in
    each actor (``RayLane``)."""
    ray = import_ray()
    if not ray.is_initialized():
        raise LaneError("--ray: not connected to a Ray cluster")
    if workers is not None and workers < 1:
        raise LaneError(f"--workers must be at least 1, not {workers}")
    interpret = config.interpreting() if interpret is None else interpret
    offered = ray.cluster_resources()
    gpus, cpus = int(offered.get("GPU", 0)), int(offered.get("CPU", 0))
    if interpret:
        have, what = cpus, "CPU(s)"
        count = workers or min(cpus, INTERPRETER_LANES)
    elif not gpus:
        raise LaneError(f"--ray: the Ray cluster offers no GPU ({cpus} CPU(s)), and a lane is one GPU "
                        "(TRITON_INTERPRET=1 runs interpreter lanes on its CPUs)")
    else:
        have, what = gpus, "GPU(s)"
        count = workers or gpus
    if not 0 < count <= have:
        raise LaneError(f"--ray: the Ray cluster offers {have} {what}"
                        + (f", fewer than --workers {workers}" if workers else "") + "; a lane needs one")
    return [RayLane(root, settings, index=i, gpu=not interpret, interpret=interpret, jobs=jobs, retime=retime,
                    families=families) for i in range(count)]


@contextlib.contextmanager
def ray_run(address: str, root: str | Path, settings: LoopSettings, **lanes: Any) -> Iterator[list["RayLane"]]:
    """``ray_lanes`` on the cluster at ``address`` for the block (``tritune optimize --ray``): the
    lanes are closed, then the connection, when it ends."""
    with connected(address):
        made = ray_lanes(root, settings, **lanes)
        try:
            yield made
        finally:
            close_lanes(made)


class RayLane:
    """One lane on a Ray cluster (module docstring): a GPU (``gpu``) or, for the interpreter, a CPU.
    ``jobs``: its verify workers (None: its node decides). ``retime``/``families``: tests only,
    sent to the actor: scripted times (``Evaluator.retime``) and a factory of planted families,
    ``families(spec) -> [Family]`` (a ``KeyJob``'s own families cannot travel)."""

    def __init__(self, root: str | Path, settings: LoopSettings, *, index: int = 0, gpu: bool = True,
                 interpret: bool = False, jobs: int | None = None, retime: Callable | None = None,
                 families: Callable[[LaunchSpec], list] | None = None,
                 start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.root = Path(root).absolute()
        self.index, self.uses_gpu = index, gpu
        self.start_timeout_s = start_timeout_s
        self._options = {"index": index, "interpret": interpret, "jobs": jobs, "use_ncu": settings.use_ncu,
                         "retime": retime, "families": families}
        self._jobs = jobs or settings.jobs
        self._actor: Any = None
        self._target: Target | None = None
        self._where = ""  # "NODE_IP/gpuN" (cpuN for an interpreter lane), once started
        self._shipped: set[str] = set()  # capture files the actor has
        self.folder = ""  # the actor's folder on its node, once started (``_LaneActor``)
        self._interrupted = threading.Event()

    @property
    def name(self) -> str:
        return f"ray:{self._where or self.index}"

    @property
    def gpu(self) -> str:
        return self._target.gpu if self._target else ""

    @property
    def target(self) -> Target | None:
        return self._target

    @property
    def jobs(self) -> int:
        """Its verify workers (as its actor made them, once started)."""
        return self._jobs

    def start(self, prebuild: Sequence[LaunchSpec] = ()) -> Target:
        """The actor made and started; ``prebuild`` is not sent (its launches travel with the
        ranking's chunk, ``baselines``)."""
        ray = import_ray()
        resources = {"num_gpus": 1} if self.uses_gpu else {"num_cpus": 1}
        self._actor = ray.remote(_LaneActor).options(max_restarts=0, max_task_retries=0,
                                                     **resources).remote(**self._options)
        what = "GPU" if self.uses_gpu else "CPU"
        reply = self._call("start", timeout=self.start_timeout_s,
                           late=f"no {what} of the cluster came free for it, or its workers did not start")
        self._formed("start", start_problem(reply))
        if reply["tritune"] != __version__:
            self._kill()
            raise LaneDied(f"its node ({reply['where']}) runs tritune {reply['tritune']}, this driver "
                           f"{__version__}: install the same tritune on every node")
        target = Target.from_json(reply["target"])
        if self.uses_gpu and not target.meaningful:
            self._kill()
            raise LaneDied(f"its node ({reply['where']}) gave it a GPU its workers cannot use")
        self._where, self._jobs, self._target = reply["where"], reply["jobs"], target
        self.folder = reply["folder"]
        return target

    def baselines(self, specs: list[LaunchSpec], log: Callable[[str], None] | None = None
                  ) -> dict[str, tuple[dict | None, Failure | None]]:
        reply = self._call("baselines", [spec.to_json() for spec in specs], self._files(specs),
                           timeout=HANG_S + 2 * len(specs) * BASELINE_TIMEOUT_S)  # built, then timed
        self._formed("baselines", baselines_problem(reply, [spec.id for spec in specs]))
        for line in reply["log"]:
            (log or _quiet)(line)
        return reply["found"]

    def run_key(self, job: KeyJob) -> KernelResult:
        if job.llm is not None:
            raise ValueError("a Ray lane cannot run --llm: the model's session stays with the driver")
        if job.families is not None:
            raise ValueError("a Ray lane's planted families are made in its actor: RayLane(families=...)")
        with DecisionStore(job.store_path) as store:  # this thread's own connection
            records, siblings = store.key_records(job.key), store.timed_out_on_siblings(job.key)
            # the actor's store holds this key alone: the seeds come from this user's store here
            prior = prior_configs(store, job.key, job.spec, job.category, run_id=job.run_id)
        body = {"spec": job.spec.to_json(), "key": job.key.to_json(), "settings": job.settings,
                "category": job.category, "baseline": job.baseline, "records": records, "siblings": siblings,
                "prior": prior}
        reply = self._call("run_key", body, self._files([job.spec]), timeout=job.budget_s + HANG_S,
                           late=f"its key {job.spec.kernel} gave no answer within its budget and {HANG_S:.0f} s")
        if self._interrupted.is_set():
            raise Interrupted()
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, dict) or (result.get("key_sha"), result.get("id")) != (job.key.sha, job.spec.id):
            self._kill()  # not what this driver sent: nothing of it is recorded, and the lane is not used again
            raise LaneDied(f"it answered for another key than {job.spec.kernel} ({job.key.sha[:10]}): not recorded")
        self._formed("run_key", None if isinstance(reply.get("records"), dict) and _lines(reply.get("log"))
                     else "no records dict and log lines")
        problem = records_problem(result, reply["records"], records)
        if problem is not None:
            self._kill()  # two stories of one key: nothing of it is signed, the lane is not used again
            raise LaneDied(f"its records of {job.spec.kernel} disagree with its result: {problem}; not recorded")
        try:
            with DecisionStore(job.store_path) as store:  # one transaction, signed by this user: all or nothing
                store.adopt(job.run_id, job.key, reply["records"])
        except (StoreError, KeyError, TypeError, ValueError, AttributeError) as exc:
            self._formed("run_key", f"records the store refused ({one_line(exc)[:200]})")
        for line in reply["log"]:
            (job.log or _quiet)(line)
        return KernelResult.from_json(result)

    def _formed(self, method: str, problem: str | None) -> None:
        """A reply not in the form this driver expects is a dead lane: its actor is killed and
        nothing of the reply is used (a node running other code, or a tampered one)."""
        if problem is not None:
            self._kill()
            raise LaneDied(f"its reply to {method} is not in the form this driver expects: {problem}; not recorded")

    def interrupt(self) -> None:
        self._interrupted.set()
        self._kill()

    def close(self) -> None:
        if self._actor is None:
            return
        if not self._interrupted.is_set():
            with contextlib.suppress(Exception):  # its workers stopped and its folder removed, if it still can
                import_ray().get(self._actor.close.remote(), timeout=CLOSE_S)
        self._kill()
        self._actor = None

    # --------------------------------------------------------------------------- the actor

    def _call(self, method: str, *args: Any, timeout: float | None = None, late: str = "") -> Any:
        """The actor's ``method`` on ``args``, its value; Ray's failures as the module docstring says."""
        ray = import_ray()
        if self._interrupted.is_set():
            raise Interrupted()
        if self._actor is None:
            raise LaneDied("it has no actor (it was closed, or never started)")
        try:
            return ray.get(getattr(self._actor, method).remote(*args), timeout=timeout)
        except KeyboardInterrupt:
            self.interrupt()
            raise
        except ray.exceptions.GetTimeoutError:
            self._kill()
            if self._interrupted.is_set():
                raise Interrupted() from None
            raise LaneDied(f"{late or 'no answer'} ({timeout:.0f} s)") from None
        except ray.exceptions.RayTaskError as exc:
            if self._interrupted.is_set():
                raise Interrupted() from None
            cause = getattr(exc, "cause", None)
            if isinstance(cause, LaneDied):
                self._kill()
                raise LaneDied(str(cause)) from None
            if isinstance(cause, Exception):
                raise cause from exc  # the job's own error, as a local lane raises it
            raise
        except ray.exceptions.RayError as exc:
            self._kill()
            if self._interrupted.is_set():
                raise Interrupted() from None
            raise LaneDied(f"its Ray actor is gone ({one_line(exc)})") from None

    def _files(self, specs: Sequence[LaunchSpec]) -> dict[str, bytes]:
        """The capture files ``specs`` need that the actor does not have yet, by path in the capture."""
        found: dict[str, bytes] = {}
        for spec in specs:
            names = [spec.source] if spec.source else []
            names += [arg.data for arg in spec.tensors if arg.values == "saved" and arg.data]
            for name in names:
                if name in self._shipped or name in found:
                    continue
                path = confined_source(self.root, spec) if name == spec.source else _inside(self.root, name)
                if path is not None and path.is_file():  # a missing one fails there as it would here
                    found[name] = path.read_bytes()
        self._shipped.update(found)
        return found

    def _kill(self) -> None:
        if self._actor is None:
            return
        with contextlib.suppress(Exception):  # gone already, or Ray shut down
            import_ray().kill(self._actor, no_restart=True)


class _LaneActor:
    """A lane's side on the cluster: a ``LocalLane`` over a capture folder of its own, which the
    driver fills (``_write``), and a temporary store per key signed with a throwaway secret.
    Made by ``RayLane.start`` through ``ray.remote``; this module never imports Ray itself."""

    def __init__(self, *, index: int, interpret: bool, jobs: int | None, use_ncu: str, retime: Callable | None,
                 families: Callable[[LaunchSpec], list] | None) -> None:
        import ray

        if interpret:  # the actor's process is the lane's alone: its workers inherit this
            config.update({config.ENV_INTERPRET: "1"})
        self._dir = _folder()
        self.root = self._dir / "capture"
        self.root.mkdir()
        gpus = ray.get_gpu_ids()
        if jobs is None:
            jobs = default_jobs(_node_gpus(ray)) if gpus else 1
        # jailed where the node can (no --llm on Ray: its capture is the user's own)
        policy = jail.for_workers(self.root, untrusted=False, program_dirs=())
        self.lane = LocalLane(None, self.root, index=index, jobs=jobs, use_ncu=use_ncu,
                              signer=Signer(secrets.token_bytes(32)), jail=policy)
        self.lane.evaluator.retime = retime
        self.families = families
        self.where = f"{ray.util.get_node_ip_address()}/" + (f"gpu{gpus[0]}" if gpus else f"cpu{index}")
        self._keys = 0

    def start(self) -> dict:
        target = self.lane.start()
        return {"target": target.to_json(), "tritune": __version__, "where": self.where, "jobs": self.lane.jobs,
                "folder": str(self._dir)}

    def baselines(self, specs: list[dict], files: dict[str, bytes]) -> dict:
        self._write(files)
        lines: list[str] = []
        found = self.lane.baselines([LaunchSpec.from_json(body) for body in specs], log=lines.append)
        return {"found": found, "log": lines}

    def run_key(self, body: dict, files: dict[str, bytes]) -> dict:
        self._write(files)
        spec, key = LaunchSpec.from_json(body["spec"]), DecisionKey.from_json(body["key"])
        self._keys += 1
        path = self._dir / f"key-{self._keys}.db"
        lines: list[str] = []
        try:
            with DecisionStore(path, signer=self.lane.signer) as store:
                run_id = store.start_run({"key": key.sha}, "ray lane")
                store.adopt(run_id, key, body["records"])  # the driver's records: the key resumes
            job = KeyJob(spec, key, settings=body["settings"], run_id=run_id, store_path=str(path),
                         root=str(self.root), category=body["category"], baseline=body["baseline"],
                         sibling_timeouts=body["siblings"], prior=tuple(body.get("prior") or ()),
                         families=self.families(spec) if self.families is not None else None, log=lines.append)
            result = self.lane.run_key(job).to_json()
            with DecisionStore(path, signer=self.lane.signer) as store:
                records = store.key_records(key)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return {"result": result, "records": records, "log": lines}

    def close(self) -> None:
        self.lane.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _write(self, files: dict[str, bytes]) -> None:
        for name, data in files.items():
            path = _inside(self.root, name)
            if path is None:
                raise SpecError(f"{name}: a capture file outside the capture folder: refused")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def _lines(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(line, str) for line in value)


def start_problem(reply: Any) -> str | None:
    """What is wrong with an actor's ``start`` reply, in a few words; None when it has the form
    ``RayLane.start`` reads."""
    if not isinstance(reply, dict):
        return f"a {type(reply).__name__}, not a dict"
    for name, kind in (("tritune", str), ("where", str), ("jobs", int), ("folder", str), ("target", dict)):
        if not isinstance(reply.get(name), kind):
            return f"{name} is not a {kind.__name__}"
    missing = [k for k in ("gpu", "capability", "triton_version", "meaningful") if k not in reply["target"]]
    return f"its target lacks {', '.join(missing)}" if missing else None


def baselines_problem(reply: Any, sent: Sequence[str]) -> str | None:
    """What is wrong with an actor's ``baselines`` reply for the launch ids ``sent``; None when it
    holds, for exactly those ids, a ``(timing, failure)`` pair each: the timing None or a dict whose
    ``time_ms``, if any, is a positive finite number, the failure None or a ``Failure``."""
    if not isinstance(reply, dict) or not isinstance(reply.get("found"), dict) or not _lines(reply.get("log")):
        return "no found dict and log lines"
    found = reply["found"]
    if set(found) != set(sent):
        return f"timings for {len(set(found) - set(sent))} launch(es) not sent and {len(set(sent) - set(found))} missing"
    for spec_id, pair in found.items():
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            return f"{spec_id}: not a (timing, failure) pair"
        timing, failure = pair
        if failure is not None and not isinstance(failure, Failure):
            return f"{spec_id}: its failure is a {type(failure).__name__}"
        if timing is None:
            continue
        if not isinstance(timing, dict):
            return f"{spec_id}: its timing is a {type(timing).__name__}"
        ms = timing.get("time_ms")
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 < ms < float("inf")):
            return f"{spec_id}: time_ms {ms!r} is not a positive number"
    return None


def _folder() -> Path:
    """A new folder for an actor (its capture, its stores), named after its process. A killed actor
    (``RayLane.interrupt``, a hung or dying one) cannot remove its own: the folders of actors whose
    process is gone are removed here first, by the next lane on the node (``process_folder``)."""
    return process_folder(FOLDER_PREFIX)


def _inside(root: Path, name: str) -> Path | None:
    """``root/name`` when ``name`` is a relative path that stays inside ``root``, else None."""
    relative = PurePath(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        return None
    path = root / relative
    return path if path.resolve().is_relative_to(root.resolve()) else None


def _node_gpus(ray: Any) -> int:
    """The GPUs of the node this actor runs on (its lanes share the node's cores)."""
    node = ray.get_runtime_context().get_node_id()
    for found in ray.nodes():
        if found.get("NodeID") == node:
            return max(1, int(found.get("Resources", {}).get("GPU", 1)))
    return 1


def _quiet(line: str) -> None:
    pass
