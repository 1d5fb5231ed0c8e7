"""Diagnose run-to-run noise of the multi-warp tensor sweep points on a GPU.

For a few rows, warps {1, 4, 8} and ILP {1, 2, 4}: many launches per chain length, each
launch's block span (max end - min start), the spread of the warps' start and end clocks, and
the per-warp durations, launched (a) all queued on one stream, as the suite does, and (b) one
launch at a time with a synchronise between them. Writes JSON to argv[1] and a text summary to
stdout. Usage: python scripts/tensor_diag.py OUT.json
"""
import json
import sys
import time

import cupy as cp
import numpy as np

from pytest_gpuchar import device, jit, probes, tensor

ROWS = [("mma", "f16.f32.m16n8k16"), ("mma", "s8.s32.m8n8k16"), ("mma", "tf32.f32.m16n8k8"),
        ("ldmatrix", "x1")]
WARPS = (1, 4, 8)
ILPS = (1, 2, 4)
REPS = 21


def main(out_path):
    dev = device.detect()
    ps = [tensor.sweep_probe(tensor.row(k, r), dev.arch, i) for k, r in ROWS for i in ILPS]
    comp = jit.compile_probe(tensor.module(dev.arch, ps), dev.driver, "diag.ptx")
    fns = probes.functions_of(comp.cubin, dev.arch)
    for p in ps:
        tensor.verify_probe(p, fns)
    res = {}
    for mode in ("queued", "synced"):
        for p in ps:
            for w in WARPS:
                threads = 32 * w
                buf, fill = tensor.inputs(p, threads)
                d_in, d_fill = cp.asarray(buf), cp.asarray(fill)
                outs = {}
                for n, entry in p.entries.items():
                    fn = comp.function(entry)
                    out = cp.zeros((REPS + 1, threads, p.out_slots), dtype=np.int64)
                    for rep in range(REPS + 1):
                        fn((1,), (threads,), (out[rep], d_in, d_fill, np.uint32(2)))
                        if mode == "synced":
                            cp.cuda.runtime.deviceSynchronize()
                    outs[n] = out
                cp.cuda.runtime.deviceSynchronize()
                rec = {}
                for n, out in outs.items():
                    h = out.get()[1:]
                    t0 = h[:, ::32, 0]
                    t1 = h[:, ::32, 1]
                    rec[n] = {"span": (t1.max(1) - t0.min(1)).tolist(),
                              "start_skew": (t0.max(1) - t0.min(1)).tolist(),
                              "end_skew": (t1.max(1) - t1.min(1)).tolist(),
                              "warp_dur": (t1 - t0).tolist()}
                res[f"{mode}/{p.name}/w{w}"] = rec
                ns = sorted(rec)
                sp = {n: np.array(rec[n]["span"], float) for n in ns}
                slopes = (sp[ns[-1]] - sp[ns[0]]) / (ns[-1] - ns[0])
                med = (np.median(sp[ns[-1]]) - np.median(sp[ns[0]])) / (ns[-1] - ns[0])
                print(f"{mode:6s} {p.name:28s} w{w}: block slope median {med:8.2f} "
                      f"per-rep min/q1/q3/max {np.min(slopes):7.2f} {np.quantile(slopes, .25):7.2f} "
                      f"{np.quantile(slopes, .75):7.2f} {np.max(slopes):7.2f} | n={ns[-1]} span "
                      f"min/med/max {sp[ns[-1]].min():.0f}/{np.median(sp[ns[-1]]):.0f}/"
                      f"{sp[ns[-1]].max():.0f} start skew med "
                      f"{np.median(rec[ns[-1]]['start_skew']):.0f} max "
                      f"{np.max(rec[ns[-1]]['start_skew']):.0f}", flush=True)
    json.dump(res, open(out_path, "w"))


if __name__ == "__main__":
    t = time.time()
    main(sys.argv[1])
    print(f"wall {time.time() - t:.1f} s")
