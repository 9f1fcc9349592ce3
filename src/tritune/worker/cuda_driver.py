"""The GPUs a process sees, from the CUDA driver itself (``libcuda`` through ctypes): no torch.

``tritune optimize`` asks which GPUs this host shows before it makes its lanes, and the parent
never initialises CUDA, so a worker answers (``lanes.visible_gpus``). That worker imported torch
to ask ``torch.cuda``: 5.3 s on an H200 host whose packages carry no bytecode (torch's import
alone 3.8 s), paid before the run's first lane started, on every run. The driver answers the
same question (the same devices in the same order: the runtime under torch enumerates through
it, honouring ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` alike; the same names, which
``cudaGetDeviceProperties`` copies from ``cuDeviceGetName``) in a process that imports nothing
but ctypes: its interpreter's start and ``cuInit``.

No driver library, or a driver that finds no device (``cuInit`` fails): no GPU, as
``torch.cuda.device_count()`` says 0 there. Imports only the standard library.
"""

from __future__ import annotations

import ctypes
from typing import Any

LIBRARY = "libcuda.so.1"
_SUCCESS = 0
_MAJOR, _MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
_NAME_BYTES = 256


def devices_job(payload: dict) -> list[dict]:
    """``{}`` -> ``[{"name", "capability"}]``, the GPUs this process sees, in CUDA's order (the
    worker's job, ``lanes.visible_gpus``)."""
    try:
        driver = ctypes.CDLL(LIBRARY)
    except OSError:
        return []
    return devices(driver)


def devices(driver: Any) -> list[dict]:
    """What ``driver`` (``libcuda``'s functions, or a stand-in with the same calls) enumerates.
    A call that fails after ``cuInit`` raises: a driver that half answers is not "no GPU"."""
    if driver.cuInit(0) != _SUCCESS:
        return []
    count = ctypes.c_int(0)
    _check(driver.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    found = []
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        _check(driver.cuDeviceGet(ctypes.byref(device), ordinal), "cuDeviceGet")
        name = ctypes.create_string_buffer(_NAME_BYTES)
        _check(driver.cuDeviceGetName(name, _NAME_BYTES, device), "cuDeviceGetName")
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        _check(driver.cuDeviceGetAttribute(ctypes.byref(major), _MAJOR, device), "cuDeviceGetAttribute")
        _check(driver.cuDeviceGetAttribute(ctypes.byref(minor), _MINOR, device), "cuDeviceGetAttribute")
        found.append({"name": name.value.decode("utf-8", errors="replace"),
                      "capability": major.value * 10 + minor.value})
    return found


def _check(code: int, call: str) -> None:
    if code != _SUCCESS:
        raise RuntimeError(f"CUDA driver: {call} failed with error {code}")
