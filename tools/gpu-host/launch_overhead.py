"""The host's cost per launch, in parts, on one GPU: what the tensor sweep pays 53,760 times
(one block, four arguments: a record row, two device buffers, a trip count; two CUDA events
around each launch). An empty kernel is launched N times back to back per variant and the
host's wall is divided by N (the GPU runs an empty launch in a few microseconds, under what
the host spends on it); each variant is timed 3 times, the best kept.

Variants, each adding one part to the one before: the bare CuPy call (record row passed as a
pointer), the record row as a CuPy view (``buf[r]``, as the launch stage passes it), the two
event records, and the whole launch stage (``Runner.run`` of one plan: the project's path).
Usage: python3 tools/gpu-host/launch_overhead.py [N]   (prints one line per variant)"""
from __future__ import annotations

import sys
import time

import numpy as np

PTX = """.version 8.0
.target sm_90
.address_size 64
.visible .entry noop(.param .u64 rec, .param .u64 a, .param .u64 b, .param .u32 n)
{
    ret;
}
"""


def best(fn, n: int, reps: int = 3) -> float:
    """Microseconds per launch, best of `reps` batches of `n` (each batch waited for)."""
    import cupy as cp
    out = []
    for _ in range(reps):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        fn(n)
        cp.cuda.Device().synchronize()
        out.append((time.perf_counter() - t) / n * 1e6)
    return min(out)


def main() -> None:
    import cupy as cp
    from pytest_gpuchar.core import device, gpu as g
    from pytest_gpuchar.core.runner import Launch, Plan, Runner
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    dev = device.detect()
    gpu = g.Gpu(dev, g.JitCache())
    fn = gpu.compile(PTX, "noop.ptx").function("noop")
    rows, threads = 16, 256
    buf = cp.zeros((rows, threads, 4), dtype=np.int64)
    d_in, d_fill = cp.zeros(1024, np.uint32), cp.zeros(1024, np.uint32)
    row_bytes = threads * 4 * 8
    base = buf.data.ptr
    trips = np.uint32(3)

    def bare(k):
        for i in range(k):
            fn((1,), (threads,), (np.uint64(base + (i % rows) * row_bytes), d_in, d_fill, trips))

    def view(k):
        for i in range(k):
            fn((1,), (threads,), (buf[i % rows], d_in, d_fill, trips))

    evs = [cp.cuda.Event() for _ in range(2 * rows)]

    def events(k):
        for i in range(k):
            a, b = evs[2 * (i % rows)], evs[2 * (i % rows) + 1]
            a.record()
            fn((1,), (threads,), (buf[i % rows], d_in, d_fill, trips))
            b.record()

    runner = Runner(gpu)

    def stage(k):
        per = max(1, k // (3 * rows))
        plans = [Plan("noop", {t: fn for t in (1, 2, 3)}, Launch((1,), (threads,)),
                      lambda t: (lambda r, rec: (rec, d_in, d_fill, np.uint32(t))), rows - 1,
                      record=(threads, 4), dtype=np.int64) for _ in range(per)]
        runner.run(plans, name="noop")

    print(f"{dev.name} {getattr(dev, 'uuid', '')}: host microseconds per launch, best of 3 x {n}")
    for name, fn_ in (("bare CuPy call, record row as a pointer", bare),
                      ("+ record row as a CuPy view (buf[r])", view),
                      ("+ two event records", events),
                      ("the launch stage (Runner.run, 16 launches x 3 lengths a plan)", stage)):
        fn_(min(n, 1000))          # warm
        print(f"{best(fn_, n):8.1f} us  {name}")


if __name__ == "__main__":
    main()
