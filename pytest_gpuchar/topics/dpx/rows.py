"""The DPX intrinsics of CUDA (Hopper's dynamic-programming instructions) as rows: what each
computes, the PTX it is on sm_90 and on sm_80..sm_89, and the SASS one call becomes on sm_90.

The PTX is CUDA's own. On sm_90 and later, crt/device_functions.hpp (CUDA 13.0) implements
each intrinsic as inline PTX (``hardware`` below, verbatim but for the operand names): two
2-input ``max``/``min``/``add`` (``.s32``/``.u32``/``.s16x2``/``.u16x2``, ``.relu``) that
ptxas fuses into one VIMNMX3 / VIADDMNMX, or setp + selp for ``__vibmax``. On older archs
the header falls back to C++ (and libdevice for the 16x2 forms): ``emulation.EMULATED``,
as nvcc 13.0 compiles it for sm_80 (sm_86 and sm_89 give the same PTX).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...core import archs
from ...core.probe import NotApplicable
from .emulation import EMULATED

FIRST_ARCH = 80          # the emulation is checked from sm_80 (issue 16: sm_80/86/89)
HARDWARE_ARCH = 90       # DPX instructions exist on sm_90 (Hopper)
LANES = ("s32", "u32", "s16x2", "u16x2")
TEMP = {"s32": "s32", "u32": "u32", "s16x2": "b32", "u16x2": "b32"}   # the header's t1 type


def _three(op: str, ty: str, relu: bool) -> str:
    """__vimax3_* / __vimin3_*: op(op(a, b), c)."""
    r = ".relu" if relu else ""
    return (f"{{ .reg .{TEMP[ty]} t1; {op}.{ty}{r} t1, {{a}}, {{b}}; "
            f"{op}.{ty}{r} {{d}}, t1, {{c}}; }}")


def _add_then(op: str, ty: str, relu: bool) -> str:
    """__viaddmax_* / __viaddmin_*: op(a + b, c)."""
    r = ".relu" if relu else ""
    return (f"{{ .reg .{TEMP[ty]} t1; add.{ty} t1, {{a}}, {{b}}; "
            f"{op}.{ty}{r} {{d}}, t1, {{c}}; }}")


def _relu2(op: str, ty: str) -> str:
    """__vimax_*_relu / __vimin_*_relu: max(op(a, b), 0)."""
    return f"{{ {op}.{ty}.relu {{d}}, {{a}}, {{b}}; }}"


def _select(cmp: str, ty: str) -> str:
    """__vibmax_s32/u32 (cmp ge) and __vibmin_* (le): the value and (a cmp b) as a 0/1 word."""
    return (f"{{ .reg .pred __$temp1; setp.{cmp}.{ty} __$temp1, {{a}}, {{b}}; "
            f"selp.{ty} {{d}}, {{a}}, {{b}}, __$temp1; selp.{ty} {{e}}, 1, 0, __$temp1; }}")


def _select16(op: str, ty: str) -> str:
    """__vibmax_s16x2/u16x2 (and __vibmin): per half the value, and for the high (e) and
    the low (f) half whether the result equals a's half."""
    s = "s16" if ty == "s16x2" else "u16"
    return (f"{{ .reg .pred pu, pv; .reg .{s} rs0, rs1, rs2, rs3; {op}.{ty} {{d}}, {{a}}, {{b}}; "
            f"mov.b32 {{rs0, rs1}}, {{d}}; mov.b32 {{rs2, rs3}}, {{a}}; "
            f"setp.eq.{s} pv, rs0, rs2; setp.eq.{s} pu, rs1, rs3; "
            f"selp.b32 {{e}}, 1, 0, pu; selp.b32 {{f}}, 1, 0, pv; }}")


@dataclass(frozen=True)
class DpxRow:
    """One intrinsic. ``family``: max3, min3, addmax, addmin, relu_max, relu_min, bmax, bmin;
    ``lanes``: s32, u32, s16x2, u16x2; ``relu`` clamps each lane at 0. ``unit``: the SASS one
    call is on sm_90 (None: several instructions, verified as a repeated sequence)."""
    name: str
    family: str
    lanes: str
    relu: bool
    hardware: str
    unit: tuple[str, ...] | None
    what: str

    @property
    def intrinsic(self) -> str:
        return f"__{self.name}"

    @property
    def emulated(self) -> str:
        return EMULATED[self.name]

    @property
    def sources(self) -> tuple[str, ...]:
        return ("a", "b") if self.family in ("relu_max", "relu_min", "bmax", "bmin") \
            else ("a", "b", "c")

    @property
    def outputs(self) -> tuple[str, ...]:
        if self.family in ("bmax", "bmin"):
            return ("d", "e") if self.lanes in ("s32", "u32") else ("d", "e", "f")
        return ("d",)

    @property
    def loop(self) -> bool:
        """Timed for throughput on sm_90: one call is one instruction with one result, and
        a loop of it survives the compiler (x = max(max(x, b), 0) with a loop-invariant b
        is idempotent: ptxas folds the whole loop away)."""
        return self.unit is not None and len(self.unit) == 1 and self.outputs == ("d",) \
            and self.family not in ("relu_max", "relu_min")

    @property
    def why_no_loop(self) -> str:
        if self.family in ("relu_max", "relu_min"):
            return ("x = max(op(x, b), 0) with a loop-invariant b is idempotent: ptxas folds "
                    "the loop away (its latency row times the instruction)")
        return ("on sm_90 one call is several instructions with a predicate output (its "
                "latency row times the sequence)")

    def supported(self, arch: str) -> str | None:
        if archs.number(arch) < FIRST_ARCH:
            return (f"{self.intrinsic}: DPX rows are checked from sm_{FIRST_ARCH} on (the "
                    f"emulation compiled for sm_80..sm_89, the hardware instruction on sm_90)")
        if self.family in ("bmax", "bmin") and self.lanes.endswith("16x2") and \
                archs.number(arch) in (120, 121):
            return (f"{self.intrinsic}: ptxas 13.x for {arch} shares the half-word extraction "
                    f"(PRMT, LOP3) between consecutive calls of a chain, so a chain has no "
                    f"per-call sequence to record (sm_100 has one)")
        return None

    def ptx_at(self, arch: str) -> str:
        """The PTX template of one call on `arch` (NotApplicable before sm_80)."""
        why = self.supported(arch)
        if why:
            raise NotApplicable(why)
        return self.hardware if archs.number(arch) >= HARDWARE_ARCH else self.emulated

    def unit_at(self, arch: str) -> tuple[str, ...] | None:
        """The SASS one call must be on `arch` (sm_90: `unit`); None elsewhere: a compiler
        sequence whose per-call opcodes the verifier derives."""
        return self.unit if archs.number(arch) == HARDWARE_ARCH else None

    def is_hardware(self, arch: str) -> bool:
        return archs.number(arch) == HARDWARE_ARCH and self.unit is not None


def _rows() -> list[DpxRow]:
    out = []
    for op, fam in (("max", "max3"), ("min", "min3")):
        for ty in LANES:
            out.append(DpxRow(f"vi{op}3_{ty}", fam, ty, False, _three(op, ty, False),
                              (f"VIMNMX3{_suffix(ty)}",), f"{op}({op}(a, b), c) per {ty} lane"))
        for ty in ("s32", "s16x2"):
            out.append(DpxRow(f"vi{op}3_{ty}_relu", fam, ty, True, _three(op, ty, True),
                              (f"VIMNMX3{_suffix(ty)}.RELU",),
                              f"max({op}({op}(a, b), c), 0) per {ty} lane"))
    for op, fam in (("max", "addmax"), ("min", "addmin")):
        for ty in LANES:
            out.append(DpxRow(f"viadd{op}_{ty}", fam, ty, False, _add_then(op, ty, False),
                              (f"VIADDMNMX{_suffix(ty)}",), f"{op}(a + b, c) per {ty} lane"))
        for ty in ("s32", "s16x2"):
            out.append(DpxRow(f"viadd{op}_{ty}_relu", fam, ty, True, _add_then(op, ty, True),
                              (f"VIADDMNMX{_suffix(ty)}.RELU",),
                              f"max({op}(a + b, c), 0) per {ty} lane"))
    for op in ("max", "min"):
        for ty in ("s32", "s16x2"):
            out.append(DpxRow(f"vi{op}_{ty}_relu", f"relu_{op}", ty, True, _relu2(op, ty),
                              (f"VIMNMX{_suffix(ty)}.RELU",), f"max({op}(a, b), 0) per {ty} lane"))
    for op, cmp in (("max", "ge"), ("min", "le")):
        for ty in ("s32", "u32"):
            out.append(DpxRow(f"vib{op}_{ty}", f"b{op}", ty, False, _select(cmp, ty), None,
                              f"{op}(a, b) and (a {cmp} b)"))
        for ty in ("s16x2", "u16x2"):
            out.append(DpxRow(f"vib{op}_{ty}", f"b{op}", ty, False, _select16(op, ty), None,
                              f"{op}(a, b) per {ty} lane and, per lane, whether it is a's"))
    return out


def _suffix(ty: str) -> str:
    return {"s32": "", "u32": ".U32", "s16x2": ".S16x2", "u16x2": ".U16x2"}[ty]


ROWS: list[DpxRow] = _rows()


def row(name: str) -> DpxRow:
    for r in ROWS:
        if r.name == name:
            return r
    raise KeyError(f"no DPX row {name!r}; rows: {[r.name for r in ROWS]}")
