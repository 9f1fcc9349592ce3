"""Imported at a lane worker's start (``Worker(preload=...)``): the GPU it is given is brought up.

A lane's workers (``tritune.loop.lanes.LocalLane``) preload this module after torch and Triton,
so that a GPU that cannot be used (a fault that recurs each time a context is made, a device that
fell off the bus) fails the worker's *start*, not its
first job: the evaluator then tries the start again and, failing, gives the lane up
(``loop.evaluate.WorkerLost``) instead of recording each candidate as a crash. Making the
context here costs nothing extra: the first job would make it anyway (~0.3-1 s), now outside its
time limit. Nothing is launched (an allocation is no kernel), so a timing on the same GPU in
another process is not disturbed. Triton's hash of itself, which its first compile would pay, is
taken here too. Under the interpreter it does nothing.
"""

from __future__ import annotations


def bring_up() -> None:
    import torch

    from tritune.replay.inputs import interpreting

    if interpreting() or not torch.cuda.is_available():  # a lane given no GPU finds out from its target
        return
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    _hash_triton()


def _hash_triton() -> None:
    """Triton hashes its own sources once per process, at its first compile (~0.4 s of the
    ranking's first timing call on an H200): done here, outside any job's time."""
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # another Triton: its first compile pays it
        return
    triton_key()


bring_up()
