"""The allowlist a model's reply passes before anything of it runs: real kernels pass (the suite's,
Inductor's, seed-004 style fused ones), every bypass of issue 23 and its family is refused with
its reason, and a stored variant is checked against the captured file it was spliced into."""
from __future__ import annotations

import ast
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import INDUCTOR_POI, import_interpreted
from tritune.allowlist import sandbox
from tritune.allowlist.sandbox import RULES, Unsafe, allowed_imports, check, check_variant_source

REPO = Path(__file__).resolve().parents[2]
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

# seed 004 style: one row per program, fp32 statistics, a jit combine function for tl.reduce
FUSED = HEAD + '''import math
from triton.language.extra import libdevice
"""softmax, layernorm and rmsnorm fused kernels."""
EPS: tl.constexpr = tl.constexpr(1e-6)
LOG2E = 1.4426950408889634
NEG = -1.0

@triton.jit
def _add(a, b):
    return a + b

@triton.jit
def softmax_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp2(x * LOG2E)
    den = tl.reduce(num, 0, _add)
    tl.store(out_ptr + row * stride + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)

@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stride, N, eps, BLOCK: tl.constexpr = 1024):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in tl.range(0, N, BLOCK, num_stages=2):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    var = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0).to(tl.float32)
        var += tl.where(cols < N, (x - mean) * (x - mean), 0.0)
    rstd = libdevice.rsqrt(tl.sum(var, axis=0) / N + eps)
    for off in tl.static_range(0, 2):
        cols = off * BLOCK + tl.arange(0, BLOCK)
        y = (tl.load(x_ptr + row * stride + cols, mask=cols < N) - mean) * rstd
        y = y * tl.load(w_ptr + cols, mask=cols < N) + tl.load(b_ptr + cols, mask=cols < N)
        tl.store(y_ptr + row * stride + cols, y, mask=cols < N)

@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * N + cols, mask=cols < N, other=0.0)
    rms = tl.math.rsqrt(tl.sum(x * x, 0) / N + EPS) * math.pi / math.pi
    if x.dtype.is_fp16() or x.dtype.primitive_bitwidth == 16:
        rms = rms.to(tl.float32)
    tl.store(y_ptr + tl.program_id(0) * N + cols, x * rms * tl.load(w_ptr + cols), mask=cols < N)

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr = 8):
    pid = tl.program_id(axis=0)
    n_m, n_n = tl.cdiv(M, BM), triton.cdiv(N, BN)
    pid_m = pid // n_n
    pid_n = pid % n_n
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a = a_ptr + (rm[:, None] * sam + rk[None, :] * sak)
    b = b_ptr + (rk[:, None] * sbk + rn[None, :] * sbn)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(tl.load(a, mask=rk[None, :] < K - k * BK, other=0.0),
                     tl.load(b, mask=rk[:, None] < K - k * BK, other=0.0), acc)
        a += BK * sak
        b += BK * sbk
    c = acc.to(tl.float16)
    assert BM >= 16, "tiles of 16 rows at least"
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, c, mask=(rm < M)[:, None] & (rn < N)[None, :])
    tl.static_assert(BK >= 16)
    tl.device_assert(M > 0)
    x = tl.maximum(acc, 0.0, propagate_nan=tl.PropagateNan.ALL)
    t = x.T.reshape(BN * BM).trans()
    s = tl.max(x, axis=1, keep_dims=True).shape[0] + min(BM, BN) + max(1, int(2.0)) + len(x.shape)
    tl.store(c_ptr + tl.arange(0, BM), tl.extra.cuda.libdevice.exp(tl.sum(x, 1)) + s + tl.sum(t, 0))
'''

FUNCTIONS_ONLY = '''
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs))
'''

INDUCTOR = sorted((REPO / "examples" / "inductor").glob("triton_*.py"))


def jit_functions(text: str) -> str:
    """The @triton.jit functions of a file, decorators and all: what a reply of functions holds."""
    lines = text.splitlines(keepends=True)
    return "\n".join("".join(lines[min(d.lineno for d in n.decorator_list) - 1: n.end_lineno])
                     for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.decorator_list)


@pytest.mark.parametrize("code", [ADD, HELPER, FUSED], ids=["add", "helper", "fused"])
def test_real_replies_pass(code):
    check(code)
    check(code, context=ADD)


def test_the_suites_kernels_pass_alone_and_with_their_file_as_context():
    files = sorted((REPO / "benchmarks" / "suite" / "kernels").glob("[a-z]*.py")) + [REPO / "tests" / "kernels.py"]
    assert len(files) > 20
    for path in files:
        text = path.read_text()
        check(HEAD + jit_functions(text))
        check(jit_functions(text), context=text)


@pytest.mark.parametrize("path", INDUCTOR, ids=[p.stem[:24] for p in INDUCTOR])
def test_inductor_kernels_pass_with_their_file_as_context(path):
    """libdevice, triton_helpers and tl_math are the file's names; its decorators (filename=__file__
    and all) are the user's code, kept unchanged, and pass as such."""
    text = path.read_text()
    check(jit_functions(text), context=text)
    with pytest.raises(Unsafe, match="decorator triton_heuristics|dunder"):
        check(HEAD + jit_functions(text).replace("'x': ", "'y': ", 1), context=text)


def test_a_reply_of_functions_uses_the_captured_files_names_only_with_context():
    with pytest.raises(Unsafe, match="^line 2: decorator triton.jit is not allowed|not allowed"):
        check(FUNCTIONS_ONLY)
    check(FUNCTIONS_ONLY, context=ADD)
    check(FUNCTIONS_ONLY.replace("tl.load(x_ptr + offs)", "_twice(tl.load(x_ptr + offs))"), context=HELPER)


@pytest.mark.parametrize("code, name", [(ADD, "add"), (HELPER, "helper")], ids=["add", "helper"])
def test_passing_samples_are_real_kernels(tmp_path, code, name):
    """The accepted samples are kernels that run (on the CPU, interpreted), not strings that
    merely look like them."""
    path = tmp_path / f"reply_{name}.py"
    path.write_text(code)
    module = import_interpreted(path, f"reply_{name}")
    x, y = torch.arange(100.0), torch.full((100,), 0.5)
    out = torch.empty_like(x)
    if name == "add":
        module.add_kernel[(2,)](x, y, out, 100, BLOCK=64)
        torch.testing.assert_close(out, x + y)
    else:
        module.scale_kernel[(2,)](x, out, 100, BLOCK=64)
        torch.testing.assert_close(out, 2 * x)


def kernel(body: str, head: str = HEAD) -> str:
    """A reply whose kernel body is ``body`` (the body's first line is line 5)."""
    return head + "@triton.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n" \
        + textwrap.indent(textwrap.dedent(body).strip(), "    ") + "\n"


JIT = "\n@triton.jit\ndef k(x_ptr):\n    pass\n"

# (id, code, line, reason): every bypass of issue 23, then its family
REFUSED = [
    # issue 23's bypasses, as they were sent
    ("alias-chain", kernel('c = tl.core\ni = c.inspect\ni.getattr_static(i, "o" + "s").system("id")'), 5,
     "tl.core is not allowed (not in Triton's public kernel API)"),
    ("subscript-list", kernel('[tl.core][0].inspect.getsource(k)'), 5, "subscript of [tl.core] is not allowed"),
    ("walrus", kernel('(c := tl.core).inspect'), 5, "an assignment expression (:=) is not allowed"),
    ("generator-frame", kernel('b = (q for q in [1]).gi_frame.f_builtins["__import__"]("os")'), 5,
     "a generator is not allowed in a kernel"),
    ("frame-of-a-value", kernel('b = x_ptr.gi_frame.f_builtins["__import__"]("os")'), 5,
     "attribute gi_frame is not allowed"),
    ("type-del", kernel('K = type("K", (), {"__del__": print})'), 5, "name type is not allowed in kernel k"),
    ("module-alias", kernel('lang = triton.language\nlang.core.knobs.pathlib.Path("x").write_text("y")'), 5,
     "triton.language is a module: use one of its functions"),
    ("heuristics-default", HEAD + '@triton.heuristics({"B": lambda args, d=print("ran"): 1024})' + JIT, 3,
     "decorator triton.heuristics({'B': lambda args, d=print('ran'): 1024}) is not allowed"),
    # aliases and modules as values
    ("module-as-value", kernel("m = tl\nm.core"), 5, "module tl may only be used as tl.member"),
    ("module-to-function", kernel("tl.store(x_ptr, tl)"), 5, "module tl may only be used as tl.member"),
    ("fn-as-attribute", kernel("f = tl.load\nf.fn.__globals__"), 6, "attribute __globals__ is not allowed"),
    ("fn-attribute", kernel("tl.load.cache_key"), 5, "tl.load.cache_key is not allowed"),
    ("call-a-local", kernel("f = tl.load\nf(x_ptr)"), 6, "calling f is not allowed (a parameter or local"),
    ("call-a-param", kernel("x_ptr(1)"), 5, "calling x_ptr is not allowed"),
    ("triton-runtime", kernel("d = triton.runtime.driver.active"), 5, "triton.runtime is not allowed"),
    ("triton-knobs", kernel("triton.knobs.cache.dir"), 5, "triton.knobs is not allowed"),
    ("triton-compiler", kernel("triton.compiler.compile(k)"), 5, "triton.compiler is not allowed"),
    ("tl-semantic", kernel("tl.semantic.add"), 5, "tl.semantic is not allowed"),
    ("tl-extra-module", kernel("tl.extra.pkgutil.walk_packages()"), 5, "tl.extra.pkgutil is not allowed"),
    ("tl-extra-cuda-utils", kernel("tl.extra.cuda.utils.globaltimer()"), 5, "tl.extra.cuda.utils is not allowed"),
    ("tl-math-core", kernel("tl.math.core.inspect"), 5, "tl.math.core is not allowed"),
    ("tl-tensor-class", kernel("t = tl.tensor(x_ptr.handle, tl.float32)"), 5, "tl.tensor is not allowed"),
    ("tl-as-module-value", kernel("m = tl.math"), 5, "tl.math is a module"),
    ("libdevice-core", kernel("libdevice.core.extern_elementwise", HEAD + "from triton.language.extra import "
                              "libdevice\n") + "", 6, "libdevice.core is not allowed"),
    ("math-os", "import math\n" + kernel("math.sys.modules"), 6, "math.sys is not allowed"),
    ("math-function", "import math\n" + kernel("math.log(2.0)"), 6, "math.log is not allowed"),
    # inline asm and extern calls
    ("inline-asm", kernel('tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [n], dtype=tl.int32, '
                          'is_pure=True, pack=1)'), 5,
     "tl.inline_asm_elementwise is not allowed (it is arbitrary PTX)"),
    ("extern-elementwise", kernel('tl.extern_elementwise("lib", "/tmp/x.bc", [n], {}, is_pure=True)'), 5,
     "tl.extern_elementwise is not allowed"),
    ("core-extern", kernel("tl.core.extern(k)"), 5, "tl.core is not allowed"),
    ("map-elementwise", kernel("tl.map_elementwise(k, n)"), 5, "tl.map_elementwise is not allowed"),
    # values: handle, type, dunders, private attributes, _semantic
    ("handle", kernel('x_ptr.handle.data.tofile("out")'), 5, "attribute handle is not allowed"),
    ("type-scalar", kernel("x_ptr.type.scalar.to_ir"), 5, "attribute type is not allowed"),
    ("dtype-to-ir", kernel("x_ptr.dtype.to_ir(n)"), 5, "attribute to_ir is not allowed"),
    ("class", kernel("x_ptr.__class__.__bases__"), 5, "attribute __bases__ is not allowed"),
    ("dunder-name", kernel("b = __builtins__"), 5, "name __builtins__ is not allowed"),
    ("private-attr", kernel("x_ptr._flatten_ir"), 5, "attribute _flatten_ir is not allowed"),
    ("semantic-kwarg", kernel("tl.load(x_ptr, _semantic=n)"), 5, "keyword argument _semantic is not allowed"),
    ("kwargs-splat", kernel("tl.load(x_ptr, **n)"), 5, "a **keyword argument is not allowed"),
    ("str-format", kernel('"{0.__globals__}".format(k)'), 5, "attribute format is not allowed"),
    ("string-method", kernel("n.format_map"), 5, "attribute format_map is not allowed"),
    # builtins outside the few Triton knows
    ("getattr", kernel('getattr(tl, "co" + "re")'), 5, "name getattr is not allowed in kernel k"),
    ("import-builtin", kernel('__import__("os")'), 5, "name __import__ is not allowed"),
    ("open", kernel('open("/tmp/x").read()'), 5, "name open is not allowed in kernel k"),
    ("eval", kernel('eval("1")'), 5, "name eval is not allowed"),
    ("print", kernel('print("x")'), 5, "name print is not allowed"),
    ("builtin-as-value", kernel("r = range"), 5, "builtin range may only be called"),
    ("subscript-builtin", kernel("b = range(3)[0]"), 5, "subscript of range(3) is not allowed"),
    ("subscript-jit-call", HELPER.replace("_twice(tl.load(x_ptr + offs, mask=mask))",
                                          "_twice(tl.load(x_ptr + offs, mask=mask))[0]"), 8,
     "subscript of _twice(tl.load(x_ptr + offs, mask=mask)) is not allowed"),
    ("subscript-constant", HEAD + "S = 'abc'\n" + kernel("c = S[0]", ""), 6, "subscript of S is not allowed"),
    ("subscript-tuple", kernel("(tl, 1)[0]"), 5, "subscript of (tl, 1) is not allowed"),
    ("subscript-module", kernel("tl[0]"), 5, "subscript of tl is not allowed"),
    # constructs: comprehensions, generators, lambdas, classes, scopes, exceptions, async, f-strings
    ("lambda", kernel("f = lambda: 1"), 5, "a lambda is not allowed in a kernel"),
    ("comprehension", kernel("a = [i for i in range(3)]"), 5, "a comprehension is not allowed"),
    ("generator", kernel("a = (i for i in range(3))"), 5, "a generator is not allowed"),
    ("dict", kernel("a = {1: 2}"), 5, "a dict is not allowed"),
    ("set", kernel("a = {1}"), 5, "a set is not allowed"),
    ("fstring", kernel('a = f"{x_ptr}"'), 5, "an f-string is not allowed"),
    ("class-in-kernel", kernel("class A:\n    pass"), 5, "a class is not allowed in a kernel"),
    ("nested-def", kernel("def g():\n    pass"), 5, "a nested function is not allowed"),
    ("global", kernel("global n2\nn2 = 1"), 5, "global is not allowed in a kernel"),
    ("nonlocal-try", kernel("try:\n    pass\nexcept Exception:\n    pass"), 5, "a try statement is not allowed"),
    ("with", kernel("with n:\n    pass"), 5, "a with statement is not allowed"),
    ("yield", kernel("yield 1"), 5, "yield is not allowed"),
    ("import-in-kernel", kernel("import os"), 5, "an import is not allowed in a kernel"),
    ("raise", kernel("raise ValueError"), 5, "a raise is not allowed in a kernel"),
    ("del", kernel("del n"), 5, "a del statement is not allowed"),
    ("starred-call", kernel("a = max(*n)"), 5, "a starred argument is allowed only in calls of Triton's"),
    ("for-over-list", kernel("for i in [tl.core]:\n    pass"), 5, "a kernel loops only over range"),
    ("attribute-store", kernel("tl.load = n"), 5, "assigning to tl.load is not allowed"),
    ("subscript-store", kernel("x_ptr[0] = n"), 5, "assigning to x_ptr[0] is not allowed"),
    ("assert-message", kernel('assert n, print("x")'), 5, "an assert's message must be a literal"),
    ("kernel-annotation", kernel("a: int = 1"), 5, "an annotation in a kernel must be tl.constexpr"),
    # module level: imports, statements, constants
    ("import-os", "import os\n", 1, "import os is not allowed (allowed imports: import triton; "),
    ("import-torch", "import torch\n", 1, "import torch is not allowed"),
    ("torch-alias", "import torch as t\n", 1, "import torch as t is not allowed"),
    ("torch-from", "from torch import nn\n", 1, "from torch import nn is not allowed"),
    ("triton-runtime-import", "from triton import runtime\n", 1, "from triton import runtime is not allowed"),
    ("tl-other-alias", "import triton.language as lang\n", 1, "import triton.language as lang is not allowed"),
    ("triton-language-plain", "import triton.language\n", 1, "import triton.language is not allowed"),
    ("star", "from triton.language import *\n", 1, "from triton.language import * is not allowed"),
    ("relative", "from . import x\n", 1, "from . import x is not allowed"),
    ("torch-in-kernel", kernel("y = torch.zeros(4)"), 5, "name torch is not allowed in kernel k"),
    ("module-call", HEAD + 'print("x")\n', 3, "a call at module level is not allowed"),
    ("module-if", HEAD + "if True:\n    pass\n", 3, "an if statement at module level is not allowed"),
    ("module-class", HEAD + "class A:\n    pass\n", 3, "a class at module level is not allowed"),
    ("module-try", HEAD + "try:\n    pass\nexcept Exception:\n    pass\n", 3, "a try statement at module level"),
    ("module-with", HEAD + "with x:\n    pass\n", 3, "a with statement at module level"),
    ("module-lambda", HEAD + "f = lambda: 1\n", 3, "the value of f must be a literal"),
    ("module-call-constant", HEAD + "N = len([1])\n", 3, "the value of N must be a literal"),
    ("module-list-constant", HEAD + "N = [1, 2]\n", 3, "the value of N must be a literal"),
    ("module-dtype-constant", HEAD + "D = tl.float32\n", 3, "the value of D must be a literal"),
    ("module-constexpr-call", HEAD + "N = tl.constexpr(print(1))\n", 3, "the value of N must be a literal"),
    ("module-rebind", HEAD + "N = 1\nN = 2\n", 4, "binding N again is not allowed (bound on line 3)"),
    ("module-rebind-tl", HEAD + "tl = 1\n", 3, "binding tl again is not allowed"),
    ("module-dunder", HEAD + "__builtins__ = 1\n", 3, "name __builtins__ is not allowed"),
    ("module-builtin", HEAD + "range = 1\n", 3, "binding range is not allowed"),
    ("module-main", HEAD + 'if __name__ == "__main__":\n    pass\n', 3, "an if statement at module level"),
    ("plain-function", HEAD + "def run(x):\n    return x\n", 3, "function run is not allowed"),
    ("plain-function-at-import", HEAD + "def f():\n    return 1\nN = f()\n", 3, "function f is not allowed"),
    # decorators, defaults and annotations: they run at import
    ("custom-decorator", HEAD + "def mark(f):\n    return f\n\n@mark\n@triton.jit\ndef k(x):\n    pass\n", 3,
     "function mark is not allowed"),
    ("autotune", HEAD + '@triton.autotune(configs=[triton.Config({"B": 1})], key=["n"])' + JIT, 3,
     "decorator triton.autotune"),
    ("heuristics", HEAD + '@triton.heuristics({"B": lambda args: 1})' + JIT, 3, "decorator triton.heuristics"),
    ("jit-repr", HEAD + "@triton.jit(repr=print)\ndef k(x):\n    pass\n", 3, "triton.jit's argument repr is not"),
    ("jit-call-arg", HEAD + "@triton.jit(debug=print(1))\ndef k(x):\n    pass\n", 3,
     "triton.jit's debug must be a literal"),
    ("jit-twice", HEAD + "@triton.jit\n@triton.jit\ndef k(x):\n    pass\n", 3, "decorator triton.jit is not allowed"),
    ("no-decorator", HEAD + "def k(x):\n    pass\n", 3, "function k is not allowed"),
    ("default-call", HEAD + "@triton.jit\ndef k(x, n=print(1)):\n    pass\n", 4,
     "a default value must be a literal"),
    ("default-list", HEAD + "@triton.jit\ndef k(x, n=[1]):\n    pass\n", 4, "a default value must be a literal"),
    ("kwonly-default", HEAD + "@triton.jit\ndef k(x, *, n=print(1)):\n    pass\n", 4, "a default value"),
    ("annotation-call", HEAD + "@triton.jit\ndef k(x: tl.constexpr(print(1))):\n    pass\n", 4,
     "the annotation of x must be tl.constexpr"),
    ("annotation-other", HEAD + "@triton.jit\ndef k(x: int):\n    pass\n", 4, "the annotation of x must be"),
    ("return-annotation", HEAD + "@triton.jit\ndef k(x) -> print(1):\n    pass\n", 4, "the return annotation"),
    ("varargs", HEAD + "@triton.jit\ndef k(*x):\n    pass\n", 4, "k takes *args or **kwargs"),
    ("syntax", "def k(:\n    pass\n", 1, "does not parse: "),
]


@pytest.mark.parametrize("code, line, reason", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_with_their_reason(code, line, reason):
    with pytest.raises(Unsafe) as caught:
        check(code)
    assert reason in caught.value.reason, caught.value.reason
    assert caught.value.line == line, caught.value
    assert str(caught.value) == f"line {line}: {caught.value.reason}"
    assert "\n" not in str(caught.value)


def test_refused_ones_are_refused_with_context_too():
    """A captured file's names widen what a reply may name, never what it may do."""
    for _, code, _, _ in REFUSED:
        with pytest.raises(Unsafe):
            check(code, context=ADD)


# the captured file binds names a reply might lean on: whatever it binds otherwise is not the reply's
CAPTURED = '''import numpy as tl
import triton
from torch._inductor.runtime import triton_helpers
from triton.language.extra import libdevice as ld
import os
BLOCK = 128
SHAPE = (1, 2)
run = print


@triton.jit
def helper(x):
    return x


def plain(x):
    return x
'''


@pytest.mark.parametrize("body, reason", [
    ("tl.load(x_ptr)", "name tl is not allowed"),  # numpy here
    ("os.system('id')", "name os is not allowed"),
    ("a = SHAPE", "name SHAPE is not allowed"),
    ("run(1)", "name run is not allowed"),
    ("plain(x_ptr)", "name plain is not allowed"),
    ("triton_helpers.set_driver_to_gpu()", "triton_helpers.set_driver_to_gpu is not allowed"),
    ("triton_helpers.inline_asm_pack(x_ptr)", "triton_helpers.inline_asm_pack is not allowed"),
    ("ld.core", "ld.core is not allowed"),
], ids=["numpy-as-tl", "os", "tuple-constant", "alias-of-print", "plain-function", "driver", "asm", "core"])
def test_names_of_the_captured_file_that_a_kernel_may_not_use(body, reason):
    code = "\n@triton.jit\ndef k(x_ptr, n):\n" + textwrap.indent(body, "    ") + "\n"
    with pytest.raises(Unsafe, match=reason):
        check(code, context=CAPTURED)


@pytest.mark.parametrize("rebinding", [
    "tl = 5", "if True:\n    import numpy as tl", "def f():\n    global tl", "for tl in range(3):\n    pass",
    "try:\n    pass\nexcept Exception as tl:\n    pass", "[(tl := 1) for _ in range(2)]",
    "with open('x') as tl:\n    pass",
], ids=["assign", "nested-import", "global", "loop", "except", "walrus-in-comprehension", "with"])
def test_a_name_the_captured_file_binds_twice_as_different_things_is_not_the_replys(rebinding):
    captured = HEAD + rebinding + "\n"
    with pytest.raises(Unsafe, match="the annotation of BLOCK must be tl.constexpr"):  # tl is not triton's
        check(FUNCTIONS_ONLY, context=captured)
    check(FUNCTIONS_ONLY, context=HEAD)


def test_names_of_the_captured_file_that_a_kernel_may_use():
    body = "a = helper(x_ptr) + BLOCK + triton_helpers.maximum(x_ptr, n)\nb = ld.exp(a) + triton.cdiv(n, 2)"
    check("\n@triton.jit\ndef k(x_ptr, n):\n" + textwrap.indent(body, "    ") + "\n", context=CAPTURED)


@pytest.mark.parametrize("code, reason", [
    ("import triton.language as tl\n", "the captured file binds tl itself"),
    ("BLOCK = 64\n", "the captured file binds BLOCK itself"),
    ("\n@triton.jit\ndef plain(x):\n    pass\n", "the captured file binds plain itself"),
], ids=["rebind-tl", "rebind-constant", "replace-plain"])
def test_a_reply_may_not_rebind_the_captured_files_names(code, reason):
    with pytest.raises(Unsafe, match=reason):
        check(code, context=CAPTURED)
    check("\n@triton.jit\ndef helper(x):\n    return x + 1\n", context=CAPTURED)  # a jit function: replaced


def test_the_first_problem_is_the_one_reported():
    with pytest.raises(Unsafe, match=r"^line 1: import os"):
        check("import os\nimport sys\n")
    with pytest.raises(Unsafe, match=r"^line 5: name open"):
        check(kernel("a = open('a') + eval('b')"))


def test_unsafe_pickles_and_the_rules_name_the_allowed_imports():
    assert issubclass(Unsafe, ValueError) and Unsafe.failure_kind == "unsafe"
    copy = pickle.loads(pickle.dumps(Unsafe(3, "import os is not allowed")))
    assert (copy.line, copy.reason, str(copy)) == (3, "import os is not allowed", "line 3: import os is not allowed")
    assert allowed_imports() == ("import triton", "import triton.language as tl", "import math",
                                 "from triton.language.extra import libdevice",
                                 "from triton.language.extra.cuda import libdevice")
    assert "import triton.language as tl" in RULES and "No torch anywhere" in RULES


def test_the_api_is_generated_from_triton_and_leaves_out_its_internals():
    members = sandbox.module_members()
    assert {"load", "store", "dot", "where", "reduce", "float32", "constexpr", "static_range"} <= set(members["tl"])
    assert {"core", "semantic", "tensor", "inline_asm_elementwise", "extra"} - {"extra"} & set(members["tl"]) == set()
    assert members["tl"]["math"] == "tl.math" and "exp" in members["libdevice"] and "core" not in members["libdevice"]
    assert {"to", "dtype", "shape", "T", "reshape", "trans", "is_fp16", "element_ty"} <= sandbox.value_attrs()
    assert not {"handle", "type", "to_ir", "mangle"} & sandbox.value_attrs()


SENTINEL_REPLY = HEAD + '''
@triton.heuristics({{"B": lambda args, d=open({path!r}, "w").write("ran"): 1024}})
@triton.jit
def k(x_ptr, B: tl.constexpr):
    pass
'''


def test_a_reply_that_would_write_a_file_at_import_is_refused_without_running(tmp_path):
    """The heuristics default runs at import, with the interpreter off too: run as plain Python it
    writes its sentinel, and check() refuses it without writing anything."""
    sentinel = tmp_path / "sentinel"
    code = SENTINEL_REPLY.format(path=str(sentinel))
    with pytest.raises(Unsafe, match="^line 4: decorator triton.heuristics"):
        check(code)
    assert not sentinel.exists()
    reply = tmp_path / "reply.py"
    reply.write_text(code)
    subprocess.run([sys.executable, str(reply)], check=True, cwd=tmp_path, timeout=60)
    assert sentinel.read_text() == "ran"  # the sample is a real threat, not a dud


# ------------------------------------------------------------------------- stored variants

def test_a_variant_that_changes_only_functions_passes():
    changed = ADD.replace("tl.load(y_ptr + offs, mask=mask)", "tl.load(y_ptr + offs, mask=mask) * 1")
    check_variant_source(ADD, changed, "add_kernel")
    check_variant_source(ADD, ADD, "add_kernel")
    check_variant_source(ADD, HEAD + "from triton.language.extra import libdevice\nN = 4\n" + ADD[len(HEAD):],
                         "add_kernel")  # what splicing adds: a new import, a constant
    check_variant_source(USER, USER.replace("mask = offs < n", "mask = n > offs"), "add_kernel")


def test_inductor_variants_keep_their_own_decorators():
    text = INDUCTOR_POI.read_text()
    name = next(n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.decorator_list)
    check_variant_source(text, text.replace("tl.store(", "tl.store(0 + ", 1), name)
    with pytest.raises(Unsafe, match="decorator"):
        check_variant_source(text, text.replace("min_elem_per_thread=0", "min_elem_per_thread=1"), name)


USER = HEAD + "import os\nos.getcwd()\n" + ADD[len(HEAD):]  # the user's own statements, kept in order only
PLAIN = ADD + '''

def run(x):
    return x
'''


@pytest.mark.parametrize("variant, reason", [
    (ADD + "import os\n", "import os is not allowed"),
    (ADD.replace("mask = offs < n", "mask = offs < n\n    tl.core.inspect"), "tl.core is not allowed"),
    (PLAIN.replace("return x", "return __import__('os').system('id')"), "binding run is not allowed"),
    (ADD + "print('x')\n", "a call at module level is not allowed"),
    (USER.replace("import os\nos.getcwd()", "os.getcwd()\nimport os"), "import os is not allowed"),
    (ADD.replace("add_kernel", "other"), "does not define the kernel add_kernel"),
    ("def broken(:\n", "does not parse"),
], ids=["import", "kernel", "plain-function", "statement", "reordered", "no-kernel", "syntax"])
def test_a_variant_that_changes_anything_else_is_refused(variant, reason):
    with pytest.raises(Unsafe, match=reason):
        captured = PLAIN if "def run" in variant else USER if "getcwd" in variant else ADD
        check_variant_source(captured, variant, "add_kernel")


def test_which_variants_need_the_check():
    from tritune.model.variant import Variant

    assert not sandbox.needs_check(Variant(options={"num_warps": 8}))
    assert not sandbox.needs_check(Variant(source=ADD, rewrite={"rule": "pipeline-loop", "params": {}}))
    assert sandbox.needs_check(Variant(source=ADD, rewrite={"rule": "llm", "params": {}}))
    assert sandbox.needs_check(Variant(source=ADD))
    assert sandbox.needs_check(Variant(source=ADD, rewrite={"rule": "made-up", "params": {}}))
