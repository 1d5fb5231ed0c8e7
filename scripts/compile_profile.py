"""Where does the suite's compile time go on a GPU machine? Times ptxas + nvdisasm of the
instruction tables' batch (whole, and in chunks compiled by parallel processes) and the driver
JIT link of each topic's module (one after another, then all at once in threads: does the
driver's JIT run links in parallel?). Usage: python scripts/compile_profile.py [chunks]
"""
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from pytest_gpuchar import (catalog, device, jit, memory, numerics, probes, tensor,
                            throughput, toolchain)


def timed(label, fn):
    t = time.perf_counter()
    out = fn()
    print(f"{label:55s} {time.perf_counter() - t:7.2f} s", flush=True)
    return out


def main(chunks: int) -> None:
    dev = device.detect()
    arch = dev.arch if dev else "sm_90"
    ps = catalog.suite_probes(arch)
    text = probes.batch_module(arch, ps)
    print(f"{arch}: {len(ps)} instruction probes, module {len(text) // 1024} KiB")
    cubin = timed("ptxas, whole tables batch", lambda: toolchain.assemble(text, arch))
    timed("nvdisasm + parse, whole batch", lambda: probes.functions_of(cubin, arch))
    parts = [ps[i::chunks] for i in range(chunks)]
    texts = [probes.batch_module(arch, p) for p in parts]
    toolchain._CACHE.clear()

    def one(t):
        return probes.functions_of(toolchain.assemble(t, arch), arch)
    with ThreadPoolExecutor(chunks) as pool:
        timed(f"ptxas + nvdisasm + parse, {chunks} chunks in parallel",
              lambda: list(pool.map(one, texts)))
    if not dev:
        return
    mods = [("tables", text), ("tensor", tensor.module(arch, tensor.hardware_probes(arch))),
            ("throughput", throughput.topic_module(arch)), ("memory", memory.module_text(arch)),
            ("numerics", numerics.module_ptx(arch)[0])]
    wg = tensor.wgmma_hardware(arch)
    if wg:
        mods.append(("wgmma", tensor.module(arch, wg)))
    for name, t in mods:
        timed(f"driver JIT link: {name}", lambda t=t: jit.link(t, name))

    def link(t):
        from cupy.cuda import runtime
        runtime.setDevice(dev.index)
        return jit.link(t)
    with ThreadPoolExecutor(len(mods)) as pool:
        timed(f"driver JIT links, all {len(mods)} at once in threads",
              lambda: list(pool.map(link, [t for _, t in mods])))
    with ThreadPoolExecutor(chunks) as pool:
        timed(f"driver JIT link: tables in {chunks} chunks in threads",
              lambda: list(pool.map(link, texts)))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)
