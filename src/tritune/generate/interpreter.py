"""Inductor's kernels on Triton's interpreter, for tests without a GPU (``on_interpreter``)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def on_interpreter() -> Iterator[None]:
    """Inductor emits Triton kernels for CPU tensors and launches them on Triton's interpreter
    (``TRITON_INTERPRET=1`` must be set before Triton is imported): ``cpu_backend = "triton"``,
    and Triton's active driver answers the target questions Inductor asks while generating code
    (there is no CPU driver in Triton 3.6). Restored on exit."""
    import torch._inductor.config as inductor_config
    import torch.utils._triton as torch_triton
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    class _Answers:  # what Inductor's code generation asks the active driver
        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: Any = None) -> int:
            return 0

        def is_active(self) -> bool:
            return True

    saved = (inductor_config.cpu_backend, torch_triton.triton_hash_with_backend, driver._active)
    inductor_config.cpu_backend = "triton"
    torch_triton.triton_hash_with_backend = lambda: "tritune-interpreter"
    driver.set_active(_Answers())
    try:
        yield
    finally:
        inductor_config.cpu_backend, torch_triton.triton_hash_with_backend, driver._active = saved
