"""End-to-end proof on the GPU (issue 11, section 5): one model's training step under torch.compile's
modes and with tritune, staged and resumable across device calls.

    PYTHONPATH=$PWD/src python3 benchmarks/e2e.py MODEL --stage all --state $STATE --out $OUT --limit-s 540

MODEL is one of ``benchmarks/e2e/train.py``'s (bert, resnet50, gpt2, vit_base_patch16_224, llama). Stages,
each a list of tasks; a task done is never run again, one cut short runs again on the next call:

  modes     ``e2e/measure.py modes``, one process per mode, fresh Inductor and Triton caches each
            (``compile_s`` is a cold compile): default, coordinate_descent, max_autotune (the last
            capped at --autotune-cap-s; past it it is recorded as "skipped: compile exceeded N s")
  optimize  ``tritune optimize --out STATE/MODEL/opt[-cd] --deadline-s D ... -- python3
            benchmarks/e2e/train.py MODEL --steps 3 --mode M`` for default and coordinate descent
            (decisions are keyed by the config Inductor chose, so a CD-compiled program needs its
            own run); --optimize-s seconds per mode in all, summed over calls; each call resumes
  measure   ``e2e/measure.py abab`` with that mode's store: enabled and disabled interleaved in one
            process (default, then coordinate descent)
  all       every task not done yet, in this order: modes default, modes coordinate_descent,
            optimize default, measure default, optimize cd, measure cd, modes max_autotune
  report    no GPU work: OUT/e2e/MODEL.json from the state

A call starts a task only when its estimated time fits before --limit-s, and kills one that runs
past it (tritune optimize gets SIGINT first: it saves its run, which the next call resumes). Each
call writes ``OUT/e2e/MODEL.json`` (tasks not done yet under ``missing``), the logs in
``OUT/logs-MODEL.tgz``, and ``OUT/state-MODEL.tgz`` (bookkeeping and stores, not caches or
captures): on a fresh machine, ``--restore state-MODEL.tgz`` (carried in) unpacks it into an empty
STATE, and the next call goes on from what was measured.

Caches: optimize and measure of one compile mode share ``STATE/cache/MODEL-MODE``, as a user's
program and ``tritune run`` share Inductor's cache: Inductor's runtime autotuning then picks the
configs the decisions are keyed by. ``TRITUNE_HOME`` is ``STATE/home``: the key that signs the
decisions, made by this benchmark for this state; the archive carries it, so that on a fresh
machine the stores are still this user's (never commit the archive).

tritune runs with its defaults, as a user runs it (issue 24): ``--optimize-args`` adds nothing and
``--budget-s`` is passed only when ``--key-budget-s`` is given; a flag that changes the result is
an arm of its own (``--optimize-args "--ncu never"``). ``--tritune-src DIR`` runs optimize and
measure with another checkout's ``src`` (the "before" arm of a comparison; give it its own STATE).

One device call for issue 24's Llama step (capture, a 200-s optimize, then the ABAB measurement;
about 420-540 s on an H200, ``--measure-args "--pairs 6"`` to shorten the last part):

    PYTHONPATH=$PWD/src python3 benchmarks/e2e.py llama --tasks optimize:default,measure:default \
        --optimize-s 200 --limit-s 560 --state gpu_state/e2e --out $OUT

The parts, under ``benchmarks/e2e/``: ``train.py`` (the program), ``measure.py`` (the two
measurements), ``tasks.py`` (the bookkeeping), ``summary.py`` (the results file).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

BENCH = pathlib.Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH), str(BENCH / "e2e"), str(REPO / "src")]

import _common  # noqa: E402
from summary import assemble, coverage  # noqa: E402  (benchmarks/e2e/)
from tasks import ORDER, STAGES, Outcome, Progress, Task, run_tasks  # noqa: E402
from train import MODELS  # noqa: E402

MEASURE = BENCH / "e2e" / "measure.py"
TRAIN = "benchmarks/e2e/train.py"
GRACE_S = 30  # after SIGINT, tritune optimize saves its run; then the process group is killed
# Seconds a task is expected to take on an H100 (compile dominates): a task starts only when this
# fits; after a task was cut short, what it ran then plus a minute. CAP_S: its own time limit.
# Measured on the H100 (2026-11-23): modes:coordinate_descent 192 s for gpt2; measure:default
# 37-52 s for resnet50, bert and gpt2 (compile included, Inductor's cache warm from optimize).
ESTIMATE_S = {"modes:default": 150, "modes:coordinate_descent": 240, "measure:default": 90,
              "measure:coordinate_descent": 240}
CAP_S = {"modes:default": 360, "modes:coordinate_descent": 420, "measure:default": 360,
         "measure:coordinate_descent": 420}
AFTER_COMPILE_S = 90  # max_autotune: what its measurement needs once compiled
ROUND_S = 30  # tritune optimize past its deadline: the round it is in, then its report


# ---------------------------------------------------------------------------------- the runner

class Runner:
    """Runs a task as a subprocess of the repository root, within its time limit."""

    def __init__(self, args: argparse.Namespace, state: pathlib.Path):
        self.args, self.state, self.model = args, state, args.model
        self.logs = state / args.model / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        (state / args.model / "tasks").mkdir(parents=True, exist_ok=True)

    # -- sizes
    def need(self, task: Task, entry: dict) -> float:
        if task.stage == "optimize":
            return self._startup_s(task) + ROUND_S + GRACE_S + 60
        if task.name == "modes:max_autotune":
            base = self.args.autotune_cap_s + AFTER_COMPILE_S
        else:
            base = ESTIMATE_S[task.name]
        return max(base, entry.get("cut_after_s", 0) + 60)

    def cap(self, task: Task) -> float:
        if task.stage == "optimize":
            return float("inf")  # its budget bounds it (``optimize_s``)
        if task.name == "modes:max_autotune":
            return self.args.autotune_cap_s + AFTER_COMPILE_S
        return CAP_S[task.name]

    def _startup_s(self, task: Task) -> float:
        """Before tritune optimize's own deadline starts: capturing the program (a compile) the first
        time, starting its workers after."""
        return 40 if (self.opt_dir(task.mode) / "capture" / "launches.jsonl").exists() else 150

    def opt_dir(self, mode: str) -> pathlib.Path:
        return self.state / self.model / ("opt" if mode == "default" else "opt-cd")

    # -- running
    def run(self, task: Task, entry: dict, timeout: float) -> Outcome:
        return {"modes": self._modes, "optimize": self._optimize, "measure": self._measure}[task.stage](
            task, entry, timeout)

    def _env(self, caches: pathlib.Path) -> dict:
        from tritune import config

        return config.environment({
            config.ENV_PYTHONPATH: config.python_path_first(str(self.args.tritune_src or REPO / "src")),
            config.ENV_UNBUFFERED: "1",
            config.ENV_HOME: str(self.state / "home"),
            config.ENV_INDUCTOR_CACHE: str(caches / "inductor"),
            config.ENV_TRITON_CACHE: str(caches / "triton"),
        })

    def _measure_cmd(self, task: Task, kind: str, out: pathlib.Path, *extra: str) -> list[str]:
        return [sys.executable, str(MEASURE.relative_to(REPO)), kind, self.model, "--mode", task.mode,
                "--json", str(out), *extra, *shlex.split(self.args.measure_args)]

    def _worker(self, task: Task, cmd: list[str], out: pathlib.Path, caches: pathlib.Path, timeout: float) -> Outcome:
        phase_file = out.with_suffix(".phase")
        out.unlink(missing_ok=True)
        phase_file.unlink(missing_ok=True)  # an earlier attempt's
        rc, seconds, killed = run_process(cmd, self._env(caches), timeout, self.logs / f"{task.stage}-{task.mode}.log")
        if rc == 0 and out.exists():
            result = json.loads(out.read_text())
            return Outcome("done", seconds, fields={"result": result, "command": portable(cmd, self.state)})
        phase = phase_file.read_text().strip() if phase_file.exists() else "start"
        if killed and timeout >= self.cap(task):
            if task.name == "modes:max_autotune" and phase in ("start", "compile"):
                return Outcome("skipped", seconds, f"compile exceeded {self.args.autotune_cap_s:.0f} s")
            return Outcome("failed", seconds, f"exceeded its limit of {timeout:.0f} s (in {phase})")
        if killed:
            return Outcome("cut", seconds, f"cut at the call's limit after {seconds:.0f} s (in {phase})",
                           {"cut_after_s": seconds})
        return Outcome("failed", seconds, f"exit {rc}: {last_line(self.logs / f'{task.stage}-{task.mode}.log')}")

    def _modes(self, task: Task, entry: dict, timeout: float) -> Outcome:
        out = self.state / self.model / "tasks" / f"{task.stage}-{task.mode}.json"
        with tempfile.TemporaryDirectory(prefix="tritune-e2e-") as fresh:  # a cold compile
            return self._worker(task, self._measure_cmd(task, "modes", out), out, pathlib.Path(fresh), timeout)

    def _measure(self, task: Task, entry: dict, timeout: float) -> Outcome:
        out = self.state / self.model / "tasks" / f"{task.stage}-{task.mode}.json"
        store = self.opt_dir(task.mode) / "decisions.db"
        return self._worker(task, self._measure_cmd(task, "abab", out, "--store", str(store)), out,
                            self._caches(task.mode), timeout)

    def _caches(self, mode: str) -> pathlib.Path:
        return self.state / "cache" / f"{self.model}-{mode}"

    def _optimize(self, task: Task, entry: dict, timeout: float) -> Outcome:
        spent = entry.get("optimize_s", 0.0)
        timeout -= GRACE_S  # SIGINT then, so that it has saved and ended before the call's limit
        deadline = optimize_deadline(self.args.optimize_s - spent, timeout, self._startup_s(task))
        out = self.opt_dir(task.mode)
        cmd = optimize_command(self.args, out, deadline, task.mode)
        log_path = self.logs / f"{task.stage}-{task.mode}.log"
        rc, seconds, killed = run_process(cmd, self._env(self._caches(task.mode)), timeout, log_path, interrupt=True)
        spent += seconds
        run = load_run(out)
        fields = {"optimize_s": spent, "command": portable(cmd, self.state), "coverage": coverage(run) if run else None}
        return optimize_outcome(rc, killed, run, spent, self.args.optimize_s, seconds, fields, last_line(log_path))


def optimize_deadline(left_s: float, timeout: float, startup_s: float) -> float:
    """``--deadline-s``: the loop's whole budget in this call (keys share it by time share), what is
    left of ``--optimize-s`` when it fits; it starts after the capture (``startup_s``) and ends
    within a round of candidates, then the report, before ``timeout``."""
    return max(15.0, min(left_s, timeout - startup_s - ROUND_S))


def optimize_command(args: argparse.Namespace, out: pathlib.Path, deadline: float, mode: str) -> list[str]:
    """``tritune optimize`` on the training program: the deadline, then only the options asked for
    (``--key-budget-s``, ``--optimize-args``): everything else is tritune's default."""
    budget = ["--budget-s", f"{args.key_budget_s:.0f}"] if args.key_budget_s else []
    return [sys.executable, "-m", "tritune", "optimize", "--out", str(out), "--deadline-s", f"{deadline:.0f}",
            *budget, *shlex.split(args.optimize_args), "--",
            sys.executable, TRAIN, args.model, "--steps", str(args.optimize_steps), "--mode", mode]


def load_run(folder: pathlib.Path):
    """The run's ``optimize.json`` as tritune's typed value; None when there is none (yet)."""
    from tritune.model.results import ResultsError, RunResults

    try:
        return RunResults.load(folder)
    except ResultsError:
        return None


def optimize_outcome(rc: int, killed: bool, run, spent: float, budget: float, seconds: float,
                     fields: dict, last: str) -> Outcome:
    """Done when the run finished (every key, or --cover reached) or its budget is spent;
    partial when it stopped at its deadline or was interrupted (the next call resumes it)."""
    if run and run.finished:
        return Outcome("done", seconds, "finished", fields)
    if run and spent >= budget:
        return Outcome("done", seconds, f"budget of {budget:.0f} s spent (resumable)", fields)
    if killed or rc in (0, 130) or (run and run.stopped):
        return Outcome("partial", seconds, "to be continued: run the same stage again", fields)
    return Outcome("failed", seconds, f"exit {rc}: {last}", fields)


def run_process(cmd: list[str], env: dict, timeout: float, log_path: pathlib.Path,
                interrupt: bool = False) -> tuple[int, float, bool]:
    """Run ``cmd`` in its own process group, output appended to ``log_path``. Past ``timeout`` the
    group is killed (with ``interrupt``: SIGINT to the command first, then up to GRACE_S for it to
    save its run). Returns (exit code, seconds, killed)."""
    start = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"\n$ {shlex.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if not _exited(proc.pid, timeout):
            if interrupt:
                proc.send_signal(signal.SIGINT)
                _exited(proc.pid, GRACE_S)
            # Not reaped yet, so the group id is still this command's: nothing else can be hit.
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return proc.returncode, time.monotonic() - start, True
        proc.wait()
    return proc.returncode, time.monotonic() - start, False


def _exited(pid: int, timeout: float) -> bool:
    """Whether ``pid`` exits within ``timeout`` seconds; it is left unreaped (``WNOWAIT``)."""
    end = time.monotonic() + timeout
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.2)


def portable(cmd: list[str], state: pathlib.Path | None = None) -> str:
    """The command as typed in the repository root: python3, and $STATE for the state folder."""
    text = shlex.join("python3" if part == sys.executable else part for part in cmd)
    return text.replace(str(state), "$STATE") if state else text


def last_line(path: pathlib.Path) -> str:
    lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()] \
        if path.exists() else []
    return lines[-1][:300] if lines else "no output"


# ---------------------------------------------------------------------------------------- main

def write_outputs(progress: Progress, state: pathlib.Path, out: pathlib.Path, model: str) -> pathlib.Path:
    target = out / "e2e" / f"{model}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(assemble(progress), indent=1, default=str))
    # one archive: the device tool returns at most 8 files, no deeper than OUT/a/b/file
    with tarfile.open(out / f"logs-{model}.tgz", "w:gz") as tar:
        for log in sorted((state / model / "logs").glob("*.log")):
            tar.add(log, arcname=f"logs-{model}/{log.name}")
    with tarfile.open(out / f"state-{model}.tgz", "w:gz") as tar:
        for path in carried(state, model):
            tar.add(path, arcname=str(path.relative_to(state)))
    return target


def carried(state: pathlib.Path, model: str) -> list[pathlib.Path]:
    """What a fresh machine needs to go on: the bookkeeping, results and stores (not captures or
    caches), and ``home`` (the signing key this benchmark's tritune made for these stores, without
    which they are another user's; it is this state's own, not a user's: never commit the archive)."""
    kept = [p for p in sorted((state / model).rglob("*")) if p.is_file() and "capture" not in
            p.relative_to(state).parts and p.suffix in (".json", ".jsonl", ".db", ".md")]
    return kept + sorted(p for p in (state / "home").glob("*") if p.is_file())


def restore(archive: pathlib.Path, state: pathlib.Path) -> None:
    """Unpack a state archive (``carried``) into ``state``: plain files only, inside it."""
    state.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4 (and backports)
            tar.extractall(state, filter="data")
        else:  # our own archive (``carried``)
            tar.extractall(state)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = _common.OneLineParser(prog="e2e.py", description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--stage", choices=sorted(STAGES), default="all")
    parser.add_argument("--state", type=pathlib.Path, default=pathlib.Path(os.environ.get("STATE") or "gpu_state/e2e"))
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path(os.environ.get("OUT") or "runs"))
    parser.add_argument("--limit-s", type=float, default=540, help="stop starting and end tasks before this")
    parser.add_argument("--optimize-s", type=float, default=240, help="tritune optimize seconds per mode, all calls")
    parser.add_argument("--key-budget-s", type=float, default=None,
                        help="tritune optimize --budget-s (per key); default: not passed (tritune's own)")
    parser.add_argument("--optimize-steps", type=int, default=3, help="train.py --steps under tritune optimize")
    parser.add_argument("--optimize-args", default="", help="more tritune optimize options (an arm of its own)")
    parser.add_argument("--tritune-src", type=pathlib.Path, default=None, metavar="DIR",
                        help="the src folder of the tritune that optimizes and measures (default: this checkout's)")
    parser.add_argument("--autotune-cap-s", type=float, default=300, help="max_autotune's compile limit")
    parser.add_argument("--measure-args", default="", help="more measure.py options (e.g. --pairs 10)")
    parser.add_argument("--restore", type=pathlib.Path, default=None, metavar="TGZ",
                        help="a state archive of an earlier call, unpacked when STATE has none for MODEL")
    parser.add_argument("--redo", action="append", default=[], metavar="TASK", help="run TASK again (e.g. modes:default)")
    parser.add_argument("--tasks", default=None, metavar="T1,T2",
                        help="these tasks in this order instead of --stage's (the device time of a session is short: "
                             "the tritune measurement first)")
    args = parser.parse_args(argv)
    if args.model not in MODELS:
        parser.error(f"unknown model {args.model!r}; one of {', '.join(MODELS)}")
    if args.tritune_src and not (args.tritune_src / "tritune" / "__init__.py").is_file():
        parser.error(f"--tritune-src {args.tritune_src}: no tritune package there")
    if args.tritune_src:
        args.tritune_src = args.tritune_src.absolute()
    if args.restore and not args.restore.is_file():
        parser.error(f"--restore {args.restore}: no such archive")
    unknown = [name for name in args.redo + (args.tasks.split(",") if args.tasks else [])
               if name not in {t.name for t in ORDER}]
    if unknown:
        parser.error(f"{unknown[0]}: not a task ({', '.join(t.name for t in ORDER)})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    state, out = args.state.absolute(), args.out.absolute()
    if args.restore and not (state / args.model / "progress.json").exists():
        restore(args.restore, state)
    progress = Progress(state / args.model / "progress.json", args.model)
    for name in args.redo:
        progress.data["tasks"].pop(name, None)
    given = sys.argv[1:] if argv is None else argv
    command = _common.portable_command([__file__, *given]).replace(str(state), "$STATE")
    progress.data["calls"].append({"command": command,
                                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                                   "stage": args.stage})
    progress.save()
    by_name = {t.name: t for t in ORDER}
    tasks = [by_name[name] for name in args.tasks.split(",")] if args.tasks else STAGES[args.stage]
    ran = run_tasks(tasks, progress, Runner(args, state), limit_s=args.limit_s)
    progress.data["calls"][-1]["ran"] = ran
    progress.save()
    target = write_outputs(progress, state, out, args.model)
    missing = assemble(progress)["missing"]
    print(f"{args.model}: ran {', '.join(ran) or 'nothing'}; results {target}; "
          + (f"not done yet: {', '.join(missing)} (run again)" if missing else "every task done"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
