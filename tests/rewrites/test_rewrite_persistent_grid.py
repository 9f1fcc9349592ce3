"""persistent-grid (``rewrites.persistent_grid``): the rewrite's text, that it compiles for sm_90,
that fewer programs than tiles compute bitwise what the original grid computed (directly, through
replay and through the applier, on the interpreter), and the cases that must not fire.

The interpreter's "SM count" is ``replay.persistent.INTERPRETER_SMS`` (4): k=1 runs 4 programs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune import apply
from tritune.capture import _jit_shim
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.model.variant import Variant
from tritune.replay import Replay, make_args, outputs
from tritune.replay.persistent import INTERPRETER_SMS, PersistentGrid
from tritune.rewrites import RULES, KernelSource, NotRewritable
from tritune.rewrites.persistent_grid import G0, TILES
from tritune.store import DecisionStore, current_target, key_for

RULE = RULES["persistent-grid"]
INDUCTOR_POI = Path(__file__).resolve().parents[2] / "examples" / "inductor" / "triton_poi_fused_add_gelu_mul_0.py"

KERNELS = '''import triton
import triton.language as tl


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr = 16):
    """out = 2x + the program id: the id is used as a value too."""
    pid = tl.program_id(0)  # the tile
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, _twice(tl.load(x_ptr + offs, mask=mask)) + pid, mask=mask)


@triton.jit
def transpose(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(axis=0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(out_ptr + rn[None, :] * M + rm[:, None], x, mask=mask)


@triton.jit
def row_shift(X, Y, B, stride, n_cols, BLOCK: tl.constexpr):
    # one program per row, the pointers advanced to it (the tutorial's way)
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + cols, mask=cols < n_cols, other=0.0)
    tl.store(Y + cols, tl.exp(x - tl.load(B + row)), mask=cols < n_cols)
'''

SCALE_REWRITTEN = '''@triton.jit
def scale(x_ptr, out_ptr, n, _tritune_tiles, BLOCK: tl.constexpr = 16):
    """out = 2x + the program id: the id is used as a value too."""
    for _tritune_tile in tl.range(tl.program_id(0), _tritune_tiles, tl.num_programs(0)):
        pid = _tritune_tile  # the tile
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, _twice(tl.load(x_ptr + offs, mask=mask)) + pid, mask=mask)
'''


def rewrite(kernel: str, k: int = 1, text: str = KERNELS) -> str:
    return RULE.apply(KernelSource.parse(text, kernel), {"k": k}).source


def function_lines(text: str, name: str) -> tuple[int, int]:
    fn = KernelSource.parse(text, name).function
    return fn.lineno, fn.end_lineno


# ---------------------------------------------------------------------------------- the rewrite

def test_a_1d_kernel_becomes_a_loop_over_tiles_and_every_other_byte_stays():
    new = rewrite("scale")
    assert SCALE_REWRITTEN in new
    first, last = function_lines(KERNELS, "scale")
    lines, new_lines = KERNELS.splitlines(keepends=True), new.splitlines(keepends=True)
    grown = len(new_lines) - len(lines)
    assert grown == 1  # the for line
    assert new_lines[:first - 1] == lines[:first - 1] and new_lines[last + grown:] == lines[last:]


def test_a_2d_kernel_recovers_both_program_ids_in_triton_s_order():
    new = rewrite("transpose")
    assert "(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, _tritune_tiles, _tritune_g0):" in new
    assert ("        _tritune_pid0 = _tritune_tile % _tritune_g0\n"
            "        _tritune_pid1 = _tritune_tile // _tritune_g0\n"
            "        rm = _tritune_pid0 * BM + tl.arange(0, BM)\n"
            "        rn = _tritune_pid1 * BN + tl.arange(0, BN)\n") in new


def test_a_parameter_the_body_advances_is_rebound_for_each_tile():
    new = rewrite("row_shift")
    assert ("    # one program per row, the pointers advanced to it (the tutorial's way)\n"
            "    for _tritune_tile in tl.range(tl.program_id(0), _tritune_tiles, tl.num_programs(0)):\n"
            "        _tritune_v_X = X\n        _tritune_v_Y = Y\n"
            "        row = _tritune_tile\n        _tritune_v_X += row * stride\n") in new
    assert "tl.load(_tritune_v_X + cols" in new and "tl.store(_tritune_v_Y + cols" in new
    assert "tl.load(B + row)" in new  # read, never assigned: not renamed


def test_rewrites_propose_each_k_with_its_grid_rule_and_apply_walks_k():
    found = RULE.rewrites(KernelSource.parse(KERNELS, "transpose"))
    assert [r.params for r in found] == [{"k": 4}, {"k": 8}, {"k": 2}, {"k": 1}]
    assert all(r.exact == "exact" and r.rule == "persistent-grid" for r in found)
    assert found[0].grid == {"persistent": {"k": 4, "tiles": TILES, "g0": G0}}
    assert RULE.apply(KernelSource.parse(KERNELS, "scale"), {"k": 3}).grid == {"persistent": {"k": 3, "tiles": TILES}}
    assert found[0].to_json()["grid"] == found[0].grid and found[0].knobs[0].values == (1, 2, 4, 8)
    assert len({r.source for r in found}) == 1  # k moves the launch, not the text
    with pytest.raises(NotRewritable, match="takes"):
        RULE.apply(KernelSource.parse(KERNELS, "scale"), {"k": 0})


def test_launch_facts_drop_the_k_that_would_not_loop_and_check_the_grid_shape():
    def ks(name, grid, sms=132):
        return [r.params["k"] for r in RULE.rewrites(KernelSource.parse(KERNELS, name,
                                                                        launch={"grid": grid, "sm_count": sms}))]

    assert ks("scale", [600]) == [4, 2, 1] and ks("scale", [6000]) == [4, 8, 2, 1]
    assert ks("transpose", [20, 20]) == [2, 1]
    with pytest.raises(NotRewritable, match="one wave"):
        ks("scale", [132])
    with pytest.raises(NotRewritable, match="second dimension"):
        ks("scale", [600, 2])
    with pytest.raises(NotRewritable, match="third dimension"):
        ks("transpose", [60, 2, 2])


def test_an_inductor_kernel_keeps_its_constant_sizes_before_the_loop():
    source = INDUCTOR_POI.read_text()
    new = rewrite("triton_poi_fused_add_gelu_mul_0", text=source)
    assert ("(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr, _tritune_tiles):\n"
            "    xnumel = 1024000\n"
            "    for _tritune_tile in tl.range(tl.program_id(0), _tritune_tiles, tl.num_programs(0)):\n"
            "        xoffset = _tritune_tile * XBLOCK\n") in new
    assert new.endswith(source[source.index("\n\ndef get_args"):])


SM90 = {
    "scale": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", TILES: "i32", "BLOCK": "constexpr"},
              {"BLOCK": 128}),
    "transpose": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32", "BM": "constexpr",
                   "BN": "constexpr", TILES: "i32", G0: "i32"}, {"BM": 32, "BN": 32}),
    "row_shift": ({"X": "*fp32", "Y": "*fp32", "B": "*fp32", "stride": "i32", "n_cols": "i32", "BLOCK": "constexpr",
                   TILES: "i32"}, {"BLOCK": 256}),
}


def test_the_rewritten_kernels_compile_for_sm90(tmp_path):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    text = KERNELS
    for name in SM90:
        text = rewrite(name, text=text)
    module = load(tmp_path / "compiled_persistent.py", text)
    for name, (signature, constexprs) in SM90.items():
        compiled = triton.compile(ASTSource(getattr(module, name), signature=signature, constexprs=constexprs),
                                  target=GPUTarget("cuda", 90, 32))
        assert "scf.for" in compiled.asm["ttir"] and compiled.asm["ptx"], name


def load(path: Path, text: str):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------- on the interpreter

@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The original kernels and their rewrites (k does not change the text), interpreted."""
    folder = tmp_path_factory.mktemp("persistent_kernels")
    text = KERNELS
    for name in ("scale", "transpose", "row_shift"):
        text = rewrite(name, text=text)
    (folder / "persistent_original.py").write_text(KERNELS)
    (folder / "persistent_rewritten.py").write_text(text)
    return (import_interpreted(folder / "persistent_original.py", "persistent_original"),
            import_interpreted(folder / "persistent_rewritten.py", "persistent_rewritten"))


def run_case(module, name: str, grid: tuple, **extras) -> torch.Tensor:
    """Launch kernel ``name`` on fixed inputs; its output."""
    gen = torch.Generator().manual_seed(0)
    if name == "scale":
        x, out = torch.randn(150, generator=gen), torch.zeros(150)
        getattr(module, name)[grid](x, out, 150, BLOCK=16, **extras)  # 10 tiles
    elif name == "transpose":
        x, out = torch.randn(40, 70, generator=gen), torch.zeros(70, 40)
        getattr(module, name)[grid](x, out, 40, 70, BM=16, BN=16, **extras)  # 3 x 5 tiles
    else:
        x, out, b = torch.randn(7, 20, generator=gen), torch.zeros(7, 20), torch.randn(7, generator=gen)
        getattr(module, name)[grid](x, out, b, 20, 20, BLOCK=32, **extras)  # 7 rows
    return out


CASES = {"scale": ((10,), {TILES: 10}), "transpose": ((3, 5), {TILES: 15, G0: 3}), "row_shift": ((7,), {TILES: 7})}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("programs", [1, 3, 4])
def test_fewer_programs_than_tiles_compute_bitwise_the_same(kernels, name, programs):
    original, rewritten = kernels
    grid, extras = CASES[name]
    expected = run_case(original, name, grid)
    assert torch.equal(run_case(rewritten, name, (programs,), **extras), expected)


def test_the_comparison_sees_a_missing_tile(kernels):
    original, rewritten = kernels
    expected = run_case(original, "scale", (10,))
    assert not torch.equal(run_case(rewritten, "scale", (4,), **{TILES: 9}), expected)  # planted: one tile short


def test_the_persistent_launch_of_a_grid():
    one, two = PersistentGrid(2, TILES, None, 4), PersistentGrid(1, TILES, G0, 4)
    assert one.launch((10,)) == ((8, 1, 1), {TILES: 10}) and one.launch((3, 1, 1)) == ((3, 1, 1), {TILES: 3})
    assert one.launch((10, 2)) is None and two.launch((2, 2, 2)) is None
    assert two.launch((3, 5)) == ((4, 1, 1), {TILES: 15, G0: 3})
    assert two.adapter(("a", G0, TILES))(("x", 0, 0), (3, 5, 1)) == (("x", 3, 15), (4, 1, 1))
    with pytest.raises(ValueError):
        PersistentGrid.of({"persistent": {"k": 0, "tiles": TILES}}, 4)


def test_a_variant_without_a_grid_keeps_its_json_and_hash():
    plain = Variant(name="x", source="s")
    assert "grid" not in plain.to_json() and Variant.from_json(plain.to_json()) == plain
    rule = {"persistent": {"k": 2, "tiles": TILES}}
    persistent = Variant(name="x", source="s", grid=rule)
    assert Variant.from_json(persistent.to_json()) == persistent and persistent.key() != plain.key()
    assert not Variant(grid=rule).is_baseline and "persistent" in persistent.describe()


# --------------------------------------------------------------------------- replay and apply

@pytest.fixture(scope="module")
def captured(kernels, tmp_path_factory):
    """The original kernels' launches, captured: {kernel: (spec, capture dir)}."""
    out = tmp_path_factory.mktemp("persistent_capture")
    original, _ = kernels
    with capture(out):
        for name, (grid, _) in CASES.items():
            run_case(original, name, grid)
    return {spec.kernel: spec for spec in read_launches(out)}, out


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("k", [1, 2])
def test_replay_launches_k_x_sms_programs_with_the_tile_count(captured, name, k, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    specs, root = captured
    spec = specs[name]
    rw = RULE.apply(KernelSource.parse(KERNELS, name), {"k": k})
    variant = Variant(name=rw.name, source=rw.source, grid=rw.grid)
    base, persistent = Replay(spec, root=root), Replay(spec, variant, root=root)
    tiles = CASES[name][1][TILES]
    assert persistent.program_grid == base.grid and persistent.grid == (min(tiles, k * INTERPRETER_SMS), 1, 1)
    want, got = make_args(spec, root, seed=1), make_args(spec, root, seed=1)
    base(want)
    persistent(got)
    for arg, value in outputs(spec, want).items():
        assert torch.equal(got[arg], value), arg


def test_replay_refuses_a_grid_the_rewrite_does_not_cover(captured, monkeypatch):
    from tritune.model.launch import SpecError

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    specs, root = captured
    rw = RULE.apply(KernelSource.parse(KERNELS, "scale"), {"k": 1})
    spec = specs["scale"]
    spec.grid = [10, 2, 1]
    with pytest.raises(SpecError, match="does not cover"):
        Replay(spec, Variant(source=rw.source, grid=rw.grid), root=root)


def decide(store, key, kernel: str, k: int, text: str = KERNELS) -> None:
    """A verified decision: persistent-grid with ``k`` for ``kernel`` on ``key``."""
    from test_apply_inductor import decide as decide_variant

    rw = RULE.apply(KernelSource.parse(text, kernel), {"k": k})
    decide_variant(store, key, Variant(name=rw.name, source=rw.source, grid=rw.grid))


@pytest.fixture
def decided(captured, tmp_path):
    """A store deciding persistent-grid k=1 for the captured scale launch."""
    specs, _ = captured
    with DecisionStore(tmp_path / "decisions.db") as store:
        decide(store, key_for(specs["scale"], current_target("cpu")), "scale", 1)
        yield store
    apply.disable()


def test_the_applier_launches_a_decided_persistent_kernel_on_fewer_programs(kernels, decided):
    original, _ = kernels
    expected = run_case(original, "scale", (10,))
    seen = []

    def spy(launch, run):
        seen.append((launch.grid, dict(launch.kwargs)))
        return run(launch)

    applier = apply.enable(decided, device="cpu")
    _jit_shim.install_around(spy)  # inside the applier's: what it hands Triton
    try:
        assert torch.equal(run_case(original, "scale", (10,)), expected)
        assert torch.equal(run_case(original, "scale", lambda meta: (triton.cdiv(150, meta["BLOCK"]),)), expected)
        assert torch.equal(run_case(original, "scale", (10, 2)), expected)  # a grid it does not cover
    finally:
        _jit_shim.uninstall_around(spy)
    assert [grid for grid, _ in seen] == [(4, 1, 1), (4, 1, 1), (10, 2)]
    assert seen[0][1][TILES] == 10 and seen[1][1][TILES] == 10 and TILES not in seen[2][1]
    assert applier.stats()["scale"] == {"launches": 3, "applied": 2, "skipped": 1, "decisions": 1, "noalias_fallbacks": 0}


def test_the_direct_launch_puts_the_tile_count_in_and_launches_fewer_programs(tmp_path, monkeypatch):
    """Compiled for sm_90 against a driver with no GPU (``test_apply_fast.no_gpu``): the first
    launches go through Triton's run, the next ones straight to the binary, each with the tile
    count in its parameter and min(tiles, k x SMs) programs."""
    from test_apply_fast import no_gpu

    from tritune.replay import persistent
    from tritune.store import LiveKeyer

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(persistent, "_sm_count", lambda device: 3)  # "cuda:0" has 3 SMs here
    module = load(tmp_path / "direct_persistent.py", KERNELS)
    x, out = torch.zeros(150), torch.zeros(150)
    launches: list = []
    with no_gpu(launches), DecisionStore(tmp_path / "decisions.db") as store:
        try:
            module.scale.warmup(x, out, 150, BLOCK=16, grid=(1,))
        except Exception as exc:  # noqa: BLE001 - no ptxas here
            pytest.skip(f"cannot compile for sm_90 on this machine: {exc}")
        key = LiveKeyer.for_kernel(module.scale, current_target("cpu"))({"x_ptr": x, "out_ptr": out, "n": 150,
                                                                             "BLOCK": 16})
        decide(store, key, "scale", 2)
        applier = apply.enable(store, device="cpu")
        try:
            for _ in range(3):
                module.scale[(10,)](x, out, 150, BLOCK=16)
            module.scale[lambda meta: (triton.cdiv(150, meta["BLOCK"]),)](x, out, 150, BLOCK=16)
            module.scale[(10, 2)](x, out, 150, BLOCK=16)  # not covered: as written
        finally:
            apply.disable()
    assert [launch[0] for launch in launches] == [(6, 1, 1)] * 4 + [(10, 2, 1)]
    # Triton's run passes launch metadata, Direct None: the shim's first launch and the one that
    # keeps the binary go through Triton's run, then the fixed grid and the callable one go direct
    assert [launch[2] is None for launch in launches] == [False, False, True, True, False]
    assert all(launch[3][:4] == (x, out, 150, 10) for launch in launches[:4])  # n, then _tritune_tiles
    assert applier.stats()["scale"] == {"launches": 5, "applied": 4, "skipped": 1, "decisions": 1, "noalias_fallbacks": 0}


def test_the_inductor_launch_time_path_passes_the_tile_count(tmp_path, monkeypatch):
    """Inductor's GPU path on the CPU (``test_apply_inductor._faked_tuner``: its launcher and the
    compiled kernel are recorders): after Inductor's own first launch, the decision launches
    min(tiles, k x SMs) programs with the tile count of Inductor's grid as its last argument."""
    from types import SimpleNamespace

    from test_apply_fast import NoGpu
    from test_apply_inductor import _faked_tuner
    from triton.runtime import driver

    from tritune.apply import inductor as inductor_apply
    from tritune.replay import persistent

    tuner, args, spec, inductors, compiled = _faked_tuner()
    rw = RULE.apply(KernelSource.parse(INDUCTOR_POI.read_text(), spec.kernel), {"k": 2})
    names = [*tuner.fn.arg_names, TILES]
    assert f"XBLOCK : tl.constexpr, {TILES}):" in rw.source  # the variant's parameter order, stood in for here
    variant_fn = SimpleNamespace(arg_names=names, run=lambda *a, grid, warmup, **kwargs: compiled)
    monkeypatch.setattr(inductor_apply, "variant_kernel", lambda fn, variant: variant_fn)
    monkeypatch.setattr(driver, "_active", NoGpu())
    monkeypatch.setattr(persistent, "_sm_count", lambda device: 132)
    with DecisionStore(tmp_path / "d.db") as store:
        decide(store, key_for(spec, current_target("cpu")), spec.kernel, 2, INDUCTOR_POI.read_text())
    applier = apply.enable(tmp_path / "d.db", device="cpu")
    try:
        for _ in range(3):
            tuner.run(*args, stream=7)
    finally:
        apply.disable()
    tiles = triton.cdiv(1024000, spec.constexprs["XBLOCK"])
    assert inductors == [7] and len(compiled.launches) == 2 and tiles > 264
    for grid, values, stream in compiled.launches:
        assert grid == (264, 1, 1) and values[:4] == (*args[:3], 1024000) and values[4:] == (spec.constexprs["XBLOCK"],
                                                                                               tiles)
    assert applier.stats()[spec.kernel]["applied"] == 2


# ------------------------------------------------------------------------------ must not fire

def kernel(body: str, params: str = "x_ptr, out_ptr, n, BLOCK: tl.constexpr", extra: str = "") -> str:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return f"import triton\nimport triton.language as tl\n{extra}\n\n@triton.jit\ndef k({params}):\n{lines}"


OFFS = "pid = tl.program_id(0)\noffs = pid * BLOCK + tl.arange(0, BLOCK)\n"
HELPER_PID = "\n@triton.jit\ndef where_am_i():\n    return tl.program_id(0)\n"
HELPER_ATOMIC = "\n@triton.jit\ndef bump(p):\n    tl.atomic_add(p, 1)\n"
REFUSED = {
    "a grid-stride loop": (kernel(OFFS + "for i in range(pid, n, tl.num_programs(0)):\n    tl.store(out_ptr + i, 1)"),
                           "num_programs"),
    "an early return": (kernel(OFFS + "if pid * BLOCK >= n:\n    return\ntl.store(out_ptr + offs, 1.0)"),
                        "returns early"),
    "a lock": (kernel(OFFS + "while tl.atomic_cas(x_ptr, 0, 1) == 1:\n    pass\n"
                      "tl.store(out_ptr + offs, 1.0)\ntl.atomic_xchg(x_ptr, 0)"), "atomic_cas"),
    "an atomic counter": (kernel(OFFS + "tl.atomic_add(out_ptr + offs, 1.0)"), "atomic_add"),
    "a barrier": (kernel(OFFS + "tl.store(out_ptr + offs, 1.0)\ntl.debug_barrier()"), "debug_barrier"),
    "a 3-D grid": (kernel(OFFS + "tl.store(out_ptr + offs + tl.program_id(2), 1.0)"), "3-D grid"),
    "a computed axis": (kernel("axis = 0\npid = tl.program_id(axis)\ntl.store(out_ptr + pid, 1.0)"), "literal"),
    "a helper reading the program id": (kernel(OFFS + "tl.store(out_ptr + where_am_i(), 1.0)", extra=HELPER_PID),
                                        "helper where_am_i reads the program id"),
    "a helper with an atomic": (kernel(OFFS + "bump(x_ptr)", extra=HELPER_ATOMIC), "helper bump uses atomic_add"),
    "a function it cannot see": (kernel(OFFS + "tl.store(out_ptr + offs, external(offs))",
                                        extra="from elsewhere import external"), "calls external"),
    "a module it cannot see": (kernel(OFFS + "tl.store(out_ptr + offs, other.f(offs))", extra="import other"),
                               "calls other.f"),
    "inline assembly": (kernel(OFFS + 'y = tl.inline_asm_elementwise("mov.u32 $0, %ctaid.x;", "=r", [], '
                                      'dtype=tl.int32, is_pure=True, pack=1)\ntl.store(out_ptr + offs, y)'),
                        "inline assembly"),
    "no program id": (kernel("offs = tl.arange(0, BLOCK)\ntl.store(out_ptr + offs, 1.0)"), "no tl.program_id"),
    "a string over lines": (kernel(OFFS + 'tl.static_print("""a\nb""")'), "several lines"),
    "already rewritten": (rewrite("scale"), "_tritune_"),
    "keyword-only parameters": (kernel(OFFS, params="x_ptr, *, BLOCK: tl.constexpr"), "keyword-only"),
    # Inductor's split scan: each tile spins on the previous tile's flag (an atomic inside the helper);
    # with more programs than fit on the GPU at once, a program's next tile waits on one never started
    "a decoupled lookback": (kernel(OFFS + "prefix = triton_helpers.exclusive_scan_decoupled_lookback("
                                           "x_ptr, offs, pid, combine)\ntl.store(out_ptr + offs, prefix)",
                                    extra="from torch._inductor.runtime import triton_helpers"),
                             "exclusive_scan_decoupled_lookback"),
    # Triton's builtins include getattr: a callee computed by a call is one the rule cannot name
    "a program id through getattr": (kernel(OFFS + 'tl.store(out_ptr + offs, getattr(tl, "program_id")(0))'),
                                     "cannot name"),
    "an atomic through getattr": (kernel(OFFS + 'getattr(tl, "atomic_add")(x_ptr, 1)\ntl.store(out_ptr + offs, 1.0)'),
                                  "cannot name"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_must_not_fire(case):
    text, reason = REFUSED[case]
    name = "scale" if case == "already rewritten" else "k"
    with pytest.raises(NotRewritable, match=reason):
        RULE.rewrites(KernelSource.parse(text, name))
    with pytest.raises(NotRewritable):
        RULE.apply(KernelSource.parse(text, name), {"k": 2})


def test_the_planted_kernels_are_otherwise_rewritable():
    """Each refusal is for its construct: the same kernel without it is rewritten."""
    assert RULE.rewrites(KernelSource.parse(kernel(OFFS + "tl.store(out_ptr + offs, 1.0)"), "k"))
    assert RULE.rewrites(KernelSource.parse(kernel(OFFS + "tl.store(out_ptr + offs, twice(offs))",
                                                   extra="\n@triton.jit\ndef twice(p):\n    return p * 2\n"), "k"))
