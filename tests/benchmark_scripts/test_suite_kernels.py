"""The kernel suite (benchmarks/suite): every kernel matches its torch reference at small odd sizes
under the interpreter, ``--check`` catches planted kernel bugs, the registry is as varied as
issue 5 asks, and ``tritune capture`` records every kernel of the driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "benchmarks" / "suite" / "run.py"
KERNELS = REPO / "benchmarks" / "suite" / "kernels"
sys.path.insert(0, str(REPO))

from benchmarks.suite import CATEGORIES, SUITE, Tolerance, by_name, compare  # noqa: E402


def _env(interpret: bool = True) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def _python(*args: str, interpret: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=_env(interpret), capture_output=True, text=True,
                          timeout=300, cwd=REPO)


# ------------------------------------------------------------------------------- correctness

@pytest.fixture(scope="module")
def checked() -> subprocess.CompletedProcess:
    return _python(str(RUN), "--small", "--check")


def test_every_kernel_matches_its_reference_under_the_interpreter(checked):
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = {line.split()[0]: line for line in checked.stdout.splitlines()[1:-1]}
    assert set(lines) == {case.name for case in SUITE}
    assert all(" ok " in line for line in lines.values()), checked.stdout
    assert f"{len(SUITE)}/{len(SUITE)} kernels match their reference" in checked.stdout


PLANTS = {
    # name: (kernel file, original text, planted text)
    "row_softmax": ("softmax.py", 'mask=mask, other=-float("inf"))\n    row_minus_max',
                    "mask=mask, other=0.0)\n    row_minus_max"),
    "layer_norm": ("norm.py", "xc = tl.where(mask, x - mean, 0.0)", "xc = x - mean"),
    "cumsum_looped": ("scan.py", "tl.cumsum(x, axis=0) + carry", "tl.cumsum(x, axis=0)"),
    "matmul": ("matmul.py", "(offs_m[:, None] < M) & (offs_k[None, :] < k_left)", "(offs_m[:, None] < M)"),
    "attention": ("attention.py", 'qk = tl.where(key_ok[None, :], qk, float("-inf"))', "qk = qk"),
    "quantize_int8": ("quantize.py", "tl.where(q >= 0, q + 0.5, q - 0.5).to(tl.int8)", "q.to(tl.int8)"),
}

PLANT_SCRIPT = """
import importlib.util, json, sys, tempfile
from pathlib import Path
import benchmarks.suite.run as run
from benchmarks.suite import by_name
plants = json.loads(sys.argv[1])
results = {}
for name, (file, old, new) in plants.items():
    module = importlib.import_module("benchmarks.suite.kernels." + file[:-3])
    text = Path(module.__file__).read_text()
    assert text.count(old) == 1, (name, old)
    path = Path(tempfile.mkdtemp()) / file
    path.write_text(text.replace(old, new))
    spec = importlib.util.spec_from_file_location("planted_" + name, path)
    planted = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(planted)
    kernel = by_name([name])[0].kernel
    original = getattr(module, kernel)
    setattr(module, kernel, getattr(planted, kernel))
    wrong = run.main(["--small", "--check", "--only", name])
    setattr(module, kernel, original)
    right = run.main(["--small", "--check", "--only", name])
    results[name] = [wrong, right]
calls = []
case = by_name(["adamw_step"])[0]
real_run = case.run
object.__setattr__(case, "run", lambda inputs: calls.append(1) or real_run(inputs))
results["repeat"] = [run.main(["--small", "--check", "--only", "adamw_step", "--repeat", "3"]), len(calls)]
print(json.dumps(results))
"""


def test_check_catches_planted_kernel_bugs_and_repeat_runs_n_times():
    done = _python("-c", PLANT_SCRIPT, json.dumps(PLANTS))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert {name: results[name] for name in PLANTS} == {name: [1, 0] for name in PLANTS}, done.stdout
    assert done.stdout.count("MISMATCH") == len(PLANTS)
    # in place: the reference is taken before the first run, so three AdamW steps still check
    assert results["repeat"] == [0, 3]


def test_check_guards_each_input_with_a_margin_of_its_own_size():
    from benchmarks.suite.run import guard_inputs, written_outside

    inputs = {"a": torch.zeros(8), "b": torch.zeros(1024, 512), "k": 3}
    guards = guard_inputs(inputs)
    assert {name: g.margin for name, g in guards.items()} == {"a": 16384, "b": 1024 * 512}  # 64 KiB at least
    assert written_outside(inputs, guards) == []
    # a tile of 64 rows past the end (the planted matmul's BLOCK_K x N over B): 128 KiB, past 64 KiB
    b, margin = inputs["b"], guards["b"].margin
    b.as_strided((2 * margin + b.numel(),), (1,), 0)[margin + b.numel() + 64 * 512 - 1] = 1.0
    assert written_outside(inputs, guards) == ["b: 1 guard element(s) changed past the end of its storage, the "
                                               "nearest 32768 element(s) past it"]


# ------------------------------------------------------------------------------- comparison

def test_compare_accepts_one_rounding_of_the_output_type():
    ref = torch.linspace(-4, 4, 1001, dtype=torch.float64)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        assert compare(ref.to(dtype), ref).ok, dtype


@pytest.mark.parametrize("dtype, delta", [(torch.float32, 1e-3), (torch.float16, 2e-2), (torch.bfloat16, 1e-1)])
def test_compare_rejects_an_error_a_few_times_the_tolerance(dtype, delta):
    ref = torch.linspace(-4, 4, 1001, dtype=torch.float64)
    wrong = ref.clone()
    wrong[500] += delta
    result = compare(wrong.to(dtype), ref)
    assert not result.ok and "1/1001 elements off" in result.message


def test_compare_rejects_nan_shape_and_output_count_mismatches():
    ref = torch.ones(4, 5, dtype=torch.float64)
    nan = ref.clone().float()
    nan[1, 2] = float("nan")
    assert "NaN" in compare(nan, ref).message
    assert "shape (5, 4)" in compare(ref.t().float(), ref).message
    assert "2 outputs" in compare((ref, ref), ref).message
    both_nan = compare(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0], dtype=torch.float64))
    assert both_nan.ok


def test_compare_on_int8_allows_rare_ties_but_not_truncation():
    ref = torch.arange(-120, 120, dtype=torch.float64).repeat(10)  # 2400 values
    rare = ref.clone()
    rare[7] += 1  # one tie rounded the other way: 1/2400 < 1e-3
    assert compare(rare.to(torch.int8), ref).ok
    truncated = torch.where(torch.arange(2400) % 2 == 0, ref - torch.sign(ref), ref)
    assert not compare(truncated.to(torch.int8), ref).ok
    off_by_two = ref.clone()
    off_by_two[7] += 2
    assert not compare(off_by_two.to(torch.int8), ref).ok
    assert not compare(rare.to(torch.int8), ref, Tolerance(0, 0)).ok


# ------------------------------------------------------------------------------- registry

def test_registry_is_varied_and_consistent():
    names = [case.name for case in SUITE]
    kernels = [case.kernel for case in SUITE]
    assert len(SUITE) >= 22 and len(set(names)) == len(names) and len(set(kernels)) == len(kernels)
    assert len({case.category for case in SUITE}) >= 9 and {case.category for case in SUITE} <= set(CATEGORIES)
    dtypes = " ".join(case.dtype for case in SUITE)
    assert all(d in dtypes for d in ("fp32", "fp16", "bf16", "int8", "int32"))
    for case in SUITE:
        # tails: every small size has a dimension no power-of-two block divides
        assert any(n % 2 for n in case.small_size), case.name
        assert len(case.small_size) == len(case.gpu_size) and case.block, case.name


def test_kernels_are_written_as_users_write_them():
    """Plain @triton.jit, hardcoded blocks, no num_warps, no autotune, standalone files (replay
    imports each captured file alone)."""
    defined = set()
    for path in sorted(KERNELS.glob("*.py")):
        text = path.read_text()
        assert "num_warps" not in text and "autotune" not in text and "heuristics" not in text, path.name
        assert "from benchmarks" not in text and "import benchmarks" not in text, path.name
        defined |= {line.split("(")[0][4:] for line in text.splitlines() if line.startswith("def ") and
                    "_kernel(" in line}
    assert {case.kernel for case in SUITE} <= defined


def test_by_name_keeps_suite_order_and_names_unknown_kernels():
    assert [c.name for c in by_name(["matmul", "vector_add"])] == ["vector_add", "matmul"]
    with pytest.raises(ValueError, match="unknown kernel\\(s\\) nope"):
        by_name(["nope"])


# ------------------------------------------------------------------------------- driver

def test_driver_errors_are_one_line(monkeypatch, capsys):
    """In process: each error is found before any kernel launches."""
    from benchmarks.suite import run

    assert run.main(["--small", "--only", "matmul,nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown kernel(s) nope" in err
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert run.main(["--only", "matmul"]) == 2 and "needs --small" in capsys.readouterr().err
    monkeypatch.delenv("TRITON_INTERPRET")
    if not torch.cuda.is_available():
        assert run.main(["--small", "--only", "matmul"]) == 2 and "no CUDA GPU here" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main(["--repeat", "0"])
    assert "--repeat must be at least 1" in capsys.readouterr().err


def test_capture_records_every_kernel_of_the_suite(tmp_path):
    out = tmp_path / "suite"
    done = subprocess.run([sys.executable, "-m", "tritune", "capture", "--out", str(out), "--", sys.executable,
                           str(RUN), "--small"], env=_env(), capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    from tritune.capture.spec import read_launches

    specs = read_launches(out)
    assert sorted(s.kernel for s in specs) == sorted(case.kernel for case in SUITE)
    assert all(s.count == 1 and s.writes_from == "ttir" and s.written for s in specs)
    written = {s.kernel: [a.name for a in s.written] for s in specs}
    assert written["adamw_kernel"] == ["param_ptr", "exp_avg_ptr", "exp_avg_sq_ptr"]
    assert written["quantize_int8_kernel"] == ["q_ptr", "scale_ptr"]
