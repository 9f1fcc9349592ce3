"""Static analysis of Triton kernels, no GPU needed: ``tritune analyze PATH``.

The data flows top to bottom, one module per step:

- ``discover``   import each .py file and collect its ``@triton.jit`` kernels (plain, autotuned,
                 heuristics, Inductor's ``CachingAutotuner``); import errors become records.
- ``pointers``   which parameters are pointers, and to what, read from their use (for ``launch``).
- ``launch``     infer the specialization to compile: signature, constexprs, num_warps.
- ``compile``    ``triton.compile`` for a GPU target on the CPU, in a private Triton cache.
- ``ttir``       TTIR op counts.
- ``ptx``        PTX statistics (global load widths, divisions, reciprocals, ...).
- ``resources``  registers, spills and stack from ``ptxas -v``.
- ``occupancy``  theoretical occupancy (seed 003's register formula and the real SM limits).
- ``report``     run all of it over a file or a directory: one dict per kernel.
- ``render``     a rich table, or JSON.

``targets`` holds the per-architecture SM limits that ``compile`` and ``occupancy`` share.
"""

from tritune.imports import import_triton_compiling

import_triton_compiling()  # before the modules below import Triton: TRITON_INTERPRET=1 may be exported

from tritune.analyze.report import RECORD_KEYS, analyze_path  # noqa: E402

__all__ = ["RECORD_KEYS", "analyze_path"]
