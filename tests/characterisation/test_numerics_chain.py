"""Seed 004 section 8.2, Figs 19-20: chain matrix multiplication D_i = A_i x B_i (mma
m16n8k8), A_{i+1} = D_i converted to the input type, B_i fresh normal(0,1) draws; mean l2
relative error against the float64 CPU chain over 1000 chains, for TF32, BF16 and FP16, each
initialised in the low-precision type and in FP32.

The paper's observations are asserted: with low-precision initialisation the error at N=1 is
negligible (products exact, accumulation in FP32); FP32 initialisation always costs more
(conversion loss); BF16's error grows fastest; FP16 tracks TF32 (same 10 mantissa bits) until
it overflows to infinity after about 10 links. The curves are plotted into the run's report.
"""
from __future__ import annotations

import json
import math

import pytest

from pytest_gpuchar import numerics
from pytest_gpuchar.plugin import assert_result

LINKS = 24
TRIALS = 1000
SEED = 2023
REPORTED = (1, 4, 8)        # chain lengths recorded as characteristics
TYPES = ("tf32", "bf16", "f16")
ROWS = [pytest.param(t, i, id=f"{t}-init_{t if i == 'low' else 'fp32'}")
        for t in TYPES for i in ("low", "fp32")]
METHOD = (f"seed 004 Figs 19-20: {TRIALS} chains of 16x8 by 8x8 products on {{instr}} "
          f"(k beyond 8 zero), D converted to "
          f"the input type for the next link (RNE; tf32 cvt.rna), B normal(0,1) seed {SEED}; "
          f"mean l2 relative error vs float64 CPU chain over the chains still finite")


def curves(gpuchar, gpu) -> dict:
    runner = numerics.session_runner(gpuchar, gpu)

    def make():
        out = {}
        for t in TYPES:
            s = numerics.spec(numerics.CHAIN[t])
            if numerics.unsupported(s, gpu.arch):
                continue
            runner.verify(s)
            for init in ("low", "fp32"):
                out[(t, init)] = numerics.chain(runner, s, init, LINKS, TRIALS, SEED)
        return out
    return numerics.cached(gpuchar, ("numerics.chain", gpu.arch), make)


def _finite_until(c) -> int:
    """Links (from 1) before the first link with any overflowed chain."""
    for i, f in enumerate(c.overflowed):
        if f > 0:
            return i
    return len(c.overflowed)


@pytest.mark.hardware
@pytest.mark.parametrize("t,init", ROWS)
def test_fig20_chain(arch, t, init, gpu, gpuchar, record):
    s = numerics.spec(numerics.CHAIN[t])
    why = numerics.unsupported(s, arch)
    if why:
        pytest.skip(why)
    runner = numerics.session_runner(gpuchar, gpu)
    try:
        path = runner.verify(s)
    except numerics.NotTensorCore as e:
        pytest.fail(str(e))
    cs = curves(gpuchar, gpu)
    c = cs[(t, init)]
    label = f"numerics.chain.{t}.init_{t if init == 'low' else 'fp32'}"
    method = METHOD.format(instr=s.instruction) + f"; SASS {path.describe()}"
    results = []
    for n in REPORTED:
        v = c.mean_err[n - 1]
        if c.overflowed[n - 1] > 0:
            results.append(record(f"{label}.l2err_n{n}", arch, value=float("inf"), unit="error",
                                  method=method, detail=f"{c.overflowed[n - 1]:.1%} of chains "
                                  f"overflowed (inf/nan) by link {n}"))
            continue
        results.append(record(f"{label}.l2err_n{n}", arch, value=v, unit="error", method=method,
                              data={"tolerance": {"abs": 1e-12, "rel": 0.1}}))
    if t == "f16":
        ov = c.overflow_link()
        results.append(record(f"{label}.overflow_link", arch,
                              value=float(ov) if ov else float("nan"), unit="count",
                              method=method + "; first link after which >= 50% of chains hold "
                              "inf/nan", data={"tolerance": {"abs": 1},
                                               "overflowed": c.overflowed}))
    for r in results:
        assert_result(r)
    # -- the paper's observations ------------------------------------------------------------
    if init == "low":
        assert c.mean_err[0] < 1e-6, (
            f"{label}: error at N=1 is {c.mean_err[0]:.3g}, not negligible: the products or the "
            f"FP32 accumulation are not exact enough")
    else:
        low = cs[(t, "low")]
        upto = _finite_until(c)
        worse = [n + 1 for n in range(upto) if not c.mean_err[n] > low.mean_err[n]]
        assert not worse, f"{label}: FP32 initialisation not worse than {t} at N={worse}"
    f16 = cs.get(("f16", init))
    limit = _finite_until(f16) if f16 else LINKS
    if t == "bf16":
        for other in ("tf32", "f16"):
            o = cs.get((other, init))
            if o is None:
                continue
            bad = [n + 1 for n in range(1, min(limit, LINKS))
                   if not c.mean_err[n] > o.mean_err[n]]
            assert not bad, f"{label}: BF16 error does not exceed {other}'s at N={bad}"
    if t == "f16":
        tf = cs[("tf32", init)]
        ratio = [c.mean_err[n] / tf.mean_err[n] for n in range(1, limit)]
        assert all(0.5 < x < 2 for x in ratio), (
            f"{label}: FP16 does not track TF32 while finite (ratios {ratio})")
        ov = c.overflow_link()
        assert ov is not None and 8 <= ov <= 14, (
            f"{label}: FP16 chains overflow at link {ov}, the paper says after about 10")
    else:
        assert c.overflow_link() is None, f"{label}: {t} overflowed ({c.overflowed})"


@pytest.mark.hardware
def test_fig20_plot(arch, gpu, gpuchar, gpuchar_artifact, tmp_path):
    """Fig 20 as a plot and a JSON curve in the run's report."""
    cs = curves(gpuchar, gpu)
    if not cs:
        pytest.skip(f"{arch}: no chain kernel supported")
    png = gpuchar_artifact(f"numerics-chain-{arch}.png",
                           f"Chain matmul l2 relative error vs length ({gpu.name}, {arch})") \
        or tmp_path / "chain.png"
    js = gpuchar_artifact(f"numerics-chain-{arch}.json", f"Chain matmul curves ({arch})") \
        or tmp_path / "chain.json"
    numerics.plot_chain(list(cs.values()), png,
                        f"Chain matmul on {gpu.name} ({arch}), {TRIALS} chains")
    assert png.stat().st_size > 1000
    js.write_text(json.dumps({f"{t}-init_{i}": {"mean_err": [None if math.isnan(x) else x
                                                                 for x in c.mean_err],
                                                    "overflowed": c.overflowed,
                                                    "trials": c.trials}
                                  for (t, i), c in cs.items()}, indent=1))
