"""Imported at a lane worker's start (``Worker(preload=...)``): the GPU it is given is brought up.

A lane's workers (``tritune.loop.lanes.LocalLane``) preload this module after torch and Triton,
so that a GPU that cannot be used (a fault that recurs each time a context is made, a device that
fell off the bus) fails the worker's *start*, not its
first job: the evaluator then tries the start again and, failing, gives the lane up
(``loop.evaluate.WorkerLost``) instead of recording each candidate as a crash. Making the
context here costs nothing extra: the first job would make it anyway (~0.3-1 s), now outside its
time limit. Nothing is launched (an allocation is no kernel), so a timing on the same GPU in
another process is not disturbed. Triton's hash of itself, which its first compile would pay, is
waited for here: ``triton_hash``, preloaded first, takes it in a thread while torch imports.
Under the interpreter it does nothing.
"""

from __future__ import annotations

from tritune.worker import triton_hash


def bring_up() -> None:
    import torch

    from tritune.replay.inputs import interpreting

    if interpreting() or not torch.cuda.is_available():  # a lane given no GPU finds out from its target
        return
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    triton_hash.wait()


bring_up()
