"""Which GPUs a worker sees, from the CUDA driver (``worker.cuda_driver``), with a stand-in
driver: the calls, their order and their failures, without a GPU."""

from __future__ import annotations

import ctypes
import sys

import pytest

from tritune.loop import jobs
from tritune.worker import cuda_driver


class FakeDriver:
    """``libcuda``'s five calls over a list of (name, major, minor); ``fail``: the call that fails."""

    def __init__(self, gpus, *, init=0, fail=None):
        self.gpus, self.init, self.fail = gpus, init, fail

    def _code(self, call):
        return 999 if call == self.fail else 0

    def cuInit(self, flags):
        return self.init

    def cuDeviceGetCount(self, count):
        count._obj.value = len(self.gpus)
        return self._code("cuDeviceGetCount")

    def cuDeviceGet(self, device, ordinal):
        device._obj.value = ordinal
        return self._code("cuDeviceGet")

    def cuDeviceGetName(self, buffer, size, device):
        ctypes.memmove(buffer, self.gpus[device.value][0].encode()[:size - 1], len(self.gpus[device.value][0]))
        return self._code("cuDeviceGetName")

    def cuDeviceGetAttribute(self, value, attribute, device):
        _, major, minor = self.gpus[device.value]
        value._obj.value = {75: major, 76: minor}[attribute]
        return self._code("cuDeviceGetAttribute")


def test_devices_in_the_drivers_order_with_name_and_capability():
    driver = FakeDriver([("NVIDIA H200", 9, 0), ("NVIDIA A100-SXM4-80GB", 8, 0)])
    assert cuda_driver.devices(driver) == [{"name": "NVIDIA H200", "capability": 90},
                                           {"name": "NVIDIA A100-SXM4-80GB", "capability": 80}]


def test_a_driver_that_finds_no_device_is_no_gpu():
    assert cuda_driver.devices(FakeDriver([("NVIDIA H200", 9, 0)], init=100)) == []  # CUDA_ERROR_NO_DEVICE
    assert cuda_driver.devices(FakeDriver([])) == []


@pytest.mark.parametrize("call", ["cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute"])
def test_a_driver_that_half_answers_raises(call):
    with pytest.raises(RuntimeError, match=f"CUDA driver: {call} failed with error 999"):
        cuda_driver.devices(FakeDriver([("NVIDIA H200", 9, 0)], fail=call))


def test_no_driver_library_is_no_gpu(monkeypatch):
    monkeypatch.setattr(cuda_driver, "LIBRARY", "libtritune-no-such-driver.so.1")
    assert cuda_driver.devices_job({}) == []


def test_the_devices_job_imports_no_torch():
    """The point of the driver: a worker that lists the GPUs never pays torch's import."""
    import subprocess

    code = ("import sys; from tritune.worker.child import resolve; "
            f"print(type(resolve({jobs.DEVICES_JOB!r})({{}})).__name__, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["list", "False"]


def test_compile_job_prepares_the_launch(monkeypatch):
    """The ranking's builds load each binary and build its launcher, so the timing worker only
    loads them from the lane's cache (``jobs.prepare_launch``)."""
    prepared = []

    class Kernel:
        def _init_handles(self):
            prepared.append(True)

    class FakeReplay:
        compiles = True

        def __init__(self, *args, **kwargs):
            pass

        def compile(self, args):
            return Kernel()

    monkeypatch.setattr(jobs, "Replay", FakeReplay)
    monkeypatch.setattr(jobs, "make_args", lambda *a, **k: {})
    monkeypatch.setattr(jobs.LaunchSpec, "from_json", staticmethod(lambda body: body))
    monkeypatch.setattr(jobs, "device_of", lambda spec: "cpu")
    assert jobs.compile_job({"spec": {}, "root": "."})["compiled"] is True
    assert prepared == [True]
    jobs.prepare_launch(None)  # a Triton without the step (the interpreter's None): nothing to do
