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


# ptxas's stderr inside Triton's PTXASError (backends/nvidia/compiler.py formats it so)
def _ptxas_failed(*stderr):
    return PTXASError("Internal Triton PTX codegen error\n`ptxas` stderr:\n" + "\n".join(stderr)
                      + "\n\nRepro command: ptxas -lineinfo -v --gpu-name sm_90a k.ptx -o k.ptx.o\n")


SHARED_DATA = "ptxas error   : Entry function 'matmul_kernel' uses too much shared data (0x30000 bytes, 0x28400 max)"
REGISTER_CAP = ("ptxas fatal   : (C7600) Register allocation failed with register count of '32'. "
                "Compile the program with a higher register target")
ABORTED = "ptxas fatal   : Ptx assembly aborted due to errors"


def test_one_line_of_a_ptxas_error_about_the_whole_kernel_keeps_that_error():
    assert errors.one_line(_ptxas_failed(SHARED_DATA, ABORTED)) == (
        "PTXASError: ptxas: Entry function 'matmul_kernel' uses too much shared data (0x30000 bytes, 0x28400 max)")
    info = "ptxas info    : (C7516) Potential Performance Loss: wgmma.mma_async instructions are serialized"
    assert errors.one_line(_ptxas_failed(info, REGISTER_CAP, ABORTED)).startswith(
        "PTXASError: ptxas: (C7600) Register allocation failed with register count of '32'.")


@pytest.mark.parametrize("message", [
    errors.one_line(OutOfResources(262144, 232448, "shared memory")),
    "KernelLoadError: out of resource: threads, Required: 2048",
    "RuntimeError: Triton Error [CUDA]: too many resources requested for launch",
    errors.one_line(_ptxas_failed(SHARED_DATA, ABORTED)),
    errors.one_line(_ptxas_failed(REGISTER_CAP, ABORTED)),
])
def test_resource_failures_that_crossed_a_process_boundary_are_read_from_their_text(message):
    assert errors.resource_failure_text(message)


@pytest.mark.parametrize("message", [
    "CompilationError: at 2:11: arange's range must be a power of 2",
    "PTXASError: ptxas: line 46: Modifier '.evict_first' cannot be combined with modifier '.cg'",
    # the words of a resource failure, in another sense
    "CompilationError: at 3:4: shared memory and registers in the message",
    "CompilationError: at 12:8: layout conversion through shared memory is not supported here",
    "ValueError: too many resources named in the configuration file",
    "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
    # ptxas lines that name registers or a limit no launch knob changes
    "ptxas warning : Registers are spilled to local memory in function 'k', 8 bytes spill stores",
    "ptxas info    : Used 255 registers, used 1 barriers, 232448 bytes smem",
    "PTXASError: ptxas: Entry function 'k' uses too much parameter space (0x1200 bytes, 0x1100 max)",
])
def test_text_near_a_resource_failure_is_none(message):
    assert not errors.resource_failure_text(message)


def test_errors_imports_nothing():
    """The bottom of the import graph: no tritune module (the package's facade names its version,
    the ground floor's other module), no Triton, no torch."""
    code = ("import sys; import tritune.errors; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tritune', 'triton', 'torch')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['tritune', 'tritune.errors', 'tritune.version']"
