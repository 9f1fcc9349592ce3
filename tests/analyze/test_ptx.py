"""tritune.analyze.ptx on PTX snippets written here, and resources' ptxas-log parser."""

import pytest

from tritune.analyze.ptx import access_bits, parse_ptx
from tritune.analyze.resources import ResourceError, parse_ptxas_log

HEADER = """//
.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(
\t.param .u64 .ptr .global .align 1 k_param_0
)
.reqntid 128
"""


def ptx(body: str) -> str:
    return HEADER + "{\n\t.reg .b32 \t%r<40>;\n\t.reg .b64 \t%rd<9>;\n" + body + "\n\tret;\n}\n"


def test_global_loads_by_width():
    stats = parse_ptx(ptx("""
\t// begin inline asm
\tmov.u32 %r1, 0x0;
\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
\t@%p1 ld.global.L1::evict_last.v4.b32 { %r5, %r6, %r7, %r8 }, [ %rd2 + 0 ];
\t@!%p2 ld.global.L1::evict_first.L2::cache_hint.v2.b32 { %r9, %r10 }, [ %rd3 + 0 ], %rd4;
\tld.global.nc.b16 %rs1, [ %rd5 + 0 ];
\t@%p3 ld.global.b32 { %r11 }, [ %rd6 + 0 ];
\t// end inline asm
"""))
    assert stats.global_loads == {16: 1, 32: 1, 64: 1, 128: 2}
    assert stats.vector_loads_128 == 2
    assert stats.global_stores == {}


def test_stores_shared_divisions_reciprocals_and_specials():
    stats = parse_ptx(ptx("""
\tdiv.full.f32 \t%r17, %r1, %r9;
\tdiv.full.f32 \t%r18, %r2, %r10;
\tdiv.rn.f32 \t%r19, %r3, %r11;
\tdiv.rn.f64 \t%fd1, %fd2, %fd3;
\tdiv.s32 \t%r20, %r4, %r5;
\trcp.approx.ftz.f32 \t%r21, %r6;
\trcp.rn.f32 \t%r22, %r6;
\tex2.approx.f32 \t%r23, %r7;
\tex2.approx.ftz.f32 \t%r24, %r7;
\tlg2.approx.f32 \t%r25, %r7;
\tsqrt.rn.f32 \t%r26, %r7;
\trsqrt.approx.ftz.f32 \t%r27, %r7;
\tfma.rn.f32 \t%r28, %r1, %r2, %r3;
\tst.shared.b32 \t[%r29], %r28;
\tbar.sync \t0;
\tld.shared.v2.b32 \t{%r30, %r31}, [%r29];
\t@%p1 st.global.v4.b32 [ %rd7 + 0 ], { %r1, %r2, %r3, %r4 };
\t@%p1 st.global.b16 [ %rd8 + 0 ], { %rs1 };
$L__BB0_2:
"""))
    assert stats.divisions == {"div.full.f32": 2, "div.rn.f32": 1, "div.rn.f64": 1, "div.s32": 1}
    assert stats.reciprocals == {"rcp.approx.ftz.f32": 1, "rcp.rn.f32": 1}
    assert stats.special == {"ex2": 2, "lg2": 1, "rsqrt": 1, "sqrt": 1}
    assert stats.global_stores == {16: 1, 128: 1}
    assert (stats.shared_loads, stats.shared_stores, stats.fma, stats.barriers) == (1, 1, 1, 1)
    assert stats.global_loads == {}
    # 18 instructions above plus ret; directives, labels and comments are not instructions
    assert stats.instructions == 19


def test_debug_sections_and_directives_are_not_instructions():
    text = ptx("\tmov.u32 %r1, 0;") + "\t.section\t.debug_info\n\t{\n.b32 40\n.b8 2\n\t}\n"
    assert parse_ptx(text).instructions == 2  # mov, ret


@pytest.mark.parametrize("opcode, bits", [
    ("ld.global.v4.b32", 128), ("ld.global.v2.b64", 128), ("ld.global.b8", 8),
    ("ld.global.L1::no_allocate.v8.b32", 256), ("st.global.v2.f16", 32), ("ld.global.b128", 128),
])
def test_access_bits(opcode, bits):
    assert access_bits(opcode.split(".")) == bits


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'big_kernel' for 'sm_90a'
ptxas info    : Function properties for big_kernel
    96 bytes stack frame, 88 bytes spill stores, 104 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 96 bytes cumulative stack size
ptxas info    : Compile time = 9.819 ms
"""


def test_parse_ptxas_log():
    used = parse_ptxas_log(PTXAS_LOG)
    assert (used.registers, used.spill_store_bytes, used.spill_load_bytes) == (255, 88, 104)
    assert (used.stack_bytes, used.barriers, used.spill_bytes) == (96, 1, 192)


def test_parse_ptxas_log_rejects_other_text():
    with pytest.raises(ResourceError, match="unexpected ptxas -v output"):
        parse_ptxas_log("ptxas fatal   : Unresolved extern function 'foo'")
