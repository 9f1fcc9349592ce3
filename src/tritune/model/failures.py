"""The kinds of failure a candidate (or a baseline) can have: one name per kind, used everywhere.

How a failure is classified from an exception, and what it carries, is ``tritune.worker.failures``.

    compile_error           it did not build (Triton's compiler, ptxas, out of resources)
    runtime_fault           a CUDA fault: the worker's context is not trusted again
    timeout                 it ran past its limit and was killed
    crash                   the worker process died
    error                   any other exception while it ran
    wrong_result            it ran and verification rejected its outputs
    baseline_out_of_bounds  the captured launch itself writes outside its tensors: nothing is decided
    ghost                   it never launched a kernel (a host-side shortcut)
    unsafe                  its code was refused before running (the allowlist)
"""

COMPILE_ERROR = "compile_error"
RUNTIME_FAULT = "runtime_fault"
TIMEOUT = "timeout"
CRASH = "crash"
ERROR = "error"
WRONG_RESULT = "wrong_result"
BASELINE_OUT_OF_BOUNDS = "baseline_out_of_bounds"
GHOST = "ghost"
UNSAFE = "unsafe"

KINDS = (COMPILE_ERROR, RUNTIME_FAULT, TIMEOUT, CRASH, ERROR, WRONG_RESULT, BASELINE_OUT_OF_BOUNDS, GHOST, UNSAFE)
