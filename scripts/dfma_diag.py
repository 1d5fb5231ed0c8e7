"""Why does DFMA reach ~92% of its documented peak on H200 (FFMA 99%)? Variants of the suite's
throughput probe, each SASS-verified and measured exactly as the suite does (throughput.run):
chains per thread (4, 8, 16) and the chained operand's slot (b: x = a*x + c, as the suite; c:
x = a*b + x). Prints results/clk/SM, achieved/peak and the SASS's reuse flags per DFMA.
Usage: python scripts/dfma_diag.py
"""
import dataclasses
import re
import time

from pytest_gpuchar import device, jit, probes, ptx, throughput

VARIANTS = [
    # (label, template text with the chain in {a}, chains)
    ("chain-in-b ch8 (suite)", "fma.rn.f64 {d}, {b}, {a}, {c};", 8),
    ("chain-in-b ch4", "fma.rn.f64 {d}, {b}, {a}, {c};", 4),
    ("chain-in-b ch16", "fma.rn.f64 {d}, {b}, {a}, {c};", 16),
    ("chain-in-c ch8", "fma.rn.f64 {d}, {b}, {c}, {a};", 8),
    ("chain-in-c ch16", "fma.rn.f64 {d}, {b}, {c}, {a};", 16),
    ("chain-in-a ch8", "fma.rn.f64 {d}, {a}, {b}, {c};", 8),
    # b and c from the constant bank: no register reads but the chain's own
    ("consts ch8", "fma.rn.f64 {d}, {a}, 0d3FF0000000000001, 0d3E50000000000000;", 8),
    ("consts ch16", "fma.rn.f64 {d}, {a}, 0d3FF0000000000001, 0d3E50000000000000;", 16),
]


def main():
    dev = device.detect()
    base = throughput.ROWS["dfma"]
    ps = []
    for i, (label, text, chains) in enumerate(VARIANTS):
        tmpl = dataclasses.replace(base.template, text=text)
        row = dataclasses.replace(base, name=f"dfma_v{i}", template=tmpl)
        body, frame, slots = throughput.kernel(row, dev.arch, chains=chains,
                                               unroll=256 // chains)
        p = throughput.TPProbe(row, dev.arch, body, throughput._kernel_name(row), frame, slots,
                               256, unroll=256 // chains, chains=chains)
        ps.append((label, p))
    module = ptx.header(dev.arch) + "\n".join(p.ptx for _, p in ps)
    compiled = jit.compile_probe(module, dev.driver, "dfma_diag.ptx")
    funcs = probes.functions_of(compiled.cubin, dev.arch)
    throughput.jit_sass = lambda _dev: (compiled, funcs)     # run() uses this module
    peak = throughput.peak("dfma", dev.arch)
    for label, p in ps:
        f = funcs[p.entry]
        dfma = [i for i in f.instrs if i.opcode == "DFMA"]
        reuse = sum(".reuse" in i.text for i in dfma)
        try:
            m = throughput.run(p, dev, repeats=5)
            print(f"{label:26s} {m.rate:7.2f} results/clk/SM = {m.rate / peak:6.1%} of {peak} "
                  f"(spread {m.spread:.2f}{', UNSTABLE ' + m.why if m.unstable else ''}); "
                  f"DFMA {len(dfma)}, with .reuse {reuse}", flush=True)
        except Exception as e:   # noqa: BLE001 - a diagnostic: print and go on
            print(f"{label:26s} failed: {str(e).splitlines()[0]}", flush=True)
        if label.endswith("(suite)") or "ch16" in label:
            lines = [i.text for i in f.instrs if re.match(r"\s*DFMA", i.text)][:10]
            print("   " + "\n   ".join(lines))


if __name__ == "__main__":
    t = time.time()
    main()
    print(f"wall {time.time() - t:.1f} s")
