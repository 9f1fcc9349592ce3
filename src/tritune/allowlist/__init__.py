"""The first wall: what untrusted kernel code may be, checked on its syntax tree before any of it runs.

``sandbox`` holds the check (``check``, ``check_variant_source``, ``Unsafe``), ``grammar`` the
allowlist's grammar, ``kernel_api`` the members of Triton's public API a kernel may name. A model's
reply, a stored source variant tritune did not derive by its own rules, and a generated module's
kernels all pass it; the second wall is the worker's operating-system jail (``tritune.worker.jail``).
It sits low, beside replay and apply, which check stored sources with it before importing them.
"""
