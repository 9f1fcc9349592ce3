"""``tritune run --store`` and ``TRITUNE_STORE``: decisions applied to a program that is not
modified, in subprocesses under the interpreter."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune import config
from tritune.boot import BOOT_DIR
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.model.variant import Variant
from tritune.store import SCHEMA_VERSION, DecisionStore, current_target, key_for

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, seen_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
    tl.store(seen_ptr + offs // BLOCK, BLOCK)
"""
PROGRAM = """
import os, sys
import torch, triton
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_kernels import scale_kernel

x, out, seen = torch.arange(100.0), torch.zeros(100), torch.zeros(64, dtype=torch.int32)
scale_kernel[(triton.cdiv(100, 32),)](x, out, seen, 100, BLOCK=32)
assert torch.equal(out, x * 2)
ran = seen[seen != 0]
print(len(ran), sorted(set(ran.tolist())), "torch" in sys.modules)
sys.exit(int(sys.argv[1]))
"""
# the boot folder first, then what this process has (the tritune under test)
BOOT_PATH = config.python_path_first(str(BOOT_DIR))
RUN = [sys.executable, "-c", "from tritune.commands.run import run; run(prog_name='tritune run')"]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """The program, its kernel file and a store with a verified decision (BLOCK 32 -> 64) keyed
    from a capture of the kernel's launch."""
    root = tmp_path_factory.mktemp("apply_run")
    (root / "run_kernels.py").write_text(KERNEL)
    (root / "prog.py").write_text(PROGRAM)
    kernels = import_interpreted(root / "run_kernels.py", "run_kernels_captured")
    with capture(root / "cap"):
        x = torch.arange(100.0)
        kernels.scale_kernel[(triton.cdiv(100, 32),)](x, torch.zeros(100), torch.zeros(64, dtype=torch.int32), 100,
                                                      BLOCK=32)
    (spec,) = read_launches(root / "cap")
    key = key_for(spec, current_target("cpu"))
    variant = Variant(name="block 64", constexprs={"BLOCK": 64})
    with DecisionStore(root / "decisions.db") as store:
        run = store.start_run({})
        cand = store.add_candidate(run, key, variant)
        store.finish_candidate(cand.id, "verified", verification={"ok": True})
        store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)
    return root


def interpreted(command: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, env={**os.environ, "TRITON_INTERPRET": "1", **env}, capture_output=True,
                          text=True, timeout=300)


def test_tritune_run_applies_the_store_and_passes_the_exit_code_through(program):
    done = interpreted([*RUN, "--store", str(program / "decisions.db"), "--",
                        sys.executable, str(program / "prog.py"), "3"])
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stdout.strip() == "2 [64] True"  # cdiv(100, 64) programs of BLOCK 64
    assert "tritune apply: decisions applied to 1 of 1 launches of kernels with decisions " \
           "(scale_kernel 1/1)" in done.stderr


def test_without_the_store_the_program_runs_as_written(program):
    done = interpreted([sys.executable, str(program / "prog.py"), "0"])
    assert done.returncode == 0 and done.stdout.strip() == "4 [32] True"


def test_a_store_that_is_not_there_is_one_line_and_the_program_runs(program):
    missing = program / "missing.db"
    done = interpreted([sys.executable, str(program / "prog.py"), "0"], PYTHONPATH=BOOT_PATH,
                       TRITUNE_STORE=str(missing))
    assert done.returncode == 0 and done.stdout.strip() == "4 [32] True"
    assert done.stderr.strip() == f"tritune apply: decisions not applied in this process: StoreError: " \
                                  f"no decision store at {missing}"
    absent = interpreted([*RUN, "--store", str(program / "decisions.db"), "--", "no-such-command-here"])
    assert absent.returncode == 127 and "command not found: no-such-command-here" in absent.stderr


def test_a_process_that_never_imports_triton_pays_nothing(program):
    check = ("import sys, tritune; tritune.enable; "
             "print(sorted(m for m in ('torch', 'triton', 'tritune.store') if m in sys.modules))")
    done = interpreted([sys.executable, "-c", check], PYTHONPATH=BOOT_PATH,
                       TRITUNE_STORE=str(program / "decisions.db"))
    assert done.returncode == 0 and done.stdout.strip() == "[]" and done.stderr == ""


def _bad_store(root, kind: str):
    path = root / f"{kind}.db"
    if kind == "not-sqlite":
        path.write_text("these are not the decisions you are looking for\n" * 100)
    elif kind == "empty":
        path.touch()
    elif kind == "newer-schema":
        DecisionStore(path).close()
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    return path


BAD_STORES = [("missing", "no decision store at"), ("not-sqlite", "not a tritune decision store"),
              ("empty", "an empty file, not a decision store"),
              ("newer-schema", f"written by store schema version {SCHEMA_VERSION + 1}")]
SAY_RAN = [sys.executable, "-c", "import sys; print('ran'); sys.exit(3)"]


@pytest.mark.parametrize("kind, why", BAD_STORES)
def test_a_bad_store_runs_the_program_and_says_first_that_nothing_was_applied(tmp_path, kind, why):
    store = _bad_store(tmp_path, kind)
    done = subprocess.run([*RUN, "--store", str(store), "--", *SAY_RAN], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120,
                          env={**os.environ, "TRITON_INTERPRET": "1"})  # no "no GPU found" line on a CPU machine
    assert done.returncode == 3  # the program's own
    warning, ran = done.stdout.splitlines()  # the warning, then the program's output; nothing else
    assert warning.startswith("tritune run: nothing applied, running the program as written: ") and why in warning
    assert ran == "ran"
    if kind == "empty":  # read, never written into: no schema, no -wal beside it
        assert store.stat().st_size == 0 and sorted(tmp_path.iterdir()) == [store]


@pytest.mark.parametrize("kind, why", BAD_STORES)
def test_strict_refuses_a_bad_store_without_running_the_program(tmp_path, kind, why):
    store = _bad_store(tmp_path, kind)
    done = subprocess.run([*RUN, "--strict", "--store", str(store), "--", *SAY_RAN], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("tritune run: nothing applied, the program was not run (--strict): ") and why in line


def test_strict_with_a_good_store_runs_the_program(program):
    done = interpreted([*RUN, "--strict", "--store", str(program / "decisions.db"), "--",
                        sys.executable, str(program / "prog.py"), "0"])
    assert done.returncode == 0 and done.stdout.strip() == "2 [64] True", done.stderr[-2000:]
