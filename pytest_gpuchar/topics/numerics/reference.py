"""Exact CPU references for tensor-core numerics (no GPU, no CUDA).

Low-precision types are emulated bit-exactly: bf16 and fp8 (e4m3 = ``float8_e4m3fn``, e5m2)
through ml_dtypes, FP16 through numpy's IEEE half, TF32 by rounding FP32 mantissas to 10 bits
exactly as ``cvt.rna.tf32.f32`` does (round to nearest, ties away from zero). References are
computed in float64 (every product of two inputs of these types is exact in float64: at most
24+24 significand bits) with ``math.fsum`` for sums (correctly rounded), or in
``fractions.Fraction`` where a rounding decision is being classified.

The element-wise profiling of seed 004 section 8.1 (Figs 16-18, Tables 12-15) and the chain
matrix multiplication of Figs 19-20 are set up here as pure host-side functions; analysis.py
runs them on a tensor core (the GPU through run.py, or model_mma here).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np


def _ml_dtypes():
    """ml_dtypes, imported when a bf16 or fp8 value is first made, not when this module is:
    the static suite imports the numerics topic at collection and never needs it, and
    importing ml_dtypes 0.7.0 took about a second of CPU (0.13 s for 0.6.0) in every process
    that collected the suite."""
    import ml_dtypes
    return ml_dtypes


@dataclass(frozen=True)
class NumType:
    """A tensor-core input/accumulator type: its storage and its significand."""
    name: str          # "f16", "bf16", "tf32", "e4m3", "e5m2", "f32"
    bits: int          # storage bits of one element in a fragment register
    mantissa: int      # explicit mantissa bits
    exponent: int      # exponent bits
    dtype: object      # numpy dtype holding the value, or the name of an ml_dtypes type
    uint: object       # unsigned integer dtype of the same width as `storage`

    @property
    def storage(self):
        """The numpy dtype holding the value (tf32: float32 with 13 low bits zero)."""
        return getattr(_ml_dtypes(), self.dtype) if isinstance(self.dtype, str) else self.dtype

    @property
    def finfo(self):
        if self.name == "tf32":
            return None
        return _ml_dtypes().finfo(self.storage) if isinstance(self.dtype, str) \
            else np.finfo(self.storage)

    @property
    def max_finite(self) -> float:
        if self.name == "tf32":
            return float(np.float32(np.uint32(0x7F7FE000).view(np.float32)))
        return float(self.finfo.max)

    @property
    def min_normal(self) -> float:
        return 2.0 ** (2 - 2 ** (self.exponent - 1))

    @property
    def min_subnormal(self) -> float:
        return self.min_normal * 2.0 ** -self.mantissa

    @property
    def has_inf(self) -> bool:
        return self.name != "e4m3"


TYPES = {
    "f16": NumType("f16", 16, 10, 5, np.float16, np.uint16),
    "bf16": NumType("bf16", 16, 7, 8, "bfloat16", np.uint16),
    "tf32": NumType("tf32", 32, 10, 8, np.float32, np.uint32),
    "e4m3": NumType("e4m3", 8, 3, 4, "float8_e4m3fn", np.uint8),
    "e5m2": NumType("e5m2", 8, 2, 5, "float8_e5m2", np.uint8),
    "f32": NumType("f32", 32, 23, 8, np.float32, np.uint32),
}

TF32_NAN = np.uint32(0x7FFFE000)   # quiet NaN with the 13 low bits clear


def numtype(name: str) -> NumType:
    try:
        return TYPES[name]
    except KeyError:
        raise ValueError(f"unknown numeric type {name!r}; one of {', '.join(TYPES)}") from None


# --- rounding into the low-precision types ------------------------------------------------

def round_tf32(x) -> np.ndarray:
    """FP32 -> TF32 as ``cvt.rna.tf32.f32``: keep 10 mantissa bits, round to nearest with ties
    away from zero (add half an ulp to the magnitude bits, clear the 13 low bits). Overflow
    past the largest finite value gives infinity; NaN stays NaN (a quiet NaN, low bits clear)."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32)          # u32 arithmetic: mag + 0x1000 stays below 2^32
    mag = bits & np.uint32(0x7FFFFFFF)
    sign = bits & np.uint32(0x80000000)
    rounded = ((mag + np.uint32(0x1000)) & np.uint32(0xFFFFE000)) | sign
    out = np.where(np.isnan(f), np.uint32(TF32_NAN) | sign, rounded).astype(np.uint32)
    return out.view(np.float32)


def to_type(x, name: str, *, satfinite: bool = False) -> np.ndarray:
    """Values of `x` (float32 array; float64 is first rounded to float32) rounded into type
    `name`, returned in the type's storage dtype. f16/bf16/fp8: round to nearest even (IEEE,
    as ml_dtypes and numpy convert); tf32: cvt.rna. `satfinite`: clamp finite overflow to the
    largest finite value (cvt .satfinite) instead of inf (or NaN for e4m3, which has no inf)."""
    t = numtype(name)
    f = np.asarray(x, dtype=np.float32)
    if satfinite:
        m = np.float32(t.max_finite)
        f = np.where(np.isfinite(f), np.clip(f, -m, m), f).astype(np.float32)
    if name == "tf32":
        return round_tf32(f)
    with np.errstate(over="ignore", invalid="ignore"):
        return f.astype(t.storage)


def is_representable(x, name: str) -> np.ndarray:
    """True where the float value is exactly a value of type `name`."""
    f = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        back = to_type(f.astype(np.float32), name).astype(np.float64)
        same = (back == f) & (f.astype(np.float32).astype(np.float64) == f)
    return same | (np.isnan(f) & np.isnan(back))


def encode(x, name: str) -> np.ndarray:
    """Bit patterns (unsigned ints of the type's width) of values already in type `name`."""
    t = numtype(name)
    return np.ascontiguousarray(np.asarray(x, dtype=t.storage)).view(t.uint)


def decode(bits, name: str) -> np.ndarray:
    """float64 values of bit patterns of type `name`."""
    t = numtype(name)
    with np.errstate(invalid="ignore"):
        return np.ascontiguousarray(np.asarray(bits, dtype=t.uint)).view(t.storage) \
            .astype(np.float64)


def ulp(x: float, name: str) -> float:
    """Spacing of type `name` at |x| (normal range; the subnormal spacing below)."""
    t = numtype(name)
    x = abs(float(x))
    if x < t.min_normal:
        return t.min_subnormal
    return 2.0 ** (math.floor(math.log2(x)) - t.mantissa)


# --- exact arithmetic and rounding classification ------------------------------------------

def exact_dot(a, b, c: float = 0.0) -> Fraction:
    """sum(a[i]*b[i]) + c as an exact rational (NaN/Inf are not allowed here)."""
    return sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b)),
               Fraction(float(c)))


def dot_f64(a, b, c=None) -> np.ndarray:
    """Row-wise sum(a*b) + c, correctly rounded to float64 (math.fsum over exact products).
    a, b: (n, k) float arrays of values whose products are exact in float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    prods = a * b
    cc = np.zeros(len(a)) if c is None else np.asarray(c, dtype=np.float64)
    terms = np.concatenate([prods, np.broadcast_to(cc, (len(prods),))[:, None]], axis=1)
    out = np.empty(len(terms))
    # the finite rows summed by exact_matmul against a column of ones, the same values as
    # math.fsum row by row, bit for bit (a table's 16384 rows: 0.1 s of fsum calls); rows
    # holding an infinity or a NaN by math.fsum itself (its errors included)
    finite = np.isfinite(terms).all(axis=1)
    if finite.any():
        t = terms[finite]
        out[finite] = exact_matmul(t[:, None, :], np.ones((t.shape[1], 1)))[:, 0, 0]
    for i in np.flatnonzero(~finite):
        out[i] = math.fsum(terms[i].tolist())
    return out


INT_BOUND = 2 ** 62           # |an integer sum| below this: no int64 overflow


def _lowest_bit(x: np.ndarray) -> int | None:
    """The exponent of the smallest lowest set bit of the nonzero values of float64 `x`
    (every one of them is a whole multiple of 2 to that power); None when all are zero."""
    mant, exp = np.frexp(x)
    whole = (mant * 2.0 ** 53).astype(np.int64)            # exact: 53-bit significands
    nz = whole != 0
    if not nz.any():
        return None
    low = whole[nz] & -whole[nz]                             # each one's lowest set bit
    return int((np.log2(low).astype(np.int64) + exp[nz] - 53).min())


def exact_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B (batched over leading axes) correctly rounded to float64: what math.fsum over
    each element's exact products returns, bit for bit. A and B are float64 arrays whose
    products are exact in float64. Every A value is a whole multiple of 2^ga and every B
    value of 2^gb, so the products are whole multiples of 2^(ga + gb): the sum is an exact
    int64 matrix product scaled back, rounded once to float64 (round to nearest even, as
    fsum). Elements the integers cannot hold (too wide a range of values) or whose result
    would leave the normal range go through math.fsum."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    out_shape = np.broadcast_shapes(A.shape[:-2], B.shape[:-2]) + (A.shape[-2], B.shape[-1])
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        return _fsum_matmul(A, B, out_shape)
    ga, gb = _lowest_bit(A), _lowest_bit(B)
    if ga is None or gb is None:
        return np.zeros(out_shape)
    with np.errstate(all="ignore"):
        a, b = np.ldexp(A, -ga), np.ldexp(B, -gb)            # whole numbers, exact
        if float(np.abs(a).max()) * float(np.abs(b).max()) * A.shape[-1] >= INT_BOUND:
            return _fsum_matmul(A, B, out_shape)
        total = np.matmul(a.astype(np.int64), b.astype(np.int64))
        out = np.ldexp(total.astype(np.float64), ga + gb)    # one rounding, then exact
    bad = (total != 0) & ~((np.abs(out) >= np.finfo(np.float64).tiny) & np.isfinite(out))
    if bad.any():
        out[bad] = _fsum_matmul(A, B, out_shape)[bad]
    return out


def _fsum_matmul(A: np.ndarray, B: np.ndarray, out_shape) -> np.ndarray:
    A = np.broadcast_to(A, out_shape[:-2] + A.shape[-2:])
    B = np.broadcast_to(B, out_shape[:-2] + B.shape[-2:])
    out = np.empty(out_shape)
    for idx in np.ndindex(*out_shape[:-2]):
        prods = A[idx][:, None, :] * B[idx].T[None, :, :]    # (m, n, k)
        out[idx] = [[math.fsum(row) for row in rows] for rows in prods.tolist()]
    return out


_FLOATS = {"f32": np.float32, "f16": np.float16}


def neighbours(q: Fraction, out: str = "f32") -> tuple[float, float]:
    """The values lo <= q <= hi of type `out` ('f32' or 'f16') bracketing the exact value q
    (lo == hi if q is exact); beyond the largest finite value the other side is +-inf."""
    dt = _FLOATS[out]
    big = dt(np.finfo(dt).max)
    if abs(q) > Fraction(float(big)):
        return (float(big), math.inf) if q > 0 else (-math.inf, -float(big))
    with np.errstate(over="ignore"):
        x = dt(float(q))
    if not np.isfinite(x):
        x = big if q > 0 else -big
    fx = Fraction(float(x))
    if fx == q:
        return float(x), float(x)
    if fx > q:
        return float(np.nextafter(x, dt(-np.inf))), float(x)
    return float(x), float(np.nextafter(x, dt(np.inf)))


def f32_neighbours(q: Fraction) -> tuple[float, float]:
    return neighbours(q, "f32")


def round_exact(q: Fraction, out: str, mode: str) -> float:
    """Exact q rounded to `out` ('f32' or 'f16') under `mode`: 'rn' (nearest, ties to even;
    overflow to inf from max + half an ulp, as IEEE 754), 'rz' (toward zero, truncation),
    'rd' (down), 'ru' (up)."""
    if mode not in ROUNDING_MODES:
        raise ValueError(f"unknown rounding mode {mode!r}; rn, rz, rd or ru")
    lo, hi = neighbours(q, out)
    if lo == hi:
        return lo
    if mode == "rz":
        return lo if q > 0 else hi
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    dt = _FLOATS[out]
    if math.isinf(hi) or math.isinf(lo):          # beyond the largest finite value
        big = float(np.finfo(dt).max)
        half = (Fraction(big) - Fraction(float(np.nextafter(dt(big), dt(0))))) / 2
        if abs(q) >= Fraction(big) + half:
            return math.copysign(math.inf, float(q))
        return math.copysign(big, float(q))
    dlo, dhi = q - Fraction(lo), Fraction(hi) - q
    if dlo != dhi:
        return lo if dlo < dhi else hi
    uint = np.uint32 if out == "f32" else np.uint16
    lo_even = int(np.array(lo, dtype=dt).view(uint)) % 2 == 0
    return lo if lo_even else hi


def round_f32(q: Fraction, mode: str) -> float:
    """Exact q rounded to FP32 under `mode` (see round_exact)."""
    return round_exact(q, "f32", mode)


ROUNDING_MODES = ("rn", "rz", "rd", "ru")


def classify_rounding(cases: list[tuple[Fraction, float]], out: str = "f32") -> list[str]:
    """The rounding modes consistent with every (exact value, observed value) pair."""
    return [m for m in ROUNDING_MODES
            if all(round_exact(q, out, m) == obs for q, obs in cases)]


# --- element-wise profiling (seed 004 section 8.1, Fig 16) ---------------------------------

OPS = ("mul", "inner", "acc")


@dataclass
class ElementCase:
    """Inputs of one element-wise experiment: d = a0*b0 + a1*b1 + c per sample.

    mul:   a1 = b1 = c = 0                     (Fig 16a)
    inner: b1 = 1, a1 = x, c = 0               (Fig 16b: the second inner-product term)
    acc:   a1 = b1 = 0, c = x                  (Fig 16c: the accumulation term)
    The same seed gives the same a0, b0, x for every op and type, so, as in the paper, a1 of the
    inner product equals c of the accumulation."""
    op: str
    init: str                 # "low": drawn then rounded to the input type; "fp32": FP32 draws
    in_type: str
    c_type: str               # "f32" or "f16"
    cpu: dict                 # the CPU's FP32 copies: a0, b0, a1, b1, c (float32 arrays)
    dev: dict                 # the values the tensor core gets, in their types (float64 arrays)


def draws(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """a0, b0, x: standard normal FP32 draws (mu 0, sigma 1, as in the paper), fixed seed."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((3, n)).astype(np.float32)
    return v[0], v[1], v[2]


def element_case(op: str, init: str, in_type: str, c_type: str, n: int,
                 seed: int = 2023) -> ElementCase:
    if op not in OPS:
        raise ValueError(f"unknown element-wise op {op!r}; one of {OPS}")
    if init not in ("low", "fp32"):
        raise ValueError(f"unknown init {init!r}; 'low' or 'fp32'")
    a0, b0, x = draws(n, seed)
    zero = np.zeros(n, dtype=np.float32)
    one = np.ones(n, dtype=np.float32)
    if op == "mul":
        vals = dict(a0=a0, b0=b0, a1=zero, b1=zero, c=zero)
    elif op == "inner":
        vals = dict(a0=a0, b0=b0, a1=x, b1=one, c=zero)
    else:
        vals = dict(a0=a0, b0=b0, a1=zero, b1=zero, c=x)

    def as_in(v):
        return to_type(v, in_type).astype(np.float32)

    def as_c(v):
        return v if c_type == "f32" else to_type(v, c_type).astype(np.float32)

    if init == "low":
        # initialised in the low-precision type: CPU and tensor core see the same values
        vals = {k: (as_c(v) if k == "c" else as_in(v)) for k, v in vals.items()}
        if c_type == "f32":
            vals["c"] = as_in(vals["c"])   # C initialised in the input type too (Figs 17-18)
    dev = {k: (as_c(v) if k == "c" else as_in(v)).astype(np.float64) for k, v in vals.items()}
    cpu = {k: np.asarray(v, dtype=np.float32) for k, v in vals.items()}
    return ElementCase(op, init, in_type, c_type, cpu, dev)


def cpu_fp32_baseline(case: ElementCase) -> np.ndarray:
    """The paper's baseline: D = A*B + C computed on the CPU in FP32 (each product and each
    addition rounded to FP32, in order)."""
    v = case.cpu
    with np.errstate(over="ignore", invalid="ignore"):
        d = v["a0"] * v["b0"]
        d = d + v["a1"] * v["b1"]
        d = d + v["c"]
    return d.astype(np.float64)


def exact_reference(case: ElementCase) -> np.ndarray:
    """a0*b0 + a1*b1 + c of the values the tensor core received, correctly rounded to float64."""
    v = case.dev
    return dot_f64(np.stack([v["a0"], v["a1"]], 1), np.stack([v["b0"], v["b1"]], 1), v["c"])


@dataclass
class ErrorStat:
    """Mean absolute error of a measurement against a reference; a non-finite measured value
    where the reference is finite is counted, never averaged away."""
    mean_abs: float | None
    max_abs: float | None
    exact_fraction: float
    nonfinite: int
    n: int

    @property
    def finite(self) -> bool:
        return self.nonfinite == 0


def error_stat(measured, reference) -> ErrorStat:
    m = np.asarray(measured, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    bad = int(np.count_nonzero(~np.isfinite(m) & np.isfinite(r)))
    ok = np.isfinite(m) & np.isfinite(r)
    err = np.abs(m[ok] - r[ok])
    return ErrorStat(float(err.mean()) if bad == 0 and err.size else None,
                     float(err.max()) if bad == 0 and err.size else None,
                     float(np.mean(m[ok] == r[ok])) if ok.any() else 0.0, bad, int(m.size))


# --- chain matrix multiplication (seed 004 section 8.2, Figs 19-20) -------------------------

def l2_relative_error(ref, got) -> float:
    """||ref - got||_2 / ||ref||_2 (equation 1 of the paper); inf/nan when `got` is not finite."""
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.linalg.norm(ref - got) / np.linalg.norm(ref))


def l2_relative_errors(ref, got) -> np.ndarray:
    """l2_relative_error of each (..., m, n) matrix pair along the leading axis."""
    ref = np.asarray(ref, dtype=np.float64)
    got = np.asarray(got, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        num = np.sqrt(((ref - got) ** 2).sum(axis=(-2, -1)))
        return num / np.sqrt((ref ** 2).sum(axis=(-2, -1)))


@dataclass
class ChainCurve:
    """Mean l2 relative error after each link (1..N) over `trials` independent chains, and the
    fraction of chains whose result is no longer finite (overflow) after each link."""
    in_type: str
    init: str
    trials: int
    mean_err: list[float]        # over the chains still finite at that link (nan if none)
    overflowed: list[float]      # fraction of chains with a non-finite element

    def overflow_link(self, fraction: float = 0.5) -> int | None:
        """First link (1-based) after which at least `fraction` of the chains overflowed."""
        for i, f in enumerate(self.overflowed):
            if f >= fraction:
                return i + 1
        return None


def chain_inputs(in_type: str, init: str, links: int, trials: int, m: int, k: int,
                 seed: int = 2023) -> tuple[np.ndarray, list[np.ndarray], np.ndarray,
                                            list[np.ndarray]]:
    """A0 (trials, m, k) and B_i (trials, k, k) for each link, FP32 normal draws (fixed seed):
    the CPU copies and the copies in the input type (init 'low': the draws rounded to the type,
    identical for CPU and GPU; init 'fp32': the CPU keeps the FP32 draws)."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((trials, m, k)).astype(np.float32)
    bs = [rng.standard_normal((trials, k, k)).astype(np.float32) for _ in range(links)]
    low_a = to_type(a, in_type).astype(np.float32)
    low_bs = [to_type(b, in_type).astype(np.float32) for b in bs]
    if init == "low":
        return low_a, low_bs, low_a, low_bs
    return a, bs, low_a, low_bs


def chain_reference(a_cpu: np.ndarray, bs_cpu: list[np.ndarray]) -> list[np.ndarray]:
    """The CPU chain in float64 (the exact reference the tensor-core chain is measured
    against; the paper used FP32, whose own error is far below the curves): D_i after each
    link."""
    d = a_cpu.astype(np.float64)
    out = []
    for b in bs_cpu:
        d = d @ b.astype(np.float64)
        out.append(d)
    return out


# --- a parametrised model of a tensor core's inner-product unit (Fasi et al.'s model) ---------

def model_mma(A, B, C, out: str = "f32", *, extra_bits: int = 3, block: int = 8,
              rounding: str = "rz") -> np.ndarray:
    """D = A @ B + C as a multi-term adder would compute it: per block of `block` k terms, the
    exact products and the running accumulator (C first) are aligned to the largest exponent,
    each truncated to 24 + `extra_bits` bits below it, summed exactly, and the sum rounded to
    `out` ('f32' or 'f16') with `rounding` ('rn' or 'rz'). Used to check that the questions in
    fasi.py recover a known model's parameters (no GPU needed); not a claim about any GPU.
    Inputs are float64 arrays of values whose products are exact in float64."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    acc = np.asarray(C, dtype=np.float64).copy()
    k = A.shape[-1]
    with np.errstate(all="ignore"):
        for k0 in range(0, k, block):
            terms = [acc] + [A[..., :, j:j + 1] * B[..., j:j + 1, :]
                             for j in range(k0, min(k, k0 + block))]
            terms = np.broadcast_arrays(*terms)
            stack = np.stack(terms)
            finite = np.isfinite(stack).all(axis=0)
            mag = np.abs(stack).max(axis=0)
            emax = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
            q = np.exp2(emax - 23 - extra_bits)
            trunc = np.trunc(stack / q) * q
            exact_sum = np.where(finite, trunc.sum(axis=0), stack.sum(axis=0))
            acc = _round_array(exact_sum, out, rounding)
    return acc


def _round_array(x: np.ndarray, out: str, rounding: str) -> np.ndarray:
    dt = np.float32 if out == "f32" else np.float16
    with np.errstate(all="ignore"):
        r = x.astype(dt)
        if rounding == "rz":
            too_big = np.isfinite(x) & (np.abs(r.astype(np.float64)) > np.abs(x))
            r = np.where(too_big, np.nextafter(r, dt(0)), r)
        elif rounding != "rn":
            raise ValueError(f"model rounding {rounding!r}: 'rn' or 'rz'")
    return r.astype(np.float64)
