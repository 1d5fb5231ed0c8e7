"""The numerics kernels: one untimed mma.sync kernel per MmaRow on the shared frame, the
fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k*") the host packs A/B/C into,
and how the compiler implemented the mma (TensorPath): the probe's verification is that a
tensor-core instruction is there, else NotTensorCore and no number."""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field

import numpy as np

from ...core import archs, ptx, sass
from ...core.probe import NotApplicable, Probe
from ...core.verify import ProbeInvalid, Verdict
from . import reference
from .rows import MMA, MmaRow

# --- fragment layouts ----------------------------------------------------------------------


def _gt(lane: int) -> tuple[int, int]:
    return lane >> 2, lane % 4


def coord(s: MmaRow, which: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of element i of `which` ('a', 'b', 'c') held by `lane`. A is m x k (row),
    B is k x n (col), C/D m x n."""
    g, t = _gt(lane)
    if which == "c":
        return g + 8 * (i >> 1), 2 * t + (i & 1)
    bits = reference.numtype(s.in_type).bits
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


def elem_bits(s: MmaRow, which: str) -> int:
    return reference.numtype(s.c_type if which == "c" else s.in_type).bits


def _dims(s: MmaRow, which: str) -> tuple[int, int]:
    return {"a": (s.m, s.k), "b": (s.k, s.n), "c": (s.m, s.n)}[which]


def n_elems(s: MmaRow, which: str) -> int:
    rows, cols = _dims(s, which)
    return rows * cols // 32


def n_regs(s: MmaRow, which: str) -> int:
    return n_elems(s, which) * elem_bits(s, which) // 32


@functools.lru_cache(maxsize=None)
def coords(s: MmaRow, which: str) -> np.ndarray:
    """(32, elements, 2) array of (row, col) per lane and element (depends on the row only:
    made once, read-only)."""
    xy = np.array([[coord(s, which, lane, i) for i in range(n_elems(s, which))]
                   for lane in range(32)], dtype=np.int64)
    xy.flags.writeable = False
    return xy


def _whole_words(w: int) -> bool:
    """Elements of w bits fill a register's bytes in order (a little-endian host): a
    register is then its elements' bytes, lowest element first."""
    return w in (8, 16, 32) and sys.byteorder == "little"


def pack(s: MmaRow, which: str, bits: np.ndarray) -> np.ndarray:
    """Matrices of bit patterns (T, rows, cols) -> fragment registers (T, 32, regs) uint32:
    element i of a lane sits in register i // per_reg, lowest bits first."""
    xy = coords(s, which)
    w = elem_bits(s, which)
    if _whole_words(w):
        el = np.ascontiguousarray(bits[:, xy[..., 0], xy[..., 1]].astype(f"uint{w}"))
        return el.view(np.uint32).reshape(el.shape[0], 32, -1)
    el = bits[:, xy[..., 0], xy[..., 1]].astype(np.uint64)      # (T, 32, elems)
    per = 32 // w
    el = el.reshape(el.shape[0], 32, -1, per)
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(w))
    # C order: a kernel reads the registers as C-ordered memory (docs/numerics.md, finding 2)
    return np.ascontiguousarray((el << shifts).sum(axis=-1).astype(np.uint32))


def unpack(s: MmaRow, which: str, regs: np.ndarray) -> np.ndarray:
    """Inverse of pack: (T, 32, regs) uint32 -> (T, rows, cols) bit patterns."""
    xy = coords(s, which)
    w = elem_bits(s, which)
    dtype = reference.numtype(s.c_type if which == "c" else s.in_type).uint
    per = 32 // w
    if _whole_words(w):
        regs = np.ascontiguousarray(regs, dtype=np.uint32)
        el = regs.view(f"uint{w}").reshape(regs.shape[0], 32, -1)
        out = np.zeros((regs.shape[0], *_dims(s, which)), dtype=dtype)
        out[:, xy[..., 0], xy[..., 1]] = el
        return out
    regs = np.asarray(regs, dtype=np.uint64)
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(w))
    el = (regs[..., None] >> shifts) & np.uint64((1 << w) - 1)
    el = el.reshape(regs.shape[0], 32, -1)
    out = np.zeros((regs.shape[0], *_dims(s, which)), dtype=np.uint64)
    out[:, xy[..., 0], xy[..., 1]] = el
    return out.astype(dtype)


# --- PTX -----------------------------------------------------------------------------------

PARAMS = [".param .u64 pa", ".param .u64 pb", ".param .u64 pc", ".param .u64 pd",
          ".param .u32 pn"]


def _fragments(x: str, cnt: int) -> str:
    return "{" + ", ".join(f"%{x}{i}" for i in range(cnt)) + "}"


def kernel_ptx(s: MmaRow) -> str:
    """One warp per tile: load A/B/C fragments (one .b32 word per register), one mma.sync,
    store D. Tiles beyond the count exit before the mma (warp-uniform). Untimed."""
    na, nb, nc = n_regs(s, "a"), n_regs(s, "b"), n_regs(s, "c")
    loads = []
    for x, cnt in (("a", na), ("b", nb), ("c", nc), ("d", nc)):
        loads += [f"  ld.param.u64 %r{x}, [p{x}];", f"  cvta.to.global.u64 %r{x}, %r{x};",
                  f"  mul.wide.u32 %off, %g, {4 * cnt};", f"  add.u64 %r{x}, %r{x}, %off;"]
        if x != "d":
            loads += [f"  ld.global.b32 %{x}{i}, [%r{x}+{4 * i}];" for i in range(cnt)]
    mma = (f"  {s.instruction} {_fragments('d', nc)}, {_fragments('a', na)}, "
           f"{_fragments('b', nb)}, {_fragments('c', nc)};")
    return ptx.Kernel(
        entry=s.entry, params=PARAMS, clock=None,
        decls=["  .reg .pred %p;", f"  .reg .b32 %a<{na}>, %b<{nb}>, %c<{nc}>, %d<{nc}>;",
               "  .reg .b32 %vtid, %vntid, %vcta, %g, %tile, %n;",
               "  .reg .b64 %ra, %rb, %rc, %rd, %off;"],
        setup=["  mov.u32 %vtid, %tid.x;", "  mov.u32 %vntid, %ntid.x;",
               "  mov.u32 %vcta, %ctaid.x;", "  mad.lo.u32 %g, %vcta, %vntid, %vtid;",
               "  shr.u32 %tile, %g, 5;", "  ld.param.u32 %n, [pn];",
               "  setp.ge.u32 %p, %tile, %n;", "  @%p bra $Ldone;"],
        body=[*loads, mma],
        after=[*(f"  st.global.b32 [%rd+{4 * i}], %d{i};" for i in range(nc)), "$Ldone:"],
    ).render()


def supported(arch: str, rows: list[MmaRow] | None = None) -> list[MmaRow]:
    """The rows (default: every MmaRow) `arch` can run."""
    return [s for s in (rows or list(MMA.values())) if s.unsupported(arch) is None]


def module_isa(arch: str, rows: list[MmaRow]) -> str:
    """The module's .version: the arch's default, or the newest any of its mma needs."""
    return max([archs.ptx_isa_version(arch)] + [s.isa for s in rows],
               key=lambda v: tuple(int(x) for x in v.split(".")))


def module_ptx(arch: str, rows: list[MmaRow] | None = None) -> tuple[str, list[MmaRow]]:
    """One PTX module with the kernel of every row `arch` supports (one ptxas / JIT run)."""
    rows = supported(arch, rows)
    return ptx.module(arch, [kernel_ptx(s) for s in rows], version=module_isa(arch, rows)), rows


# --- what the SASS says ---------------------------------------------------------------------

TENSOR_OPS = sass.TENSOR_OPCODES
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


class NotTensorCore(ProbeInvalid):
    """The compiler produced no tensor-core instruction for an mma: no number is reported."""


def tensor_path(s: MmaRow, func: sass.Function) -> TensorPath:
    """Classify the arithmetic of a kernel's SASS; raise NotTensorCore with the listing if no
    tensor-core instruction is there (an FPU emulation is not a tensor-core measurement)."""
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


# --- the probe ------------------------------------------------------------------------------

@dataclass
class MmaVerdict(Verdict):
    """A numerics kernel's verdict: the tensor-core path its mma took."""
    path: TensorPath | None = None


@dataclass
class MmaProbe(Probe):
    """An untimed mma kernel: its 'region' is the whole kernel, and it is valid when the mma
    became tensor-core SASS (the FPU or conversion ops around it are reported, not refused:
    the accumulation questions decide what they can use)."""
    mma: MmaRow | None = None

    def regions(self, functions: dict[str, sass.Function]) -> dict[int, list[sass.Instr]]:
        return {1: list(self.sass_of(functions, 1).instrs)}

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> MmaVerdict:
        path = tensor_path(self.mma, functions[self.mma.entry])
        return MmaVerdict(True, dict(path.tensor), path=path)


def probe(s: MmaRow, arch: str, why_prefix: str = "") -> MmaProbe:
    """The kernel of `s` for `arch` as a probe (NotApplicable where the arch lacks the mma)."""
    why = s.unsupported(arch)
    if why:
        raise NotApplicable(why_prefix + why)
    return MmaProbe(f"numerics/{s.name}", arch, "\n" + kernel_ptx(s), {1: s.entry}, {1: 1},
                    isa=module_isa(arch, [s]), mma=s)


def probes(arch: str) -> list[MmaProbe]:
    """Every numerics kernel `arch` supports, in module order."""
    return [probe(s, arch) for s in supported(arch)]


def module_text(arch: str, part: list[MmaProbe]) -> str:
    """The module of these probes as module_ptx writes it (its own .version)."""
    return module_ptx(arch, [p.mma for p in part])[0]
