"""The optimization loop: profile, propose, build/run, remediate, arbitrate, refine.

- ``category``  what family a kernel is (elementwise, reduction, scan, matmul, attention)
- ``families``  proposer families behind one interface, each with its verification mode
- ``jobs``      worker entries: a candidate built, verified and timed in one isolated call
- ``evaluate``  ``Evaluator``: baseline, candidate, confirmation and profile through a worker
- ``kernel``    ``KernelLoop``: the rounds for one kernel, recorded in the decision store
- ``session``   ``optimize(root, out)``: every kernel of a capture, resumable, ``optimize.json``
"""

from tritune.loop.kernel import KernelLoop
from tritune.loop.session import OptimizeError, optimize, plan

__all__ = ["KernelLoop", "OptimizeError", "optimize", "plan"]
