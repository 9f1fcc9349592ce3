"""The JIT shim: what it patches exists in this Triton, it is reversible, and it sees each launch once."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune.capture import _jit_shim
from tritune.capture._jit_shim import TARGETS, ShimError, check_targets, install, uninstall

KERNELS = Path(__file__).parents[1] / "programs" / "capture_kernels.py"


@pytest.fixture(scope="module")
def k():
    module = import_interpreted(KERNELS, "capture_kernels_shim")
    return module


def _owner(module_name: str, class_name: str):
    return getattr(importlib.import_module(module_name), class_name)


def test_every_target_exists_with_the_signature_the_shim_relies_on():
    check_targets()
    for module_name, class_name, attr, role in TARGETS:
        params = inspect.signature(getattr(_owner(module_name, class_name), attr)).parameters
        if role == "launch":  # run(self, *args, grid, warmup, **kwargs)
            assert params["grid"].kind is inspect.Parameter.KEYWORD_ONLY
            assert params["warmup"].kind is inspect.Parameter.KEYWORD_ONLY
    # the autotuner hands the chosen config to the jit function as keyword arguments
    assert "**config.all_kwargs()" in inspect.getsource(_owner("triton.runtime.autotuner", "Autotuner").run)


def test_a_renamed_target_is_a_clear_error(monkeypatch):
    monkeypatch.delattr(_owner("triton.runtime.autotuner", "Heuristics"), "run")
    with pytest.raises(ShimError, match=r"no triton\.runtime\.autotuner\.Heuristics\.run"):
        check_targets()


def test_install_twice_and_uninstall_restore_the_originals():
    originals = {t[:3]: _owner(*t[:2]).__dict__[t[2]] for t in TARGETS}
    first, second = (lambda launch: None), (lambda launch: None)
    install(first)
    install(first)
    install(second)
    try:
        for (module_name, class_name, attr), original in originals.items():
            patched = _owner(module_name, class_name).__dict__[attr]
            assert patched is not original and patched.__wrapped__ is original
        uninstall(first)
        assert _jit_shim.installed()
    finally:
        uninstall(second)
    assert not _jit_shim.installed()
    for (module_name, class_name, attr), original in originals.items():
        assert _owner(module_name, class_name).__dict__[attr] is original


@pytest.fixture
def seen():
    launches = []

    def listener(launch):
        launches.append(launch)

    install(listener)
    yield launches
    uninstall(listener)


def test_each_launch_is_seen_once_with_its_kind(k, seen):
    x, out = torch.randn(20), torch.empty(20)
    k.inplace_kernel[(1,)](x, 20)
    k.tuned_kernel[lambda meta: (triton.cdiv(20, meta["BLOCK"]),)](x, out, 20)  # 2 trials + 1 launch
    k.heuristic_kernel[(1,)](x, out, 20)
    k.inplace_kernel.warmup(x, 20, grid=(1,))  # a warmup is not a launch
    assert [launch.kind for launch in seen] == ["jit", "autotune", "heuristics"]
    tuned = seen[1]
    assert tuned.kwargs["BLOCK"] == k.tuned_kernel.best_config.kwargs["BLOCK"]
    assert tuned.kwargs["num_warps"] == k.tuned_kernel.best_config.num_warps
    assert tuned.autotuner is k.tuned_kernel
    assert seen[0].interpreted and seen[0].args[1] == 20


def test_a_launch_made_while_handling_one_is_not_seen(k):
    seen = []
    x = torch.zeros(4)

    def relaunching(launch):
        seen.append(launch)
        if len(seen) == 1:
            k.inplace_kernel[(1,)](x, 4)  # e.g. a listener or a pre-run hook launching

    install(relaunching)
    try:
        k.inplace_kernel[(1,)](x, 4)
    finally:
        uninstall(relaunching)
    assert len(seen) == 1 and torch.equal(x, torch.full((4,), 2.0))


def test_a_failing_listener_does_not_break_the_program(k, capfd, monkeypatch):
    monkeypatch.setattr(_jit_shim, "_reported", set())

    def broken(launch):
        raise ValueError("planted")

    x = torch.zeros(4)
    install(broken)
    try:
        k.inplace_kernel[(1,)](x, 4)
        k.inplace_kernel[(1,)](x, 4)
    finally:
        uninstall(broken)
    assert torch.equal(x, torch.full((4,), 2.0))
    err = capfd.readouterr().err
    assert err.count("kernel inplace_kernel not recorded: ValueError: planted") == 1


def test_quiet_hides_launches(k, seen):
    with _jit_shim.quiet():
        k.inplace_kernel[(1,)](torch.zeros(4), 4)
    assert seen == []


def test_straight_through_skips_the_shim_until_someone_else_wants_the_launches(k):
    """A hook with nothing to do for a kernel sends its later launches straight to Triton; a
    listener installed afterwards sees them again, and the last one out leaves no bypass."""
    hooked, heard = [], []

    def hook(launch, run):
        hooked.append(launch)
        _jit_shim.straight_through(launch, hook)
        return run(launch)

    x = torch.zeros(4)
    _jit_shim.install_around(hook)
    try:
        for _ in range(3):
            k.inplace_kernel[(1,)](x, 4)
        assert len(hooked) == 1 and "run" in vars(k.inplace_kernel)
        install(heard.append)
        try:
            k.inplace_kernel[(1,)](x, 4)
            k.inplace_kernel[(1,)](x, 4)
        finally:
            uninstall(heard.append)
        assert len(heard) == 2 and len(hooked) == 3  # with a listener there: no bypass
    finally:
        _jit_shim.uninstall_around(hook)
    assert "run" not in vars(k.inplace_kernel) and not _jit_shim.installed()
    assert torch.equal(x, torch.full((4,), 5.0))  # each of the 5 launches ran once
