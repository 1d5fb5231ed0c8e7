"""The numerics experiments as host-side analysis over a tensor core: the element-wise
profiling of Tables 12-15, the chain matmul of Figs 19-20, the fragment-layout checks, the
bit snapshot's text, and the paper's observations as invariants. Pure: a tensor core is
anything with ``run(s, A, B, C)`` (the GPU's Operations from run.py, or a CPU model)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from . import reference
from .kernels import TensorPath
from .rows import CHAIN_K, ChainRow, ElementRow, MmaRow


class TensorCore(Protocol):
    """D = A*B + C for batches of tiles: A (T, m, k), B (T, k, n) values of the input type,
    C (T, m, n) of the C type (float arrays, already representable; None: zeros) -> D
    (T, m, n) float64; `verify` says how the mma was implemented."""

    def run(self, s: MmaRow, A, B, C=None) -> np.ndarray: ...

    def verify(self, s: MmaRow) -> TensorPath: ...


@dataclass(frozen=True)
class Operations:
    """A tensor core given by its operations (the GPU's: run.runner, fp8_run.runner)."""
    run: Callable
    verify: Callable
    sass_text: Callable


class ModelTensorCore:
    """A CPU tensor core whose parameters are known (reference.model_mma: extra bits, block
    size, rounding): the experiments are checked on it, without a GPU, to recover them."""

    def __init__(self, **params) -> None:
        self.params = params

    def verify(self, s: MmaRow) -> TensorPath:
        return TensorPath(s.name, {"HMMA": 1})

    def sass_text(self, s: MmaRow) -> str:
        return f"HMMA ({s.name}, CPU model)\n"

    def run(self, s: MmaRow, A, B, C=None) -> np.ndarray:
        A = np.asarray(A, dtype=float)
        if C is None:
            C = np.zeros((A.shape[0], s.m, s.n))
        conv = [reference.to_type(x, t).astype(float)
                for x, t in ((A, s.in_type), (B, s.in_type), (C, s.c_type))]
        return reference.model_mma(*conv, s.c_type, **self.params)


# --- element-wise profiling (seed 004 section 8.1) -------------------------------------------

def diagonal_tiles(s: MmaRow, a0, b0, a1, b1, c) -> tuple[np.ndarray, ...]:
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
    vs_fp32: reference.ErrorStat              # against the CPU FP32 computation (the paper)
    vs_fp32_cvt: reference.ErrorStat | None   # f16 C/D: against fp16(CPU FP32) (Table 14)
    vs_exact: reference.ErrorStat             # against the exact result, rounded once to D
    n: int

    def stat(self, col: str) -> reference.ErrorStat | None:
        """The error against the reference of a table column."""
        return self.vs_fp32 if col == "vs_fp32" else self.vs_fp32_cvt


def elementwise(tc: TensorCore, s: MmaRow, op: str, init: str, n: int = 16384,
                seed: int = 2023) -> Elementwise:
    case = reference.element_case(op, init, s.in_type, s.c_type, n, seed)
    v = case.dev
    A, B, C, (t, i) = diagonal_tiles(s, v["a0"], v["b0"], v["a1"], v["b1"], v["c"])
    D = tc.run(s, A, B, C)[t, i, i]
    base = reference.cpu_fp32_baseline(case)
    exact = reference.exact_reference(case)
    once = reference.to_type(exact.astype(np.float32), s.c_type).astype(np.float64) \
        if s.c_type != "f32" else exact.astype(np.float32).astype(np.float64)
    cvt = None
    if s.c_type == "f16":
        cvt = reference.error_stat(D, reference.to_type(base, "f16").astype(np.float64))
    return Elementwise(s.name, op, init, reference.error_stat(D, base), cvt,
                       reference.error_stat(D, once), n)


def element_conclusions(row: ElementRow, res: Elementwise, low: Elementwise | None) -> list[str]:
    """The paper's conclusions for one table cell, as failed invariants: products are exact
    (low-precision init); FP16 C/D is computed in higher precision and rounded once (Table
    14); with FP32 initialisation the conversion loss dominates (`low`: the same cell with
    low-precision init, needed by the FP32-init rows). `res` holds finite results."""
    s, key, out = row.mma, row.key, []
    stat = res.stat(row.col)
    if row.init == "low" and row.op == "mul" and res.vs_exact.exact_fraction != 1.0:
        out.append(f"{key}: products are not exact: {res.vs_exact.exact_fraction:.4%} of "
                   f"{res.n} products equal the exact product rounded once to {s.c_type}")
    if row.combo == "f16-f16" and row.init == "low" and row.col == "vs_fp32cvt16" \
            and not res.vs_exact.exact_fraction >= 0.999:
        # Table 14: zero error against fp16(CPU FP32). Checked against the exact result
        # rounded once (RN) to FP16; rare double-rounding or sticky-bit cases are allowed
        # (at most 1 in 1000) and their count is recorded.
        out.append(f"{key}: FP16 C/D is not 'computed in higher precision and rounded once': "
                   f"only {res.vs_exact.exact_fraction:.4%} of results equal the exact value "
                   f"rounded once to FP16 (mean error against fp16(CPU FP32) "
                   f"{stat.mean_abs:.3g}; Table 14: 0)")
    if needs_low(row):
        low_err = low.stat(row.col).mean_abs
        if not (low_err is not None and stat.mean_abs >= 10 * low_err):
            out.append(f"{key}: conversion loss does not dominate: init FP32 error "
                       f"{stat.mean_abs:.3g} vs init {s.in_type} error {low_err}")
    return out


def needs_low(row: ElementRow) -> bool:
    """Whether the cell's conclusion compares it with the low-precision-init cell."""
    return row.init == "fp32" and (row.col == "vs_fp32cvt16" or row.combo != "f16-f16")


# --- chain matrix multiplication (seed 004 section 8.2) ---------------------------------------

def chain_inputs(s: MmaRow, init: str, links: int = 32, trials: int = 1000,
                 seed: int = 2023) -> tuple:
    """What a chain experiment depends on alone: the first A and every link's B as the
    tensor core gets them, and the float64 CPU chain's D per link."""
    a_cpu, bs_cpu, a_dev, bs_dev = reference.chain_inputs(s.in_type, init, links, trials,
                                                           s.m, CHAIN_K, seed)
    return a_dev, bs_dev, reference.chain_reference(a_cpu, bs_cpu)


def chain(tc: TensorCore, s: MmaRow, init: str, links: int = 32, trials: int = 1000,
          seed: int = 2023, inputs: tuple | None = None) -> reference.ChainCurve:
    """Figs 19-20: D_i = A_i x B_i with A_{i+1} = D_i rounded to the input type (as the
    paper copies D to the next A), B_i fresh normal draws, `trials` chains as `trials` tiles
    of one launch per link. l2 relative error against the float64 CPU chain. `inputs`:
    chain_inputs of the same arguments, made beforehand (else made here)."""
    kk = CHAIN_K
    a_dev, bs_dev, refs = inputs or chain_inputs(s, init, links, trials, seed)
    A = a_dev.astype(np.float64)
    errs, over = [], []
    for i in range(links):
        Ap = np.zeros((trials, s.m, s.k))
        Ap[:, :, :kk] = A                        # k beyond 8: zeros (m16n8k16 kernels)
        B = np.zeros((trials, s.k, s.n))
        B[:, :kk, :] = bs_dev[i]
        with np.errstate(all="ignore"):
            D = tc.run(s, Ap, B)
        ref = refs[i]
        finite = np.isfinite(D).all(axis=(1, 2))
        over.append(float(1 - finite.mean()))
        e = reference.l2_relative_errors(ref[finite], D[finite])
        errs.append(float(np.mean(e)) if e.size else float("nan"))
        with np.errstate(all="ignore"):
            A = reference.to_type(D.astype(np.float32), s.in_type).astype(np.float64)
    return reference.ChainCurve(s.in_type, init, trials, errs, over)


def finite_until(c: reference.ChainCurve) -> int:
    """Links (from 1) before the first link with any overflowed chain."""
    for i, f in enumerate(c.overflowed):
        if f > 0:
            return i
    return len(c.overflowed)


def chain_observations(row: ChainRow, curves: dict, links: int) -> list[str]:
    """The paper's observations on Fig 20 for one curve, as failed invariants: with
    low-precision init the error at N=1 is negligible; FP32 init always costs more; BF16's
    error grows fastest; FP16 tracks TF32 until it overflows after about 10 links; nothing
    else overflows. `curves`: (type, init) -> ChainCurve of every type measured."""
    label, t, init = row.label, row.in_type, row.init
    c = curves[(t, init)]
    out = []
    if init == "low":
        if not c.mean_err[0] < 1e-6:
            out.append(f"{label}: error at N=1 is {c.mean_err[0]:.3g}, not negligible: the "
                       f"products or the FP32 accumulation are not exact enough")
    else:
        low = curves[(t, "low")]
        worse = [n + 1 for n in range(finite_until(c))
                 if not c.mean_err[n] > low.mean_err[n]]
        if worse:
            out.append(f"{label}: FP32 initialisation not worse than {t} at N={worse}")
    f16 = curves.get(("f16", init))
    limit = finite_until(f16) if f16 else links
    if t == "bf16":
        for other in ("tf32", "f16"):
            o = curves.get((other, init))
            if o is None:
                continue
            bad = [n + 1 for n in range(1, min(limit, links))
                   if not c.mean_err[n] > o.mean_err[n]]
            if bad:
                out.append(f"{label}: BF16 error does not exceed {other}'s at N={bad}")
    if t == "f16":
        tf = curves[("tf32", init)]
        ratio = [c.mean_err[n] / tf.mean_err[n] for n in range(1, limit)]
        if not all(0.5 < x < 2 for x in ratio):
            out.append(f"{label}: FP16 does not track TF32 while finite (ratios {ratio})")
        ov = c.overflow_link()
        if not (ov is not None and 8 <= ov <= 14):
            out.append(f"{label}: FP16 chains overflow at link {ov}, the paper says after "
                       f"about 10")
    elif c.overflow_link() is not None:
        out.append(f"{label}: {t} overflowed ({c.overflowed})")
    return out


def chain_json(curves: dict) -> dict:
    """Fig 20's curves as JSON-able data (NaN as null)."""
    return {f"{t}-init_{i}": {"mean_err": [None if x != x else x for x in c.mean_err],
                              "overflowed": c.overflowed, "trials": c.trials}
            for (t, i), c in curves.items()}


# --- fragment layouts on the hardware ------------------------------------------------------

def layout_probe(tc: TensorCore, s: MmaRow) -> list[str]:
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
    D = tc.run(s, A, B)
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


def layout_check(tc: TensorCore, s: MmaRow) -> None:
    """Random tiles against the float64 reference: a wrong fragment layout gives O(1)
    errors. Raises AssertionError with the one-hot probe's findings (16/32-bit inputs)."""
    rng = np.random.default_rng(9)
    A = reference.to_type(rng.standard_normal((64, s.m, s.k)).astype(np.float32), s.in_type)
    B = reference.to_type(rng.standard_normal((64, s.k, s.n)).astype(np.float32), s.in_type)
    C = reference.to_type(rng.standard_normal((64, s.m, s.n)).astype(np.float32), s.c_type)
    A, B, C = (x.astype(np.float64) for x in (A, B, C))
    D = tc.run(s, A, B, C)
    ref = A @ B + C
    tol = 4 * 2.0 ** -reference.numtype(s.c_type).mantissa * (np.abs(A) @ np.abs(B) + np.abs(C))
    bad = np.argwhere(~(np.abs(D - ref) <= tol))
    if bad.size:
        probe = layout_probe(tc, s) if reference.numtype(s.in_type).bits > 8 else []
        raise AssertionError(
            f"{s.name}: D differs from A@B+C beyond rounding at {len(bad)} elements (first "
            f"{bad[:4].tolist()}): the fragments are not where the PTX ISA layout puts them; "
            f"one-hot probe ({len(probe)} slots differ): " + "; ".join(probe[:40]))


# --- bit-exact snapshots -------------------------------------------------------------------

def fixed_tiles(s: MmaRow, seed: int = 5):
    """8 random tiles (normal draws rounded to the types) + 4 edge tiles."""
    rng = np.random.default_rng(seed)
    t_in = reference.numtype(s.in_type)

    def rnd(shape, t):
        return reference.to_type(rng.standard_normal(shape).astype(np.float32), t).astype(float)
    A = rnd((12, s.m, s.k), s.in_type)
    B = rnd((12, s.k, s.n), s.in_type)
    C = rnd((12, s.m, s.n), s.c_type)
    # edge tiles: subnormal inputs, largest finite inputs (C = 0), signed zeros, cancellation
    A[8] = t_in.min_subnormal * rng.integers(1, 2 ** t_in.mantissa, (s.m, s.k)) * \
        rng.choice([-1, 1], (s.m, s.k))
    B[8] = 2.0 ** min(t_in.mantissa + 4, 6)
    A[9] = t_in.max_finite * rng.choice([-1, 1], (s.m, s.k))
    B[9] = rng.choice([0.0, 1.0, -1.0], (s.k, s.n))
    C[9] = 0.0
    A[10] = rng.choice([0.0, -0.0], (s.m, s.k))
    C[10] = rng.choice([0.0, -0.0], (s.m, s.n))
    A[11][:, 0::2] = A[11][:, 1::2]
    B[11][1::2, :] = -B[11][0::2, :]
    return A, B, C


def bits_text(s: MmaRow, arch: str, path: TensorPath, D: np.ndarray) -> str:
    """The snapshot of D's bits for the fixed tiles, row by row, one tile after another."""
    bits = reference.encode(reference.to_type(D, s.c_type), s.c_type)
    w = reference.numtype(s.c_type).bits // 4
    lines = [f"// {s.instruction} on {arch}: {path.describe()}",
             "// tiles 0-7 random normal, 8 subnormal A, 9 largest finite A, 10 signed zeros, "
             "11 cancellation; D bits row by row"]
    for t in range(D.shape[0]):
        lines.append(f"tile {t}:")
        lines += [" ".join(f"{int(v):0{w}x}" for v in row) for row in bits[t]]
    return "\n".join(lines) + "\n"
