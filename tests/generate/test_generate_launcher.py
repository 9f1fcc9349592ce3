"""A model's module for ``tritune generate --llm``: what ``generate.assemble`` keeps of it, and the
launcher allowlist (``generate.launcher.check_launcher``) its ``run()`` passes. Syntax trees only:
nothing here runs a reply (each payload would write ``SENTINEL`` if it ran). Each refusal is
matched by its reason, so a test fails when the check that should stop its payload is gone."""

from __future__ import annotations

import ast
import textwrap

import pytest

from tritune.allowlist.sandbox import Unsafe
from tritune.generate.assemble import KERNEL_HEADER, _same_statements, assemble, input_kinds
from tritune.generate.launcher import NUMBER, OTHER, TENSOR, check_launcher

SENTINEL = "/tmp/tritune-launcher-sentinel"
KERNELS = '''import torch
import triton
import triton.language as tl

BLOCK_SIZE = 64


@triton.jit
def bias_relu_kernel(x_ptr, bias_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(bias_ptr + offsets % cols, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x + b, 0.0), mask=mask)

'''
GOOD_RUN = '''
def run(x, bias):
    """Allocate, launch, return."""
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    bias_relu_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, bias, out, n, bias.numel(), BLOCK=BLOCK_SIZE)
    return out
'''
INPUTS = [TENSOR, TENSOR]


def module(run: str, extra: str = "") -> str:
    return KERNELS + extra + textwrap.dedent(run)


def with_body(body: str, signature: str = "x, bias") -> str:
    """A module whose run() holds ``body`` before a proper launch and return."""
    return module(f"\ndef run({signature}):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + """
    out = torch.empty_like(x)
    bias_relu_kernel[(triton.cdiv(x.numel(), 64),)](x, bias, out, x.numel(), bias.numel(), BLOCK=64)
    return out
""")


def refused(code: str) -> Unsafe:
    with pytest.raises(Unsafe) as caught:
        assemble(code, INPUTS, name="bias_relu")
    return caught.value


# ------------------------------------------------------------------------ what is kept

def test_the_module_is_tritunes_header_the_kernels_and_run_nothing_else():
    code = ('"""The model\'s docstring."""\n' + module(GOOD_RUN, extra="# a comment between statements\n")
            + '\n\nif __name__ == "__main__":\n    open(' + repr(SENTINEL) + ', "w")\n')
    text = assemble(code, INPUTS, name="bias_relu").text
    tree = ast.parse(text)
    assert ast.get_docstring(tree).startswith("bias_relu: Triton kernel(s) written by a model")
    assert [ast.unparse(node) for node in tree.body[1:5]] == ["import torch", *KERNEL_HEADER.splitlines()]
    assert [type(node).__name__ for node in tree.body[5:]] == ["Assign", "FunctionDef", "FunctionDef"]
    assert "The model's docstring" not in text and "a comment between" not in text
    assert "__main__" not in text and SENTINEL not in text  # the main block is dropped, not shipped
    assert text.count("import torch") == 1 and text.count("import triton\n") == 1  # the reply's own are dropped
    assert text.endswith(textwrap.dedent(GOOD_RUN).lstrip())  # run() as the reply wrote it


@pytest.mark.parametrize("run", [
    GOOD_RUN,
    # a grid of the launch's meta-parameters, shapes unpacked, a branch on the dtype, a tuple returned
    '''
    def run(x, bias):
        M, N = x.shape
        rows = x.shape[0]
        if x.dtype == torch.float16 and N > 1024:
            block = 128
        else:
            block = triton.next_power_of_2(min(N, 64))
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        spare = x.new_empty(x.shape[:1] + (N,))
        grid = lambda meta: (triton.cdiv(M * N, meta["BLOCK"]),)
        bias_relu_kernel[lambda meta: (triton.cdiv(M * N, meta["BLOCK"]),)](
            x.view(-1), bias, out, rows * N, bias.size(0), BLOCK=block, num_warps=4)
        return out, spare.reshape(M, N)
    '''.replace("        grid = lambda meta: (triton.cdiv(M * N, meta[\"BLOCK\"]),)\n", ""),
    '''
    def run(x, bias):
        out = torch.empty_strided(x.size(), x.stride(), dtype=torch.float32, device=x.device)
        grid = (triton.cdiv(x.numel(), BLOCK_SIZE), 1)
        n = x.numel()
        n += 0
        bias_relu_kernel[grid](x, bias, out, n if x.is_contiguous() else n, len(bias.shape), BLOCK=BLOCK_SIZE)
        return [out]
    ''',
])
def test_launch_arithmetic_passes(run):
    assembled = assemble(module(run), INPUTS, name="bias_relu")
    assert assembled.kernels == ("bias_relu_kernel",)


def test_input_kinds_follow_the_cases():
    import torch

    class Case:
        def __init__(self, *tensors):
            self.tensors = tensors

    cases = [Case(torch.ones(2), 0.5, "a", torch.ones(1)), Case(torch.ones(3), 2, "b", 1.0)]
    assert input_kinds(cases) == [TENSOR, NUMBER, OTHER, OTHER]


# ------------------------------------------------------------ payloads in the launcher

@pytest.mark.parametrize("body, reason", [
    # torch.load / torch.save through an alias (issue 23: `n = torch.nn; n.modules.module.torch.load`)
    (f"n = torch.nn\nn.modules.module.torch.load({SENTINEL!r})", "torch.nn is not allowed in run()"),
    (f"save = torch.save\nsave(x, {SENTINEL!r})", "torch.save is not allowed in run()"),
    (f"torch.save(x, {SENTINEL!r})", "torch.save is not allowed in run()"),
    (f"t = x.__class__\nt.__module__", "the attribute .__class__ is not allowed"),
    # the builtins that reach everything
    (f"f = getattr(torch, 'sa' + 've')\nf(x, {SENTINEL!r})", "the call getattr(...) is not allowed"),
    ("__import__('os').system('true')", "the call __import__(...) is not allowed"),
    (f"open({SENTINEL!r}, 'w').write('ran')", "the call open(...) is not allowed"),
    # native operators, and a subscript of a module
    ("y = torch.ops.aten.relu(x)", "torch.ops is not allowed in run()"),
    (f"[torch][0].save(x, {SENTINEL!r})", "a list is not allowed in run()"),
    (f"torch.__dict__['save'](x, {SENTINEL!r})", "torch.__dict__ is not allowed in run()"),
    # nested code, imports, lambdas
    ("def helper():\n    return 1", "a nested def is not allowed in run()"),
    ("import os", "an import is not allowed in run()"),
    ("from os import system", "an import is not allowed in run()"),
    ("f = lambda: 0", "a lambda (but a launch's grid) is not allowed in run()"),
    # the rest of Python that is no launch arithmetic
    ("for i in range(2):\n    pass", "a loop is not allowed in run()"),
    ("with torch.no_grad():\n    pass", "a with statement is not allowed in run()"),
    ("try:\n    pass\nexcept Exception:\n    pass", "a try statement is not allowed in run()"),
    ("global LEAK", "global is not allowed in run()"),
    ("n = (m := 4)", "the walrus := is not allowed in run()"),
    ("sizes = [s for s in x.shape]", "a comprehension is not allowed in run()"),
    ("name = f'{x}'", "an f-string is not allowed in run()"),
    ("path = 'a'", "a str literal is not allowed in run()"),
    ("x.data = bias", "assignment only to local names"),
    ("torch = 1", "run() may not bind the name torch"),
    ("__builtins__ = 1", "run() may not bind the name __builtins__"),
    ("min(x, bias)", "min() of sizes only"),
    ("min(1, 2)", "an expression statement in run() must be a launch"),
])
def test_a_payload_in_run_is_refused(body, reason):
    assert reason in refused(with_body(body)).reason


@pytest.mark.parametrize("body, reason", [
    # a torch op computing the result on the host: the kernel then runs for show
    ("y = x + bias", "arithmetic on a tensor and a tensor"),
    ("y = torch.relu(x)", "torch.relu is not allowed in run()"),
    ("y = x.relu()", "the method .relu() is not allowed in run()"),
    ("y = x.to(torch.float64)", "the method .to() is not allowed in run()"),
    ("x.copy_(bias)", "the method .copy_() is not allowed in run()"),
    ("x.shape", "an expression statement in run() must be a launch"),
    ("y = x[:, 0]", "a subscript of anything but a shape"),
    # a number read from a tensor's values: a launcher that branches on the data it gets
    ("if x.sum() > 0:\n    pass", "the method .sum() is not allowed in run()"),
    ("n = x.item()", "the method .item() is not allowed in run()"),
    # allocations take a shape, dtype= and device= only
    ("y = torch.empty(4, out=x)", "out= is not allowed"),
    ("y = torch.empty(x)", "a shape is one tuple of sizes, or sizes as arguments"),
    ("y = torch.full((4,), 1.0)", "torch.full is not allowed in run()"),
    # kinds stay put
    ("n = x.numel()\nn = x", "n was a number, now a tensor"),
])
def test_host_computation_is_refused(body, reason):
    assert reason in refused(with_body(body)).reason


@pytest.mark.parametrize("launch, reason", [
    ("bias_relu_kernel[(1,)](x, bias, out, 4, 4, BLOCK=64, pre_hook=print)", "pre_hook= is neither a parameter"),
    ("bias_relu_kernel[(1,)](x, bias, out, 4, 4, BLOCK=64, num_warps=torch)", "torch may be used only"),
    ("bias_relu_kernel[(1,)](*[x], bias, out, 4, 4, BLOCK=64)", "no *arguments in a launch"),
    ("bias_relu_kernel[(1,)](x, bias, out, 4, 4, **{'BLOCK': 64})", "no **arguments in a launch"),
    ("bias_relu_kernel[(1,)](x, bias, out, 4, x.dtype, BLOCK=64)", "a launch passes tensors and sizes only"),
    (f"bias_relu_kernel[lambda meta, d=open({SENTINEL!r}, 'w'): (1,)](x, bias, out, 4, 4, BLOCK=64)",
     "a grid lambda takes one plain parameter"),
    ("bias_relu_kernel[lambda meta: (meta.get('BLOCK'),)](x, bias, out, 4, 4, BLOCK=64)",
     "the call meta.get(...) is not allowed"),
    ("bias_relu_kernel[lambda meta: (meta['__class__'],)](x, bias, out, 4, 4, BLOCK=64)",
     'the grid lambda reads meta["NAME"] only'),
    # meta also holds the launch's tensors: a grid that reads their values would depend on the data
    ("bias_relu_kernel[lambda meta: (1 if meta['x_ptr'] > 0 else 2,)](x, bias, out, 4, 4, BLOCK=64)",
     'the grid lambda reads meta["NAME"] only, NAME a tl.constexpr parameter'),
    ("bias_relu_kernel[lambda x: (1,)](x, bias, out, 4, 4, BLOCK=64)", "the grid lambda's parameter x hides"),
    ("bias_relu_kernel[(1, 1, 1, 1)](x, bias, out, 4, 4, BLOCK=64)", "a grid has one to three sizes"),
    ("bias_relu_kernel.run(x, bias, out, 4, 4, BLOCK=64, grid=(1,), warmup=False)",
     "the kernel bias_relu_kernel may only be launched"),
    ("k = bias_relu_kernel\n    k[(1,)](x, bias, out, 4, 4, BLOCK=64)",
     "the kernel bias_relu_kernel may only be launched"),
])
def test_a_launch_is_a_kernel_grid_and_sizes(launch, reason):
    code = module(f"\ndef run(x, bias):\n    out = torch.empty_like(x)\n    {launch}\n    return out\n")
    assert reason in refused(code).reason


@pytest.mark.parametrize("signature, reason", [
    (f"x, bias, f=lambda: open({SENTINEL!r}, 'w')", "no defaults"),  # a default runs at import
    (f"x, bias=open({SENTINEL!r}, 'w')", "no defaults"),
    ("x, bias: print('at import')", "no defaults, annotations"),  # so does an annotation
    ("*inputs", "no defaults, annotations, *args"),
    ("x", "run() must take the reference's 2 argument(s), not 1"),
])
def test_a_signature_that_runs_code_at_import_is_refused(signature, reason):
    assert reason in refused(module(f"\ndef run({signature}):\n    return x\n")).reason


def test_a_decorated_or_annotated_run_is_refused():
    assert "may not bind the name run" in refused(module("\n@triton.jit\ndef run(x, bias):\n    return x\n")).reason
    code = module(f"\ndef run(x, bias) -> open({SENTINEL!r}, 'w'):\n    return x\n")
    assert "no defaults, annotations" in refused(code).reason


def test_a_refusal_names_the_replys_line():
    code = with_body("import os")
    line = code.splitlines().index("    import os") + 1
    error = refused(code)
    assert error.line == line and str(error) == f"line {line}: an import is not allowed in run()"


# -------------------------------------------------------------------- payloads at module level

@pytest.mark.parametrize("extra, reason", [
    # a statement that would run at import
    (f"open({SENTINEL!r}, 'w').write('ran')\n", "an expression at module level"),
    (f"if True:\n    open({SENTINEL!r}, 'w')\n", "an if statement at module level"),
    (f"for _ in range(1):\n    open({SENTINEL!r}, 'w')\n", "a loop at module level"),
    (f"class K:\n    x = open({SENTINEL!r}, 'w')\n", "a class at module level"),
    (f"if __name__ == '__main__':\n    pass\nelse:\n    open({SENTINEL!r}, 'w')\n", "an if statement at module level"),
    # an extra plain function (the kernels part is kernels; run() is the only host code)
    (f"def helper(x):\n    return open({SENTINEL!r}, 'w')\n", "def helper: a plain function"),
    # a second statement hidden on a line another one holds
    (f"LEAK = 1; open({SENTINEL!r}, 'w')\n", "one statement per line at module level"),
    # torch for the kernels, or a name run() relies on bound to something else
    ("from torch import load\n", "no other import of torch"),
    ("import torch as t\n", "no other import of torch"),
    ("import math as triton\n", "may not bind the name triton"),
    ("import min\n", "may not bind the name min"),
    ("min = 3\n", "may not bind the name min"),
])
def test_a_payload_at_module_level_is_refused(extra, reason):
    assert reason in refused(module(GOOD_RUN, extra=extra)).reason


def test_a_second_run_or_none_is_refused():
    assert "run() is defined twice" in refused(module(GOOD_RUN + GOOD_RUN)).reason
    assert "defines no run(...)" in refused(KERNELS).reason


def test_the_kernels_part_goes_through_the_kernel_allowlist_at_the_replys_lines():
    """The sandbox sees the kernels part behind tritune's header; its refusal names the reply's line."""
    code = module(GOOD_RUN, extra=f"LEAK = open({SENTINEL!r}, 'w')\n")
    line = code.splitlines().index(f"LEAK = open({SENTINEL!r}, 'w')") + 1
    assert refused(code).line == line


def test_the_written_module_must_be_exactly_its_checked_parts():
    checked, launcher = KERNEL_HEADER, "def run(x):\n    return x\n"
    _same_statements(f'"""doc"""\nimport torch\n{checked}\n{launcher}', checked, launcher)
    with pytest.raises(Unsafe, match="not its checked parts"):
        _same_statements(f'"""doc"""\nimport torch\n{checked}\nimport os\n{launcher}', checked, launcher)


def test_check_launcher_alone():
    """The API other code may call: the kernels and their parameters, the inputs' kinds, the constants."""
    run = "def run(x, alpha):\n    out = torch.empty_like(x)\n    k[(1,)](x, out, alpha * 2, B=C)\n    return out\n"
    check_launcher(run, {"k": ["x", "out", "alpha", "B"]}, [TENSOR, NUMBER], ["C"])
    with pytest.raises(Unsafe, match="C is not a parameter"):
        check_launcher(run, {"k": ["x", "out", "alpha", "B"]}, [TENSOR, NUMBER])
    with pytest.raises(Unsafe, match="arithmetic on a tensor and a number"):
        check_launcher(run, {"k": ["x", "out", "alpha", "B"]}, [TENSOR, TENSOR], ["C"])
    with pytest.raises(Unsafe, match="alpha is an input run\\(\\) cannot use"):
        check_launcher(run, {"k": ["x", "out", "alpha", "B"]}, [TENSOR, OTHER], ["C"])
    grid = run.replace("k[(1,)]", "k[lambda meta: (meta['B'],)]")
    check_launcher(grid, {"k": ["x", "out", "alpha", "B"]}, [TENSOR, NUMBER], ["C"], {"k": ["B"]})
    with pytest.raises(Unsafe, match="NAME a tl.constexpr parameter of the kernel"):
        check_launcher(grid, {"k": ["x", "out", "alpha", "B"]}, [TENSOR, NUMBER], ["C"], {"k": []})
    with pytest.raises(Unsafe, match="one def run"):
        check_launcher(run + "x = 1\n", {"k": []}, [TENSOR, NUMBER])


def test_assembling_an_assembled_module_gives_it_back():
    """What ``run._llm_optimized`` relies on: a baked module is assembled anew, unchanged if it holds
    nothing new."""
    text = assemble(module(GOOD_RUN), INPUTS, name="bias_relu").text
    assert assemble(text, INPUTS, name="bias_relu").text == text


def test_code_nested_too_deeply_to_check_is_refused_not_a_crash():
    error = refused(with_body("n = " + "+".join(["1"] * 3000)))
    assert error.reason == "the code is nested too deeply to be checked"
