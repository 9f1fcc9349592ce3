"""Verification of a generated module (``generate/check.py``) under the interpreter, called in this
process and through a real tritune worker: a correct relu(x + bias) passes, and each planted bug
is caught with its class (wrong value, write past the end, unwritten output, write into an input,
torch instead of a kernel, syntax error, Triton type error, NaN, wrong outputs, a raising run)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tritune.generate.check import CLASSES, MESSAGE_CHARS, check_job, failure_class  # noqa: E402
from tritune.worker import Failure, Outcome, Worker  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the planted NaN

# (4, 64): a multiple of the kernel's block, so a missing store mask only shows on the odd case
SPEC = """
import torch

def reference(x, bias):
    return torch.relu(x + bias)

def inputs(device):
    return [(torch.randn(4, 64, device=device), torch.randn(64, device=device))]
"""

GOOD = """
import torch
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, out_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % N, mask=mask)
    y = tl.maximum(x + b, 0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def run(x, bias):
    out = torch.empty_like(x)
    n = x.numel()
    bias_relu_kernel[(triton.cdiv(n, 64),)](x, bias, out, n, x.shape[-1], BLOCK=64)
    return out
"""

STORE = "tl.store(out_ptr + offs, y, mask=mask)"
SKIPPED = "out is right with every Triton launch of run() skipped"
VALUE = "y = tl.maximum(x + b, 0.0)"
# name -> (text of GOOD, its replacement, class, failing case (None: before any case), message parts)
PLANTS = {
    "wrong value": (VALUE, "y = tl.maximum(x + b, 0.0) + tl.where(offs == 70, 1.0, 0.0)", "wrong_result",
                    "spec 0", ["out[1, 6]: baseline ", "(abs err 1,", "1 of 256 elements bad"]),
    "past the end": (STORE, "tl.store(out_ptr + offs, y)", "wrong_result", "odd",
                     ["run() writes outside out: 3 guard element(s) changed past the end"]),
    "unwritten": (STORE, "tl.store(out_ptr + offs, y, mask=mask & (offs % N != N - 1))", "wrong_result", "spec 0",
                  ["out[0, 63]: baseline ", "candidate unwritten", "4 of 256 elements bad"]),
    "into its input": ("out = torch.empty_like(x)", "out = x", "wrong_result", "spec 0",
                       ["run() writes into its input x (a kernel must not; baseline: before, candidate: after): x[",
                        "256 of 256 elements bad (bitwise)"]),
    "torch only": ("    out = torch.empty_like(x)\n", "    return torch.relu(x + bias)\n", "no_kernel", "spec 0",
                   ["run() launched no Triton kernel"]),
    "syntax": ("def run(x, bias):", "def run(x, bias)", "syntax", None, ["SyntaxError: ", f"(line {GOOD.splitlines().index('def run(x, bias):') + 1})"]),
    "compile": (STORE, "tl.store(out_ptr + 1.5, y, mask=mask)", "compile", "spec 0",
                ["run() raised InterpreterError:", "invalid operands of type pointer<fp32>"]),
    "nan": (VALUE, "y = tl.where(offs == 70, tl.sqrt(x * 0.0 - 1.0), tl.maximum(x + b, 0.0))", "wrong_result",
            "spec 0", ["out[1, 6]: baseline ", "candidate nan"]),
    "two outputs": ("    return out\n", "    return out, out\n", "wrong_result", "spec 0",
                    ["run() returns 2 tensor(s), the reference 1"]),
    "a tuple for a tensor": ("    return out\n", "    return (out,)\n", "wrong_result", "spec 0",
                             ["run() returns a tuple, the reference a Tensor"]),
    "raises": ("def run(x, bias):", "def run(x):", "runtime", "spec 0",
               ["run() raised TypeError: run() takes 1 positional argument but 2 were given"]),
    # a kernel launches (so "no launch" does not fire) but the outputs do not come from it
    "torch beside a kernel": ("    return out\n", "    return torch.relu(x + bias)\n", "no_kernel", "spec 0",
                              [SKIPPED]),
    "copied from torch": ("    return out\n", "    out.copy_(torch.relu(x + bias))\n    return out\n", "no_kernel",
                          "spec 0", [SKIPPED]),
    "kept from an earlier call": (  # right on the first call of each shape, then stale: a cache by shape
        "def run(x, bias):\n    out = torch.empty_like(x)\n",
        "KEPT = {}\n\n\ndef run(x, bias):\n    if tuple(x.shape) in KEPT:\n        return KEPT[tuple(x.shape)]\n"
        "    out = KEPT[tuple(x.shape)] = torch.empty_like(x)\n", "no_kernel", "spec 0", [SKIPPED]),
}


def planted(name: str) -> str:
    old, new = PLANTS[name][:2]
    assert GOOD.count(old) == 1, old  # the plant changes what it says it changes
    return GOOD.replace(old, new)


@pytest.fixture(scope="module")
def worker():
    with Worker(120.0, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton")) as w:
        yield w


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # for the checks run in this process


def payload(tmp_path, source: str, spec: str = SPEC, derived: bool = True) -> dict:
    module, spec_path = tmp_path / "kernel.py", tmp_path / "spec.py"
    module.write_text(source)
    spec_path.write_text(spec)
    return {"module": str(module), "spec": str(spec_path), "device": "cpu", "seed": 0, "derived": derived}


def check(how: str, worker, job: dict) -> dict:
    if how == "direct":
        return check_job(job)
    outcome = worker.call("tritune.generate.check:check_job", job)
    assert outcome.ok, outcome.failure
    return outcome.value


@pytest.mark.parametrize("how", ["direct", "worker"])
def test_a_correct_module_passes_on_the_spec_and_derived_cases(tmp_path, worker, how):
    result = check(how, worker, payload(tmp_path, GOOD))
    assert result["ok"] and result["failure"] is None, result["message"]
    assert [c["label"] for c in result["cases"]] == ["spec 0", "odd", "one row", "larger"]
    assert [c["shapes"] for c in result["cases"]][:2] == ["f32[4,64], f32[64]", "f32[3,63], f32[63]"]
    assert all(c["ok"] and len(c["outputs"]) == 1 and c["outputs"][0]["ok"] for c in result["cases"])
    assert result["launches"] == 4 and result["message"].startswith("verified on 4 cases (3 derived)")


@pytest.mark.parametrize("how", ["direct", "worker"])
@pytest.mark.parametrize("plant", list(PLANTS))
def test_each_planted_bug_is_caught_with_its_class(tmp_path, worker, how, plant):
    failure, label, parts = PLANTS[plant][2:]
    result = check(how, worker, payload(tmp_path, planted(plant)))
    assert not result["ok"] and result["failure"] == failure, result["message"]
    assert failure in CLASSES
    message = result["message"]
    assert "\n" not in message and len(message) <= MESSAGE_CHARS
    if label is not None:
        assert message.startswith(f"case {label!r} (")
        failing = [c for c in result["cases"] if not c["ok"]]
        assert failing[0]["label"] == label and failing[0]["message"] == message  # the first failing case
    else:
        assert result["cases"] == []
    for part in parts:
        assert part in message, message


def test_the_spec_cases_alone_miss_what_the_odd_case_catches(tmp_path, worker):
    result = check("direct", worker, payload(tmp_path, planted("past the end")))
    assert [c["label"] for c in result["cases"] if not c["ok"]] == ["odd"]
    result = check("direct", worker, payload(tmp_path, planted("past the end"), derived=False))
    assert result["ok"] and [c["label"] for c in result["cases"]] == ["spec 0"]


# serves any size, but launches at most 8 programs of 64: right on the spec's cases and the derived
# ones (at most (8, 64)), wrong where the family's sampled sizes are larger
CAPPED = GOOD.replace("bias_relu_kernel[(triton.cdiv(n, 64),)]", "bias_relu_kernel[(min(triton.cdiv(n, 64), 8),)]") + """

FAMILY = True


def serves(x, bias):
    return x.dim() == 2 and bias.dim() == 1 and x.shape[-1] == bias.shape[0]
"""


def test_sizes_of_the_family_catch_what_the_cases_miss(tmp_path, worker):
    assert "min(triton.cdiv(n, 64), 8)" in CAPPED
    without = check("direct", worker, payload(tmp_path, CAPPED.replace("FAMILY = True", "FAMILY = False")))
    assert without["ok"] and without["family"] == {"sampled": 0, "served": 0}, without["message"]
    result = check("direct", worker, payload(tmp_path, CAPPED))
    assert not result["ok"] and result["failure"] == "wrong_result"
    assert result["message"].startswith("case 'family ") and "unwritten" in result["message"], result["message"]
    good = check("direct", worker, payload(tmp_path, GOOD + "\nFAMILY = True\n\n\ndef serves(x, bias):\n    return True\n"))
    assert good["ok"] and good["family"] == {"sampled": 19, "served": 19}, good["message"]  # 16 drawn, 3 ``near``
    assert "19 of 19 sampled sizes of the family" in good["message"]


def test_a_models_module_is_checked_on_the_family_when_asked(tmp_path, worker):
    # a module without FAMILY (a model's): the family's sizes where the payload asks, every one of them must pass
    capped = CAPPED.split("\n\nFAMILY = True")[0]
    assert "FAMILY" not in capped and "serves" not in capped
    assert check("direct", worker, payload(tmp_path, capped))["ok"]
    result = check("direct", worker, {**payload(tmp_path, capped), "family": True})
    assert not result["ok"] and result["message"].startswith("case 'family "), result["message"]
    good = check("direct", worker, {**payload(tmp_path, GOOD), "family": True})
    assert good["ok"] and good["family"] == {"sampled": 19, "served": 19}, good["message"]
    # what the module says of itself counts for tritune's kernel.py ("module"), not for a model's: no opt-out
    for says in ("FAMILY = False", "FAMILY = True"):  # FAMILY = True without a serves(): no family either
        module = capped + f"\n\n{says}\n"
        assert check("direct", worker, {**payload(tmp_path, module), "family": "module"})["family"]["sampled"] == 0
        result = check("direct", worker, {**payload(tmp_path, module), "family": True})
        assert not result["ok"] and result["message"].startswith("case 'family "), (says, result["message"])
    narrow = CAPPED.replace("    return x.dim() == 2 and", "    return False and")  # serves() refuses every size
    result = check("direct", worker, {**payload(tmp_path, narrow), "family": True})
    assert not result["ok"] and result["message"].startswith("case 'family "), result["message"]


def test_a_serves_that_raises_leaves_the_verdict_to_run(tmp_path, worker):
    raising = CAPPED.replace("    return x.dim() == 2 and", "    raise RuntimeError('planted')\n    return x.dim() == 2 and")
    assert raising != CAPPED
    result = check("direct", worker, payload(tmp_path, raising))
    assert not result["ok"] and result["message"].startswith("case 'family "), result["message"]


def test_a_size_the_module_does_not_serve_is_no_failure(tmp_path, worker):
    narrow = GOOD + "\nFAMILY = True\n\n\ndef serves(x, bias):\n    return x.shape[0] <= 8\n"
    result = check("direct", worker, payload(tmp_path, narrow))
    assert result["ok"], result["message"]
    family = result["family"]
    unserved = [c for c in result["cases"] if c["ok"] is None]
    assert 0 < family["served"] < family["sampled"] == 19 and len(unserved) == 19 - family["served"]
    assert all(c["label"].startswith("family ") and c["message"].startswith("not served") for c in unserved)


INT_SPEC = """
import torch

def reference(x):
    return (x > 0).to(torch.int32) * 3

def inputs(device):
    return [(torch.randn(4, 64, device=device),)]
"""

INT_GOOD = """
import torch
import triton
import triton.language as tl


@triton.jit
def sign_kernel(x_ptr, out_ptr, n, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 0, 3, 0).to(tl.int32), mask=mask)


def run(x):
    out = torch.empty(x.shape, dtype=torch.int32, device=x.device)
    sign_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), x.shape[-1], BLOCK=64)
    return out
"""


def test_integer_outputs_run_twice_to_find_unwritten_elements(tmp_path, worker):
    result = check("direct", worker, payload(tmp_path, INT_GOOD, INT_SPEC))
    assert result["ok"], result["message"]
    assert result["launches"] == 8  # two runs per case: one sentinel cannot tell an integer unwritten
    unwritten = INT_GOOD.replace("mask=mask)", "mask=mask & (offs % N != 0))")
    result = check("direct", worker, payload(tmp_path, unwritten, INT_SPEC))
    assert result["failure"] == "wrong_result" and "out[0, 0]: baseline " in result["message"]
    assert "candidate unwritten" in result["message"]


def test_the_spec_tolerance_overrides_the_table(tmp_path, worker):
    off = planted("wrong value").replace("tl.where(offs == 70, 1.0, 0.0)", "0.01")
    result = check("direct", worker, payload(tmp_path, off))
    assert result["failure"] == "wrong_result" and "rtol 0.0001 atol 1e-05" in result["message"]
    loose = SPEC + "\ntolerance = {'float32': (0.0, 0.02)}\n"
    result = check("direct", worker, payload(tmp_path, off, loose))
    assert result["ok"], result["message"]


# a device fault as torch reports it (a RuntimeError: no type of its own)
FAULT = GOOD.replace("    return out\n", "    raise RuntimeError('CUDA error: an illegal memory access was "
                                        "encountered')\n")


def test_failure_class_maps_worker_failures():
    cases = [
        (Failure("compile_error", "SyntaxError: invalid syntax (line 3)"), "syntax"),
        (Failure("compile_error", "IndentationError: unexpected indent (line 2)"), "syntax"),
        (Failure("compile_error", "CompilationError: at 3:4: invalid operands"), "compile"),
        (Failure("runtime_fault", "RuntimeError: CUDA error: an illegal memory access"), "runtime"),
        (Failure("timeout", "job timed out after 60 s"), "timeout"),
        (Failure("crash", "child died: SIGSEGV"), "runtime"),
        (Failure("error", "ValueError: bad"), "runtime"),
        (Failure("ghost", "ghost on input set 0"), "no_kernel"),
        (Failure("wrong_result", "wrong_result on input set 0"), "wrong_result"),
    ]
    for failure, expected in cases:
        assert failure_class(Outcome(ok=False, failure=failure)) == (expected, failure.message)
        assert failure_class(failure)[0] == expected
    cls, message = failure_class(Failure("error", "ValueError: " + "x" * 1000))
    assert cls == "runtime" and len(message) == MESSAGE_CHARS and message.endswith("...")
    with pytest.raises(ValueError, match="did not fail"):
        failure_class(Outcome(ok=True, value={}))


def test_a_device_fault_is_raised_so_the_worker_ends_its_child(tmp_path, worker):
    job = payload(tmp_path, FAULT)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        check_job(job)
    pid = worker.pid
    outcome = worker.call("tritune.generate.check:check_job", job)
    assert not outcome.ok and outcome.failure.kind == "runtime_fault"
    assert failure_class(outcome)[0] == "runtime" and "illegal memory access" in failure_class(outcome)[1]
    assert worker.pid != pid  # the child that ran it is gone


@pytest.mark.parametrize("allocation", [
    ("from torch import empty_like\n", "empty_like(x)"),  # a name of the module bound to torch's allocator
    ("empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu\n",  # as Inductor's generated code does
     "empty_strided_cpu(tuple(x.shape), x.stride(), x.dtype)"),
    ("", "x.new_empty(x.shape)"),
])
def test_every_allocator_of_run_hands_out_poisoned_memory_and_is_put_back(tmp_path, worker, allocation):
    binding, call = allocation
    header = "import triton.language as tl\n"
    source = planted("unwritten").replace("torch.empty_like(x)", call).replace(header, header + binding)
    originals = (torch.empty, torch.empty_like, torch.empty_strided, torch._C._dynamo.guards._empty_strided_cpu)
    result = check("direct", worker, payload(tmp_path, source))
    assert result["failure"] == "wrong_result" and "candidate unwritten" in result["message"], result["message"]
    assert (torch.empty, torch.empty_like, torch.empty_strided,
            torch._C._dynamo.guards._empty_strided_cpu) == originals
    assert "new_empty" not in vars(torch.Tensor)  # TensorBase's method, as before


def test_tensors_look_plain_to_run_so_absolute_storage_offsets_work(tmp_path, worker):
    # Generated code (tritune's emit, Inductor-like launchers) views buffers and inputs with an
    # absolute storage offset: the guard margins must not shift what offset 0 means.
    emitted = GOOD.replace("    out = torch.empty_like(x)\n", (
        "    assert x.storage_offset() == 0 and x.untyped_storage().nbytes() == 4 * x.numel()\n"
        "    buf0 = torch.empty(x.numel(), dtype=x.dtype, device=x.device)\n"
        "    out = buf0.as_strided(tuple(x.shape), x.stride(), 0)\n"
        "    x = x.as_strided(tuple(x.shape), x.stride(), 0)\n"))
    assert emitted != GOOD
    result = check("direct", worker, payload(tmp_path, emitted))
    assert result["ok"], result["message"]
    unmasked = emitted.replace(STORE, PLANTS["past the end"][1])
    result = check("direct", worker, payload(tmp_path, unmasked))
    assert result["failure"] == "wrong_result" and "run() writes outside out: 3 guard element(s)" in result["message"]


ALIAS_SPEC = SPEC.replace("return torch.relu(x + bias)", "return torch.relu(x + bias), x")


def test_an_input_returned_where_the_reference_returns_it_too_is_no_cheat(tmp_path, worker):
    # with the launches skipped, such an output is still right: the check lets it be
    source = GOOD.replace("    return out\n", "    return out, x\n")
    result = check("direct", worker, payload(tmp_path, source, ALIAS_SPEC))
    assert result["ok"], result["message"]
    # where the reference computes that output, handing back the input is caught
    computed = ALIAS_SPEC.replace("), x", "), x * 1.0")
    result = check("direct", worker, payload(tmp_path, source, computed))
    assert result["failure"] == "no_kernel", result["message"]
    assert result["message"].startswith("case 'spec 0' (f32[4,64], f32[64]): out1 is right with every Triton launch")


@pytest.mark.parametrize("call", ["torch.zeros_like(x)", "torch.zeros(x.shape, device=x.device)", "x.new_zeros(x.shape)",
                                  "torch.full_like(x, 7.0)", "torch.ones(x.shape, device=x.device)", "x.clone()"])
def test_value_filled_allocations_are_guarded_too(tmp_path, worker, call):
    # torch.zeros and kin keep their values but sit between margins: an unmasked store past the end
    # of such an output is seen (in a worker: unguarded, it corrupts the child's heap on the CPU)
    source = planted("past the end").replace("torch.empty_like(x)", call)
    result = check("worker", worker, payload(tmp_path, source))
    assert result["failure"] == "wrong_result", result["message"]
    assert "run() writes outside out: 3 guard element(s) changed past the end" in result["message"]
    originals = (torch.zeros, torch.zeros_like, torch.full_like, torch.ones, torch.clone)
    assert check("direct", worker, payload(tmp_path, GOOD.replace("torch.empty_like(x)", call)))["ok"]
    assert (torch.zeros, torch.zeros_like, torch.full_like, torch.ones, torch.clone) == originals
    assert "clone" not in vars(torch.Tensor) and "new_zeros" not in vars(torch.Tensor)  # TensorBase's, as before


SLICED_SPEC = SPEC.replace("torch.randn(4, 64, device=device)", "torch.randn(4, 128, device=device)[:, :64]")
SLICED = GOOD.replace("    n = x.numel()\n", "    x = x.contiguous()\n    n = x.numel()\n")


def test_a_write_into_an_inputs_memory_outside_its_view_is_caught(tmp_path, worker):
    # x is a slice of wider rows: its storage holds the caller's other columns, which run() must
    # leave alone as it leaves x itself
    assert check("direct", worker, payload(tmp_path, SLICED, SLICED_SPEC))["ok"]
    spill = SLICED.replace("    x = x.contiguous()\n", (
        "    if not x.is_contiguous():  # the spec's case: zero the columns beside x's\n"
        "        x.as_strided(x.shape, x.stride(), x.storage_offset() + x.shape[-1]).zero_()\n"
        "    x = x.contiguous()\n"))
    result = check("direct", worker, payload(tmp_path, spill, SLICED_SPEC))
    assert result["failure"] == "wrong_result", result["message"]
    assert "run() writes into the memory of its input x outside x" in result["message"]


def test_any_kernel_counts_launches_as_the_gpu_hook_reports_them():
    """On a GPU the launch hook calls ``seen(name, stream, expected)`` (``replay.launches``); the
    generated module's counter took ``seen(name)`` only, so every generated kernel failed its
    check on a GPU with a TypeError (H200, 2026-11-29), while the interpreter's one-argument call
    passed on the CPU."""
    from tritune.generate.check import _AnyKernel

    counter = _AnyKernel(interpreted=False)
    counter.seen("any_name", 7, 7)  # as ``_gpu_launches``' hook calls it
    counter.seen(None, 8, 7)  # another stream than the replay's
    counter.seen("interpreted")  # as the interpreter's does
    assert (counter.count, counter.off_stream) == (3, 1)
