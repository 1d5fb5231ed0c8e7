"""Fasi-style questions for the FP8 wgmma (e4m3/e5m2 -> f32), where the accumulation keeps
fewer bits than FP32 (public FP8 training reports: about 14): how many significant bits of
C + products survive, how the kept result is rounded, whether products are summed in blocks,
and the error growth with K against an exact reference. Pure: a tensor core is anything with
``run(s, A, B, C)`` (the GPU's, fp8_run.runner, or a CPU model); FP8 values via ml_dtypes."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import reference
from .fasi import Answer, factor, products_row, run_rows

MAX_E = 30                        # C = 2^e + one product of 1: e = 1..30
ROUND_FRACTIONS = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(3, 2))
K_GROWTH = (32, 64, 128, 256, 512, 1024, 2048, 4096)
K_REPORTED = (32, 512, 4096)
QUESTIONS = ("products_exact", "subnormal_inputs", "accumulator_bits", "extra_bits",
             "product_sum_bits", "rounding_c_rn", "rounding_c_rz", "rounding_c_terms",
             "rounding_products_rn", "rounding_products_rz", "rounding_products_terms",
             "block_size", "order_invariant", "nan_propagates", "inf_propagates",
             "inf_times_zero_nan", "inf_minus_inf_nan", "max_product_exact")
# "terms": every term truncated toward zero at the kept unit of the largest term, then summed
# exactly (an adder that aligns to the largest exponent and keeps no bit below its precision)
MODES = (*reference.ROUNDING_MODES, "terms")


@dataclass(frozen=True)
class Fp8Row:
    """One answer of the FP8 wgmma of one input type."""
    in_type: str
    question: str

    @property
    def id(self) -> str:
        return f"{self.in_type}-{self.question}"

    @property
    def key(self) -> str:
        return f"numerics.fp8_wgmma.{self.in_type}.{self.question}"

    @property
    def asked(self) -> tuple[str, str]:
        """(the answer it reads, the rounding mode it asks about or '')."""
        if self.question.startswith("rounding"):
            base, _, mode = self.question.rpartition("_")
            return base, mode
        return self.question, ""


FP8_ROWS = [Fp8Row(t, q) for t in ("e4m3", "e5m2") for q in QUESTIONS]


# --- kept bits -------------------------------------------------------------------------------

def _run_cases(tc, s, rows) -> np.ndarray:
    return run_rows(tc, s, rows)


def _first_run(exact: list[bool]) -> int:
    """Length of the leading run of True."""
    n = 0
    for ok in exact:
        if not ok:
            break
        n += 1
    return n


def ask_accumulator_bits(tc, s) -> Answer:
    """C = 2^e plus one product 1 x 1: the sum 2^e + 1 needs e + 1 significant bits; the
    accumulation keeps `bits` when it is exact for every e < bits and lost from e = bits.
    Negative C (-2^e + 1) is recorded beside it."""
    es = list(range(1, MAX_E + 1))
    a, b = products_row(s, [(0, 1.0)])
    rows = [(a, b, float(sign * 2.0 ** e)) for sign in (1, -1) for e in es]
    got = _run_cases(tc, s, rows)
    pos, neg = got[:len(es)], got[len(es):]
    exact = [g == 2.0 ** e + 1 for e, g in zip(es, pos)]
    run = _first_run(exact)
    bits = run + 1 if run < len(es) else None
    detail = (f"C = 2^e, one product 1: exact up to e = {run} ({bits} significant bits kept)"
              if bits else f"exact for every e up to {MAX_E}: at least {MAX_E + 1} bits")
    lost = [f"2^{e}+1 -> {float(g) - 2.0 ** e:g} over 2^{e}" for e, g in zip(es, pos)
            if g != 2.0 ** e + 1][:4]
    cases = [(e, float(p), float(n)) for e, p, n in zip(es, pos, neg)]
    return Answer("accumulator_bits", None if bits is None else float(bits), "bits",
                  detail + ("; " + ", ".join(lost) if lost else ""), cases,
                  uses_accumulator=True)


def extra_bits(acc: Answer) -> Answer:
    """Fasi et al.'s "extra bits" in this adder's terms: the bits it keeps beyond FP32's 24
    (negative: fewer)."""
    v = None if acc.value is None else acc.value - 24
    return Answer("extra_bits", v, "bits", f"accumulator bits {acc.value} - 24 (FP32's "
                  f"significand): {acc.detail}", acc.cases, uses_accumulator=True)


def ask_product_sum_bits(tc, s) -> Answer:
    """C = 0, two products 2^e and 1 in one wgmma: the bits the inner-product addition keeps
    (only up to the largest power of two that is a product of two normal values)."""
    es = [e for e in range(1, MAX_E + 1) if factor(2.0 ** e, s.in_type)]
    rows = []
    for e in es:
        a, b = products_row(s, [(0, 2.0 ** e), (1, 1.0)])
        rows.append((a, b, 0.0))
    got = _run_cases(tc, s, rows)
    run = _first_run([g == 2.0 ** e + 1 for e, g in zip(es, got)])
    if run == len(es):
        return Answer("product_sum_bits", None, "bits",
                      f"undetermined: 2^e + 1 exact for every e up to {es[-1]}, the largest "
                      f"power of two that is a product of two normal {s.in_type} values",
                      [(e, float(g)) for e, g in zip(es, got)])
    return Answer("product_sum_bits", float(es[run - 1] + 1 if run else 1), "bits",
                  f"two products 2^e and 1, C = 0: exact up to e = {es[run - 1] if run else 0}",
                  [(e, float(g)) for e, g in zip(es, got)])


# --- rounding at the kept precision ----------------------------------------------------------

def round_bits(q: Fraction, bits: int, mode: str) -> Fraction:
    """Exact q rounded to `bits` significant bits (rn: nearest, ties to even; rz; rd; ru)."""
    if q == 0:
        return q
    e = math.floor(math.log2(abs(q)))
    if Fraction(2) ** e > abs(q):
        e -= 1
    elif Fraction(2) ** (e + 1) <= abs(q):
        e += 1
    u = Fraction(2) ** (e - bits + 1)
    lo = math.floor(q / u) * u
    hi = lo if lo == q else lo + u
    if mode == "rd" or lo == hi:
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return lo if q > 0 else hi
    dlo, dhi = q - lo, hi - q
    if dlo != dhi:
        return lo if dlo < dhi else hi
    return lo if (lo / u) % 2 == 0 else hi


def truncated_terms(terms: list[Fraction], bits: int) -> Fraction:
    """Each term truncated toward zero at the kept unit of the largest one, summed exactly."""
    top = max(abs(t) for t in terms)
    e = math.floor(math.log2(top))
    u = Fraction(2) ** (e - bits + 1)
    return sum((Fraction(math.trunc(t / u)) * u for t in terms), Fraction(0))


def predict(terms: list[Fraction], bits: int, mode: str) -> Fraction:
    if mode == "terms":
        return truncated_terms(terms, bits)
    return round_bits(sum(terms, Fraction(0)), bits, mode)


def classify(cases: list[tuple[list[Fraction], float]], bits: int) -> list[str]:
    """The modes (MODES) consistent with every (terms, observed) case."""
    return [m for m in MODES if all(float(predict(t, bits, m)) == g for t, g in cases)]


def ask_rounding(tc, s, via: str, bits: float | None) -> Answer:
    """At the kept precision: a big term 2^(bits-1) (C, or a product with C = 0) plus a small
    product f (1/4, 1/2, 3/4, 3/2 of the kept unit, both signs): the modes (MODES) of a
    `bits`-bit result consistent with every case."""
    if bits is None:
        return Answer(f"rounding_{via}", None, "modes", "undetermined: no kept bit count")
    b = int(bits)
    big = 2.0 ** (b - 1)
    if via == "products" and factor(big, s.in_type) is None:
        return Answer(f"rounding_{via}", None, "modes",
                      f"undetermined: 2^{b - 1} is no product of two {s.in_type} values")
    rows, qs = [], []
    for sign in (1, -1):
        for same in (True, False):
            for f in ROUND_FRACTIONS:
                small = (sign if same else -sign) * float(f)
                if via == "c":
                    a, bb = products_row(s, [(0, small)])
                    rows.append((a, bb, sign * big))
                else:
                    a, bb = products_row(s, [(0, sign * big), (1, small)])
                    rows.append((a, bb, 0.0))
                qs.append([Fraction(sign * big), Fraction(small)])
    got = _run_cases(tc, s, rows)
    cases = [(t, float(g)) for t, g in zip(qs, got)]
    modes = classify(cases, b)
    return Answer(f"rounding_{via}", None, "modes",
                  f"{via}: 2^{b - 1} + f (kept unit 1): " + ", ".join(
                      f"{float(sum(t)):g}->{g:g}" for t, g in cases[:8]) +
                  f" ... consistent at {b} bits with: {modes or 'no mode'}",
                  [(str(float(sum(t))), g) for t, g in cases], uses_accumulator=(via == "c"),
                  modes=modes)


# --- blocks -------------------------------------------------------------------------------

def ask_block_size(tc, s, bits: float | None) -> Answer:
    """A small product s at k = 0, then +P at k = j and -P at k = j + 1 (C = 0), s far below
    P's kept precision: where +P and -P share s's addition, s is truncated away (result 0);
    where they form a block of their own (cancelling exactly before the block joins the
    accumulator), s survives. The block size is the first j at which s survives."""
    if bits is None:
        return Answer("block_size", None, "count", "undetermined: no kept bit count")
    P = 2.0 ** 6
    small = P * 2.0 ** -(int(bits) + 3)
    if factor(small, s.in_type) is None or factor(P, s.in_type) is None:
        return Answer("block_size", None, "count",
                      f"undetermined: {small:g} is no product of two normal {s.in_type} values")
    js = list(range(1, s.k - 1))
    rows = []
    for j in js:
        a, b = products_row(s, [(0, small), (j, P), (j + 1, -P)])
        rows.append((a, b, 0.0))
    got = _run_cases(tc, s, rows)
    survived = [j for j, g in zip(js, got) if g == small]
    cases = [(j, float(g)) for j, g in zip(js, got)]
    if 1 in survived:
        return Answer("block_size", None, "count",
                      "undetermined: s survives even with P and -P next to it (the addition "
                      "keeps it, so no block boundary shows)", cases)
    if not survived:
        return Answer("block_size", None, "count",
                      f"undetermined: s = P*2^-{int(bits) + 3} lost wherever P and -P sit in "
                      f"the {s.k} k terms (one addition of all of them, or the accumulator "
                      f"aligned with every block)", cases)
    return Answer("block_size", float(survived[0]), "count",
                  f"s survives with P, -P at k = {survived} of 1..{js[-1]}", cases)


# --- error growth with K -------------------------------------------------------------------

def k_inputs(in_type: str, k: int, tiles: int, seed: int = 2024):
    """A (tiles, 64, k), B (tiles, k, 8): normal(0, 1) draws rounded to the type (RNE)."""
    rng = np.random.default_rng(seed + k)
    a = reference.to_type(rng.standard_normal((tiles, 64, k)).astype(np.float32), in_type)
    b = reference.to_type(rng.standard_normal((tiles, k, 8)).astype(np.float32), in_type)
    return a.astype(np.float64), b.astype(np.float64)


def exact_product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B correctly rounded to float64 (math.fsum over the exact products, bit for bit:
    reference.exact_matmul)."""
    return reference.exact_matmul(A, B)


def chained(tc, s, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """D over K in steps of the kernel's k: each step's D is the next step's C (f32 in
    memory, the accumulator registers' own format)."""
    D = np.zeros((A.shape[0], 64, 8))
    for k0 in range(0, A.shape[2], s.k):
        with np.errstate(all="ignore"):
            D = tc.run(s, A[:, :, k0:k0 + s.k], B[:, k0:k0 + s.k, :], D)
    return D


@functools.lru_cache(maxsize=2 * len(K_GROWTH))
def k_case(in_type: str, k: int, tiles: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, the exact A @ B) of one K: what depends only on the row, made once and shared
    by the measured chain and the CPU models (read-only)."""
    A, B = k_inputs(in_type, k, tiles)
    ref = exact_product(A, B)
    for x in (A, B, ref):
        x.flags.writeable = False
    return A, B, ref


def k_errors(tcs: dict, s, ks=K_GROWTH, tiles: int = 8,
             cases=k_case) -> dict[str, dict[int, float]]:
    """Per tensor core (name -> tc): mean l2 relative error of D = A @ B (chained over K)
    against the exact product (computed once per K; `cases`: k_case, or where a session
    keeps its K cases)."""
    out: dict[str, dict[int, float]] = {name: {} for name in tcs}
    for k in ks:
        A, B, ref = cases(s.in_type, k, tiles)
        for name, tc in tcs.items():
            err = reference.l2_relative_errors(ref, chained(tc, s, A, B))
            out[name][k] = float(np.mean(err))
    return out
