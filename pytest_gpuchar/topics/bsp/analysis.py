"""Pure maths of the Many-BSP run (no CuPy, no pytest): the kernels' inputs and CPU references
(evaluated as their PTX evaluates, so a wrong kernel cannot time garbage), the whole-kernel
cycles from the stamp records, and the model's side: its device from the Table 1-8
parameters, the prediction, and the divisor of eq. (24) that would make it exact."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...core.fit import iqr
from ...models import manybsp as mb
from .rows import MU, PYRAMID, Size

SEED = 20260219
# per-launch whole-kernel cycles: unstable when their interquartile range exceeds this share of
# the median. The full range is the figure's spread (the nightly's noise), not the judgement:
# with 25 launches of a short kernel one launch that meets a busy moment widens it while the
# interquartile range stays small (docs/models.md, lab notes)
UNSTABLE_IQR = 0.05
MAX_THREADS_PER_SM = 2048  # sm_50 .. sm_90
REGISTERS_PER_SM = 65536


# --- inputs and references ----------------------------------------------------------------

def rng(size: Size) -> np.random.Generator:
    """The inputs' generator: the same numbers for a size in every run."""
    return np.random.default_rng([SEED, *size.dims])


def knn_inputs(n: int, gen: np.random.Generator) -> dict:
    """n LatLong records (lat, lng float pairs) around the query point (30, 90)."""
    loc = np.empty((n, 2), np.float32)
    loc[:, 0] = gen.uniform(0.0, 60.0, n)
    loc[:, 1] = gen.uniform(60.0, 120.0, n)
    return {"locations": loc, "lat": np.float32(30.0), "lng": np.float32(90.0)}


def knn_reference(loc: np.ndarray, lat: np.float32, lng: np.float32) -> np.ndarray:
    """sqrt.rn(fma.rn(dlat, dlat, dlng * dlng)) in float32 (an f32 FMA is exact in double
    before its one rounding, up to a double-rounding tie)."""
    dlat = (lat - loc[:, 0]).astype(np.float32)
    dlng = (lng - loc[:, 1]).astype(np.float32)
    sq = (dlng * dlng).astype(np.float32)
    s = (dlat.astype(np.float64) * dlat + sq).astype(np.float32)
    return np.sqrt(s)


def mm_inputs(h_a: int, w_a: int, w_b: int, gen: np.random.Generator) -> dict:
    return {"A": gen.uniform(-1, 1, (h_a, w_a)).astype(np.float32),
            "B": gen.uniform(-1, 1, (w_a, w_b)).astype(np.float32)}


def mm_reference(a: np.ndarray, b: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sampled rows of C as float64 (a[rows] @ b) and the float32 dot-product error bound
    around them (2 k eps sum |a||b|, k = wA)."""
    ref = a[rows].astype(np.float64) @ b.astype(np.float64)
    bound = 2 * a.shape[1] * 2.0 ** -24 * (np.abs(a[rows]).astype(np.float64) @ np.abs(b)) \
        + 1e-30
    return ref, bound


def mm_outside(c: np.ndarray, rows: np.ndarray, ref: np.ndarray, bound: np.ndarray) -> int:
    """Elements of the sampled rows of C outside the bound around the reference."""
    return int(np.count_nonzero(np.abs(c[rows] - ref) > bound))


def mm_mismatch(a: np.ndarray, b: np.ndarray, c: np.ndarray, rows: np.ndarray) -> int:
    """Elements of the sampled rows of C outside the float32 dot-product error bound
    (2 k eps sum |a||b|, k = wA) around the float64 product."""
    return mm_outside(c, rows, *mm_reference(a, b, rows))


@dataclass(frozen=True)
class HotspotCoeffs:
    """Rodinia hotspot's coefficients for a rows x cols chip (hotspot.cu, compute_tran_temp),
    as the float32 kernel arguments."""
    cap: np.float32
    rx: np.float32
    ry: np.float32
    rz: np.float32
    step: np.float32

    @classmethod
    def of(cls, rows: int, cols: int) -> "HotspotCoeffs":
        t_chip, chip_h, chip_w = 0.0005, 0.016, 0.016
        max_pd, precision, spec_heat_si, k_si, factor_chip = 3.0e6, 0.001, 1.75e6, 100, 0.5
        gh, gw = np.float32(chip_h / rows), np.float32(chip_w / cols)
        cap = factor_chip * spec_heat_si * t_chip * gw * gh
        rx = gw / (2.0 * k_si * t_chip * gh)
        ry = gh / (2.0 * k_si * t_chip * gw)
        rz = t_chip / (k_si * gh * gw)
        step = precision / (max_pd / (factor_chip * t_chip * spec_heat_si))
        return cls(*(np.float32(v) for v in (cap, rx, ry, rz, step)))


def hotspot_inputs(rows: int, cols: int, gen: np.random.Generator) -> dict:
    return {"temp": gen.uniform(323.0, 343.0, (rows, cols)).astype(np.float32),
            "power": gen.uniform(0.0, 1e-3, (rows, cols)).astype(np.float32),
            "coeffs": HotspotCoeffs.of(rows, cols)}


def hotspot_cell(t: np.ndarray, p: np.ndarray, tn: np.ndarray, ts: np.ndarray,
                 te: np.ndarray, tw: np.ndarray, c: HotspotCoeffs) -> np.ndarray:
    """One cell's new temperature as rows 124-162 evaluate it: the neighbour sums in f32, the
    rest in f64 (FMAs as multiply-add), the result rounded to f32."""
    f32, f64 = np.float32, np.float64
    sdc = f64(f32(c.step) / f32(c.cap))
    rx1, ry1, rz1 = f32(1) / c.rx, f32(1) / c.ry, f32(1) / c.rz
    td = t.astype(f64)
    two_t = td + td
    acc = f64(ry1) * ((ts + tn).astype(f32).astype(f64) - two_t) + p.astype(f64)
    acc = f64(rx1) * ((te + tw).astype(f32).astype(f64) - two_t) + acc
    amb = (rz1 * (f32(80.0) - t).astype(f32)).astype(f32)
    return (sdc * (amb.astype(f64) + acc) + td).astype(f32)


def hotspot_step(t: np.ndarray, p: np.ndarray, c: HotspotCoeffs) -> np.ndarray:
    """One stencil step over the whole grid, neighbours clamped at its edges (the kernel's
    validYmin..validXmax)."""
    n = np.vstack([t[:1], t[:-1]])
    s = np.vstack([t[1:], t[-1:]])
    w = np.hstack([t[:, :1], t[:, :-1]])
    e = np.hstack([t[:, 1:], t[:, -1:]])
    return hotspot_cell(t, p, n, s, e, w, c)


def hotspot_reference(temp: np.ndarray, power: np.ndarray, c: HotspotCoeffs,
                      iterations: int = PYRAMID) -> np.ndarray:
    """The kernel's output: `iterations` steps of the whole grid (the pyramid's halo makes a
    block's small tile equal the global steps)."""
    t = temp
    for _ in range(iterations):
        t = hotspot_step(t, power, c)
    return t


# --- whole-kernel cycles from the stamps ----------------------------------------------------

@dataclass(frozen=True)
class Span:
    """One launch: per SM, the last warp's exit minus the first warp's entry (%clock64 of
    that SM); ``cycles`` the largest (the SM that finished last: the kernel's time on the
    SMs), ``median`` over SMs; the %globaltimer span of the whole grid in ns."""
    cycles: float
    median: float
    sms: int
    warps: tuple[int, int]       # fewest, most warps one SM ran
    globaltimer_ns: float
    unwritten: int               # warps whose record stayed zero


def launch_span(rec: np.ndarray) -> Span:
    """rec: (warps, 5) u64 [t0, t1, smid, g0, g1] of one launch. Per-SM first entry and last
    exit by SM id as an index (no sort: a large KNN launch has half a million warps); a warp
    whose record stayed zero goes to a bin of its own, past the last SM."""
    rec = np.asarray(rec, dtype=np.uint64)
    t0, t1, sm = rec[:, 0], rec[:, 1], rec[:, 2]
    ok = t1 > 0
    every = bool(ok.all())          # the usual case: no masked copies of the columns
    n = int(sm.max()) + 1 if len(sm) else 0
    idx = sm.astype(np.intp) if every else np.where(ok, sm, n).astype(np.intp)
    warps = np.bincount(idx, minlength=n + 1)[:n]
    lo = np.full(n + 1, np.iinfo(np.uint64).max, np.uint64)
    hi = np.zeros(n + 1, np.uint64)
    np.minimum.at(lo, idx, t0)
    np.maximum.at(hi, idx, t1)
    used = warps > 0
    per = (hi[:n][used] - lo[:n][used]).astype(np.float64)
    warps = warps[used]
    if every and len(sm):
        gt = float(rec[:, 4].max() - rec[:, 3].min())
    else:
        gt = float(rec[ok, 4].max() - rec[ok, 3].min()) if ok.any() else float("nan")
    return Span(float(per.max()), float(np.median(per)), int(used.sum()),
                (int(warps.min()), int(warps.max())), gt, int(len(ok) - ok.sum()))


@dataclass(frozen=True)
class Cycles:
    """Whole-kernel cycles over the repeated launches: the median of the per-launch figures,
    their spread, and whether that spread allows a judgement."""
    value: float
    spread: float
    per_launch: list
    unstable: str


def kernel_cycles(spans: list[Span]) -> Cycles:
    per = [s.cycles for s in spans]
    med = float(np.median(per))
    spread = float(max(per) - min(per))
    scatter = iqr(per)
    why = ""
    if scatter > UNSTABLE_IQR * med:
        why = (f"whole-kernel cycles vary over {len(per)} launches: interquartile range "
               f"{scatter:.0f} cycles (> {UNSTABLE_IQR:.0%} of the median {med:.0f}; full "
               f"range {spread:.0f})")
    return Cycles(med, spread, per, why)


# --- the model ------------------------------------------------------------------------------

def device(params: dict, shared_per_sm: int, mu: float = MU) -> mb.Device:
    """The model's device from the Table 1-8 parameters; the occupancy limits are the arch's
    (2048 threads, 64 K registers per SM) and the device's shared memory per SM."""
    return mb.Device.from_model_params(params, mu=mu, shmem_size=shared_per_sm,
                                       max_thread_per_sm=MAX_THREADS_PER_SM,
                                       n_reg=REGISTERS_PER_SM)


def bar_overhead(params: dict, n_t: int) -> float:
    """bar.sync cost for blocks of n_t threads: the measured row nearest in size (256, 1024)."""
    name = "bar_sync_ovh_256" if abs(n_t - 256) <= abs(n_t - 1024) else "bar_sync_ovh_1024"
    v = params["parameters"][name]["value"]
    if v is None:
        raise ValueError(f"{name} not measured: {params['parameters'][name]['reason']}")
    return float(v)


def divisor(pred: mb.Prediction, dev: mb.Device, launch: mb.Launch, measured: float) -> float:
    """The min(mu, (1 + rho) / 2) of eq. (24) that would give the measured cycles (eq. 25's
    term, if any, held), or nan when the fixed terms alone exceed the measurement."""
    used = min(dev.mu, (1 + pred.rho) / 2)
    share = launch.n_b / dev.n_sm * pred.comp
    extra = pred.cycles - (dev.block_lnch_ovh + share / used + pred.novlp / 2)
    rest = measured - dev.block_lnch_ovh - pred.novlp / 2 - extra
    return share / rest if rest > 0 else float("nan")


def error_ratio(measured: float, predicted: float) -> float:
    """Eq. (27) as a ratio: |measured - predicted| / measured."""
    return abs(measured - predicted) / measured if measured else float("nan")


def summary(pred: mb.Prediction) -> dict:
    """The prediction's intermediates, rounded for the report."""
    return {k: (round(v, 3) if isinstance(v, float) and math.isfinite(v) else v)
            for k, v in pred.__dict__.items()}



# --- the model judged as a model: its error against the seed's published error -------------

# an error beyond this multiple of the seed report's error for the kernel is the model's
# failure, recorded and an expected failure, never a pass (issue 42; docs/models.md)
MISS_FACTOR = 2.0


def seed_error(kernel: str) -> tuple[float, str]:
    """The seed report's (seed 002) largest published error of `kernel` (hotspot, knn, mm)
    over its three GPUs, as a ratio, and where it is printed."""
    from ...models.manybsp_examples import EXAMPLES
    ours = [e for e in EXAMPLES if e.kernel.lower() == kernel]
    if not ours:
        raise ValueError(f"no worked example of kernel {kernel!r} in seed 002 "
                         f"(kernels: {sorted({e.kernel.lower() for e in EXAMPLES})})")
    worst = max(ours, key=lambda e: e.error_pct)
    return worst.error_pct / 100, f"seed 002 section {worst.section}, {worst.key}"


def model_miss(kernel: str, error: float, terms: mb.Terms, predicted: float,
               measured: float) -> str:
    """"" when the error lies within MISS_FACTOR x the seed's error for the kernel; else why
    the model misses: the error, the seed's, and eq. (24)'s terms against the measurement
    (which term carries the prediction, and which way it errs)."""
    seed, where = seed_error(kernel)
    if not math.isfinite(error) or error <= MISS_FACTOR * seed:
        return ""
    parts = {"launch": terms.launch, "computation": terms.computation,
             "communication": terms.communication + terms.waves}
    big = max(parts, key=parts.get)
    way = "over" if predicted > measured else "under"
    return (f"model miss: error {error:.1%} > {MISS_FACTOR:g} x the seed's {seed:.2%} for "
            f"{kernel} ({where}); the prediction {predicted:,.0f} cycles "
            f"({' + '.join(f'{k} {v:,.0f}' for k, v in parts.items())}, {big} the largest) "
            f"{way}-estimates the measured {measured:,.0f}: eqs. (24)/(25) have no term for "
            f"blocks that wait on memory throughput or on latency under load "
            f"(docs/models.md, 'Where it fails, by term')")
