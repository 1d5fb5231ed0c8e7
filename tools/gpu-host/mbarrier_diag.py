"""Why do the mbarrier arrive -> test_wait / try_wait chains end their launch with CUDA error
719 (issue 33, item 11)? A diagnostic, not the product: hand-written PTX variants of the
suite's chain (docs/movement.md), each JIT-compiled by the driver and launched on one thread in
a process of its own (a 719 poisons the context), then the failing ones again under
compute-sanitizer (memcheck, synccheck). Prints a table and writes it to $OUT/mbarrier.txt.

Variants (one thread, one CTA, two count-1 mbarriers, 16 steps unless said):
  arrive          the suite's arrive-only row (runs on H200): the control
  suite           arrive -> test_wait(state) -> selp next barrier, 3 passes (the suite's row)
  suite_try       the same with try_wait
  one_pass        'suite' without the pass loop
  fixed           arrive -> test_wait on b0 only, no selp (the address never depends on ok)
  parity          arrive -> test_wait.parity on the phase parity, not the state
  fenced          'suite' with fence.mbarrier_init.release.cluster + bar.sync after the inits
  inval           'suite' with mbarrier.inval of both barriers before the kernel ends
  st_then_wait    'suite' with the state kept in a 64-bit register that is also stored to
                  global memory (the compiler cannot drop its upper half)

Usage: python3 tools/gpu-host/mbarrier_diag.py [--sanitize]   (run one: --variant NAME)
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

HEAD = """.version 8.0
.target sm_90
.address_size 64
.shared .align 8 .b64 bars[2];
.visible .entry k(.param .u64 out_param)
{
.reg .b64 %out, %st, %t0, %t1, %dt;
.reg .b32 %b0, %b1, %a, %it, %okc, %par;
.reg .pred %ok, %again;
ld.param.u64 %out, [out_param];
mov.u32 %b0, bars;
add.u32 %b1, %b0, 8;
mbarrier.init.shared::cta.b64 [%b0], 1;
mbarrier.init.shared::cta.b64 [%b1], 1;
mov.u32 %a, %b0;
mov.u64 %st, 0;
mov.u32 %okc, 0;
mov.u32 %par, 0;
mov.u32 %it, 0;
"""
TAIL = """sub.u32 %a, %a, %b0;
st.global.u32 [%out], %a;
st.global.u32 [%out+4], %okc;
st.global.u64 [%out+8], %st;
ret;
}
"""


def step(variant: str) -> list[str]:
    wait = "try_wait" if variant == "suite_try" else "test_wait"
    if variant == "arrive":
        return ["mbarrier.arrive.shared::cta.b64 _, [%b0];"]
    if variant == "fixed":
        return ["mbarrier.arrive.shared::cta.b64 %st, [%b0];",
                "mbarrier.test_wait.shared::cta.b64 %ok, [%b0], %st;",
                "selp.b32 %par, 1, 0, %ok;", "add.u32 %okc, %okc, %par;"]
    if variant == "parity":
        # count-1 barrier: each arrive completes the phase whose parity %par holds
        return ["mbarrier.arrive.shared::cta.b64 %st, [%a];",
                "mbarrier.test_wait.parity.shared::cta.b64 %ok, [%a], %par;",
                "xor.b32 %par, %par, 1;",
                "selp.b32 %a, %b0, %b1, %ok;"]
    out = [f"mbarrier.arrive.shared::cta.b64 %st, [%a];",
           f"mbarrier.{wait}.shared::cta.b64 %ok, [%a], %st;",
           "selp.b32 %a, %b0, %b1, %ok;"]
    if variant == "st_then_wait":
        out.insert(1, "st.global.u64 [%out+16], %st;")
    return out


def kernel(variant: str) -> str:
    body = [line for _ in range(16) for line in step(variant)]
    passes = variant not in ("one_pass",)
    lines = [HEAD]
    if variant == "fenced":
        lines.append("fence.mbarrier_init.release.cluster;\nbar.sync 0;\n")
    if passes:
        lines.append("$PASS:\n")
    lines.append("mov.u64 %t0, %clock64;\n" + "\n".join(body) + "\nmov.u64 %t1, %clock64;\n")
    if passes:
        lines.append("add.u32 %it, %it, 1;\nsetp.lt.u32 %again, %it, 3;\n@%again bra $PASS;\n")
    if variant == "inval":
        lines.append("mbarrier.inval.shared::cta.b64 [%b0];\nmbarrier.inval.shared::cta.b64 [%b1];\n")
    lines.append(TAIL)
    return "".join(lines)


VARIANTS = ["arrive", "suite", "suite_try", "one_pass", "fixed", "parity", "fenced", "inval",
            "st_then_wait"]


def run_one(variant: str) -> int:
    import cupy as cp
    path = f"/tmp/mbar_{variant}.ptx"
    with open(path, "w") as f:
        f.write(kernel(variant))
    out = cp.zeros(4, dtype=cp.uint64)
    try:
        mod = cp.RawModule(path=path)
        fn = mod.get_function("k")
        fn((1,), (1,), (out,))
        cp.cuda.runtime.deviceSynchronize()
    except Exception as e:  # noqa: BLE001 - the diagnostic's answer
        print(f"{variant}: FAULT {type(e).__name__}: {e}")
        return 1
    h = out.get()
    print(f"{variant}: ran; chain ended on barrier offset {int(h[0]) & 0xffffffff}, "
          f"ok count {int(h[0]) >> 32}, state {int(h[1]):#x}")
    return 0


def main() -> int:
    if "--variant" in sys.argv:
        return run_one(sys.argv[sys.argv.index("--variant") + 1])
    sanitize = "--sanitize" in sys.argv
    lines = []
    for v in VARIANTS:
        p = subprocess.run([sys.executable, __file__, "--variant", v], capture_output=True,
                           text=True, timeout=120)
        got = (p.stdout.strip() or p.stderr.strip()[-300:]).splitlines()
        lines.append(f"{v:14s} exit {p.returncode}: {got[-1] if got else ''}")
        print(lines[-1], flush=True)
        if sanitize and p.returncode != 0:
            for tool in ("memcheck", "synccheck"):
                s = subprocess.run(["compute-sanitizer", "--tool", tool, "--print-limit", "5",
                                    sys.executable, __file__, "--variant", v],
                                   capture_output=True, text=True, timeout=300)
                text = textwrap.indent((s.stdout + s.stderr).strip()[-2500:], "    ")
                lines.append(f"  compute-sanitizer --tool {tool} ({v}): exit {s.returncode}\n{text}")
                print(lines[-1], flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "mbarrier.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
            for v in VARIANTS:
                f.write(f"\n--- {v}\n{kernel(v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
