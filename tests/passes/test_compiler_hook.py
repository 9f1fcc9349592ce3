"""The pipeline inside Triton's compiler: scoped switch, cache separation, chaining, workers."""

from __future__ import annotations

import collections
import os
import pathlib
import subprocess
import sys

import pytest
from triton import knobs
from triton.runtime.jit import JITFunction

import kernels
import tritune.compiler as tc
from tritune import config
from tritune.compiler import cache, hook, jit_caches

TESTS = pathlib.Path(__file__).parents[1]


@pytest.fixture(autouse=True)
def private_triton_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    for key in ("TRITUNE_PASSES", "TRITUNE_FAST_MATH", "TRITUNE_STAGES", "TRITUNE_DEBUG", "TRITON_CACHE_MANAGER"):
        monkeypatch.delenv(key, raising=False)
    yield
    hook.uninstall()


def loads(compiled) -> int:
    return compiled.asm["ttir"].count("tt.load")


def test_scoped_switch_optimizes_inside_and_restores_outside():
    before = kernels.compile_sm90("table1")
    with tc.enabled(["exact"]) as active:
        inside = kernels.compile_sm90("table1")
        assert active.history[-1].counts["merge-redundant-loads"] == 1
        assert active.history[-1].counts["merge-redundant-reduces"] == 1
    after = kernels.compile_sm90("table1")
    assert (loads(before), loads(inside), loads(after)) == (2, 1, 2)
    assert inside.asm["ttir"].count('"tt.reduce"(') == 1
    assert inside.metadata.tritune["ttir"]["merge-redundant-loads"] == 1
    assert "TRITUNE_PASSES" not in os.environ and "TRITON_CACHE_MANAGER" not in os.environ


def test_optimized_binary_is_cached_under_its_own_key(tmp_path):
    with tc.enabled(["exact"]) as active:
        kernels.compile_sm90("table1")
        compiled = len(active.history)
        again = kernels.compile_sm90("table1")  # served from the salted cache: no new compilation
        assert len(active.history) == compiled and loads(again) == 1
    assert loads(kernels.compile_sm90("table1")) == 2  # the baseline key never saw the optimized one
    with tc.enabled(["fast"], fast_math=True):
        assert loads(kernels.compile_sm90("table1")) == 1


def test_salt_is_empty_without_passes_and_differs_per_configuration():
    assert cache.salt(config.Config()) == ""
    exact = cache.salt(config.Config(passes=("exact",)))
    fast = cache.salt(config.Config(passes=("exact",), fast_math=True))
    assert exact and fast and exact != fast
    assert cache.salted_key("KEY", config.Config()) == "KEY"
    assert cache.salted_key("KEY", config.Config(passes=("exact",))) != "KEY"


def test_previous_hook_is_chained_and_restored():
    calls = []

    def previous(backend, stages, options, language, capability):
        calls.append(sorted(stages))

    knobs.runtime.add_stages_inspection_hook = previous
    try:
        with tc.enabled(["exact"]):
            assert loads(kernels.compile_sm90("table1")) == 1
        assert calls and "ttir" in calls[0]
        hook.uninstall()
        assert knobs.runtime.add_stages_inspection_hook is previous
    finally:
        knobs.runtime.add_stages_inspection_hook = None


def test_merged_load_attributes_pass_ptxas():
    # .cg from the first load, evict_first from the second: ptxas rejects the pair, so the
    # kept load must not carry it. triton.compile runs the real ptxas, so this compiles or fails.
    with pytest.raises(Exception, match="cannot be combined"):
        import triton
        import triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        @triton.jit
        def illegal(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, cache_modifier=".cg", eviction_policy="evict_first"))

        triton.compile(ASTSource(illegal, signature={"x_ptr": "*fp32", "BLOCK": "constexpr"},
                                 constexprs={"BLOCK": 128}), target=GPUTarget("cuda", 90, 32))
    with tc.enabled(["merge-redundant-loads"]):
        merged = kernels.compile_sm90("cg_then_evict_first")
    assert loads(merged) == 1 and "cubin" in merged.asm
    assert "evictionPolicy = evict_first" in merged.asm["ttir"] and "cacheModifier" not in merged.asm["ttir"]


def test_debug_mode_verifies_after_each_pass(monkeypatch):
    import tritune.passes as passes

    checked = []
    real = passes.run_pipeline

    def spy(module, names, *, fast_math=False, verify=False):
        checked.append(verify)
        return real(module, names, fast_math=fast_math, verify=verify)

    monkeypatch.setattr(passes, "run_pipeline", spy)
    with tc.enabled(["exact"], debug=True):
        kernels.compile_sm90("divide_chain")
    assert checked == [True]


def test_fast_math_pipeline_on_division_chain():
    with tc.enabled(["exact"]) as active:
        exact = kernels.compile_sm90("divide_chain")
        assert active.history[-1].counts["constant-division"] == 1
    with tc.enabled(["fast"], fast_math=True) as active:
        fast = kernels.compile_sm90("divide_chain")
        # ((x / s1) / s2) / 4 -> x / ((s1 * s2) * 4): two links folded, no constant divisor left
        assert active.history[-1].counts["reassociate-division"] == 2
    assert exact.asm["ttir"].count("arith.divf") == 2
    assert fast.asm["ttir"].count("arith.divf") == 1


def test_environment_reaches_a_process_that_never_imports_tritune(tmp_path):
    # What Inductor's compile workers see: only the environment. Triton imports the cache
    # manager named there, and that import installs the hook.
    script = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import kernels; " \
             "c = kernels.compile_sm90('table1'); print(c.asm['ttir'].count('tt.load'), " \
             "'tritune' in sys.modules)"
    env = {**os.environ, "TRITUNE_PASSES": "exact", "TRITON_CACHE_MANAGER": cache.MANAGER_PATH,
           "TRITON_CACHE_DIR": str(tmp_path / "child")}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "True"]


def test_unknown_pass_and_conflicting_cache_manager_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="unknown pass 'nope'"):
        tc.enable(["nope"])
    monkeypatch.setenv("TRITON_CACHE_MANAGER", "some.module:Other")
    with pytest.raises(tc.CacheManagerConflict, match="some.module:Other"):
        tc.enable(["exact"])


def test_jit_cache_shim_parks_and_restores_in_memory_caches():
    # Fails if Triton renames JITFunction.device_caches or create_binder (see jit_caches.py).
    fn = kernels.table1
    assert isinstance(fn, JITFunction)
    assert isinstance(fn.device_caches, collections.defaultdict)
    assert fn.device_caches.default_factory.__func__ is JITFunction.create_binder
    baseline = fn.device_caches
    assert jit_caches.switch("", "salt-a") >= 1
    assert fn.device_caches is not baseline
    optimized = fn.device_caches
    jit_caches.switch("salt-a", "")
    assert fn.device_caches is baseline
    jit_caches.switch("", "salt-a")
    assert fn.device_caches is optimized
    jit_caches.switch("salt-a", "")


def test_pipeline_on_ttgir_only():
    with tc.enabled(["exact"], stages=("ttgir",), debug=True) as active:
        compiled = kernels.compile_sm90("table1")
    assert active.history[-1].stage == "ttgir"
    assert active.history[-1].counts["merge-redundant-loads"] == 1
    assert loads(compiled) == 2  # TTIR untouched
    assert compiled.asm["ttgir"].count("tt.load") == 1 and "cubin" in compiled.asm


def test_unknown_stage_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown stage"):
        tc.enable(["exact"], stages=("llir",))
