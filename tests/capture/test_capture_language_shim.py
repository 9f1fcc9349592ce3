"""The ``triton.language`` shim: what it snapshots exists with the kinds it expects, the
interpreter's patches still look like what it unwraps, and it restores everything."""

from __future__ import annotations

import pytest
import triton.language as tl
from triton.runtime import interpreter
from triton.runtime.jit import JITFunction

from tritune.capture import _language_shim
from tritune.capture._jit_shim import ShimError
from tritune.capture._language_shim import TARGETS, check_targets, compilable_language, interpreter_patched, jit_copy
from tritune.capture.writes import compile_ttir


def helper(x):  # a jit helper's body, for InterpretedFunction / JITFunction
    return x + 1


def _add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


add_one_kernel = JITFunction(_add_one)  # not triton.jit: compiled here whatever TRITON_INTERPRET says


def test_every_target_exists_with_its_kind():
    found = check_targets()
    assert len(found) == len(TARGETS)
    assert [obj for obj, _ in _language_shim._PRISTINE] == found
    assert found[:3] == [tl, tl.core, tl.math] and found[3] is tl.tensor


def test_a_missing_target_is_a_clear_error(monkeypatch):
    monkeypatch.delattr(tl.core, "tensor_descriptor_base")
    with pytest.raises(ShimError, match=r"no triton\.language\.core\.tensor_descriptor_base: tritune capture"):
        check_targets()
    monkeypatch.setattr(tl, "tensor", object())  # there, but not a class
    with pytest.raises(ShimError, match=r"triton\.language\.tensor as a class"):
        check_targets()


@pytest.fixture
def patched_by_interpreter(monkeypatch):
    """Triton's own ``_patch_lang`` applied to this module's globals (as when a kernel calls a
    jit helper), recording every attribute it set; restored afterwards."""
    calls = []
    set_attr = interpreter._LangPatchScope.set_attr

    def recording(self, obj, name, value):
        calls.append((obj, name, getattr(obj, name, None), value))
        set_attr(self, obj, name, value)

    monkeypatch.setattr(interpreter._LangPatchScope, "set_attr", recording)
    scope = interpreter._patch_lang(helper)
    try:
        yield calls
    finally:
        scope.restore()


def test_the_interpreter_patches_only_what_the_shim_snapshots(patched_by_interpreter):
    snapshotted = {id(obj) for obj, _ in _language_shim._PRISTINE}
    outside = {f"{getattr(obj, '__name__', obj)}.{name}" for obj, name, _, _ in patched_by_interpreter
               if id(obj) not in snapshotted}
    assert not outside, f"the interpreter now patches namespaces the shim does not restore: {sorted(outside)}"


def test_the_interpreters_builtin_wrappers_are_recognised(patched_by_interpreter):
    # the wrappers _patch_attr makes (the builtins it leaves patched); its other patches
    # (tl.reduce, tl.dtype.to_ir...) the shim restores from its snapshot
    wrapped = [(before, value) for _, _, before, value in patched_by_interpreter
               if getattr(value, "__qualname__", "").startswith("_patch_attr.")]
    assert len(wrapped) > 50  # tl.load, tl.store, tl.tensor.__add__, ...
    assert all(tl.core.is_builtin(before) and interpreter_patched(value) is before for before, value in wrapped)
    assert interpreter_patched(tl.core.load) is None and interpreter_patched(helper) is None


def test_compilable_language_restores_the_builtins_for_the_block_only(patched_by_interpreter):
    wrapper = tl.load
    assert interpreter_patched(wrapper) is not None
    with compilable_language():
        assert tl.core.is_builtin(tl.load) and interpreter_patched(tl.load) is None
    assert tl.load is wrapper


def test_a_uint8_kernel_compiles_after_the_interpreter_patched_dtype(patched_by_interpreter):
    # the interpreter's dtype.to_ir asks the builder for get_uint8_ty, which the compiler's lacks
    assert tl.dtype.to_ir.__code__.co_filename.endswith("interpreter.py")
    with compilable_language():
        ttir = compile_ttir(add_one_kernel, {"x_ptr": "*u8", "out_ptr": "*u8", "n": "i32", "BLOCK": "constexpr"},
                            {"BLOCK": 16}, {})
    assert "tt.store" in ttir and "i8" in ttir


def test_language_jit_helpers_become_jit_functions():
    interpreted = interpreter.InterpretedFunction(helper, noinline=True)
    copy = jit_copy(interpreted)
    assert isinstance(copy, JITFunction) and copy.fn is helper and copy.noinline
    assert jit_copy(interpreted) is copy
