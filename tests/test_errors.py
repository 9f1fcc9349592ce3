"""tritune.errors: Triton's compile failures classified by type, and one line per exception.

The CompilationError and PTXASError here are raised by Triton itself, compiling for sm_90 on the
CPU; OutOfResources is raised only when a binary is loaded on a GPU, so its real class is raised
by hand.
"""

import subprocess
import sys

import pytest
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError, CompileTimeAssertionFailure
from triton.runtime.errors import InterpreterError, OutOfResources, PTXASError

from tritune import errors
from tritune.analyze.compile import compile_kernel
from tritune.analyze.launch import Launch
from tritune.imports import interpreter_off

with interpreter_off():  # JITFunctions to compile, whatever TRITON_INTERPRET says

    @triton.jit
    def not_a_power_of_two(x_ptr):
        offs = tl.arange(0, 100)  # Triton needs a power of two: a CompilationError
        tl.store(x_ptr + offs, 1.0)

    @triton.jit
    def ptxas_rejects(x_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)  # ptxas rejects .cg with an eviction hint: a PTXASError
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, cache_modifier=".cg", eviction_policy="evict_first"))


def _compile(fn, constexprs=None):
    signature = {"x_ptr": "*fp32", **{name: "constexpr" for name in constexprs or {}}}
    launch = Launch(signature=signature, constexprs=dict(constexprs or {}), sources={}, attrs={},
                    num_warps=4, num_stages=3)
    compile_kernel(fn, launch, 90)


@pytest.fixture(scope="module")
def compilation_error():
    with pytest.raises(CompilationError) as info:
        _compile(not_a_power_of_two)
    return info.value


@pytest.fixture(scope="module")
def ptxas_error():
    with pytest.raises(PTXASError) as info:
        _compile(ptxas_rejects, {"BLOCK": 256})
    return info.value


def _raised(exc, cause=None):
    try:
        raise exc from cause
    except BaseException as caught:  # noqa: BLE001
        return caught


def test_triton_errors_are_classified_by_type(compilation_error, ptxas_error):
    assert errors.compile_failure(compilation_error) == errors.COMPILATION
    assert errors.compile_failure(ptxas_error) == errors.PTXAS
    assert errors.compile_failure(OutOfResources(262144, 232448, "shared memory")) == errors.RESOURCES
    assert errors.compile_failure(InterpreterError("boom")) == errors.INTERPRETER
    # a subclass is its base's kind
    assert errors.compile_failure(CompileTimeAssertionFailure(None, None, "static_assert failed")) == errors.COMPILATION


def test_text_alone_classifies_nothing():
    # The words of a resource failure in another exception are not a resource failure.
    for exc in (RuntimeError("out of resource: shared memory, Required: 262144"), ValueError("ptxas error"),
                type("OutOfResources", (Exception,), {})("a class of the same name elsewhere")):
        assert errors.compile_failure(exc) is None
        assert not errors.caused_by(exc, errors.RESOURCES)


def test_caused_by_looks_through_the_cause_chain():
    wrapped = _raised(RuntimeError("load failed"), _raised(KeyError("x"), OutOfResources(1, 0, "threads")))
    assert errors.caused_by(wrapped, errors.RESOURCES)
    assert not errors.caused_by(wrapped, errors.PTXAS)
    assert not errors.caused_by(_raised(RuntimeError("load failed")), errors.RESOURCES)


def test_one_line_of_triton_errors(compilation_error, ptxas_error):
    line = errors.one_line(compilation_error)
    assert line.startswith("CompilationError: at 2:") and "\n" not in line  # position kept, excerpt dropped
    assert errors.one_line(ptxas_error).startswith("PTXASError: ptxas: line ")
    assert "\n" not in errors.one_line(ptxas_error)
    oom = errors.one_line(OutOfResources(262144, 232448, "shared memory"))
    assert oom.startswith("OutOfResources: out of resource: shared memory, Required: 262144")


def test_one_line_of_other_errors():
    assert errors.one_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
    assert errors.one_line(KeyError()) == "KeyError"
    assert errors.one_line(_syntax_error()) == "SyntaxError: invalid syntax (line 1)"
    assert errors.one_line(errors.InputError("x.py: says it all\nmore")) == "x.py: says it all"

    class Broken(Exception):
        def __str__(self):
            raise RuntimeError("no text")

    assert errors.one_line(Broken()) == "Broken"


def _syntax_error():
    try:
        compile("def broken(:\n", "bad.py", "exec")
    except SyntaxError as exc:
        return exc
    raise AssertionError("compiled")


def test_a_resource_failure_that_crossed_a_process_boundary_is_read_from_its_text():
    # What a worker sends back for a real OutOfResources, and for other compile failures.
    assert errors.resource_failure_text(errors.one_line(OutOfResources(262144, 232448, "shared memory")))
    assert errors.resource_failure_text("KernelLoadError: out of resource: threads, Required: 2048")
    assert not errors.resource_failure_text("CompilationError: at 2:11: arange's range must be a power of 2")
    assert not errors.resource_failure_text("PTXASError: ptxas: line 46: Modifier '.evict_first' ...")


def test_errors_imports_nothing():
    """The bottom of the import graph: no tritune module, no Triton, no torch."""
    code = ("import sys; import tritune.errors; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tritune', 'triton', 'torch')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['tritune', 'tritune.errors']"
