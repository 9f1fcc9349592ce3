"""``tritune generate``'s launcher for any size of a spec's family (``generate/family.py``) on the
CPU: Inductor's kernels compiled for symbolic sizes, run on Triton's interpreter. kernel.py serves
sizes it was not generated for, with torch and Triton alone, also as a torch operator inside a
torch.compile'd model (no graph break); what the family does not serve is a clear error; a wrong family is caught by the sampled sizes and left out; a wrapper doing work
outside Triton is one line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tritune.generate import family as fam  # noqa: E402
from tritune.generate.run import GenerateSettings, generate  # noqa: E402
from tritune.generate.spec import GenerateError  # noqa: E402

SPEC = '''
import torch
name = "bias_relu_sum"

def reference(x, bias, scale):
    y = torch.relu(x + bias) * scale
    return y, y.sum(-1)

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(6, 40, generator=g).to(device), torch.randn(40, generator=g).to(device), 2.0)]
'''

QUIET = GenerateSettings(budget_s=0, bench=False, interpret=True)

# kernel.py (sys.argv[1]) imported in a fresh interpreter that cannot import tritune
WITHOUT_TRITUNE = """
import importlib.abc, importlib.util, sys, torch

class NoTritune(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tritune":
            raise ImportError("kernel.py imports tritune")

sys.meta_path.insert(0, NoTritune())
spec = importlib.util.spec_from_file_location("kernel", sys.argv[1])
kernel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel)
g = torch.Generator().manual_seed(1)
"""

# kernel.py in a fresh interpreter that cannot import tritune, on sizes no case had
UNSEEN = WITHOUT_TRITUNE + """
for rows, cols in ((5, 33), (37, 130), (2, 2), (1, 7), (3, 1), (0, 9)):
    x, bias = torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)
    if not kernel.serves(x, bias, 2.0):
        print(rows, cols, "not served")
        continue
    y, total = kernel.run(x, bias, 2.0)
    want = torch.relu(x + bias) * 2.0
    print(rows, cols, torch.allclose(y, want), torch.allclose(total, want.sum(-1), atol=1e-5))
# the operator, inside a model torch.compile traces whole (fullgraph: a graph break is an error)
def model(x, bias):
    y, total = kernel.op(x, bias, 2.0)
    return y * 3, total + 1

compiled = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=True)
for rows, cols in ((5, 33), (9, 17)):
    x, bias = torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)
    y, total = compiled(x, bias)
    want = torch.relu(x + bias) * 2.0
    print("op", rows, cols, torch.allclose(y, want * 3), torch.allclose(total, want.sum(-1) + 1, atol=1e-5))
for args in ((torch.randn(2, 3, 4), torch.randn(4), 2.0), (torch.randn(40), torch.randn(40), 2.0),
             (torch.randn(3, 4).double(), torch.randn(4).double(), 2.0),
             (torch.randn(4, 3).t(), torch.randn(4), 2.0), (torch.randn(3, 4), torch.randn(4), 3.0)):
    try:
        kernel.run(*args)
        print("served", kernel.serves(*args))
    except ValueError as exc:
        print("refused", kernel.serves(*args), str(exc).split(":")[0])
"""


@pytest.fixture
def interpreted(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _generate(tmp_path: Path) -> dict:
    (tmp_path / "spec.py").write_text(SPEC)
    return generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)


def test_kernel_py_serves_unseen_sizes_with_torch_and_triton_alone(tmp_path, interpreted):
    result = _generate(tmp_path)
    assert result["check"]["ok"], result["check"]["message"]
    family = result["family"]
    # 16 drawn, 3 beside the one case (``derive.near``)
    assert family["emitted"] and family["sampled"] == 19 and 13 <= family["served"] < 19, family
    # what the family leaves to the cases: dims of 0 or 1, Dynamo's special sizes (the code is made for >= 2)
    unserved = [c["shapes"] for c in result["check"]["cases"] if c["ok"] is None]
    assert len(unserved) == 19 - family["served"]
    assert all(re.search(r"\[(1|0),|,(1|0)\]", shapes) for shapes in unserved), unserved
    assert f"{family['served']} of 19 sampled sizes of the family" in result["check"]["message"]
    text = (tmp_path / "out" / "kernel.py").read_text()
    assert "\nFAMILY = True\n" in text and "def _family_0(in0, in1, in2, _probe=False, _fake=False):" in text
    assert not re.search(r"^\s*(import|from)\s+tritune\b", text, re.M)  # and the subprocess below cannot import it
    done = subprocess.run([sys.executable, "-c", UNSEEN, str(tmp_path / "out" / "kernel.py")], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[:6] == ["5 33 True True", "37 130 True True", "2 2 True True",
                         "1 7 not served", "3 1 not served", "0 9 not served"]
    assert lines[6:8] == ["op 5 33 True True", "op 9 17 True True"]
    # another rank (higher, lower), another dtype, another value of a float the reference was given: refused;
    # another layout (a transposed x): served, by the family on a contiguous copy
    assert lines[8:] == ["refused False bias_relu_sum"] * 3 + ["served True", "refused False bias_relu_sum"]
    assert re.search(r'@torch.library.custom_op\("tritune_generated::bias_relu_sum_[0-9a-f]{8}"', text)
    saved = json.loads((tmp_path / "out" / "generate.json").read_text())
    assert saved["family"] == family


def test_a_family_with_a_wrong_grid_is_caught_and_left_out(tmp_path, interpreted, monkeypatch):
    real = fam._grid

    def halved(rule, constexprs, scalars):  # half the programs on the first axis: rows left unwritten
        x, rest = real(rule, constexprs, scalars)[1:-1].split(", ", 1)
        return f"(max(1, ({x}) // 2), {rest})"

    monkeypatch.setattr(fam, "_grid", halved)
    result = _generate(tmp_path)
    assert result["check"]["ok"], result["check"]["message"]  # the per-case launchers alone
    assert result["family"]["emitted"] is False
    notes = " ".join(result["notes"])
    assert "made again without the launchers for other sizes" in notes and "case 'family" in notes
    assert "\nFAMILY = False\n" in (tmp_path / "out" / "kernel.py").read_text()


WRAPPER = '''
def call(self, args):
    arg0_1, arg1_1, arg2_1 = args
    args.clear()
    s0 = arg0_1
    buf0 = empty_strided_cuda((s0, 16), (16, 1), torch.float32)
    {line}
    return (buf0, )
'''


@pytest.mark.parametrize("line, says", [
    ("extern_kernels.mm(arg1_1, arg2_1, out=buf0)", "calls extern_kernels.mm"),
    ("torch.ops.aten.copy_(buf0, arg1_1)", "calls torch.ops.aten.copy_"),
    ("buf1 = arg1_1.data_ptr()", "computes arg1_1.data_ptr()"),
    ("buf1 = os.environ", "reads os.environ"),
    ("import os", "does import os"),
    # it binds only what Inductor's wrapper binds, and reads nothing it did not bind
    ("max = arg1_1", "assigns 'max'"),
    ("device = arg1_1", "assigns 'device'"),
    ("buf1 = __builtins__", "reads '__builtins__' before binding it"),
    ("buf1 = undefined_name", "reads 'undefined_name' before binding it"),
    ("buf1 = [s0 for _ in arg1_1]", "computes"),
    ("buf1 = empty_strided_cuda((s0,), (1,), dtype=torch.float32)", "allocates"),
    ("assert_size_stride(arg1_1, (s0,))", "calls assert_size_stride"),
])
def test_a_wrapper_doing_anything_else_is_one_line(line, says):
    family = {"code": WRAPPER.format(line=line), "sources": ["L['x'].size()[0]", "L['x']", "L['w']"],
              "params": ["x", "w"], "launches": [], "inputs": [{"tensor": 2, "dtype": "float32", "device": "cuda"}] * 2,
              "returns": "Tensor"}
    with pytest.raises(GenerateError) as caught:
        fam.family_text(family, {})
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_graph_argument_from_anywhere_but_the_inputs_is_refused():
    family = {"code": WRAPPER.format(line="pass"), "sources": ["G['weights'].size()[0]", "L['x']", "L['w']"],
              "params": ["x", "w"], "launches": [], "returns": "Tensor",
              "inputs": [{"tensor": 2, "dtype": "float32", "device": "cuda"}] * 2}
    with pytest.raises(GenerateError, match="not from an input or its sizes"):
        fam.family_text(family, {})


TWO_DTYPES = SPEC.replace(
    "return [(torch.randn(6, 40, generator=g).to(device), torch.randn(40, generator=g).to(device), 2.0)]",
    "x, bias = torch.randn(6, 40, generator=g).to(device), torch.randn(40, generator=g).to(device)\n"
    "    return [(x, bias, 2.0), (x.double(), bias.double(), 2.0)]")


def test_each_dtype_pattern_of_the_cases_gets_a_family(tmp_path, interpreted):
    assert TWO_DTYPES != SPEC
    (tmp_path / "spec.py").write_text(TWO_DTYPES)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"], result["check"]["message"]
    family = result["family"]
    # 16 per dtype pattern, 3 beside each case
    assert family["emitted"] and family["sampled"] == 38 and family["served"] >= 26, family
    text = (tmp_path / "out" / "kernel.py").read_text()
    assert "in0.dtype == torch.float32" in text and "in0.dtype == torch.float64" in text
    assert "for family in (_family_0, _family_1, ):" in text


BRANCH = '''
import torch

def reference(x):
    if x.shape[0] > 4:  # Dynamo guards the symbolic size: s0 > 4
        return torch.relu(x)
    return x * 2

def inputs(device):
    return [(torch.randn(6, 40, generator=torch.Generator().manual_seed(0)).to(device),)]
'''

SQUEEZE = '''
import torch

def reference(x):
    return torch.relu(x.squeeze(1))  # a no-op for sizes >= 2 of dim 1, not for 1

def inputs(device):
    return [(torch.randn(6, 4, 40, generator=torch.Generator().manual_seed(0)).to(device),)]
'''

STRUCTSEQ = '''
import torch

def reference(n, x):  # an int first, and a structseq (torch.return_types.max) returned
    return (torch.relu(x) * n).max(-1)

def inputs(device):
    return [(3, torch.randn(3, 12, generator=torch.Generator().manual_seed(0)).to(device))]
'''

# the kernel.py of a spec in a fresh interpreter: sys.argv[2] holds calls, each printed as served or not, right or not
CALLS = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("kernel", sys.argv[1])
kernel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel)
reference = {}
exec(open(sys.argv[3]).read(), reference)
for args in eval(sys.argv[2], {"torch": torch}):
    if not kernel.serves(*args):
        print("not served")
        continue
    got, want = kernel.run(*args), reference["reference"](*args)
    same = all(torch.allclose(a.float(), b.float(), atol=1e-5) for a, b in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)))
    print(type(got).__name__, same)
"""


def _calls(tmp_path: Path, text: str, calls: str) -> list[str]:
    (tmp_path / "spec.py").write_text(text)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"] and result["family"]["emitted"], (result["check"]["message"], result["notes"])
    done = subprocess.run([sys.executable, "-c", CALLS, str(tmp_path / "out" / "kernel.py"), calls,
                           str(tmp_path / "spec.py")], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


def test_dynamos_guards_keep_the_family_to_the_sizes_its_code_was_made_for(tmp_path, interpreted):
    assert _calls(tmp_path, BRANCH, "[(torch.randn(9, 33),), (torch.randn(3, 33),)]") == ["Tensor True", "not served"]


def test_a_dim_of_one_is_not_taken_for_a_symbolic_size(tmp_path, interpreted):
    assert _calls(tmp_path, SQUEEZE, "[(torch.randn(5, 3, 33),), (torch.randn(5, 1, 33),)]") == \
        ["Tensor True", "not served"]


def test_a_structseq_and_an_int_before_the_tensors(tmp_path, interpreted, monkeypatch):
    # its max and argmax reduce with a combine function, which Triton's interpreter runs element by element:
    # forcing each timed block took 11 minutes on the CPU; the timing has tests of its own
    monkeypatch.setattr(fam, "timeable", lambda spec, text="": False)
    lines = _calls(tmp_path, STRUCTSEQ, "[(2, torch.randn(5, 13)), (5, torch.randn(2, 7))]")
    assert lines == ["tuple True", "tuple True"]
    assert "    device = in1.device\n" in (tmp_path / "out" / "kernel.py").read_text()  # the first tensor's


def test_a_scalar_of_a_subclass_gets_no_family(tmp_path, interpreted):
    """A float subclass's name would be written into kernel.py: no family for it (the cases remain)."""
    text = SPEC.replace('name = "bias_relu_sum"', 'name = "bias_relu_sum"\n\nclass F(float):\n    pass\n\n'
                        'F.__name__ = "float and print(\'PLANTED\') is None and float"').replace(", 2.0)]", ", F(2.0))]")
    (tmp_path / "spec.py").write_text(text)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"] and not result["family"]["emitted"]
    assert any("not exactly a bool, int or float" in note for note in result["notes"]), result["notes"]
    assert "PLANTED" not in (tmp_path / "out" / "kernel.py").read_text()


CUMSUM = '''
import torch
name = "cumsum"

def reference(x):  # a scan: Inductor's kernel passes a @triton.jit function of its module to tl.associative_scan
    return torch.cumsum(x, -1)

def inputs(device):
    return [(torch.randn(6, 40, generator=torch.Generator().manual_seed(0)).to(device),)]
'''


def test_a_scans_helper_function_is_copied_beside_its_kernels(tmp_path, interpreted, monkeypatch):
    # the timed configurations have their own tests: forced on the interpreter, a scan's take minutes
    monkeypatch.setattr(fam, "timeable", lambda spec, text="": False)
    calls = ", ".join(f"(torch.randn({rows}, {cols}, generator=torch.Generator().manual_seed({rows})),)"
                      for rows, cols in ((6, 40), (9, 33), (3, 130)))  # the spec's case, then sizes no case has
    assert _calls(tmp_path, CUMSUM, f"[{calls}]") == ["Tensor True"] * 3
    text = (tmp_path / "out" / "kernel.py").read_text()
    # one helper (the same text in every kernel's module), named as every kernel, case's or family's, calls it
    helpers = re.findall(r"^def (_triton_helper_fn_add0_[0-9a-f]{8})\(", text, re.M)
    assert len(helpers) == 1 and "_triton_helper_fn_add0)" not in text, helpers
    kernels = re.findall(r"^def (triton_\w+)\(", text, re.M)
    assert text.count(f"tl.associative_scan((tmp2,), 1, {helpers[0]})") == len(kernels) >= 3, kernels
    assert not re.search(r"^\s*(import|from)\s+tritune\b", text, re.M)


SCAN_MODULE = '''
import triton
import triton.language as tl

@triton.jit
def _larger(a, b):
    return tl.maximum(a, b)

@triton.jit
def _triton_helper_fn_add0(arg0_0, arg1_0):
    return {combine}

@triton.jit
def triton_per_scan_0(in_ptr0, out_ptr0, XBLOCK: tl.constexpr):
    x = tl.load(in_ptr0 + tl.arange(0, XBLOCK))
    tl.store(out_ptr0 + tl.arange(0, XBLOCK), tl.associative_scan(x, 0, _triton_helper_fn_add0))
'''

# the kernels emit_module._emitted made of SCAN_MODULE, each on the interpreter
SCANS = """
import sys, torch
kernels = {}
exec(open(sys.argv[1]).read(), kernels)
x = torch.randn(8, generator=torch.Generator().manual_seed(0))
for name in sys.argv[2:]:
    out = torch.empty_like(x)
    kernels[name][(1,)](x, out, XBLOCK=8)
    print(torch.allclose(out, x.cumsum(0)), torch.equal(out, x.cummax(0).values))
"""


def test_helpers_of_one_name_and_other_bodies_get_their_own_names_and_the_same_body_one(tmp_path):
    """Inductor names helpers per module: two kernels' modules may each hold a ``_triton_helper_fn_add0``.
    kernel.py holds each helper text once, those it calls first, under names that tell them apart."""
    functions, kernels = {}, []
    for combine in ("arg0_0 + arg1_0", "_larger(arg0_0, arg1_0)", "arg0_0 + arg1_0"):
        emitted, function, _, helpers = emit_module._emitted(SCAN_MODULE.format(combine=combine), "triton_per_scan_0")
        functions.update({**helpers, emitted: function})  # as emit() and _family() add them
        kernels.append(emitted)
    assert kernels[0] == kernels[2] != kernels[1]  # the same kernel text, other helpers: another kernel
    names = list(functions)
    assert [name.rsplit("_", 1)[0] for name in names] == ["_triton_helper_fn_add0", "triton_per_scan_0", "_larger",
                                                          "_triton_helper_fn_add0", "triton_per_scan_0"], names
    assert f"return {names[2]}(arg0_0, arg1_0)" in functions[names[3]] and names[3] in functions[names[4]]
    path = tmp_path / "scans.py"
    path.write_text("import triton\nimport triton.language as tl\n"
                    + "".join(f"\n\n@triton.jit\n{text}\n" for text in functions.values()))
    done = subprocess.run([sys.executable, "-c", SCANS, str(path), kernels[0], kernels[1]], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["True False", "False True"]


TWO_SIZES = '''
import torch
name = "bias_relu_two"

def reference(x, bias):
    return torch.relu(x + bias) * 2.0

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(rows, cols, generator=g).to(device), torch.randn(cols, generator=g).to(device))
            for rows, cols in ((6, 40), (12, 24))]
'''

# kernel.py of TWO_SIZES, tuned and not (TUNED), on sizes in a case's bucket and beside it
TUNED_CALLS = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("kernel", sys.argv[1])
kernel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel)
g = torch.Generator().manual_seed(1)
kernel.SPECIALIZE = 1
for tuned in (True, False):
    kernel.TUNED = tuned
    for rows, cols in ((7, 40), (13, 40), (5, 33), (16, 24), (3, 35)):
        x, bias = torch.randn(rows, cols, generator=g), torch.randn(cols, generator=g)
        if (rows, cols) != (3, 35) or tuned:
            print(tuned, rows, cols, torch.equal(kernel.run(x, bias), torch.relu(x + bias) * 2.0))
        else:
            print("specialized", sorted(sorted(seen) for seen in kernel._SIZED.values()))
"""


def _small_blocks(static, variant, launch, label):
    """Spec 0's bucket launches with XBLOCK=64 (Inductor's interpreter configuration is 256 for every case)."""
    config = real_case_config(static, variant, launch, label)
    long = config is not None and label == "spec 0"  # and a long origin: only the comment is cut
    return None if config is None else (({**config[0], "XBLOCK": 64}, config[1] + " x" * 150) if long else config)


from tritune.generate import emit as emit_module  # noqa: E402

real_case_config = emit_module._case_config


def _tuned(tmp_path: Path) -> tuple[dict, str]:
    (tmp_path / "spec.py").write_text(TWO_SIZES)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    return result, (tmp_path / "out" / "kernel.py").read_text()


def test_the_family_takes_its_cases_configuration_by_bucket_and_their_sizes_as_constants(tmp_path, interpreted,
                                                                                         monkeypatch):
    monkeypatch.setattr(emit_module, "_case_config", _small_blocks)
    result, text = _tuned(tmp_path)
    assert result["check"]["ok"], result["check"]["message"]
    assert result["family"]["tuned"] is True, result["family"]
    # 16 drawn, and beside each of the two cases: another first dim of its bucket, one of another bucket, another last dim
    assert result["family"]["sampled"] == 22, result["family"]
    # the bucket of spec 0 (6, 40) -> (8, 64), with its configuration; the general one elsewhere
    assert "if TUNED and (4 < in0.size(0) <= 8 and 32 < in0.size(1) <= 64 and 32 < in1.size(0) <= 64):  " \
           "# Inductor's autotuning for spec 0" in text
    assert re.search(r"\[\(-\(\(\(\w+\)\) // -\(64\)\), 1, 1\)\]", text)
    assert "bucket [8, 64], [64]: XBLOCK=64 num_warps=4 num_stages=1  (Inductor's autotuning for spec 0 x x" in text
    assert "bucket [16, 32], [32]: XBLOCK=256" in text  # spec 1's, the same as the general one: no branch of its own
    # the kernel specialized on the cases' hidden sizes, launched where the inputs repeat one
    assert re.search(r"def triton_poi_\w+\(in_ptr0, in_ptr1, out_ptr0, ks0: tl.constexpr, xnumel, XBLOCK: tl.constexpr\)",
                     text)
    assert re.search(r"_kernel = _sized\(triton_poi_\w+, triton_poi_\w+, \(\w+,\), \{\(24,\), \(40,\)\}\)", text)
    assert "as constants where the inputs give: ks0=24; ks0=40; and for the first SPECIALIZE others" in text
    done = subprocess.run([sys.executable, "-c", TUNED_CALLS, str(tmp_path / "out" / "kernel.py")],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [line.split()[-1] for line in lines[:9]] == ["True"] * 9
    # the cases' sizes (40, 24) are compiled in; of the others, 33 and then not 35 (SPECIALIZE = 1); none with TUNED off
    assert lines[9:] == ["specialized [[(33,)]]"]


def _caught(result: dict, text: str) -> None:
    assert result["check"]["ok"], result["check"]["message"]
    assert "made again without the tuning of the launchers for other sizes" in " ".join(result["notes"]), result["notes"]
    assert result["family"]["emitted"] is True and result["family"]["tuned"] is False
    assert "TUNED and" not in text and "tl.constexpr, xnumel" not in text


def test_a_wrong_kernel_for_the_cases_sizes_is_caught_and_the_tuning_left_out(tmp_path, interpreted, monkeypatch):
    real = fam.specialized

    def half(function, name, params):  # the specialized kernel covers half of the elements
        text = real(function, name, params)
        head, body = text.split("\n", 1)
        return f"{head}\n    xnumel = xnumel // 2\n{body}"

    monkeypatch.setattr(emit_module, "specialized", half)
    _caught(*_tuned(tmp_path))


def test_a_wrong_launch_in_a_cases_bucket_is_caught_and_the_tuning_left_out(tmp_path, interpreted, monkeypatch):
    real = fam._grid

    def halved(rule, constexprs, scalars):  # the bucket's launch (XBLOCK=64 only there) runs half the programs
        grid = real(rule, constexprs, scalars)
        if constexprs.get("XBLOCK") != 64:
            return grid
        x, rest = grid[1:-1].split(", ", 1)
        return f"(max(1, ({x}) // 2), {rest})"

    monkeypatch.setattr(emit_module, "_case_config", _small_blocks)
    monkeypatch.setattr(fam, "_grid", halved)
    _caught(*_tuned(tmp_path))


PINNED = '''
import os
import torch
import torch.nn.functional as F
name = "bias_relu_pinned"
SCALE = 2.0
unserved = "reference"
pinned = {"x": [-1], "bias": 0}

def reference(x, bias):
    return F.relu(x + bias) * SCALE

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(s, generator=g).to(device), torch.randn(s[-1], generator=g).to(device))
            for s in [(4, 6, 40), (8, 10, 24)]]
'''

# kernel.py of PINNED in a fresh interpreter without tritune: which inputs its kernels serve, what run() returns,
# how often it warns, and the operator inside a compiled model on inputs the kernels do not serve
FALLBACK = WITHOUT_TRITUNE + """
import warnings
want = lambda x, bias: torch.relu(x + bias) * 2.0
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for x, bias in ((torch.randn(5, 7, 40, generator=g), torch.randn(40, generator=g)),   # served
                    (torch.randn(3, 40, 5, generator=g).transpose(1, 2), torch.randn(40, generator=g)),  # strided
                    (torch.randn(5, 7, 33, generator=g), torch.randn(33, generator=g)),   # a pinned size no case has
                    (torch.randn(1, 7, 24, generator=g), torch.randn(24, generator=g)),   # a size of 1
                    (torch.randn(0, 7, 24, generator=g), torch.randn(24, generator=g))):  # empty
        print(kernel.serves(x, bias), torch.equal(kernel.run(x, bias), want(x, bias)))
print("warnings", len(caught), str(caught[0].message).split(":")[0] if caught else "")
compiled = torch.compile(lambda x, bias: kernel.op(x, bias) + 1, backend="aot_eager", fullgraph=True, dynamic=True)
for rows, cols in ((3, 33), (4, 40), (6, 24)):  # a pinned size no case has, then the cases' own hidden sizes
    x, bias = torch.randn(rows, 5, cols, generator=g), torch.randn(cols, generator=g)
    print("op", torch.equal(compiled(x, bias), want(x, bias) + 1))
"""


def test_strided_inputs_a_pinned_size_and_sizes_of_one_or_zero_go_where_the_spec_says(tmp_path, interpreted):
    (tmp_path / "spec.py").write_text(PINNED)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"], result["check"]["message"]
    text = (tmp_path / "out" / "kernel.py").read_text()
    # the sampled sizes keep the pinned hidden size at a case's: all are served but the single rows
    assert "if not _fake and (in0.size(2), in1.size(0),) not in {(24, 24), (40, 40)}:" in text
    cases = [c for c in result["check"]["cases"] if c["label"].startswith("family ")]
    assert cases and all(re.search(r"\[\d+,\d+,(24|40)\]", c["shapes"]) for c in cases), cases
    # the reference is copied with the import and the constant it reads, nothing else of the spec file
    assert "    import torch.nn.functional as F\n    SCALE = 2.0\n    def reference(x, bias):" in text
    assert "import os" not in text
    done = subprocess.run([sys.executable, "-c", FALLBACK, str(tmp_path / "out" / "kernel.py")], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["True True", "True True", "False True", "False True", "False True",
                                        "warnings 1 bias_relu_pinned", "op True", "op True", "op True"]
    # no case of kernel.py has a pinned size the spec's cases do not: the derived ones keep theirs too
    assert not re.search(r"\(\d+, \d+, (?!24\b|40\b)\d+\), \(", text.split("_CASES = {")[1].split("}")[0])
    # the sizes kernel.py leaves to the reference were checked through run(), the reference behind it
    fallback = [c for c in result["check"]["cases"] if c["ok"] is None]
    assert fallback and all(c["message"] == "not served by a kernel: run() returns the spec's reference, verified"
                            for c in fallback), fallback


def test_a_wrong_copy_of_the_reference_is_caught(tmp_path, interpreted, monkeypatch):
    from tritune.generate import spec as spec_module

    real = spec_module.reference_text
    monkeypatch.setattr(spec_module, "reference_text", lambda text: real(text).replace("* SCALE", "* SCALE * 1.5"))
    (tmp_path / "spec.py").write_text(PINNED)
    with pytest.raises(GenerateError, match="no verified kernel"):
        generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    saved = json.loads((tmp_path / "out" / "generate.json").read_text())
    assert "case 'family " in saved["notes"][-1] and "wrong" in saved["notes"][-1].lower(), saved["notes"]


def test_the_spec_says_pinned_and_unserved_right_or_in_one_line(tmp_path):
    from tritune.generate.spec import SpecError, load_spec

    for line, says in (('pinned = {"y": [0]}', "`pinned` names 'y', which is no argument of reference(x, bias)"),
                       ('pinned = {"x": "last"}', "`pinned['x']` must be a dim or a list of dims"),
                       ('pinned = [-1]', "`pinned` must be a dict"),
                       ('pinned = {"x": [3]}', "`pinned` names dims [3] of argument 0, which in case 'spec 0' is of rank 3"),
                       ('unserved = "eager"', "`unserved` must be one of 'error', 'reference', not 'eager'"),
                       # a copy of the reference that could differ from the spec's own: refused before anything runs
                       ("SCALE = 3.0", "the reference reads SCALE, which the spec does not bind once"),
                       ("from torch import relu as F", "the reference reads F, which the spec does not bind once"),
                       ("def reference(x, bias):\n    return x", "needs one undecorated def reference(...)")):
        (tmp_path / "spec.py").write_text(PINNED + "\n" + line + "\n")
        with pytest.raises(SpecError) as caught:
            load_spec(tmp_path / "spec.py")
        assert says in str(caught.value) and "\n" not in str(caught.value)
    (tmp_path / "spec.py").write_text(PINNED)
    spec = load_spec(tmp_path / "spec.py")
    assert spec.pinned == {0: (-1,), 1: (0,)} and spec.unserved == "reference" and spec.pinned_dims(0, 3) == {2}


def test_a_reference_reading_more_than_imports_and_constants_is_refused_in_one_line():
    from tritune.generate.spec import reference_text

    helper = "import torch\ndef helper(x):\n    return x\nLIMIT = torch.ones(3)\ndef reference(x):\n    return helper(x) + LIMIT\n"
    with pytest.raises(ValueError, match=r"the reference reads LIMIT, helper, which the spec does not bind once"):
        reference_text(helper)
    with pytest.raises(ValueError, match="needs one undecorated def reference"):
        reference_text("import functools\n@functools.cache\ndef reference(x):\n    return x\n")
    # a name that shadows a builtin is the module's: copied, not left to the builtin
    assert "    from torch import sum\n" in reference_text("from torch import sum\ndef reference(x):\n    return sum(x, 1)\n")
    with pytest.raises(ValueError, match="reads undefined_name"):
        reference_text("def reference(x):\n    return undefined_name(x)\n")


def test_a_bucket_takes_the_searchs_decision_for_its_case_where_kernel_py_can_hold_it(tmp_path, interpreted):
    from tritune.generate.emit import tuning
    from tritune.model.variant import Variant

    (tmp_path / "spec.py").write_text(TWO_SIZES)
    payload = {"spec": str(tmp_path / "spec.py"), "device": "cpu", "capture": str(tmp_path / "capture"),
               "derived": False, "interpret": True, "family": True}
    done = subprocess.run([sys.executable, "-c", "import json, sys; from tritune.generate.inductor import capture_job; "
                           "json.dump(capture_job(json.loads(sys.argv[1])), open(sys.argv[2], 'w'))",
                           json.dumps(payload), str(tmp_path / "body.json")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]  # a worker's job: in a process of its own
    body = json.loads((tmp_path / "body.json").read_text())
    family, = body["families"]
    ids = {plan["label"]: plan["steps"][0]["spec"]["id"] for plan in body["plans"]}
    decided = {ids["spec 0"]: Variant("search", options={"num_warps": 2}, constexprs={"XBLOCK": 32}),
               ids["spec 1"]: Variant("rewrite", constexprs={"XBLOCK": 64}, source="def other(): pass\n")}
    launch, = tuning(family, body["plans"], decided)
    by_bucket = {where: (config, came) for where, config, came in launch["buckets"]}
    config, came = by_bucket[((8, 64), (64,))]  # spec 0 (6, 40): the decision, baked in
    assert (config["XBLOCK"], config["num_warps"]) == (32, 2) and came == \
        "tritune's search on spec 0: num_warps=2, XBLOCK=32", came
    config, came = by_bucket[((16, 32), (32,))]  # spec 1 (12, 24): a rewritten source is its own case's alone
    assert config["XBLOCK"] == 256 and came.startswith("Inductor's autotuning for spec 1 (the search's decision "), came
    # the launch's size argument took 40 and 24 at the cases: those are compiled in
    assert launch["special"] == {"params": ["ks0"], "values": [(24,), (40,)]}
    assert tuning(family, body["plans"], {}) [0]["buckets"][0][2].startswith("Inductor's autotuning for spec ")


CENTER = '''
import torch
name = "center"

def reference(x):  # a mean: Inductor converts the row length, (ks0).to(tl.float32), in the family's kernel
    return x - x.mean(-1, keepdim=True)

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(6, 40, generator=g).to(device),), (torch.randn(12, 24, generator=g).to(device),)]
'''

ALIAS = '''
import torch
name = "alias"

def reference(x):  # the second output is a view of the input
    return torch.relu(x), x[:, 1]

def inputs(device):
    return [(torch.randn(6, 40, generator=torch.Generator().manual_seed(0)).to(device),)]
'''

INPLACE = '''
import torch
name = "inplace"
unserved = "reference"

def reference(x):
    return x.mul_(2)

def inputs(device):
    return [(torch.randn(6, 40, generator=torch.Generator().manual_seed(0)).to(device),)]
'''


def test_a_size_the_kernel_converts_is_specialized_through_tl_cast(tmp_path, interpreted):
    (tmp_path / "spec.py").write_text(CENTER)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"] and result["family"]["tuned"] is True, (result["check"]["message"], result["notes"])
    text = (tmp_path / "out" / "kernel.py").read_text()
    assert re.search(r"tmp\d+ = tl\.cast\(ks0, tl\.float32\)", text) and "ks0: tl.constexpr" in text


def test_outputs_that_alias_an_input_and_in_place_references_keep_their_callers_tensors(tmp_path, interpreted):
    # a family whose output is a view of an input never runs on a contiguous copy: it would be a view of the copy
    assert _calls(tmp_path, ALIAS, "[(torch.randn(7, 33),), (torch.randn(33, 7).t(),)]") == ["tuple True", "not served"]
    assert "    for family in ():\n        found = family(*dense," in (tmp_path / "out" / "kernel.py").read_text()
    # the spec's reference behind kernel.py runs on copies: an in-place reference does not change the caller's input
    (tmp_path / "spec.py").write_text(INPLACE)
    result = generate(tmp_path / "spec.py", tmp_path / "out2", QUIET, log=lambda line: None)
    assert result["check"]["ok"], result["check"]["message"]
    script = ("import importlib.util, sys, torch\nspec = importlib.util.spec_from_file_location('k', sys.argv[1])\n"
              "k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k)\n"
              "x = torch.ones(1, 7); out = k.run(x)\nprint(out is x, float(x.sum()), float(out.sum()))\n")
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script, str(tmp_path / "out2" / "kernel.py")],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "7.0", "14.0"]


@pytest.mark.parametrize("block", [512, 2048])
def test_a_wrong_configuration_among_the_timed_ones_is_caught_though_the_cpu_never_picks_it(tmp_path, interpreted,
                                                                                            monkeypatch, block):
    real = fam._grid

    def halved(rule, constexprs, scalars):  # one block of family.TIMED runs half its programs
        grid = real(rule, constexprs, scalars)
        if constexprs.get("XBLOCK") != block:
            return grid
        x, rest = grid[1:-1].split(", ", 1)
        return f"(max(1, ({x}) // 2), {rest})"

    assert block in {b for b, _ in fam.TIMED}
    monkeypatch.setattr(fam, "_grid", halved)
    result, text = _tuned(tmp_path)
    _caught(result, text)
    assert "_choice(" not in text
    assert "configuration " in " ".join(result["notes"]), result["notes"]


def test_kernel_py_times_each_configuration_once_per_bucket_and_keeps_the_fastest(tmp_path, interpreted):
    result, text = _tuned(tmp_path)
    assert result["check"]["ok"], result["check"]["message"]
    # every configuration a launch may pick was verified, forced in turn: Inductor's (XBLOCK=256 num_warps=4
    # under the interpreter) and the five other ones of TIMED
    assert "if _i == 0:  # XBLOCK=256 num_warps=4\n" in text and (256, 4) in fam.TIMED
    forced = [c for c in result["check"]["cases"] if c["label"].startswith("configuration ")]
    assert [c["label"] for c in forced] == [f"configuration {k}{sized} (beyond)" for k in range(len(fam.TIMED))
                                            for sized in ("", " specialized")]  # the general kernel, the specialized
    assert all(c["ok"] for c in forced) and "6 timed configurations forced (12 runs)" in result["check"]["message"]
    rows, cols = map(int, re.match(r"f32\[(\d+),(\d+)\]", forced[0]["shapes"]).groups())
    assert rows > 2 * 12 and rows * cols >= 1 << 12, forced[0]  # past every case's first dim, and large (CPU)
    assert cols == 23, forced[0]  # the largest case's 24 made odd: no block divides a row or the elements
    assert re.search(r"_i = _choice\('_family_0:0', \(\w+, \), \d\)", text)
    script = WITHOUT_TRITUNE + """
import triton.testing
timed = []
def do_bench(fn, **kwargs):  # a fake GPU clock: the third configuration is the fastest, the fifth does not compile
    timed.append(len(timed))
    if len(timed) == 5:
        from triton.runtime.errors import OutOfResources
        raise OutOfResources(1 << 20, 1 << 16, "shared memory")
    return 1.0 if len(timed) != 3 else 0.5
triton.testing.do_bench = do_bench
torch.cuda.is_available, torch.cuda.is_current_stream_capturing = (lambda: True), (lambda: False)  # a GPU, as if
ran = []
launches = tuple((lambda k=k: ran.append(k)) for k in range(6))
print(kernel._choice("k", (1000,), 6), kernel._tune("k", (1000,), launches, True), kernel._choice("k", (1000,), 6),
      kernel._choice("k", (1024,), 6), kernel._choice("k", (1025,), 6), len(timed))
print(kernel._tune("c", (5,), launches, False), kernel._choice("c", (5,), 6), len(timed))  # no GPU: the first, untimed
torch.cuda.is_current_stream_capturing = lambda: True  # inside a CUDA graph capture: the first, and nothing kept
print(kernel._tune("g", (5,), launches, True), kernel._choice("g", (5,), 6), len(timed))
kernel.AUTOTUNE = False
print(kernel._choice("k", (1000,), 6))
kernel._FORCE = 9
print(kernel._choice("k", (1000,), 6))
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out" / "kernel.py")], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    # not chosen yet; timed: the third (index 2); kept for the bucket of 1000 (and 1024), not for 1025's; six timed
    assert done.stdout.splitlines() == ["None 2 2 2 None 6", "0 0 6", "0 None 6", "0", "5"]


def _center(tmp_path: Path) -> tuple[dict, str]:
    (tmp_path / "spec.py").write_text(CENTER)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    return result, (tmp_path / "out" / "kernel.py").read_text()


def test_a_looped_reduction_times_its_blocks_per_bucket_of_rows_and_row_length(tmp_path, interpreted):
    result, text = _center(tmp_path)
    assert result["check"]["ok"], result["check"]["message"]
    configurations = len(fam.TIMED_LOOPED) + 1
    assert re.search(rf"_i = _choice\('_family_0:0', \(\w+, \w+, \), {configurations}\)", text), text[-4000:]
    assert "elif _i == 7:  # XBLOCK=16 R0_BLOCK=64 num_warps=4" in text
    forced = [c for c in result["check"]["cases"] if c["label"].startswith("configuration ")]
    assert len(forced) == 2 * configurations and all(c["ok"] for c in forced), forced
    assert f"{configurations} timed configurations forced" in result["check"]["message"]
    assert forced[0]["shapes"].endswith(",23]"), forced[0]  # each row's tail is masked in every block
    # one choice per bucket of (rows, row length): another row length is timed again
    script = WITHOUT_TRITUNE + """
import triton.testing
timed = []
triton.testing.do_bench = lambda fn, **kwargs: timed.append(1) or (0.5 if len(timed) % 8 == 4 else 1.0)
torch.cuda.is_available, torch.cuda.is_current_stream_capturing = (lambda: True), (lambda: False)
launches = tuple((lambda: None) for k in range(8))
print(kernel._tune("k", (100, 40), launches, True), kernel._choice("k", (128, 33), 8), kernel._choice("k", (128, 65), 8))
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out" / "kernel.py")], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["3", "3", "None"]


def test_a_reduction_block_that_drops_an_odd_tail_is_caught_on_the_forced_size(tmp_path, interpreted, monkeypatch):
    real = fam._Translator._launch_text

    def tail_dropped(self, name, spec, config, scalars, args):  # one timed block sums all but an odd row's last element
        if config.get("R0_BLOCK") == 64 and "r0_numel" in scalars:
            r0 = scalars["r0_numel"]
            args = [f"({a} - {a} % 2)" if a == r0 else a for a in args]
        return real(self, name, spec, config, scalars, args)

    assert (16, 64, 4) in fam.TIMED_LOOPED
    monkeypatch.setattr(fam._Translator, "_launch_text", tail_dropped)
    result, text = _center(tmp_path)
    _caught(result, text)
    assert "configuration 7" in " ".join(result["notes"]), result["notes"]


TWO_DTYPES = '''
import torch
name = "two_dtypes"

def reference(x, bias):
    return torch.relu(x + bias) * 2.0

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(6, 40, generator=g).to(device, dtype), torch.randn(40, generator=g).to(device, dtype))
            for dtype in (torch.float32, torch.float64)]
'''


def test_each_dtype_patterns_family_has_its_timed_configurations_forced(tmp_path, interpreted):
    # a family per dtype pattern, each with a timed launch: each configuration is forced on a size of each
    (tmp_path / "spec.py").write_text(TWO_DTYPES)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"] and result["family"]["tuned"] is True, (result["check"]["message"], result["notes"])
    text = (tmp_path / "out" / "kernel.py").read_text()
    assert "_TIMED = ('_family_0:0', '_family_1:0')" in text
    forced = [c for c in result["check"]["cases"] if c["label"].startswith("configuration ")]
    assert {c["shapes"].split("[")[0] for c in forced} == {"f32", "f64"} and all(c["ok"] for c in forced)
    assert "6 timed configurations forced (24 runs)" in result["check"]["message"]  # 2 sizes, 2 kernels each


def test_a_specialized_kernel_wrong_under_one_timed_configuration_is_caught(tmp_path, interpreted, monkeypatch):
    # at run time a bigger batch with a case's inner sizes takes the specialized kernel with the timed configuration
    real = fam.specialized

    def wrong_at_512(function, name, params):  # the specialized kernel covers half of the elements at XBLOCK=512
        text = real(function, name, params)
        head, body = text.split("\n", 1)
        return f"{head}\n    if XBLOCK == 512:\n        xnumel = xnumel // 2\n{body}"

    assert 512 in {b for b, _ in fam.TIMED}
    monkeypatch.setattr(emit_module, "specialized", wrong_at_512)
    result, text = _tuned(tmp_path)
    _caught(result, text)
    assert "specialized (beyond)" in " ".join(result["notes"]), result["notes"]


SUM_MIDDLE = '''
import torch
name = "sum_middle"

def reference(x):  # the reduced dim is not the last one
    return x.sum(1)

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(6, 64, 10, generator=g).to(device),), (torch.randn(3, 32, 12, generator=g).to(device),)]
'''


def test_a_block_that_drops_an_odd_tail_of_a_middle_dim_is_caught(tmp_path, interpreted, monkeypatch):
    real = fam._Translator._launch_text

    def tail_dropped(self, name, spec, config, scalars, args):  # one timed block sums all but an odd row's last element
        if (config.get("XBLOCK"), config.get("R0_BLOCK")) == (16, 64) and "r0_numel" in scalars:  # not Inductor's
            r0 = scalars["r0_numel"]
            args = [f"({a} - {a} % 2)" if a == r0 else a for a in args]
        return real(self, name, spec, config, scalars, args)

    monkeypatch.setattr(fam._Translator, "_launch_text", tail_dropped)
    (tmp_path / "spec.py").write_text(SUM_MIDDLE)
    result = generate(tmp_path / "spec.py", tmp_path / "out", QUIET, log=lambda line: None)
    text = (tmp_path / "out" / "kernel.py").read_text()
    _caught(result, text)
    assert "'configuration 7 (beyond)' (f32[13,63,9])" in " ".join(result["notes"]), result["notes"]  # 64 made odd



GLU_ROWS = '''
import torch
name = "glu_rows"

def reference(x):  # GLU halves dim 1: an odd dim 1 is refused
    return torch.nn.functional.glu(x, dim=1).sum(-1)

def inputs(device):
    return [(torch.randn(6, 64, 256, generator=torch.Generator().manual_seed(0)).to(device),)]
'''


def test_the_forced_size_keeps_the_odd_dims_the_reference_takes(tmp_path):
    # every even dim made odd is refused (dim 1 must be even): the next size has the last dim odd, not none
    from tritune.generate.derive import beyond
    from tritune.generate.spec import load_spec

    (tmp_path / "spec.py").write_text(GLU_ROWS)
    spec = load_spec(tmp_path / "spec.py")
    groups = beyond(spec, spec.cases("cpu"))
    assert [[tuple(c.tensors[0].shape) for c in group] for group in groups] == [[(13, 64, 255), (13, 64, 256)]]
