"""The sandbox's AST check: real Triton replies pass, each forbidden construct fails with its reason."""
from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import import_interpreted
from tritune.llm.sandbox import RULES, Unsafe, allowed_imports, check

HEAD = "import triton\nimport triton.language as tl\n"

ADD = HEAD + '''
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)
'''

# the kernel comes before its helper: a jit function may call one defined further down
HELPER = HEAD + '''
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, _twice(tl.load(x_ptr + offs, mask=mask)), mask=mask)

@triton.jit
def _twice(x):
    return x * 2
'''

TUNED = HEAD + '''
CONFIGS = [triton.Config({"BLOCK": 256}, num_warps=4, pre_hook=None)]

@triton.autotune(
    configs=[triton.Config({"BLOCK": b}, num_warps=w, num_stages=s)
             for b in [128, 256] for w in (4, 8) for s in range(2, 4) if b * w <= 2048],
    key=["n"], reset_to_zero=["out_ptr"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0,
                    "R": lambda args: triton.next_power_of_2(max(args["x_ptr"].numel(), 1))})
@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, R: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit(do_not_specialize=["n"], debug=False)
def other_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass
'''

CONSTANTS = HEAD + '''import math
BLOCK = 128
HALF = BLOCK // 2
EPS: tl.constexpr = tl.constexpr(1e-6)
SHAPE = (BLOCK, HALF)
DTYPE = tl.float16
TAU = 2 * math.pi if BLOCK > 0 else math.tau

@triton.jit
def norm_kernel(x_ptr, n, B: tl.constexpr = BLOCK, dtype: tl.constexpr = tl.float32):
    x = tl.load(x_ptr + tl.arange(0, B)).to(DTYPE)
    tl.store(x_ptr + tl.arange(0, B), x / (tl.sum(x * x, axis=0) + EPS))
'''

FROM_IMPORTS = '''"""A reply that imports by name."""
from triton import language as tl
from triton import jit, cdiv
from triton.language import constexpr

@jit
def k(x_ptr, n, BLOCK: constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), dtype=tl.float32))
'''

MODULE = ADD + '''
import torch

def run(x: torch.Tensor, y: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    out = torch.empty_like(x, dtype=dtype)
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    add_kernel[grid](x, y, out, n, BLOCK=64)
    return out
'''

LIBDEVICE = HEAD + '''from triton.language.extra import libdevice

@triton.jit
def exp_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.extra.cuda.libdevice.exp(tl.load(x_ptr + offs))
    tl.store(x_ptr + offs, libdevice.exp(tl.math.exp(x)))
'''

# a reply of functions alone: tl and triton are the names of the module it is spliced into
FUNCTIONS_ONLY = '''
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
'''


@pytest.mark.parametrize("code", [ADD, HELPER, TUNED, CONSTANTS, FROM_IMPORTS, MODULE, LIBDEVICE,
                                  FUNCTIONS_ONLY],
                         ids=["add", "helper", "autotune", "constants", "from-imports", "module",
                              "libdevice", "functions-only"])
def test_real_replies_pass(code):
    check(code)


@pytest.mark.parametrize("code, name", [(MODULE, "module"), (HELPER, "helper")])
def test_passing_samples_are_real_kernels(tmp_path, code, name):
    """The accepted samples are kernels that run (on the CPU, interpreted), not strings that
    merely look like them."""
    path = tmp_path / f"reply_{name}.py"
    path.write_text(code)
    module = import_interpreted(path, f"reply_{name}")
    x, y = torch.arange(100.0), torch.full((100,), 0.5)
    if name == "module":
        torch.testing.assert_close(module.run(x, y), x + y)
    else:
        out = torch.empty_like(x)
        module.scale_kernel[(2,)](x, out, 100, BLOCK=64)
        torch.testing.assert_close(out, 2 * x)


def kernel(body: str) -> str:
    """A reply whose kernel body is ``body``."""
    return HEAD + "\n@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n" \
        + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n"


def helper(body: str) -> str:
    """A reply with a plain helper function whose body is ``body``."""
    return HEAD + "\ndef helper(x):\n" + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n"


REJECTED = [
    ("import-os", "import os\n", 1, "import of os is not allowed (allowed: triton, triton.language, "
                                    "torch, math)"),
    ("from-os", HEAD + "from os import path\n", 3, "import of os is not allowed"),
    ("import-as", "import numpy as np\n", 1, "import of numpy is not allowed"),
    ("star", "from triton.language import *\n", 1, "import * is not allowed"),
    ("relative", "from . import x\n", 1, "a relative import is not allowed"),
    ("triton-runtime-import", "from triton import runtime\n", 1,
     "import of triton.runtime is not allowed (it reaches Triton's launcher"),
    ("torch-load-import", "from torch import load\n", 1, "import of torch.load is not allowed"),
    ("import-in-function", helper("import subprocess\nreturn x"), 5,
     "an import inside a function is not allowed"),
    ("dunder-import", helper('return __import__("os")'), 5, "name __import__ is not allowed"),
    ("open", helper('return open("/tmp/x").read()'), 5, "name open is not allowed"),
    ("eval", helper('return eval("1 + 1")'), 5, "name eval is not allowed"),
    ("exec", kernel('exec("x = 1")'), 6, "name exec is not allowed"),
    ("getattr", helper('return getattr(tl, "x")'), 5, "name getattr is not allowed"),
    ("class-attr", helper("return x.__class__"), 5, "attribute __class__ is not allowed"),
    ("bases", helper("return ().__class__.__bases__"), 5, "attribute __class__ is not allowed"),
    ("dunder-name", helper("return __builtins__"), 5, "name __builtins__ is not allowed"),
    ("dunder-file", helper("return __file__"), 5, "dunder name __file__ is not allowed"),
    ("dunder-def", HEAD + "def __getattr__(name):\n    return name\n", 3,
     "dunder name __getattr__ is not allowed"),
    ("torch-load", "import torch\n" + helper('return torch.load("w.pt")'), 6,
     "torch.load is not allowed (it reads files)"),
    ("torch-save", "import torch\n" + helper('torch.save(x, "w.pt")'), 6,
     "torch.save is not allowed (it writes files)"),
    ("torch-C", "import torch\n" + helper("return torch._C"), 6, "private attribute _C"),
    ("torch-ops", "import torch\n" + helper("return torch.ops.aten.add(x, x)"), 6,
     "torch.ops.aten.add is not allowed (it reaches native operators)"),
    ("torch-hub", "import torch\n" + helper('return torch.hub.load("a/b", "m")'), 6,
     "torch.hub.load is not allowed (it downloads code)"),
    ("cpp-extension", "import torch\n" + helper("return torch.utils.cpp_extension.load"), 6,
     "torch.utils.cpp_extension.load is not allowed (it compiles and loads native code)"),
    ("torch-through-module", "import torch\n" + helper("return torch.nn.modules.module.torch"),
     6, "it reaches module torch through torch.nn.modules.module"),
    ("stdlib-through-tl", kernel("tl.core.inspect.getsource(k)"), 6,
     "it reaches module inspect through triton.language.core"),
    ("torch-in-kernel", "import torch\n" + kernel("y = torch.zeros(4)"), 7,
     "kernel k refers to torch (torch): a kernel that calls torch is a fallback"),
    ("torch-alias-in-kernel", "from torch import zeros\n" + kernel("y = zeros(4)"), 7,
     "kernel k refers to torch (zeros)"),
    ("plain-function-in-kernel", helper("return x") + kernel("y = helper(1)")[len(HEAD):], 9,
     "kernel k uses helper, which is not a @triton.jit function"),
    ("triton-runtime-driver", kernel("d = triton.runtime.driver.active"), 6,
     "triton.runtime.driver.active is not allowed (it reaches Triton's launcher, driver and caches)"),
    ("triton-knobs", helper("triton.knobs.cache.dir = x"), 5,
     "assigning to triton.knobs.cache.dir is not allowed"),
    ("triton-knobs-read", helper("return triton.knobs.cache.dir"), 5,
     "triton.knobs.cache.dir is not allowed (it changes Triton's settings and hooks)"),
    ("triton-testing", helper("return triton.testing.do_bench(x)"), 5,
     "it runs benchmarks and processes"),
    ("custom-decorator", HEAD + "def mark(f):\n    return f\n\n@mark\n@triton.jit\ndef k(x):\n"
     "    pass\n", 6, "decorator mark is not allowed (only triton.jit, triton.autotune and "
                     "triton.heuristics: a decorator runs at import)"),
    ("functools-decorator", HEAD + "@triton.jit\n@cache\ndef k(x):\n    pass\n", 4,
     "decorator cache is not allowed"),
    ("autotune-hook", HEAD + '@triton.autotune(configs=[], key=[], pre_hook=lambda a: None)\n'
     '@triton.jit\ndef k(x):\n    pass\n', 3, "triton.autotune's argument pre_hook is not allowed"),
    ("config-hook", HEAD + '@triton.autotune(configs=[triton.Config({}, pre_hook=print)], '
     'key=[])\n@triton.jit\ndef k(x):\n    pass\n', 3,
     "triton.Config's argument pre_hook is not allowed"),
    ("heuristic-torch", HEAD + 'import torch\n@triton.heuristics({"B": lambda a: '
     'a["o"].copy_(torch.ones(1))})\n@triton.jit\ndef k(o, B: tl.constexpr):\n    pass\n', 4,
     "a heuristic may not call a['o'].copy_"),
    ("autotune-without-jit", HEAD + '@triton.autotune(configs=[], key=[])\ndef k(x):\n'
     '    pass\n', 4, "triton.autotune and triton.heuristics must decorate a @triton.jit"),
    ("print", HEAD + 'print("x")\n', 3, "a call at module level is not allowed"),
    ("with", HEAD + "with x:\n    pass\n", 3, "a with statement at module level is not allowed"),
    ("try", HEAD + "try:\n    pass\nexcept Exception:\n    pass\n", 3,
     "a try statement at module level is not allowed"),
    ("class", HEAD + "class A:\n    pass\n", 3, "a class at module level is not allowed"),
    ("lambda", HEAD + "f = lambda: 1\n", 3, "the value of f must be a constant"),
    ("call-constant", HEAD + "N = len([1])\n", 3, "the value of N must be a constant"),
    ("rebind-tl", HEAD + "tl = 1\n", 3, "rebinding tl is not allowed (bound on line 2)"),
    ("rebind-usual-name", "tl = 1\n", 1, "rebinding tl is not allowed (it names triton.language)"),
    ("rebind-import", HEAD + "import math as triton\n", 3, "rebinding triton is not allowed"),
    ("rebind-function", ADD + "add_kernel = 1\n", 10, "rebinding add_kernel is not allowed"),
    ("rebind-in-function", helper("tl = x\nreturn tl"), 5,
     "rebinding tl is not allowed (it names an import or a function)"),
    ("module-as-value", "import torch\n" + helper("m = torch\nreturn m.load(x)"), 6,
     "module torch may only be used as torch.name"),
    ("monkeypatch", helper("tl.load = x"), 5, "assigning to tl.load is not allowed"),
    ("global", helper("global N\nN = x"), 5, "global is not allowed"),
    ("nonlocal", helper("def g():\n    nonlocal x\n    x = 1\nreturn g"), 6,
     "nonlocal is not allowed"),
    ("main", HEAD + 'if __name__ == "__main__":\n    pass\n', 3,
     'an if __name__ == "__main__": block is not allowed'),
    ("default-call", HEAD + "def run(x, n=len([1, 2])):\n    return x\n", 3,
     "the default value of n must be a constant"),
    ("annotation-call", HEAD + "@triton.jit\ndef k(x: tl.constexpr(print(1))):\n    pass\n", 4,
     "the annotation of x must be a constant, a type or tl.constexpr"),
    ("str-format", helper('return "{0.__globals__}".format(helper)'), 5,
     "str.format is not allowed"),
    ("system-attr", "import torch\n" + helper('return torch.os.system("id")'), 6,
     "attribute os is not allowed"),
    ("interpreter-array", kernel('x_ptr.handle.data.tofile("out")'), 6,
     "attribute handle is not allowed (it reaches the interpreter's arrays)"),
    ("torch-from-import-chain", "from torch import nn\n" + helper("return nn.modules.module.torch"),
     6, "it reaches module torch through torch.nn.modules.module"),
    ("syntax", "def k(:\n    pass\n", 1, "does not parse: "),
]


@pytest.mark.parametrize("code, line, reason", [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED])
def test_forbidden_constructs_are_rejected_with_their_reason(code, line, reason):
    with pytest.raises(Unsafe) as caught:
        check(code)
    assert reason in caught.value.reason, caught.value.reason
    assert caught.value.line == line
    assert str(caught.value) == f"line {line}: {caught.value.reason}"
    assert "\n" not in str(caught.value)


def test_the_first_problem_is_the_one_reported():
    with pytest.raises(Unsafe, match=r"^line 1: import of os"):
        check("import os\nimport sys\n")
    with pytest.raises(Unsafe, match=r"^line 5: name open"):
        check(HEAD + "\ndef f():\n    return open('a'), eval('b')\n")


def test_unsafe_is_a_value_error_that_pickles_and_the_allowed_imports_are_the_issues():
    assert issubclass(Unsafe, ValueError)
    copy = pickle.loads(pickle.dumps(Unsafe(3, "import of os is not allowed")))
    assert (copy.line, copy.reason, str(copy)) == (3, "import of os is not allowed",
                                                   "line 3: import of os is not allowed")
    assert allowed_imports() == ("triton", "triton.language", "torch", "math")
    assert "triton, triton.language, torch, math" in RULES


SENTINEL_REPLY = HEAD + '''
def mark(fn):
    open({path!r}, "w").write("ran")
    return fn

@mark
@triton.jit
def k(x_ptr):
    pass
'''


def test_a_reply_that_would_write_a_file_is_rejected_without_running(tmp_path):
    """The reply writes its sentinel at import (the decorator runs then): run as plain Python it
    does, and check() rejects it without writing anything."""
    sentinel = tmp_path / "sentinel"
    code = SENTINEL_REPLY.format(path=str(sentinel))
    with pytest.raises(Unsafe, match="^line 5: name open is not allowed"):
        check(code)
    with pytest.raises(Unsafe, match="^line 8: decorator mark is not allowed"):
        check(code.replace("open(", "print("))
    assert not sentinel.exists()

    reply = tmp_path / "reply.py"
    reply.write_text(code)
    subprocess.run([sys.executable, str(reply)], check=True, cwd=tmp_path, timeout=60)
    assert sentinel.read_text() == "ran"  # the sample is a real threat, not a dud
