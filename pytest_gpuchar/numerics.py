"""Tensor-core numerics: mma.sync kernels, their fragment layouts, and the experiments.

One small kernel per mma shape and type (``Spec``): each warp loads its A/B/C fragments from
global memory (one .b32 word per fragment register, packed on the host in the layout the PTX
ISA gives for that shape), runs ONE ``mma.sync`` and stores D. Every experiment is host-side
data: which tiles go in, and the exact reference (refnum.py) the D that comes back is compared
with. The driver JIT's SASS is checked before any number is taken: the tensor-core instruction
must be there (HMMA/QMMA); an operation that the compiler moved to the FPU (on sm_90 the FP8
mma.sync becomes F2FP + HMMA + FADD) is not a tensor-core measurement, and the characteristics
that depend on it are reported "invalid" with the SASS.

Experiments (seed 004 section 8 and the questions of Fasi et al. 2021):
  elementwise()  - multiplication / inner-product addition / accumulation errors (Tables 12-15)
  subnormals, rounding, extra bits, block size, order, NaN/Inf, overflow (``fasi_*``)
  chain()        - chain matrix multiplication l2 relative error vs length (Figs 19-20)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from . import archs, refnum

# --- kernel specs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    name: str            # "bf16.m16n8k16.f32"
    in_type: str         # A/B type (refnum.TYPES)
    c_type: str          # C/D type: "f32" or "f16"
    m: int
    n: int
    k: int
    min_arch: int
    isa: str             # lowest PTX ISA version with this mma

    @property
    def shape(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @property
    def entry(self) -> str:
        return "tc_" + self.name.replace(".", "_")

    @property
    def ptx_types(self) -> str:
        t = self.in_type
        return f"{self.c_type}.{t}.{t}.{self.c_type}"

    @property
    def instruction(self) -> str:
        return f"mma.sync.aligned.{self.shape}.row.col.{self.ptx_types}"


def _spec(t, c, m, n, k, arch, isa):
    return Spec(f"{t}.m{m}n{n}k{k}.{c}", t, c, m, n, k, arch, isa)


SPECS = {s.name: s for s in [
    _spec("f16", "f32", 16, 8, 16, 80, "7.0"),
    _spec("f16", "f16", 16, 8, 16, 80, "7.0"),
    _spec("bf16", "f32", 16, 8, 16, 80, "7.0"),
    _spec("tf32", "f32", 16, 8, 8, 80, "7.0"),
    _spec("f16", "f32", 16, 8, 8, 75, "6.5"),      # chain matmul (m16n8k8 as in the paper)
    _spec("bf16", "f32", 16, 8, 8, 80, "7.0"),
    _spec("e4m3", "f32", 16, 8, 32, 89, "8.4"),
    _spec("e5m2", "f32", 16, 8, 32, 89, "8.4"),
]}

# The kernel each question uses per "type row" of the tables.
ELEMENTWISE = {"bf16-f32": "bf16.m16n8k16.f32", "f16-f32": "f16.m16n8k16.f32",
               "f16-f16": "f16.m16n8k16.f16", "tf32-f32": "tf32.m16n8k8.f32",
               "e4m3-f32": "e4m3.m16n8k32.f32", "e5m2-f32": "e5m2.m16n8k32.f32"}
# The chain matmul multiplies 16x8 by 8x8 as the paper's m16n8k8 does. FP16/BF16 run it on
# m16n8k16 with the upper half of k zero (zero products change no sum): on the H200 (driver
# 580.159.04) the m16n8k8 f16/bf16 kernels' results did not match the PTX ISA fragment layout
# (see layout_probe and docs/numerics.md), TF32 uses its own m16n8k8.
CHAIN = {"tf32": "tf32.m16n8k8.f32", "bf16": "bf16.m16n8k16.f32", "f16": "f16.m16n8k16.f32"}
CHAIN_K = 8


def spec(name: str) -> Spec:
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"unknown tensor-core kernel {name!r}; one of {', '.join(SPECS)}") \
            from None


def unsupported(s: Spec, arch: str) -> str | None:
    """Why `arch` cannot run this mma (a skip reason), or None."""
    n = archs.number(arch)
    if n < 70:
        return f"{arch} has no tensor cores"
    if n < s.min_arch:
        what = {75: "mma.m16n8k8 with f16 needs sm_75+", 80: f"mma.{s.shape} {s.in_type} "
                f"needs sm_80+", 89: f"FP8 ({s.in_type}) mma.sync needs sm_89+"}[s.min_arch]
        return f"{arch}: {what}" + (" (sm_70 has only mma.m8n8k4)" if n == 70 else "")
    return None


# --- fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k*") -------------------------

def _gt(lane: int) -> tuple[int, int]:
    return lane >> 2, lane % 4


def coord(s: Spec, which: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of element i of `which` ('a', 'b', 'c') held by `lane`. A is m x k (row),
    B is k x n (col), C/D m x n."""
    g, t = _gt(lane)
    if which == "c":
        return g + 8 * (i >> 1), 2 * t + (i & 1)
    bits = refnum.numtype(s.in_type).bits
    if bits == 16 and s.k == 16:
        if which == "a":
            return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)
        return 2 * t + (i & 1) + 8 * (i >> 1), g
    if bits == 16 and s.k == 8:
        if which == "a":
            return g + 8 * (i >> 1), 2 * t + (i & 1)
        return 2 * t + i, g
    if bits == 32 and s.k == 8:      # tf32
        if which == "a":
            return g + 8 * (i & 1), t + 4 * (i >> 1)
        return t + 4 * i, g
    if bits == 8 and s.k == 32:      # e4m3 / e5m2
        if which == "a":
            return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)
        return 4 * t + (i & 3) + 16 * (i >> 2), g
    raise ValueError(f"{s.name}: no fragment layout for {which}")


def elem_bits(s: Spec, which: str) -> int:
    return refnum.numtype(s.c_type if which == "c" else s.in_type).bits


def n_elems(s: Spec, which: str) -> int:
    rows, cols = {"a": (s.m, s.k), "b": (s.k, s.n), "c": (s.m, s.n)}[which]
    return rows * cols // 32


def n_regs(s: Spec, which: str) -> int:
    return n_elems(s, which) * elem_bits(s, which) // 32


def coords(s: Spec, which: str) -> np.ndarray:
    """(32, elements, 2) array of (row, col) per lane and element."""
    return np.array([[coord(s, which, lane, i) for i in range(n_elems(s, which))]
                     for lane in range(32)], dtype=np.int64)


def pack(s: Spec, which: str, bits: np.ndarray) -> np.ndarray:
    """Matrices of bit patterns (T, rows, cols) -> fragment registers (T, 32, regs) uint32:
    element i of a lane sits in register i // per_reg, lowest bits first."""
    xy = coords(s, which)
    w = elem_bits(s, which)
    el = bits[:, xy[..., 0], xy[..., 1]].astype(np.uint64)      # (T, 32, elems)
    per = 32 // w
    el = el.reshape(el.shape[0], 32, -1, per)
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(w))
    return (el << shifts).sum(axis=-1).astype(np.uint32)


def unpack(s: Spec, which: str, regs: np.ndarray) -> np.ndarray:
    """Inverse of pack: (T, 32, regs) uint32 -> (T, rows, cols) bit patterns."""
    xy = coords(s, which)
    w = elem_bits(s, which)
    per = 32 // w
    regs = np.asarray(regs, dtype=np.uint64)
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(w))
    el = (regs[..., None] >> shifts) & np.uint64((1 << w) - 1)
    el = el.reshape(regs.shape[0], 32, -1)
    rows, cols = {"a": (s.m, s.k), "b": (s.k, s.n), "c": (s.m, s.n)}[which]
    out = np.zeros((regs.shape[0], rows, cols), dtype=np.uint64)
    out[:, xy[..., 0], xy[..., 1]] = el
    return out.astype(refnum.numtype(s.c_type if which == "c" else s.in_type).uint)


# --- PTX ---------------------------------------------------------------------------------

def kernel_ptx(s: Spec) -> str:
    """One warp per tile: load A/B/C fragments (one .b32 word per register), one mma.sync,
    store D. Tiles beyond the count exit before the mma (warp-uniform)."""
    na, nb, nc = n_regs(s, "a"), n_regs(s, "b"), n_regs(s, "c")
    lines = [f".visible .entry {s.entry}(.param .u64 pa, .param .u64 pb, .param .u64 pc, "
             f".param .u64 pd, .param .u32 pn)", "{",
             "  .reg .pred %p;",
             f"  .reg .b32 %a<{na}>, %b<{nb}>, %c<{nc}>, %d<{nc}>;",
             "  .reg .b32 %vtid, %vntid, %vcta, %g, %tile, %n;",
             "  .reg .b64 %ra, %rb, %rc, %rd, %off;",
             "  mov.u32 %vtid, %tid.x;", "  mov.u32 %vntid, %ntid.x;", "  mov.u32 %vcta, %ctaid.x;",
             "  mad.lo.u32 %g, %vcta, %vntid, %vtid;", "  shr.u32 %tile, %g, 5;",
             "  ld.param.u32 %n, [pn];", "  setp.ge.u32 %p, %tile, %n;", "  @%p bra $Ldone;"]
    for x, cnt in (("a", na), ("b", nb), ("c", nc), ("d", nc)):
        lines += [f"  ld.param.u64 %r{x}, [p{x}];", f"  cvta.to.global.u64 %r{x}, %r{x};",
                  f"  mul.wide.u32 %off, %g, {4 * cnt};", f"  add.u64 %r{x}, %r{x}, %off;"]
        if x != "d":
            lines += [f"  ld.global.b32 %{x}{i}, [%r{x}+{4 * i}];" for i in range(cnt)]

    def regs(x, cnt):
        return "{" + ", ".join(f"%{x}{i}" for i in range(cnt)) + "}"
    lines.append(f"  {s.instruction} {regs('d', nc)}, {regs('a', na)}, {regs('b', nb)}, "
                 f"{regs('c', nc)};")
    lines += [f"  st.global.b32 [%rd+{4 * i}], %d{i};" for i in range(nc)]
    lines += ["$Ldone:", "  ret;", "}"]
    return "\n".join(lines) + "\n"


def module_ptx(arch: str, specs: list[Spec] | None = None) -> tuple[str, list[Spec]]:
    """One PTX module with the kernel of every spec `arch` supports (one ptxas / JIT run)."""
    specs = [s for s in (specs or list(SPECS.values())) if unsupported(s, arch) is None]
    isa = max([archs.ptx_isa_version(arch)] + [s.isa for s in specs],
              key=lambda v: tuple(int(x) for x in v.split(".")))
    head = f".version {isa}\n.target {archs.ptx_target(arch)}\n.address_size 64\n\n"
    return head + "\n".join(kernel_ptx(s) for s in specs), specs


# --- what the SASS says -----------------------------------------------------------------

TENSOR_OPS = ("HMMA", "QMMA", "IMMA", "DMMA", "HGMMA", "QGMMA")
FPU_OPS = ("FADD", "FFMA", "FMUL", "HADD2", "HFMA2", "HMUL2", "FMNMX", "HMNMX2", "DADD",
           "DFMA", "DMUL")
CONVERT_OPS = ("F2FP", "F2F", "I2F", "F2I")


@dataclass
class TensorPath:
    """How the compiler implemented the mma: tensor-core ops, FPU ops, conversions."""
    spec: str
    tensor: dict = field(default_factory=dict)     # opcode -> count
    fpu: dict = field(default_factory=dict)
    convert: dict = field(default_factory=dict)

    @property
    def native(self) -> bool:
        """One tensor-core instruction of the mma's own type does it all."""
        return bool(self.tensor) and not self.fpu and not self.convert

    @property
    def accumulation_on_fpu(self) -> bool:
        """C is added by FPU instructions after the tensor-core ops (sm_90 FP8 mma.sync)."""
        return any(op.split(".")[0] in ("FADD", "HADD2", "FFMA", "HFMA2") for op in self.fpu)

    def describe(self) -> str:
        parts = [f"{n}x {op}" for d in (self.convert, self.tensor, self.fpu)
                 for op, n in d.items()]
        return " + ".join(parts) or "no arithmetic"


class NotTensorCore(AssertionError):
    """The compiler produced no tensor-core instruction for an mma: no number is reported."""


def tensor_path(s: Spec, func) -> TensorPath:
    """Classify the arithmetic of a kernel's SASS (sass.Function); raise NotTensorCore with
    the listing if no tensor-core instruction is there."""
    from . import sass
    p = TensorPath(s.name)
    for ins in func.instrs:
        base = ins.opcode.split(".")[0]
        for group, names in ((p.tensor, TENSOR_OPS), (p.fpu, FPU_OPS),
                             (p.convert, CONVERT_OPS)):
            if base in names:
                group[ins.opcode] = group.get(ins.opcode, 0) + 1
    if not p.tensor:
        raise NotTensorCore(f"probe invalid: {s.name} ({s.instruction}): no tensor-core "
                            f"instruction in the SASS; an FPU emulation is not a tensor-core "
                            f"measurement\n{sass.format_listing(func.instrs)}")
    return p


def sass_text(functions: dict, s: Spec) -> str:
    """Normalised SASS of the spec's kernel (for snapshots and invalid-probe messages)."""
    from . import sass
    return sass.normalise(functions[s.entry])


# --- running on the GPU ---------------------------------------------------------------------

THREADS = 128   # 4 warps (tiles) per block


class Runner:
    """Runs D = A*B + C for batches of tiles on the GPU (cupy), through the driver JIT.

    `verify(spec)` classifies the driver's SASS once (TensorPath; NotTensorCore if none).
    `run(spec, A, B, C)`: A (T, m, k), B (T, k, n) values of the input type, C (T, m, n) of
    the C type (float arrays, already representable) -> D (T, m, n) float64."""

    def __init__(self, dev, watchdog_s: float = 20.0):
        from . import jit, probes
        self.dev = dev
        self.watchdog_s = watchdog_s
        self.ptx, self.specs = module_ptx(dev.arch)
        self.compiled = jit.compile_probe(self.ptx, dev.driver, "gpuchar_numerics.ptx")
        self.functions = probes.functions_of(self.compiled.cubin, dev.arch)
        self.paths: dict[str, TensorPath] = {}
        self.launches = 0

    def verify(self, s: Spec) -> TensorPath:
        if s.name not in self.paths:
            if s not in self.specs:
                raise ValueError(f"{s.name} is not supported on {self.dev.arch}: "
                                 f"{unsupported(s, self.dev.arch)}")
            self.paths[s.name] = tensor_path(s, self.functions[s.entry])
        return self.paths[s.name]

    def sass_text(self, s: Spec) -> str:
        return sass_text(self.functions, s)

    def run_bits(self, s: Spec, a_bits, b_bits, c_bits) -> np.ndarray:
        import cupy as cp

        from . import measure
        self.verify(s)
        if measure.wedged():
            raise measure.GPUWedged(f"GPU wedged by probe {measure.wedged()}")
        T = a_bits.shape[0]
        ga = cp.asarray(pack(s, "a", a_bits))
        gb = cp.asarray(pack(s, "b", b_bits))
        gc = cp.asarray(pack(s, "c", c_bits))
        gd = cp.zeros((T, 32, n_regs(s, "c")), dtype=cp.uint32)
        fn = self.compiled.function(s.entry)
        blocks = (T * 32 + THREADS - 1) // THREADS
        fn((blocks,), (THREADS,), (ga, gb, gc, gd, np.uint32(T)))
        measure._wait(f"numerics/{s.name}", self.watchdog_s)
        self.launches += 1
        return unpack(s, "c", gd.get())

    def run(self, s: Spec, A, B, C=None) -> np.ndarray:
        A = np.asarray(A)
        if C is None:
            C = np.zeros((A.shape[0], s.m, s.n))
        d = self.run_bits(s, refnum.encode(refnum.to_type(A, s.in_type), s.in_type),
                          refnum.encode(refnum.to_type(B, s.in_type), s.in_type),
                          refnum.encode(refnum.to_type(C, s.c_type), s.c_type))
        return refnum.decode(d, s.c_type)


def _check_representable(x, t: str, what: str) -> None:
    ok = refnum.is_representable(np.asarray(x, dtype=np.float64), t)
    if not ok.all():
        bad = np.asarray(x).ravel()[~ok.ravel()][:3]
        raise ValueError(f"{what}: values not representable in {t}: {bad}")


# --- element-wise profiling (seed 004 section 8.1) -------------------------------------------

def diagonal_tiles(s: Spec, a0, b0, a1, b1, c) -> tuple[np.ndarray, ...]:
    """Place samples so every sample is one output element with its own row of A and column
    of B: sample i of a tile is D[i][i] = A[i][2i]B[2i][i] + A[i][2i+1]B[2i+1][i] + C[i][i];
    every other element of A and B is zero. k/2 samples per tile (at most n)."""
    per = min(s.n, s.k // 2)
    n = len(a0)
    T = -(-n // per)
    A = np.zeros((T, s.m, s.k))
    B = np.zeros((T, s.k, s.n))
    C = np.zeros((T, s.m, s.n))
    idx = np.arange(n)
    t, i = idx // per, idx % per
    A[t, i, 2 * i], A[t, i, 2 * i + 1] = a0, a1
    B[t, 2 * i, i], B[t, 2 * i + 1, i] = b0, b1
    C[t, i, i] = c
    return A, B, C, (t, i)


@dataclass
class Elementwise:
    """One table cell set: op x init of one kernel, with the errors the paper reports."""
    spec: str
    op: str
    init: str
    vs_fp32: refnum.ErrorStat              # against the CPU FP32 computation (the paper)
    vs_fp32_cvt: refnum.ErrorStat | None   # f16 C/D: against fp16(CPU FP32) (Table 14)
    vs_exact: refnum.ErrorStat             # against the exact result, rounded once to D's type
    n: int


def elementwise(runner: Runner, s: Spec, op: str, init: str, n: int = 16384,
                seed: int = 2023) -> Elementwise:
    case = refnum.element_case(op, init, s.in_type, s.c_type, n, seed)
    v = case.dev
    A, B, C, (t, i) = diagonal_tiles(s, v["a0"], v["b0"], v["a1"], v["b1"], v["c"])
    D = runner.run(s, A, B, C)[t, i, i]
    base = refnum.cpu_fp32_baseline(case)
    exact = refnum.exact_reference(case)
    once = refnum.to_type(exact.astype(np.float32), s.c_type).astype(np.float64) \
        if s.c_type != "f32" else exact.astype(np.float32).astype(np.float64)
    cvt = None
    if s.c_type == "f16":
        cvt = refnum.error_stat(D, refnum.to_type(base, "f16").astype(np.float64))
    return Elementwise(s.name, op, init, refnum.error_stat(D, base), cvt,
                       refnum.error_stat(D, once), n)


# --- the questions of Fasi et al. -----------------------------------------------------------

def factor(target: float, t: str, *, normal: bool = True) -> tuple[float, float] | None:
    """Two values of type `t` whose product is exactly `target` (None if none is found):
    b a power of two, a = target / b; with `normal`, both factors are normal numbers (so a
    type that flushes subnormal inputs cannot spoil an experiment about something else)."""
    if target == 0:
        return 0.0, 1.0
    tt = refnum.numtype(t)
    for e in sorted(range(-160, 160), key=abs):
        b = 2.0 ** e
        a = target / b
        if not (math.isfinite(a) and a != 0):
            continue
        if normal and (abs(a) < tt.min_normal or b < tt.min_normal):
            continue
        if refnum.is_representable(np.array([a, b]), t).all():
            return a, b
    return None


def single_rows(s: Spec, rows: list[tuple[list[float], list[float], float]]):
    """One tile per case: A's row 0 = a, B's column 0 = b, C[0][0] = c; D[0][0] is the answer."""
    T = len(rows)
    A = np.zeros((T, s.m, s.k))
    B = np.zeros((T, s.k, s.n))
    C = np.zeros((T, s.m, s.n))
    for j, (a, b, c) in enumerate(rows):
        A[j, 0, :len(a)] = a
        B[j, :len(b), 0] = b
        C[j, 0, 0] = c
    return A, B, C


def run_rows(runner: Runner, s: Spec, rows) -> np.ndarray:
    A, B, C = single_rows(s, rows)
    with np.errstate(all="ignore"):
        return runner.run(s, A, B, C)[:, 0, 0]


def products_row(s: Spec, terms: list[tuple[int, float]]) -> tuple[list[float], list[float]]:
    """a, b (length k) whose products a[j]*b[j] are the given terms at positions j."""
    a = [0.0] * s.k
    b = [0.0] * s.k
    for pos, val in terms:
        f = factor(val, s.in_type)
        if f is None:
            raise ValueError(f"{s.name}: {val!r} is not a product of two {s.in_type} values")
        a[pos], b[pos] = f
    return a, b


@dataclass
class Answer:
    """One numeric question answered on the hardware: a value (1/0 for yes/no, a count of
    bits or terms) or None when the hardware gave no determinable answer, with the evidence."""
    question: str
    value: float | None
    unit: str
    detail: str
    cases: list = field(default_factory=list)
    uses_accumulator: bool = False     # the answer depends on the C (accumulation) path
    modes: list = field(default_factory=list)   # rounding questions: consistent IEEE modes


def _fmt(x: float) -> str:
    return "nan" if x != x else (f"{x:.9g}" if abs(x) < 1e6 or not math.isfinite(x)
                                 else f"{x:.6e}")


def ask_subnormal_inputs(runner, s: Spec) -> Answer:
    t = refnum.numtype(s.in_type)
    cases = []
    for m in (1, 3, 2 ** t.mantissa - 1):
        a = m * t.min_subnormal
        b = 2.0 ** (t.mantissa + 4)            # brings the product into every D type's range
        cases.append(([a], [b], 0.0, a * b))
    got = run_rows(runner, s, [(a, b, c) for a, b, c, _ in cases])
    ok = all(g == e for g, (_, _, _, e) in zip(got, cases))
    return Answer("subnormal_inputs", float(ok), "bool",
                  "subnormal A x power-of-two B: " + ", ".join(
                      f"{_fmt(a[0])}*{_fmt(b[0])} -> {_fmt(g)} (exact {_fmt(e)})"
                      for (a, b, _, e), g in zip(cases, got)),
                  [(a[0], b[0], float(g), e) for (a, b, _, e), g in zip(cases, got)])


def ask_subnormal_outputs(runner, s: Spec) -> Answer | str:
    """A product that is subnormal in D's type comes out exactly (1) or is flushed (0)."""
    out = refnum.numtype(s.c_type)
    targets = [out.min_subnormal * m for m in (1, 5, 3 * 2 ** (out.mantissa - 2))]
    rows, exp = [], []
    for v in targets:
        f = factor(v, s.in_type)
        if f is None:
            return (f"products of two {s.in_type} values cannot be subnormal in {s.c_type} "
                    f"(smallest product {refnum.numtype(s.in_type).min_subnormal ** 2:.3g})")
        rows.append(([f[0]], [f[1]], 0.0))
        exp.append(v)
    got = run_rows(runner, s, rows)
    ok = all(g == e for g, e in zip(got, exp))
    return Answer("subnormal_outputs", float(ok), "bool",
                  f"products subnormal in {s.c_type}: " + ", ".join(
                      f"{_fmt(e)} -> {_fmt(g)}" for e, g in zip(exp, got)),
                  [(e, float(g)) for e, g in zip(exp, got)])


def _big(s: Spec) -> float:
    """The 'large term' P of the alignment experiments: the largest power-of-two product of
    two normal input values with 4P finite in D's type (so small terms P*2^-e reach deep)."""
    out_max = refnum.numtype(s.c_type).max_finite
    for p in (30, 24, 16, 14, 8, 0):
        if 4 * 2.0 ** p <= out_max and factor(2.0 ** p, s.in_type):
            return 2.0 ** p
    return 1.0


def _out_ulp_frac(s: Spec) -> int:
    return refnum.numtype(s.c_type).mantissa


def _round_to(q: Fraction, out: str, mode: str) -> float:
    return refnum.round_exact(q, out, mode)


def _classify(cases: list[tuple[Fraction, float]], out: str) -> list[str]:
    return refnum.classify_rounding(cases, out)


ROUND_FRACTIONS = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(3, 2))


def ask_rounding(runner, s: Spec, via: str) -> Answer:
    """Rounding of the result when the exact sum needs more bits than D has.
    via 'c': C = +-P and one product of +-f ulp(P) (the accumulation addition, Fig 16c);
    via 'products': two products P and f ulp(P), C = 0 (the inner-product addition, 16b).
    Answer: the rounding modes consistent with every case (rn, rz, rd, ru)."""
    P = _big(s)
    out = s.c_type
    u = 2.0 ** (-_out_ulp_frac(s)) * P
    rows, qs = [], []
    for sign in (1, -1):
        for same in (True, False):
            for f in ROUND_FRACTIONS:
                big = sign * P
                small = (sign if same else -sign) * float(f) * u
                if via == "c":
                    a, b = products_row(s, [(0, small)])
                    rows.append((a, b, big))
                else:
                    a, b = products_row(s, [(0, big), (1, small)])
                    rows.append((a, b, 0.0))
                qs.append(Fraction(big) + Fraction(small))
    got = run_rows(runner, s, rows)
    cases = [(q, float(g)) for q, g in zip(qs, got)]
    modes = _classify(cases, out)
    detail = (f"{via}: " + ", ".join(f"{float(q):.10g}->{_fmt(g)}" for q, g in cases[:8])
              + f" ... consistent with: {modes or 'no IEEE mode'}")
    return Answer(f"rounding_{via}", None, "modes", detail,
                  [(str(q), g) for q, g in cases], uses_accumulator=(via == "c"), modes=modes)


def ask_extra_bits(runner, s: Spec) -> Answer:
    """Fasi et al.'s alignment test: P + P*2^-e - P with the three products in one k-block
    and C = 0. The exact result P*2^-e survives only while the adder keeps the term's bits
    after aligning it to P: the largest such e, minus 23 (FP32's significand keeps 24 bits,
    2^-23 below the leading one), is the number of extra bits. Several placements of the three
    terms are tried; the smallest answer counts."""
    P = _big(s)
    placements = [(0, 1, 2), (2, 0, 1), (1, 2, 0)]
    es = list(range(20, 42))
    rows, keys = [], []
    for pl in placements:
        for e in es:
            small = P * 2.0 ** -e
            if factor(small, s.in_type) is None:
                continue
            a, b = products_row(s, [(pl[0], P), (pl[1], small), (pl[2], -P)])
            rows.append((a, b, 0.0))
            keys.append((pl, e, small))
    got = run_rows(runner, s, rows)
    per_pl = {}
    tested = {}
    for (pl, e, small), g in zip(keys, got):
        tested.setdefault(pl, []).append(e)
        if g == small:
            per_pl.setdefault(pl, []).append(e)
    best = {}
    for pl, ok in per_pl.items():
        # largest e such that every e' <= e (from the first tested) survived
        run = None
        for e in tested[pl]:
            if e in ok:
                run = e
            else:
                break
        best[pl] = run
    vals = [v for v in best.values() if v is not None]
    if len(vals) != len(placements):
        return Answer("extra_bits", None, "bits",
                      f"the term P*2^-{min(es)} was lost for some placement: "
                      f"{best} (P={P:g})", list(zip(keys, got.tolist())))
    emax = min(vals)
    top = max(e for e in es if factor(P * 2.0 ** -e, s.in_type) is not None)
    at_least = emax >= top
    detail = (f"largest e with P+P*2^-e-P exact: {emax} (P={P:g}; placements {best})"
              + (f"; reached the largest e tested ({top}): at least" if at_least else ""))
    return Answer("extra_bits", float(emax - 23), "bits", detail,
                  [(str(k[0]), k[1], float(g)) for k, g in zip(keys, got)])


def ask_block_size(runner, s: Spec, extra_bits: float | None) -> Answer:
    """How many k terms one multi-term addition takes: +P at k=0, P*2^-e at k=1 (an e that
    survives inside one addition but not an FP32 rounding), -P at k=j. The small term
    survives iff k=j is summed in the same addition as k=0; the block size is the first j
    where it is lost."""
    if extra_bits is None or extra_bits < 1:
        return Answer("block_size", None, "count",
                      f"undetermined: needs an adder with >= 1 extra bit (measured "
                      f"{extra_bits})")
    P = _big(s)
    e = 24
    small = P * 2.0 ** -e
    rows = []
    for j in range(2, s.k):
        a, b = products_row(s, [(0, P), (1, small), (j, -P)])
        rows.append((a, b, 0.0))
    got = run_rows(runner, s, rows)
    same = [j for j, g in zip(range(2, s.k), got) if g == small]
    size = s.k
    for j in range(2, s.k):
        if j not in same:
            size = j
            break
    return Answer("block_size", float(size), "count",
                  f"k positions summed with k=0 in one addition: 0, 1, {same} of {s.k} "
                  f"(P={P:g}, small=P*2^-{e})", [(j, float(g)) for j, g in
                                                  zip(range(2, s.k), got)])


def ask_order(runner, s: Spec, block: int | None, seed: int = 7) -> Answer:
    """Are the results invariant under permutations of the k terms inside one block (i.e. one
    fixed multi-term addition, whatever the order of the inputs)? Adversarial inputs: wide
    exponent spread and cancelling signs, 64 vectors x 4 permutations, bitwise compared."""
    rng = np.random.default_rng(seed)
    t = refnum.numtype(s.in_type)
    b = block or s.k
    span = min(10, 2 ** (t.exponent - 1) - 2)
    n = 64
    mant = rng.uniform(1, 2, (n, b))
    exps = rng.integers(-span, span, (n, b))
    a = refnum.to_type((rng.choice([-1, 1], (n, b)) * mant * 2.0 ** exps).astype(np.float32),
                       s.in_type).astype(np.float64)
    bb = refnum.to_type((rng.choice([-1, 1], (n, b)) * rng.uniform(1, 2, (n, b)) *
                         2.0 ** rng.integers(-span, span, (n, b))).astype(np.float32),
                        s.in_type).astype(np.float64)
    rows, tags = [], []
    for v in range(n):
        for p in range(4):
            perm = np.arange(b) if p == 0 else rng.permutation(b)
            ra = np.zeros(s.k)
            rb = np.zeros(s.k)
            ra[:b], rb[:b] = a[v, perm], bb[v, perm]
            rows.append((list(ra), list(rb), 0.0))
            tags.append(v)
    got = run_rows(runner, s, rows).reshape(n, 4)
    bits = got.astype(np.float32).view(np.uint32) if s.c_type == "f32" else \
        got.astype(np.float16).view(np.uint16)
    varying = int(np.count_nonzero((bits != bits[:, :1]).any(axis=1)))
    exact = refnum.dot_f64(a, bb)
    inexact = int(np.count_nonzero(got[:, 0] != exact))
    if inexact == 0 and varying == 0:
        return Answer("order_invariant", None, "bool",
                      f"undetermined: all {n} sums were exact, no rounding for the order to "
                      f"change", [varying, inexact])
    return Answer("order_invariant", float(varying == 0), "bool",
                  f"{varying} of {n} vectors changed under permutation of {b} k-terms; "
                  f"{inexact} of {n} results differ from the exact sum (so the test has "
                  f"rounding to reveal)", [varying, inexact])


def ask_specials(runner, s: Spec) -> list[Answer]:
    """NaN and Inf inputs, and overflow of D: IEEE says NaN*1 -> NaN, Inf*1 -> Inf,
    Inf*0 -> NaN, Inf + -Inf -> NaN; overflow of D rounds to Inf (not saturated)."""
    t = refnum.numtype(s.in_type)
    nan = float("nan")
    out: list[Answer] = []
    rows = [([nan], [1.0], 0.0)]
    names = ["nan_propagates"]
    if t.has_inf:
        inf = float("inf")
        rows += [([inf], [1.0], 0.0), ([inf], [0.0], 0.0), ([inf, -inf], [1.0, 1.0], 0.0)]
        names += ["inf_propagates", "inf_times_zero_nan", "inf_minus_inf_nan"]
    big = t.max_finite
    ovf = refnum.numtype(s.c_type).max_finite
    if big * big > ovf:
        rows.append(([big], [big], 0.0))
        names.append("overflow_to_inf")
    else:
        rows.append(([big], [big], 0.0))
        names.append("max_product_exact")
    got = run_rows(runner, s, rows)
    checks = {"nan_propagates": lambda g: math.isnan(g),
              "inf_propagates": lambda g: g == math.inf,
              "inf_times_zero_nan": lambda g: math.isnan(g),
              "inf_minus_inf_nan": lambda g: math.isnan(g),
              "overflow_to_inf": lambda g: g == math.inf,
              "max_product_exact": lambda g: g == big * big}
    for name, (a, b, c), g in zip(names, rows, got):
        out.append(Answer(name, float(checks[name](float(g))), "bool",
                          f"a={a} b={b} -> {_fmt(float(g))}", [float(g)]))
    return out


def ask_products_exact(runner, s: Spec, n: int = 4096, seed: int = 11) -> Answer:
    """Random products of the input type (full exponent range of normal values) against the
    exact product rounded once to D's type."""
    rng = np.random.default_rng(seed)
    t = refnum.numtype(s.in_type)
    span = min(12, 2 ** (t.exponent - 1) - 3)
    a = refnum.to_type((rng.standard_normal(n) * 2.0 ** rng.integers(-span, span, n))
                       .astype(np.float32), s.in_type).astype(np.float64)
    b = refnum.to_type((rng.standard_normal(n) * 2.0 ** rng.integers(-span, span, n))
                       .astype(np.float32), s.in_type).astype(np.float64)
    z = np.zeros(n)
    A, B, C, (tt, i) = diagonal_tiles(s, a, b, z, z, z)
    with np.errstate(all="ignore"):
        D = runner.run(s, A, B, C)[tt, i, i]
    prod = a * b                                  # exact in float64
    ok = np.isfinite(prod)
    if s.c_type == "f32":
        # every product of two f16/bf16/tf32/fp8 values fits FP32's 24-bit significand
        want = {"exact": prod.astype(np.float32).astype(np.float64)}
    else:
        q = [Fraction(float(x)) for x in prod]
        want = {m: np.array([_round_to(x, s.c_type, m) for x in q]) for m in ("rn", "rz")}
    wrong = {m: int(np.count_nonzero(D[ok] != w[ok])) for m, w in want.items()}
    best = min(wrong, key=wrong.get)
    return Answer("products_exact", float(wrong[best] == 0), "bool",
                  f"{wrong[best]} of {int(ok.sum())} random products differ from the exact "
                  f"product" + ("" if s.c_type == "f32" else
                                f" rounded once to {s.c_type} ({best}; {wrong})"),
                  [wrong, int(ok.sum())], modes=[m for m, w in wrong.items() if w == 0])


QUESTIONS = ("products_exact", "subnormal_inputs", "subnormal_outputs", "rounding_c",
             "rounding_products", "extra_bits", "block_size", "order_invariant", "specials")


def fasi(runner, s: Spec) -> dict[str, Answer | str]:
    """Every question for one kernel: name -> Answer, or a string saying why it does not
    apply. The accumulation questions (C involved) on a path that adds C on the FPU answer
    with a string starting 'invalid:' and the SASS."""
    path = runner.verify(s)
    res: dict[str, Answer | str] = {}
    res["products_exact"] = ask_products_exact(runner, s)
    res["subnormal_inputs"] = ask_subnormal_inputs(runner, s)
    res["subnormal_outputs"] = ask_subnormal_outputs(runner, s)
    for via in ("c", "products"):
        r = ask_rounding(runner, s, via)
        if via == "c" and path.accumulation_on_fpu:
            res["rounding_c"] = (f"invalid: C is added by {path.fpu} on the FPU, after "
                                 f"{path.tensor}: not a tensor-core measurement")
            continue
        res[f"rounding_{via}"] = r
    eb = ask_extra_bits(runner, s)
    res["extra_bits"] = eb
    bs = ask_block_size(runner, s, eb.value)
    res["block_size"] = bs
    res["order_invariant"] = ask_order(runner, s, int(bs.value) if bs.value else None)
    for a in ask_specials(runner, s):
        res[a.question] = a
    return res


# --- chain matrix multiplication (seed 004 section 8.2) ---------------------------------------

def chain(runner, s: Spec, init: str, links: int = 32, trials: int = 1000,
          seed: int = 2023) -> refnum.ChainCurve:
    """Figs 19-20: D_i = A_i x B_i with A_{i+1} = D_i rounded to the input type (as the
    paper copies D to the next A), B_i fresh normal draws, `trials` chains as `trials` tiles
    of one launch per link. l2 relative error against the float64 CPU chain."""
    kk = CHAIN_K
    a_cpu, bs_cpu, a_dev, bs_dev = refnum.chain_inputs(s.in_type, init, links, trials,
                                                        s.m, kk, seed)
    refs = refnum.chain_reference(a_cpu, bs_cpu)
    A = a_dev.astype(np.float64)
    errs, over = [], []
    for i in range(links):
        Ap = np.zeros((trials, s.m, s.k))
        Ap[:, :, :kk] = A                        # k beyond 8: zeros (m16n8k16 kernels)
        B = np.zeros((trials, s.k, s.n))
        B[:, :kk, :] = bs_dev[i]
        with np.errstate(all="ignore"):
            D = runner.run(s, Ap, B)
        ref = refs[i]
        finite = np.isfinite(D).all(axis=(1, 2))
        over.append(float(1 - finite.mean()))
        e = refnum.l2_relative_errors(ref[finite], D[finite])
        errs.append(float(np.mean(e)) if e.size else float("nan"))
        with np.errstate(all="ignore"):
            A = refnum.to_type(D.astype(np.float32), s.in_type).astype(np.float64)
    return refnum.ChainCurve(s.in_type, init, trials, errs, over)


def layout_probe(runner, s: Spec) -> list[str]:
    """Find, on the hardware, which A element and which B row each fragment slot really is:
    tile j has A one-hot at (r, c) = divmod(j, k) and B[k'][n'] = 1 + k' + k*n' (distinct,
    exact in every 16/32-bit input type), C = 0, so D's non-zero row and values name the
    (row, k) the tensor core used. Returns one line per slot that differs from the PTX ISA
    layout (empty: the layout is right). Not for FP8 (too few mantissa bits for the labels)."""
    T = s.m * s.k
    A = np.zeros((T, s.m, s.k))
    for j in range(T):
        A[j, j // s.k, j % s.k] = 1.0
    kk, nn = np.meshgrid(np.arange(s.k), np.arange(s.n), indexing="ij")
    B = np.broadcast_to(1.0 + kk + s.k * nn, (T, s.k, s.n)).copy()
    D = runner.run(s, A, B)
    bad = []
    for j in range(T):
        r, c = divmod(j, s.k)
        rows = sorted(set(np.nonzero(D[j])[0].tolist()))
        vals = D[j][rows[0]] if rows else np.zeros(s.n)
        ks = sorted({int(v - 1) % s.k for v in vals if v})
        ns = [int(v - 1) // s.k for v in vals if v]
        if rows != [r] or ks != [c] or ns != list(range(s.n)):
            bad.append(f"A[{r}][{c}] -> D rows {rows}, B rows {ks}, B cols {ns}")
    return bad


def plot_chain(curves: list[refnum.ChainCurve], path, title: str = "") -> None:
    """Fig 20: mean l2 relative error against chain length, per type and initialisation;
    links after which most FP16 chains overflowed are marked."""
    from . import plots
    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = {"tf32": "tab:blue", "bf16": "tab:red", "f16": "tab:green"}
    for c in curves:
        x = np.arange(1, len(c.mean_err) + 1)
        y = np.array(c.mean_err, dtype=float)
        ax.semilogy(x, np.where(y > 0, y, np.nan), marker="o" if c.init == "low" else "x",
                    ms=3, ls="-" if c.init == "low" else "--", color=colours.get(c.in_type),
                    label=f"{c.in_type}, init {c.init if c.init == 'fp32' else c.in_type}")
        ov = c.overflow_link()
        if ov:
            ax.axvline(ov, color=colours.get(c.in_type), ls=":", lw=1)
            ax.annotate(f"{c.in_type} overflow (inf)\n>=50% chains from N={ov}", (ov, 1e-3),
                        fontsize=7, color=colours.get(c.in_type))
    ax.set_xlabel("chain length N")
    ax.set_ylabel("mean l2 relative error vs float64 CPU")
    ax.set_title(title or "Chain matrix multiplication (seed 004 Fig 20)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    plots.save(fig, path)


# --- session helpers for the test modules ------------------------------------------------------

def session_runner(gpuchar, dev) -> Runner:
    """One Runner (one driver JIT of the numerics module) per session and device."""
    key = ("numerics.runner", dev.arch, dev.driver)
    if key not in gpuchar.runs:
        gpuchar.runs[key] = Runner(dev, gpuchar.watchdog_s)
    return gpuchar.runs[key]


def cached(gpuchar, key: tuple, make):
    """gpuchar.runs[key], computed once per session by make()."""
    if key not in gpuchar.runs:
        gpuchar.runs[key] = make()
    return gpuchar.runs[key]
