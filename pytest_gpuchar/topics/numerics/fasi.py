"""The questions Fasi et al. (2021) asked of tensor cores, as analysis over a tensor core's
results: are products exact, are subnormals kept, how are sums rounded, how many extra bits
does the adder keep, how many terms does one addition take, does the order matter, what do
NaN/Inf/overflow do. Pure: the tensor core is analysis.TensorCore (the GPU or a model)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from . import reference
from .analysis import TensorCore, diagonal_tiles
from .rows import MmaRow


@functools.lru_cache(maxsize=4096)
def factor(target: float, t: str, *, normal: bool = True) -> tuple[float, float] | None:
    """Two values of type `t` whose product is exactly `target` (None if none is found):
    b a power of two, a = target / b; with `normal`, both factors are normal numbers (so a
    type that flushes subnormal inputs cannot spoil an experiment about something else).
    Memoised: the questions ask for the same terms again and again (a pure function of its
    arguments; 0.0 and -0.0 give the same answer)."""
    if target == 0:
        return 0.0, 1.0
    tt = reference.numtype(t)
    for e in sorted(range(-160, 160), key=abs):
        b = 2.0 ** e
        a = target / b
        if not (math.isfinite(a) and a != 0):
            continue
        if normal and (abs(a) < tt.min_normal or b < tt.min_normal):
            continue
        if reference.is_representable(np.array([a, b]), t).all():
            return a, b
    return None


def single_rows(s: MmaRow, rows: list[tuple[list[float], list[float], float]]):
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


def run_rows(tc: TensorCore, s: MmaRow, rows) -> np.ndarray:
    A, B, C = single_rows(s, rows)
    with np.errstate(all="ignore"):
        return tc.run(s, A, B, C)[:, 0, 0]


def products_row(s: MmaRow, terms: list[tuple[int, float]]) -> tuple[list[float], list[float]]:
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


def ask_subnormal_inputs(tc: TensorCore, s: MmaRow) -> Answer:
    t = reference.numtype(s.in_type)
    cases = []
    for m in (1, 3, 2 ** t.mantissa - 1):
        a = m * t.min_subnormal
        b = 2.0 ** (t.mantissa + 4)            # brings the product into every D type's range
        cases.append(([a], [b], 0.0, a * b))
    got = run_rows(tc, s, [(a, b, c) for a, b, c, _ in cases])
    ok = all(g == e for g, (_, _, _, e) in zip(got, cases))
    return Answer("subnormal_inputs", float(ok), "bool",
                  "subnormal A x power-of-two B: " + ", ".join(
                      f"{_fmt(a[0])}*{_fmt(b[0])} -> {_fmt(g)} (exact {_fmt(e)})"
                      for (a, b, _, e), g in zip(cases, got)),
                  [(a[0], b[0], float(g), e) for (a, b, _, e), g in zip(cases, got)])


def ask_subnormal_outputs(tc: TensorCore, s: MmaRow) -> Answer | str:
    """A product that is subnormal in D's type comes out exactly (1) or is flushed (0)."""
    out = reference.numtype(s.c_type)
    targets = [out.min_subnormal * m for m in (1, 5, 3 * 2 ** (out.mantissa - 2))]
    rows, exp = [], []
    for v in targets:
        f = factor(v, s.in_type)
        if f is None:
            return (f"products of two {s.in_type} values cannot be subnormal in {s.c_type} "
                    f"(smallest product {reference.numtype(s.in_type).min_subnormal ** 2:.3g})")
        rows.append(([f[0]], [f[1]], 0.0))
        exp.append(v)
    got = run_rows(tc, s, rows)
    ok = all(g == e for g, e in zip(got, exp))
    return Answer("subnormal_outputs", float(ok), "bool",
                  f"products subnormal in {s.c_type}: " + ", ".join(
                      f"{_fmt(e)} -> {_fmt(g)}" for e, g in zip(exp, got)),
                  [(e, float(g)) for e, g in zip(exp, got)])


def _big(s: MmaRow) -> float:
    """The 'large term' P of the alignment experiments: the largest power-of-two product of
    two normal input values with 4P finite in D's type (so small terms P*2^-e reach deep)."""
    out_max = reference.numtype(s.c_type).max_finite
    for p in (30, 24, 16, 14, 8, 0):
        if 4 * 2.0 ** p <= out_max and factor(2.0 ** p, s.in_type):
            return 2.0 ** p
    return 1.0


ROUND_FRACTIONS = (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(3, 2))


def ask_rounding(tc: TensorCore, s: MmaRow, via: str) -> Answer:
    """Rounding of the result when the exact sum needs more bits than D has.
    via 'c': C = +-P and one product of +-f ulp(P) (the accumulation addition, Fig 16c);
    via 'products': two products P and f ulp(P), C = 0 (the inner-product addition, 16b).
    Answer: the rounding modes consistent with every case (rn, rz, rd, ru)."""
    P = _big(s)
    u = 2.0 ** (-reference.numtype(s.c_type).mantissa) * P
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
    got = run_rows(tc, s, rows)
    cases = [(q, float(g)) for q, g in zip(qs, got)]
    modes = reference.classify_rounding(cases, s.c_type)
    detail = (f"{via}: " + ", ".join(f"{float(q):.10g}->{_fmt(g)}" for q, g in cases[:8])
              + f" ... consistent with: {modes or 'no IEEE mode'}")
    return Answer(f"rounding_{via}", None, "modes", detail,
                  [(str(q), g) for q, g in cases], uses_accumulator=(via == "c"), modes=modes)


def _longest_run(tested: list[int], ok: list[int]) -> int | None:
    """The largest e such that every e' <= e (from the first tested) survived."""
    run = None
    for e in tested:
        if e not in ok:
            break
        run = e
    return run


def ask_extra_bits(tc: TensorCore, s: MmaRow) -> Answer:
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
    got = run_rows(tc, s, rows)
    per_pl, tested = {}, {}
    for (pl, e, small), g in zip(keys, got):
        tested.setdefault(pl, []).append(e)
        if g == small:
            per_pl.setdefault(pl, []).append(e)
    best = {pl: _longest_run(tested[pl], ok) for pl, ok in per_pl.items()}
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


def ask_block_size(tc: TensorCore, s: MmaRow, extra_bits: float | None) -> Answer:
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
    got = run_rows(tc, s, rows)
    same = [j for j, g in zip(range(2, s.k), got) if g == small]
    size = next((j for j in range(2, s.k) if j not in same), s.k)
    return Answer("block_size", float(size), "count",
                  f"k positions summed with k=0 in one addition: 0, 1, {same} of {s.k} "
                  f"(P={P:g}, small=P*2^-{e})", [(j, float(g)) for j, g in
                                                  zip(range(2, s.k), got)])


def _adversarial(rng, s: MmaRow, n: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """n vectors of b values of the input type: wide exponent spread, random signs."""
    t = reference.numtype(s.in_type)
    span = min(10, 2 ** (t.exponent - 1) - 2)
    mant = rng.uniform(1, 2, (n, b))
    exps = rng.integers(-span, span, (n, b))
    a = reference.to_type((rng.choice([-1, 1], (n, b)) * mant * 2.0 ** exps)
                          .astype(np.float32), s.in_type).astype(np.float64)
    bb = reference.to_type((rng.choice([-1, 1], (n, b)) * rng.uniform(1, 2, (n, b)) *
                            2.0 ** rng.integers(-span, span, (n, b))).astype(np.float32),
                           s.in_type).astype(np.float64)
    return a, bb


def ask_order(tc: TensorCore, s: MmaRow, block: int | None, seed: int = 7) -> Answer:
    """Are the results invariant under permutations of the k terms inside one block (i.e. one
    fixed multi-term addition, whatever the order of the inputs)? Adversarial inputs: wide
    exponent spread and cancelling signs, 64 vectors x 4 permutations, bitwise compared."""
    rng = np.random.default_rng(seed)
    b = block or s.k
    n = 64
    a, bb = _adversarial(rng, s, n, b)
    rows = []
    for v in range(n):
        for p in range(4):
            perm = np.arange(b) if p == 0 else rng.permutation(b)
            ra = np.zeros(s.k)
            rb = np.zeros(s.k)
            ra[:b], rb[:b] = a[v, perm], bb[v, perm]
            rows.append((list(ra), list(rb), 0.0))
    got = run_rows(tc, s, rows).reshape(n, 4)
    bits = got.astype(np.float32).view(np.uint32) if s.c_type == "f32" else \
        got.astype(np.float16).view(np.uint16)
    varying = int(np.count_nonzero((bits != bits[:, :1]).any(axis=1)))
    exact = reference.dot_f64(a, bb)
    inexact = int(np.count_nonzero(got[:, 0] != exact))
    if inexact == 0 and varying == 0:
        return Answer("order_invariant", None, "bool",
                      f"undetermined: all {n} sums were exact, no rounding for the order to "
                      f"change", [varying, inexact])
    return Answer("order_invariant", float(varying == 0), "bool",
                  f"{varying} of {n} vectors changed under permutation of {b} k-terms; "
                  f"{inexact} of {n} results differ from the exact sum (so the test has "
                  f"rounding to reveal)", [varying, inexact])


def ask_specials(tc: TensorCore, s: MmaRow) -> list[Answer]:
    """NaN and Inf inputs, and overflow of D: IEEE says NaN*1 -> NaN, Inf*1 -> Inf,
    Inf*0 -> NaN, Inf + -Inf -> NaN; overflow of D rounds to Inf (not saturated)."""
    t = reference.numtype(s.in_type)
    nan = float("nan")
    rows = [([nan], [1.0], 0.0)]
    names = ["nan_propagates"]
    if t.has_inf:
        inf = float("inf")
        rows += [([inf], [1.0], 0.0), ([inf], [0.0], 0.0), ([inf, -inf], [1.0, 1.0], 0.0)]
        names += ["inf_propagates", "inf_times_zero_nan", "inf_minus_inf_nan"]
    big = t.max_finite
    rows.append(([big], [big], 0.0))
    names.append("overflow_to_inf" if big * big > reference.numtype(s.c_type).max_finite
                 else "max_product_exact")
    got = run_rows(tc, s, rows)
    checks = {"nan_propagates": lambda g: math.isnan(g),
              "inf_propagates": lambda g: g == math.inf,
              "inf_times_zero_nan": lambda g: math.isnan(g),
              "inf_minus_inf_nan": lambda g: math.isnan(g),
              "overflow_to_inf": lambda g: g == math.inf,
              "max_product_exact": lambda g: g == big * big}
    return [Answer(name, float(checks[name](float(g))), "bool",
                   f"a={a} b={b} -> {_fmt(float(g))}", [float(g)])
            for name, (a, b, c), g in zip(names, rows, got)]


def ask_products_exact(tc: TensorCore, s: MmaRow, n: int = 4096, seed: int = 11) -> Answer:
    """Random products of the input type (full exponent range of normal values) against the
    exact product rounded once to D's type."""
    rng = np.random.default_rng(seed)
    t = reference.numtype(s.in_type)
    span = min(12, 2 ** (t.exponent - 1) - 3)
    a = reference.to_type((rng.standard_normal(n) * 2.0 ** rng.integers(-span, span, n))
                          .astype(np.float32), s.in_type).astype(np.float64)
    b = reference.to_type((rng.standard_normal(n) * 2.0 ** rng.integers(-span, span, n))
                          .astype(np.float32), s.in_type).astype(np.float64)
    z = np.zeros(n)
    A, B, C, (tt, i) = diagonal_tiles(s, a, b, z, z, z)
    with np.errstate(all="ignore"):
        D = tc.run(s, A, B, C)[tt, i, i]
    prod = a * b                                  # exact in float64
    ok = np.isfinite(prod)
    if s.c_type == "f32":
        # every product of two f16/bf16/tf32/fp8 values fits FP32's 24-bit significand
        want = {"exact": prod.astype(np.float32).astype(np.float64)}
    else:
        q = [Fraction(float(x)) for x in prod]
        want = {m: np.array([reference.round_exact(x, s.c_type, m) for x in q])
                for m in ("rn", "rz")}
    wrong = {m: int(np.count_nonzero(D[ok] != w[ok])) for m, w in want.items()}
    best = min(wrong, key=wrong.get)
    return Answer("products_exact", float(wrong[best] == 0), "bool",
                  f"{wrong[best]} of {int(ok.sum())} random products differ from the exact "
                  f"product" + ("" if s.c_type == "f32" else
                                f" rounded once to {s.c_type} ({best}; {wrong})"),
                  [wrong, int(ok.sum())], modes=[m for m, w in wrong.items() if w == 0])


QUESTIONS = ("products_exact", "subnormal_inputs", "subnormal_outputs", "rounding_c",
             "rounding_products", "extra_bits", "block_size", "order_invariant", "specials")


def fasi(tc: TensorCore, s: MmaRow) -> dict[str, Answer | str]:
    """Every question for one kernel: name -> Answer, or a string saying why it does not
    apply. The accumulation questions (C involved) on a path that adds C on the FPU answer
    with a string starting 'invalid:'."""
    path = tc.verify(s)
    res: dict[str, Answer | str] = {}
    res["products_exact"] = ask_products_exact(tc, s)
    res["subnormal_inputs"] = ask_subnormal_inputs(tc, s)
    res["subnormal_outputs"] = ask_subnormal_outputs(tc, s)
    for via in ("c", "products"):
        r = ask_rounding(tc, s, via)
        if via == "c" and path.accumulation_on_fpu:
            res["rounding_c"] = (f"invalid: C is added by {path.fpu} on the FPU, after "
                                 f"{path.tensor}: not a tensor-core measurement")
            continue
        res[f"rounding_{via}"] = r
    eb = ask_extra_bits(tc, s)
    res["extra_bits"] = eb
    bs = ask_block_size(tc, s, eb.value)
    res["block_size"] = bs
    res["order_invariant"] = ask_order(tc, s, int(bs.value) if bs.value else None)
    for a in ask_specials(tc, s):
        res[a.question] = a
    return res
