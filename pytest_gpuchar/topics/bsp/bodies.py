"""The three kernels of the Many-BSP report (seed 002) in PTX, instruction for instruction as
its Tables 2-1 (Hotspot), 3-1 (KNN) and 4-1 (MM) list them: the nvcc output of Rodinia's
hotspot ``calculate_temp`` (16 x 16 blocks, the double-precision stencil), Rodinia's nn
``euclid`` and the CUDA sample ``MatrixMulCUDA<32>``. Instruction k of a body is the report's
instruction k (the BLOCK tables are numbered so); only names change (parameters, shared
arrays, labels: the kernel's exits branch to the frame's ``$BODY_END``) and three misprints of
the listing are corrected (``CORRECTIONS``). The frame (clock reads, stamps) is kernels.py's.
"""
from __future__ import annotations

#: (kernel, report row, printed, written here, why)
CORRECTIONS = (
    ("hotspot", 149, "add.s64 %rd38, %rd15, %rd37;", "add.s64 %rd38, %rd25, %rd37;",
     "temp_on_cuda[ty][W] is the row base %rd25 (row 91) plus W*4; %rd15 is the power "
     "pointer of row 50"),
    ("mm", 26, "add.s64 %rd3, %r4, %rd12;", "add.s64 %rd3, %rd5, %rd12;",
     "&As[ty][tx] is the row base %rd5 (row 24) plus tx*4; %r4 is a 32-bit register"),
    ("mm", 142, "add.s32 %r30, %r30, %r3;", "add.s32 %r30, %r30, 32;",
     "a += aStep with aStep = BLOCK_SIZE = 32; %r3 is bStep (32 * wB), the step of b (row "
     "141)"),
)


def knn(entry: str) -> list[str]:
    """Rodinia nn ``euclid(locations, distances, numRecords, lat, lng)``: Table 3-1."""
    p = f"{entry}_param_"
    return [
        f"ld.param.u64 %rd1, [{p}0];", f"ld.param.u64 %rd2, [{p}1];",
        f"ld.param.u32 %r2, [{p}2];", f"ld.param.f32 %f1, [{p}3];",
        f"ld.param.f32 %f2, [{p}4];",
        "mov.u32 %r3, %ctaid.y;", "mov.u32 %r4, %nctaid.x;", "mov.u32 %r5, %ctaid.x;",
        "mad.lo.s32 %r6, %r3, %r4, %r5;", "mov.u32 %r7, %ntid.x;", "mov.u32 %r8, %tid.x;",
        "mad.lo.s32 %r1, %r6, %r7, %r8;", "setp.ge.s32 %p1, %r1, %r2;",
        "@%p1 bra $BODY_END;",
        "cvta.to.global.u64 %rd3, %rd1;", "cvta.to.global.u64 %rd4, %rd2;",
        "mul.wide.s32 %rd5, %r1, 4;", "add.s64 %rd6, %rd4, %rd5;",
        "mul.wide.s32 %rd7, %r1, 8;", "add.s64 %rd8, %rd3, %rd7;",
        "ld.global.f32 %f3, [%rd8];", "sub.f32 %f4, %f1, %f3;",
        "ld.global.f32 %f5, [%rd8+4];", "sub.f32 %f6, %f2, %f5;", "mul.f32 %f7, %f6, %f6;",
        "fma.rn.f32 %f8, %f4, %f4, %f7;", "sqrt.rn.f32 %f9, %f8;",
        "st.global.f32 [%rd6], %f9;",
    ]


def mm(entry: str) -> list[str]:
    """CUDA sample ``MatrixMulCUDA<32>(C, A, B, wA, wB)``: Table 4-1 (the k loop unrolled
    32 times: rows 44-139)."""
    p, a_s, b_s = f"{entry}_param_", f"{entry}_As", f"{entry}_Bs"
    inner = []
    for k in range(32):
        f = 8 + 3 * k
        acc = "%f103" if k == 0 else f"%f{f - 1}"
        out = "%f103" if k == 31 else f"%f{f + 2}"
        b_off = f"+{128 * k}" if k else ""
        a_off = f"+{4 * k}" if k else ""
        inner += [f"ld.shared.f32 %f{f}, [%rd6{b_off}];",
                  f"ld.shared.f32 %f{f + 1}, [%rd5{a_off}];",
                  f"fma.rn.f32 {out}, %f{f + 1}, %f{f}, {acc};"]
    return [
        f"ld.param.u64 %rd7, [{p}0];", f"ld.param.u64 %rd8, [{p}1];",
        f"ld.param.u64 %rd9, [{p}2];", f"ld.param.u32 %r12, [{p}3];",
        f"ld.param.u32 %r13, [{p}4];",
        "mov.u32 %r14, %ctaid.y;", "mul.lo.s32 %r15, %r12, %r14;", "shl.b32 %r30, %r15, 5;",
        "add.s32 %r2, %r12, -1;", "shl.b32 %r3, %r13, 5;", "setp.lt.s32 %p1, %r2, 0;",
        "mov.f32 %f103, 0f00000000;", "@%p1 bra BB1_3;",
        "cvta.to.global.u64 %rd1, %rd9;", "cvta.to.global.u64 %rd2, %rd8;",
        "mov.u32 %r16, %tid.x;", "add.s32 %r4, %r2, %r30;", "mov.u32 %r17, %ctaid.x;",
        "shl.b32 %r29, %r17, 5;", "mov.u32 %r18, %tid.y;", "mad.lo.s32 %r6, %r18, %r12, %r16;",
        "mul.wide.s32 %rd10, %r18, 128;", f"mov.u64 %rd11, {a_s};",
        "add.s64 %rd5, %rd11, %rd10;", "mul.wide.s32 %rd12, %r16, 4;",
        "add.s64 %rd3, %rd5, %rd12;", "mad.lo.s32 %r7, %r18, %r13, %r16;",
        f"mov.u64 %rd13, {b_s};", "add.s64 %rd14, %rd13, %rd10;", "add.s64 %rd4, %rd14, %rd12;",
        "add.s64 %rd6, %rd13, %rd12;", "mov.f32 %f103, 0f00000000;",
        "BB1_2:",
        "add.s32 %r19, %r6, %r30;", "mul.wide.s32 %rd15, %r19, 4;", "add.s64 %rd16, %rd2, %rd15;",
        "ld.global.f32 %f6, [%rd16];", "st.shared.f32 [%rd3], %f6;",
        "add.s32 %r20, %r7, %r29;", "mul.wide.s32 %rd17, %r20, 4;", "add.s64 %rd18, %rd1, %rd17;",
        "ld.global.f32 %f7, [%rd18];", "st.shared.f32 [%rd4], %f7;", "bar.sync 0;",
        *inner,
        "bar.sync 0;", "add.s32 %r29, %r29, %r3;", "add.s32 %r30, %r30, 32;",
        "setp.le.s32 %p2, %r30, %r4;", "@%p2 bra BB1_2;",
        "BB1_3:",
        "mov.u32 %r22, %ctaid.x;", "shl.b32 %r23, %r22, 5;", "mad.lo.s32 %r24, %r14, %r3, %r23;",
        "mov.u32 %r25, %tid.x;", "add.s32 %r26, %r24, %r25;", "mov.u32 %r27, %tid.y;",
        "mad.lo.s32 %r28, %r27, %r13, %r26;", "cvta.to.global.u64 %rd19, %rd7;",
        "mul.wide.s32 %rd20, %r28, 4;", "add.s64 %rd21, %rd19, %rd20;",
        "st.global.f32 [%rd21], %f103;",
    ]


def _hotspot_prologue(p: str, temp: str, power: str) -> list[str]:
    """Rows 1-55: parameters, block and thread coordinates, the range test, the two loads
    into shared memory."""
    return [
        f"ld.param.u32 %r9, [{p}0];", f"ld.param.u64 %rd3, [{p}1];",
        f"ld.param.u64 %rd4, [{p}2];", f"ld.param.u64 %rd5, [{p}3];",
        f"ld.param.u32 %r10, [{p}4];", f"ld.param.u32 %r11, [{p}5];",
        f"ld.param.u32 %r12, [{p}6];", f"ld.param.u32 %r13, [{p}7];",
        f"ld.param.f32 %f2, [{p}8];", f"ld.param.f32 %f3, [{p}9];",
        f"ld.param.f32 %f4, [{p}10];", f"ld.param.f32 %f5, [{p}11];",
        f"ld.param.f32 %f6, [{p}12];",
        "mov.u32 %r14, %ctaid.x;", "shl.b32 %r15, %r9, 1;", "mov.u32 %r16, 16;",
        "sub.s32 %r17, %r16, %r15;", "mov.u32 %r18, %ctaid.y;", "mul.lo.s32 %r19, %r18, %r17;",
        "sub.s32 %r20, %r19, %r13;", "mul.lo.s32 %r21, %r14, %r17;", "sub.s32 %r22, %r21, %r12;",
        "mov.u32 %r23, %tid.y;", "add.s32 %r1, %r20, %r23;", "mov.u32 %r24, %tid.x;",
        "add.s32 %r2, %r22, %r24;", "setp.gt.s32 %p1, %r1, -1;", "add.s32 %r25, %r11, -1;",
        "setp.le.s32 %p2, %r1, %r25;", "and.pred %p3, %p1, %p2;", "setp.gt.s32 %p4, %r2, -1;",
        "add.s32 %r26, %r10, -1;", "setp.le.s32 %p5, %r2, %r26;", "and.pred %p6, %p4, %p5;",
        "and.pred %p7, %p3, %p6;", "@!%p7 bra BB0_2;", "bra.uni BB0_1;",
        "BB0_1:",
        "mad.lo.s32 %r27, %r1, %r10, %r2;", "cvta.to.global.u64 %rd6, %rd4;",
        "mul.wide.s32 %rd7, %r27, 4;", "add.s64 %rd8, %rd6, %rd7;", "ld.global.f32 %f7, [%rd8];",
        "mul.wide.s32 %rd9, %r23, 64;", f"mov.u64 %rd10, {temp};", "add.s64 %rd11, %rd10, %rd9;",
        "mul.wide.s32 %rd12, %r24, 4;", "add.s64 %rd13, %rd11, %rd12;",
        "st.shared.f32 [%rd13], %f7;", "cvta.to.global.u64 %rd14, %rd3;",
        "add.s64 %rd15, %rd14, %rd7;", "ld.global.f32 %f8, [%rd15];",
        f"mov.u64 %rd16, {power};", "add.s64 %rd17, %rd16, %rd9;", "add.s64 %rd18, %rd17, %rd12;",
        "st.shared.f32 [%rd18], %f8;",
    ]


def _hotspot_setup(temp: str) -> list[str]:
    """Rows 56-96: the barrier after the loads, step/Cap and the reciprocals, the valid
    range and the clamped S and E neighbours."""
    return [
        "BB0_2:",
        "bar.sync 0;", "setp.lt.s32 %p8, %r9, 1;", "@%p8 bra BB0_11;",
        "div.rn.f32 %f9, %f6, %f2;", "rcp.rn.f32 %f10, %f3;", "rcp.rn.f32 %f11, %f4;",
        "rcp.rn.f32 %f1, %f5;", "cvt.f64.f32 %fd1, %f9;", "add.s32 %r37, %r20, 15;",
        "setp.gt.s32 %p9, %r37, %r25;", "mov.u32 %r39, -15;", "sub.s32 %r40, %r39, %r20;",
        "add.s32 %r41, %r11, %r40;", "add.s32 %r42, %r41, 14;", "selp.b32 %r43, %r42, 15, %p9;",
        "setp.lt.s32 %p10, %r23, %r43;", "add.s32 %r45, %r23, 1;",
        "selp.b32 %r46, %r45, %r43, %p10;", "mul.wide.s32 %rd19, %r46, 64;",
        f"mov.u64 %rd20, {temp};", "add.s64 %rd21, %rd20, %rd19;", "mul.wide.s32 %rd22, %r24, 4;",
        "add.s64 %rd1, %rd21, %rd22;", "cvt.f64.f32 %fd2, %f11;", "add.s32 %r51, %r22, 15;",
        "setp.gt.s32 %p11, %r51, %r26;", "sub.s32 %r53, %r39, %r22;", "add.s32 %r54, %r10, %r53;",
        "add.s32 %r55, %r54, 14;", "selp.b32 %r56, %r55, 15, %p11;",
        "setp.lt.s32 %p12, %r24, %r56;", "add.s32 %r57, %r24, 1;",
        "selp.b32 %r58, %r57, %r56, %p12;", "mul.wide.s32 %rd23, %r58, 4;",
        "mul.wide.s32 %rd24, %r23, 64;", "add.s64 %rd25, %rd20, %rd24;",
        "add.s64 %rd2, %rd25, %rd23;", "cvt.f64.f32 %fd3, %f10;", "mov.u32 %r59, 1;",
        "sub.s32 %r129, %r59, %r9;", "mov.u32 %r130, 0;",
    ]


def _hotspot_loop(temp: str, power: str, temp_t: str) -> list[str]:
    """Rows 97-182: the pyramid loop (one stencil step per iteration, two barriers)."""
    return [
        "BB0_4:",
        "mov.u32 %r61, 14;", "sub.s32 %r6, %r61, %r130;", "setp.le.s32 %p13, %r24, %r6;",
        "add.s32 %r130, %r130, 1;", "setp.ge.s32 %p14, %r24, %r130;",
        "and.pred %p15, %p13, %p14;", "mov.u16 %rs8, 0;", "@!%p15 bra BB0_7;", "bra.uni BB0_5;",
        "BB0_5:",
        "setp.gt.s32 %p16, %r23, %r6;", "setp.lt.s32 %p17, %r23, %r130;",
        "or.pred %p18, %p17, %p16;", "shr.s32 %r69, %r22, 31;", "setp.gt.s32 %p20, %r24, %r56;",
        "neg.s32 %r78, %r22;", "and.b32 %r79, %r69, %r78;", "setp.lt.s32 %p21, %r24, %r79;",
        "or.pred %p22, %p21, %p20;", "or.pred %p23, %p18, %p22;", "shr.s32 %r83, %r20, 31;",
        "setp.gt.s32 %p25, %r23, %r43;", "neg.s32 %r90, %r20;", "and.b32 %r91, %r83, %r90;",
        "setp.lt.s32 %p26, %r23, %r91;", "or.pred %p27, %p26, %p25;", "or.pred %p28, %p23, %p27;",
        "@%p28 bra BB0_7;",
        "add.s64 %rd30, %rd25, %rd22;", "ld.shared.f32 %f12, [%rd30];", "cvt.f64.f32 %fd4, %f12;",
        f"mov.u64 %rd31, {power};", "add.s64 %rd32, %rd31, %rd24;", "add.s64 %rd33, %rd32, %rd22;",
        "ld.shared.f32 %f13, [%rd33];", "cvt.f64.f32 %fd5, %f13;", "setp.gt.s32 %p29, %r23, %r91;",
        "add.s32 %r103, %r23, -1;", "selp.b32 %r104, %r103, %r91, %p29;",
        "mul.wide.s32 %rd34, %r104, 64;", "add.s64 %rd35, %rd20, %rd34;",
        "add.s64 %rd36, %rd35, %rd22;", "ld.shared.f32 %f14, [%rd36];",
        "ld.shared.f32 %f15, [%rd1];",
        "add.f32 %f16, %f15, %f14;", "cvt.f64.f32 %fd6, %f16;", "add.f64 %fd7, %fd4, %fd4;",
        "sub.f64 %fd8, %fd6, %fd7;", "fma.rn.f64 %fd9, %fd2, %fd8, %fd5;",
        "setp.gt.s32 %p30, %r24, %r79;", "add.s32 %r111, %r24, -1;",
        "selp.b32 %r112, %r111, %r79, %p30;", "mul.wide.s32 %rd37, %r112, 4;",
        "add.s64 %rd38, %rd25, %rd37;", "ld.shared.f32 %f17, [%rd38];",
        "ld.shared.f32 %f18, [%rd2];",
        "add.f32 %f19, %f18, %f17;", "cvt.f64.f32 %fd10, %f19;", "sub.f64 %fd11, %fd10, %fd7;",
        "fma.rn.f64 %fd12, %fd3, %fd11, %fd9;", "mov.f32 %f20, 0f42A00000;",
        "sub.f32 %f21, %f20, %f12;", "mul.f32 %f22, %f1, %f21;", "cvt.f64.f32 %fd13, %f22;",
        "add.f64 %fd14, %fd13, %fd12;", "fma.rn.f64 %fd15, %fd1, %fd14, %fd4;",
        "cvt.rn.f32.f64 %f23, %fd15;", f"mov.u64 %rd39, {temp_t};", "add.s64 %rd40, %rd39, %rd24;",
        "add.s64 %rd41, %rd40, %rd22;", "st.shared.f32 [%rd41], %f23;", "mov.u16 %rs8, 1;",
        "BB0_7:",
        "bar.sync 0;", "setp.eq.s32 %p31, %r129, 0;", "@%p31 bra BB0_11;",
        "setp.eq.s16 %p32, %rs8, 0;", "@%p32 bra BB0_10;", f"mov.u64 %rd43, {temp_t};",
        "add.s64 %rd44, %rd43, %rd24;", "add.s64 %rd46, %rd44, %rd22;",
        "ld.shared.f32 %f24, [%rd46];",
        "add.s64 %rd49, %rd25, %rd22;", "st.shared.f32 [%rd49], %f24;",
        "BB0_10:",
        "bar.sync 0;", "add.s32 %r129, %r129, 1;", "setp.lt.s32 %p33, %r130, %r9;",
        "@%p33 bra BB0_4;",
    ]


def hotspot(entry: str) -> list[str]:
    """Rodinia hotspot ``calculate_temp(iteration, power, temp_src, temp_dst, grid_cols,
    grid_rows, border_cols, border_rows, Cap, Rx, Ry, Rz, step)``: Table 2-1, 196 rows."""
    p = f"{entry}_param_"
    temp, power, temp_t = (f"{entry}_{n}" for n in ("temp_on_cuda", "power_on_cuda", "temp_t"))
    return [
        *_hotspot_prologue(p, temp, power), *_hotspot_setup(temp),
        *_hotspot_loop(temp, power, temp_t),
        "BB0_11:",
        "and.b16 %rs7, %rs8, 255;", "setp.eq.s16 %p34, %rs7, 0;", "@%p34 bra $BODY_END;",
        "mul.wide.s32 %rd50, %r23, 64;", f"mov.u64 %rd51, {temp_t};",
        "add.s64 %rd52, %rd51, %rd50;", "mul.wide.s32 %rd53, %r24, 4;",
        "add.s64 %rd54, %rd52, %rd53;", "ld.shared.f32 %f25, [%rd54];",
        "mad.lo.s32 %r128, %r1, %r10, %r2;", "cvta.to.global.u64 %rd55, %rd5;",
        "mul.wide.s32 %rd56, %r128, 4;", "add.s64 %rd57, %rd55, %rd56;",
        "st.global.f32 [%rd57], %f25;",
    ]


#: module-level shared arrays of each kernel: (suffix, bytes)
SHARED = {
    "hotspot": (("temp_on_cuda", 1024), ("power_on_cuda", 1024), ("temp_t", 1024)),
    "knn": (),
    "mm": (("As", 4096), ("Bs", 4096)),
}

#: parameter types of each kernel, in order (the frame appends the stamp record pointer)
PARAMS = {
    "hotspot": ("u32", "u64", "u64", "u64", "u32", "u32", "u32", "u32", "f32", "f32", "f32",
                "f32", "f32"),
    "knn": ("u64", "u64", "u32", "f32", "f32"),
    "mm": ("u64", "u64", "u64", "u32", "u32"),
}

BODIES = {"hotspot": hotspot, "knn": knn, "mm": mm}
