"""The DPX intrinsics as compiled for sm_80..sm_89: the PTX that nvcc (CUDA 13.0, -arch=sm_80;
sm_86 and sm_89 give the same) emits for the non-sm_90 branch of each intrinsic in
crt/device_functions.hpp (plain C++ for the 32-bit forms, libdevice's __nv_vmaxs2 & co. for
the 16x2 forms), one kernel per intrinsic, its loads and stores replaced by the template
fields {a} {b} {c} (sources, in argument order) and {d} {e} {f} (the result and the
predicate outputs of __vibmax/__vibmin, as 0/1 words), its temporaries scoped in a block.
This is the "emulated sequence" the static test verifies per arch; data, not code."""
from __future__ import annotations

EMULATED = {
    "vimax3_s32": (
        "{ .reg .b32 t<1>; max.s32 t0, {a}, {b}; max.s32 {d}, t0, {c}; }"),
    "vimax3_u32": (
        "{ .reg .b32 t<1>; max.u32 t0, {a}, {b}; max.u32 {d}, t0, {c}; }"),
    "vimax3_s16x2": (
        "{ .reg .b32 t<12>; shl.b32 t0, {a}, 16; shl.b32 t1, {b}, 16; max.s32 t2, t0, t1; "
        "shr.u32 t3, t2, 16; max.s32 t4, {a}, {b}; and.b32 t5, t4, -65536; or.b32 t6, t3, t5; "
        "shl.b32 t7, {c}, 16; max.s32 t8, t2, t7; shr.u32 t9, t8, 16; max.s32 t10, t6, {c}; "
        "and.b32 t11, t10, -65536; or.b32 {d}, t11, t9; }"),
    "vimax3_u16x2": (
        "{ .reg .b32 t<10>; and.b32 t0, {a}, 65535; and.b32 t1, {b}, 65535; max.u32 t2, t0, "
        "t1; max.u32 t3, {a}, {b}; and.b32 t4, t3, -65536; or.b32 t5, t4, t2; and.b32 t6, "
        "{c}, 65535; max.u32 t7, t2, t6; max.u32 t8, t5, {c}; and.b32 t9, t8, -65536; or.b32 "
        "{d}, t9, t7; }"),
    "vimax3_s32_relu": (
        "{ .reg .b32 t<2>; max.s32 t0, {a}, {b}; max.s32 t1, t0, {c}; max.s32 {d}, t1, 0; }"),
    "vimax3_s16x2_relu": (
        "{ .reg .b32 t<17>; shl.b32 t0, {a}, 16; shl.b32 t1, {b}, 16; max.s32 t2, t0, t1; "
        "shr.u32 t3, t2, 16; max.s32 t4, {a}, {b}; and.b32 t5, t4, -65536; or.b32 t6, t3, t5; "
        "shl.b32 t7, {c}, 16; max.s32 t8, t2, t7; shr.u32 t9, t8, 16; max.s32 t10, t6, {c}; "
        "and.b32 t11, t10, -65536; or.b32 t12, t11, t9; max.s32 t13, t8, 0; shr.u32 t14, t13, "
        "16; max.s32 t15, t12, 0; and.b32 t16, t15, -65536; or.b32 {d}, t16, t14; }"),
    "vimin3_s32": (
        "{ .reg .b32 t<1>; min.s32 t0, {a}, {b}; min.s32 {d}, t0, {c}; }"),
    "vimin3_u32": (
        "{ .reg .b32 t<1>; min.u32 t0, {a}, {b}; min.u32 {d}, t0, {c}; }"),
    "vimin3_s16x2": (
        "{ .reg .b32 t<12>; shl.b32 t0, {a}, 16; shl.b32 t1, {b}, 16; min.s32 t2, t0, t1; "
        "shr.u32 t3, t2, 16; min.s32 t4, {a}, {b}; and.b32 t5, t4, -65536; or.b32 t6, t3, t5; "
        "shl.b32 t7, {c}, 16; min.s32 t8, t2, t7; shr.u32 t9, t8, 16; min.s32 t10, t6, {c}; "
        "and.b32 t11, t10, -65536; or.b32 {d}, t11, t9; }"),
    "vimin3_u16x2": (
        "{ .reg .b32 t<10>; and.b32 t0, {a}, 65535; and.b32 t1, {b}, 65535; min.u32 t2, t0, "
        "t1; min.u32 t3, {a}, {b}; and.b32 t4, t3, -65536; or.b32 t5, t4, t2; and.b32 t6, "
        "{c}, 65535; min.u32 t7, t2, t6; min.u32 t8, t5, {c}; and.b32 t9, t8, -65536; or.b32 "
        "{d}, t9, t7; }"),
    "vimin3_s32_relu": (
        "{ .reg .b32 t<2>; min.s32 t0, {a}, {b}; min.s32 t1, t0, {c}; max.s32 {d}, t1, 0; }"),
    "vimin3_s16x2_relu": (
        "{ .reg .b32 t<17>; shl.b32 t0, {a}, 16; shl.b32 t1, {b}, 16; min.s32 t2, t0, t1; "
        "shr.u32 t3, t2, 16; min.s32 t4, {a}, {b}; and.b32 t5, t4, -65536; or.b32 t6, t3, t5; "
        "shl.b32 t7, {c}, 16; min.s32 t8, t2, t7; shr.u32 t9, t8, 16; min.s32 t10, t6, {c}; "
        "and.b32 t11, t10, -65536; or.b32 t12, t11, t9; max.s32 t13, t8, 0; shr.u32 t14, t13, "
        "16; max.s32 t15, t12, 0; and.b32 t16, t15, -65536; or.b32 {d}, t16, t14; }"),
    "viaddmax_s32": (
        "{ .reg .b32 t<1>; add.s32 t0, {b}, {a}; max.s32 {d}, t0, {c}; }"),
    "viaddmax_u32": (
        "{ .reg .b32 t<1>; add.s32 t0, {b}, {a}; max.u32 {d}, t0, {c}; }"),
    "viaddmax_s16x2": (
        "{ .reg .b32 t<11>; xor.b32 t0, {b}, {a}; add.s32 t1, {b}, {a}; xor.b32 t2, t0, t1; "
        "and.b32 t3, t2, 65536; sub.s32 t4, t1, t3; shl.b32 t5, t4, 16; shl.b32 t6, {c}, 16; "
        "max.s32 t7, t5, t6; shr.u32 t8, t7, 16; max.s32 t9, t4, {c}; and.b32 t10, t9, "
        "-65536; or.b32 {d}, t8, t10; }"),
    "viaddmax_u16x2": (
        "{ .reg .b32 t<10>; xor.b32 t0, {b}, {a}; add.s32 t1, {b}, {a}; xor.b32 t2, t0, t1; "
        "and.b32 t3, t2, 65536; sub.s32 t4, t1, t3; and.b32 t5, t4, 65535; and.b32 t6, {c}, "
        "65535; max.u32 t7, t5, t6; max.u32 t8, t4, {c}; and.b32 t9, t8, -65536; or.b32 {d}, "
        "t9, t7; }"),
    "viaddmax_s32_relu": (
        "{ .reg .b32 t<2>; add.s32 t0, {b}, {a}; max.s32 t1, t0, {c}; max.s32 {d}, t1, 0; }"),
    "viaddmax_s16x2_relu": (
        "{ .reg .b32 t<16>; xor.b32 t0, {b}, {a}; add.s32 t1, {b}, {a}; xor.b32 t2, t0, t1; "
        "and.b32 t3, t2, 65536; sub.s32 t4, t1, t3; shl.b32 t5, t4, 16; shl.b32 t6, {c}, 16; "
        "max.s32 t7, t5, t6; shr.u32 t8, t7, 16; max.s32 t9, t4, {c}; and.b32 t10, t9, "
        "-65536; or.b32 t11, t8, t10; max.s32 t12, t7, 0; shr.u32 t13, t12, 16; max.s32 t14, "
        "t11, 0; and.b32 t15, t14, -65536; or.b32 {d}, t15, t13; }"),
    "viaddmin_s32": (
        "{ .reg .b32 t<1>; add.s32 t0, {b}, {a}; min.s32 {d}, t0, {c}; }"),
    "viaddmin_u32": (
        "{ .reg .b32 t<1>; add.s32 t0, {b}, {a}; min.u32 {d}, t0, {c}; }"),
    "viaddmin_s16x2": (
        "{ .reg .b32 t<11>; xor.b32 t0, {b}, {a}; add.s32 t1, {b}, {a}; xor.b32 t2, t0, t1; "
        "and.b32 t3, t2, 65536; sub.s32 t4, t1, t3; shl.b32 t5, t4, 16; shl.b32 t6, {c}, 16; "
        "min.s32 t7, t5, t6; shr.u32 t8, t7, 16; min.s32 t9, t4, {c}; and.b32 t10, t9, "
        "-65536; or.b32 {d}, t8, t10; }"),
    "viaddmin_u16x2": (
        "{ .reg .b32 t<10>; xor.b32 t0, {b}, {a}; add.s32 t1, {b}, {a}; xor.b32 t2, t0, t1; "
        "and.b32 t3, t2, 65536; sub.s32 t4, t1, t3; and.b32 t5, t4, 65535; and.b32 t6, {c}, "
        "65535; min.u32 t7, t5, t6; min.u32 t8, t4, {c}; and.b32 t9, t8, -65536; or.b32 {d}, "
        "t9, t7; }"),
    "viaddmin_s32_relu": (
        "{ .reg .b32 t<2>; add.s32 t0, {b}, {a}; min.s32 t1, t0, {c}; max.s32 {d}, t1, 0; }"),
    "viaddmin_s16x2_relu": (
        "{ .reg .b32 t<16>; xor.b32 t0, {b}, {a}; add.s32 t1, {b}, {a}; xor.b32 t2, t0, t1; "
        "and.b32 t3, t2, 65536; sub.s32 t4, t1, t3; shl.b32 t5, t4, 16; shl.b32 t6, {c}, 16; "
        "min.s32 t7, t5, t6; shr.u32 t8, t7, 16; min.s32 t9, t4, {c}; and.b32 t10, t9, "
        "-65536; or.b32 t11, t8, t10; max.s32 t12, t7, 0; shr.u32 t13, t12, 16; max.s32 t14, "
        "t11, 0; and.b32 t15, t14, -65536; or.b32 {d}, t15, t13; }"),
    "vimax_s32_relu": (
        "{ .reg .b32 t<1>; max.s32 t0, {a}, {b}; max.s32 {d}, t0, 0; }"),
    "vimax_s16x2_relu": (
        "{ .reg .b32 t<11>; shl.b32 t0, {a}, 16; shl.b32 t1, {b}, 16; max.s32 t2, t0, t1; "
        "shr.u32 t3, t2, 16; max.s32 t4, {a}, {b}; and.b32 t5, t4, -65536; or.b32 t6, t3, t5; "
        "max.s32 t7, t2, 0; shr.u32 t8, t7, 16; max.s32 t9, t6, 0; and.b32 t10, t9, -65536; "
        "or.b32 {d}, t10, t8; }"),
    "vimin_s32_relu": (
        "{ .reg .b32 t<1>; min.s32 t0, {a}, {b}; max.s32 {d}, t0, 0; }"),
    "vimin_s16x2_relu": (
        "{ .reg .b32 t<11>; shl.b32 t0, {a}, 16; shl.b32 t1, {b}, 16; min.s32 t2, t0, t1; "
        "shr.u32 t3, t2, 16; min.s32 t4, {a}, {b}; and.b32 t5, t4, -65536; or.b32 t6, t3, t5; "
        "max.s32 t7, t2, 0; shr.u32 t8, t7, 16; max.s32 t9, t6, 0; and.b32 t10, t9, -65536; "
        "or.b32 {d}, t10, t8; }"),
    "vibmax_s32": (
        "{ .reg .pred q<1>; max.s32 {d}, {a}, {b}; setp.ge.s32 q0, {a}, {b}; selp.u32 {e}, 1, "
        "0, q0; }"),
    "vibmax_u32": (
        "{ .reg .pred q<1>; max.u32 {d}, {a}, {b}; setp.ge.u32 q0, {a}, {b}; selp.u32 {e}, 1, "
        "0, q0; }"),
    "vibmin_s32": (
        "{ .reg .pred q<1>; min.s32 {d}, {a}, {b}; setp.le.s32 q0, {a}, {b}; selp.u32 {e}, 1, "
        "0, q0; }"),
    "vibmin_u32": (
        "{ .reg .pred q<1>; min.u32 {d}, {a}, {b}; setp.le.u32 q0, {a}, {b}; selp.u32 {e}, 1, "
        "0, q0; }"),
    "vibmax_s16x2": (
        "{ .reg .b32 t<9>; .reg .b16 h<4>; .reg .pred q<2>; cvt.u16.u32 h0, {a}; shr.u32 t0, "
        "{a}, 16; cvt.u16.u32 h1, t0; cvt.u16.u32 h2, {b}; shr.u32 t1, {b}, 16; cvt.u16.u32 "
        "h3, t1; cvt.s32.s16 t2, {a}; cvt.s32.s16 t3, {b}; max.s32 t4, t2, t3; shr.s32 t5, "
        "{a}, 16; shr.s32 t6, {b}, 16; max.s32 t7, t5, t6; setp.ge.s16 q0, h1, h3; "
        "setp.ge.s16 q1, h0, h2; and.b32 t8, t4, 65535; prmt.b32 {d}, t7, t8, 4180; selp.u32 "
        "{e}, 1, 0, q0; selp.u32 {f}, 1, 0, q1; }"),
    "vibmax_u16x2": (
        "{ .reg .b32 t<7>; .reg .pred q<2>; shr.u32 t0, {a}, 16; shr.u32 t1, {b}, 16; and.b32 "
        "t2, {a}, 65535; and.b32 t3, {b}, 65535; max.u32 t4, t2, t3; max.u32 t5, t0, t1; "
        "setp.ge.u32 q0, t0, t1; setp.ge.u32 q1, t2, t3; shl.b32 t6, t5, 16; or.b32 {d}, t4, "
        "t6; selp.u32 {e}, 1, 0, q0; selp.u32 {f}, 1, 0, q1; }"),
    "vibmin_s16x2": (
        "{ .reg .b32 t<9>; .reg .b16 h<4>; .reg .pred q<2>; cvt.u16.u32 h0, {a}; shr.u32 t0, "
        "{a}, 16; cvt.u16.u32 h1, t0; cvt.u16.u32 h2, {b}; shr.u32 t1, {b}, 16; cvt.u16.u32 "
        "h3, t1; cvt.s32.s16 t2, {a}; cvt.s32.s16 t3, {b}; min.s32 t4, t2, t3; shr.s32 t5, "
        "{a}, 16; shr.s32 t6, {b}, 16; min.s32 t7, t5, t6; setp.le.s16 q0, h1, h3; "
        "setp.le.s16 q1, h0, h2; and.b32 t8, t4, 65535; prmt.b32 {d}, t7, t8, 4180; selp.u32 "
        "{e}, 1, 0, q0; selp.u32 {f}, 1, 0, q1; }"),
    "vibmin_u16x2": (
        "{ .reg .b32 t<7>; .reg .pred q<2>; shr.u32 t0, {a}, 16; shr.u32 t1, {b}, 16; and.b32 "
        "t2, {a}, 65535; and.b32 t3, {b}, 65535; min.u32 t4, t2, t3; min.u32 t5, t0, t1; "
        "setp.le.u32 q0, t0, t1; setp.le.u32 q1, t2, t3; shl.b32 t6, t5, 16; or.b32 {d}, t4, "
        "t6; selp.u32 {e}, 1, 0, q0; selp.u32 {f}, 1, 0, q1; }"),
}
