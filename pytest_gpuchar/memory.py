"""Memory hierarchy probes: pointer chasing through each level, the cache staircase, the
fill granularity (stride sweep) and shared-memory bank conflicts.

Probes are data, as everywhere in the suite: small named builders write the PTX, the SASS of
the timed region is verified (opcode *with its cache operator* and count), and every figure is
a slope over two or more chain lengths.

Pointer chase
    Every load's address is the value the previous load returned (``ld.global.ca.u64 %p,
    [%p]``), so the loads are serialised and each costs its full load-to-use latency. Two probe
    kinds per load flavour:

    * ``chain``: N loads unrolled between the clock reads (N = CHAIN_LENGTHS), nothing else in
      the region. The slope over N is the **load-to-use latency** (clock reads and the wait
      for the start pointer are fixed costs and cancel).
    * ``loop``: one load in a ``.pragma "nounroll"`` do-while loop of `steps` iterations (a
      kernel parameter: LOOP_STEPS) between the clock reads; the region holds the load plus
      the loop's counter add, compare and branch. The slope over steps is the **chase loop's
      cycles per step**; minus the latency it is the loop's own cost per step (what a chase
      written as a loop, e.g. the paper's Figure 2, adds to every access).

    The clock is read twice per launch, around the whole chain or loop (amortised), never per
    access: per-access clock reads add their own cost to every figure (public H100 L1
    figures differ by ~8 cycles for that reason alone).

Footprints come from the device (L1/shared per SM, L2 size, free memory; see ``Geometry``),
with a documented fallback when an attribute cannot be read. Device-memory chases use one
random single cycle (``random_cycle``: a uniformly random cyclic permutation, the
distribution of Sattolo's algorithm) over a footprint of at least 4x the L2, one pointer per
128-byte line, and every launch continues where the previous one stopped, so no line of the
timed chain was touched since the whole cycle was last walked. ``Layout`` asserts that the
chain is one cycle through exactly the intended number of distinct lines, and each launch's
end pointer is checked against the host's walk of the same chain: a chase that touched fewer
lines than intended (the "1 GB at a 4 KB stride visited only 17 MB" mistake) cannot pass.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from . import archs, probes, ptx
from .verify import Intent

LINE = 128                      # bytes per pointer in random chases: one per 128-byte line
CHAIN_LENGTHS = (16, 32, 64)    # unrolled dependent loads per timed region
LOOP_STEPS = (32, 64, 128)      # iterations of the timed chase loop
SMEM_BYTES = 16384              # static shared array of the shared-memory probes
CONST_WORDS = 128               # the .const chain (u32 words), CONST_LINES pointers in it
CONST_STRIDE = 64
CONST_LINES = CONST_WORDS * 4 // CONST_STRIDE
FALLBACK_L1 = 256 * 1024        # largest L1/shared per SM of the archs the suite knows (sm_90)
FALLBACK_L2 = 64 * 2**20        # above the largest L2 of the known archs (H100/H200: 50 MiB)
DRAM_FACTOR = 4                 # device-memory chases: footprint >= 4 x L2
MEMORY_RESERVE = 0.25           # leave this fraction of free device memory alone


# --- load flavours (rows of Table IV) -------------------------------------------------------

@dataclass(frozen=True)
class Flavour:
    """One load (or store+load) instruction the chase is built from."""
    name: str
    space: str          # global | shared | const
    ptx_op: str         # the PTX instruction of one chase step ({p} is the chain register)
    width: int          # chain register width
    note: str

    def sass(self, arch: str) -> tuple[str, ...]:
        """The exact SASS opcodes one step must become on `arch` (see SASS_BY_ARCH)."""
        return sass_unit(self.name, arch)


FLAVOURS = {f.name: f for f in (
    Flavour("ca", "global", "ld.global.ca.u64 {p}, [{p}];", 64,
            "cache at all levels (L1 and L2)"),
    Flavour("default", "global", "ld.global.u64 {p}, [{p}];", 64,
            "no cache operator: what compiled CUDA code issues (weak, L1-cached)"),
    Flavour("cg", "global", "ld.global.cg.u64 {p}, [{p}];", 64, "cache in L2, not L1"),
    Flavour("cv", "global", "ld.global.cv.u64 {p}, [{p}];", 64,
            "volatile: fetch again (system-scope strong load)"),
    Flavour("nc", "global", "ld.global.nc.u64 {p}, [{p}];", 64,
            "non-coherent read-only (texture) path"),
    Flavour("shared_ld", "shared", "ld.shared.u32 {p}, [{p}];", 32, "shared-memory load"),
    Flavour("shared_st_ld", "shared",
            "st.volatile.shared.u32 [{p}], {p};\nld.volatile.shared.u32 {p}, [{p}];", 32,
            "shared store then a load of the same word (the load waits for the store)"),
    Flavour("const", "const", "ld.const.u32 {p}, [{p}];", 32, "constant cache (indexed)"),
)}


def _sass_table(n: int) -> dict[str, tuple[str, ...]]:
    """SASS per step as ptxas 12.4/13.5 emit it (checked offline for every static arch; the
    driver's JIT is verified against the same table on the GPU)."""
    if n >= 80:
        g = {"ca": "LDG.E.64.STRONG.SM", "default": "LDG.E.64", "cg": "LDG.E.64.STRONG.GPU",
             "cv": "LDG.E.64.STRONG.SYS", "nc": "LDG.E.64.CONSTANT"}
        lds = "LDS"
    elif n >= 75:
        g = {"ca": "LDG.E.64.STRONG.CTA", "default": "LDG.E.64.SYS",
             "cg": "LDG.E.64.STRONG.GPU", "cv": "LDG.E.64.STRONG.SYS",
             "nc": "LDG.E.64.CONSTANT.SYS"}
        lds = "LDS.U"
    elif n >= 70:
        g = {"ca": "LDG.E.64.STRONG.CTA", "default": "LDG.E.64.SYS",
             "cg": "LDG.E.64.STRONG.GPU", "cv": "LDG.E.64.STRONG.SYS",
             "nc": "LDG.E.64.CONSTANT.SYS"}
        lds = "LDS.U"
    else:
        g = {"ca": "LDG.E.64", "default": "LDG.E.64", "cg": "LDG.E.CG.64",
             "cv": "LDG.E.CV.64", "nc": "LDG.E.CI.64"}
        lds = "LDS.U.32"
    out = {k: (v,) for k, v in g.items()}
    out["shared_ld"] = (lds,)
    out["shared_st_ld"] = ("STS", lds)
    out["const"] = ("LDC",)
    out["lds64"] = ("LDS.64" if n >= 80 else "LDS.U.64",)
    return out


def sass_unit(flavour: str, arch: str) -> tuple[str, ...]:
    table = _sass_table(archs.number(arch))
    if flavour not in table:
        raise KeyError(f"no SASS mapping for load flavour {flavour!r}")
    return table[flavour]


# one loop iteration besides the load: the counter's add, the compare, the backward branch
LOOP_UNIT = ("IADD3|VIADD|IADD32I|IADD|IMAD.IADD|UIADD3", "ISETP.*|UISETP.*", "BRA")
# executed once before the loop (the step count's parameter load, the counter's zeroing, the
# alignment NOPs of the loop head): allowed in the region ahead of the loop label only, as
# are never-executed instructions (predicate @!PT), see check_loop
LOOP_SETUP_OPCODES = ("LDC", "ULDC", "ULDC.64", "MOV", "UMOV", "IMAD.MOV.U32", "MOV32I", "NOP")


@dataclass(frozen=True)
class Level:
    """A row of Table IV: what is chased, through which footprint."""
    key: str            # memory.latency.<level>
    flavour: str
    footprint: str      # l1 | l2 | dram | shared | const
    warm: bool          # walk the whole cycle once before the timed chain
    paper: str = ""     # the Table IV row this corresponds to


LEVELS = (
    Level("l1_hit", "ca", "l1", True, "L1 (ld.ca) 33"),
    Level("l1_hit_default", "default", "l1", True, ""),
    Level("readonly_hit", "nc", "l1", True, ""),
    Level("l2_hit", "cg", "l2", True, "L2 (ld.cg) 200"),
    Level("dram_cv", "cv", "dram", False, "global (ld.cv) 290"),
    Level("dram_ca", "ca", "dram", False, ""),
    Level("shared_load", "shared_ld", "shared", True, "shared ld 23"),
    Level("shared_store_load", "shared_st_ld", "shared", True, "shared st 19 (see method)"),
    Level("const_hit", "const", "const", True, ""),
)


# --- PTX builders -------------------------------------------------------------------------

def _step_lines(flavour: Flavour, reg: str) -> list[str]:
    return flavour.ptx_op.format(p=reg).split("\n")


def _smem_fill(first: str, empty_test: str, step: str) -> list[str]:
    """PTX: copy `%nw` words from global `%init` into `gpuchar_smem`, each word plus the
    buffer's base (relative offsets become shared addresses), thread-strided from `first` by
    `step`, then a barrier."""
    return [
        "mov.u32 %base, gpuchar_smem;",
        f"mov.u32 %j, {first};",
        empty_test,
        "@%more bra $COPIED;",
        "$COPY:",
        "mul.wide.u32 %a64, %j, 4;",
        "add.u64 %a64, %a64, %init;",
        "ld.global.u32 %v, [%a64];",
        "add.u32 %v, %v, %base;",
        "shl.b32 %i, %j, 2;",
        "add.u32 %i, %i, %base;",
        "st.shared.u32 [%i], %v;",
        f"add.u32 %j, %j, {step};",
        "setp.lt.u32 %more, %j, %nw;",
        "@%more bra $COPY;",
        "$COPIED:",
        "bar.sync 0;",
    ]


def chase_kernel(entry: str, flavour: Flavour, *, n: int | None) -> str:
    """One single-thread chase kernel.

    Parameters: out (u64*: cycles, end pointer, %smid), state (u64*: the start pointer, for
    shared/const an offset; the end pointer is written back so the next launch continues the
    cycle), warm (u32: untimed chase steps before the clock), steps (u32: loop iterations,
    `n is None` only), init (u64*: u32 words copied into shared memory), init_words (u32).
    `n` unrolled loads in the timed region, or (n None) the nounroll loop.
    """
    w = flavour.width
    p = "%p64" if w == 64 else "%p32"
    lines = [
        f".visible .entry {entry}(.param .u64 out_param, .param .u64 state_param, "
        ".param .u32 warm_param, .param .u32 steps_param, .param .u64 init_param, "
        ".param .u32 initw_param)",
        "{",
        ".reg .b64 %out, %state, %init, %p64, %t0, %t1, %dt, %a64;",
        ".reg .b32 %p32, %warm, %steps, %i, %j, %nw, %v, %base, %smid;",
        ".reg .pred %never, %more;",
        "ld.param.u64 %out, [out_param];",
        "ld.param.u64 %state, [state_param];",
        "ld.param.u32 %warm, [warm_param];",
        "ld.param.u32 %steps, [steps_param];",
        "ld.param.u64 %init, [init_param];",
        "ld.param.u32 %nw, [initw_param];",
        "ld.global.u64 %p64, [%state];",
    ]
    if flavour.space == "shared":
        lines += [
            *_smem_fill("0", "setp.eq.u32 %more, %nw, 0;", "1"),
            "cvt.u32.u64 %p32, %p64;",
            "add.u32 %p32, %p32, %base;",
        ]
    elif flavour.space == "const":
        lines += ["cvt.u32.u64 %p32, %p64;"]
    lines += [
        # untimed warm-up walk (cache-hit levels): every line of the cycle once
        "mov.u32 %i, 0;",
        "setp.eq.u32 %more, %warm, 0;",
        "@%more bra $WARMED;",
        "$WARM:",
        *_step_lines(flavour, p),
        "add.u32 %i, %i, 1;",
        "setp.lt.u32 %more, %i, %warm;",
        "@%more bra $WARM;",
        "$WARMED:",
        "mov.u32 %i, 0;",
        "mov.u64 %t0, %clock64;",
        "setp.eq.u64 %never, %t0, -1;",
        "@%never bra $BODY_END;",
    ]
    if n is None:
        lines += [
            "$LOOP:",
            '.pragma "nounroll";',
            *_step_lines(flavour, p),
            "add.u32 %i, %i, 1;",
            "setp.lt.u32 %more, %i, %steps;",
            "@%more bra $LOOP;",
        ]
    else:
        for _ in range(n):
            lines += _step_lines(flavour, p)
    lines += [
        "$BODY_END:",
        "mov.u64 %t1, %clock64;",
        "sub.s64 %dt, %t1, %t0;",
        "st.global.u64 [%out], %dt;",
    ]
    if flavour.space == "shared":
        lines += ["sub.u32 %p32, %p32, %base;"]
    if w == 32:
        lines += ["cvt.u64.u32 %p64, %p32;"]
    lines += [
        "st.global.u64 [%out+8], %p64;",
        "st.global.u64 [%state], %p64;",
        "mov.u32 %smid, %smid;",
        "st.global.u32 [%out+16], %smid;",
        "ret;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def bank_kernel(entry: str, width: int, n: int) -> str:
    """One warp chasing through shared memory, each thread its own chain, with the address
    pattern fixing the bank conflict degree (see ``bank_layout``). Thread 0's cycles are
    reported. 64-bit rows: the chain advances on the low word and the high word of every load
    is XOR-ed into an accumulator stored at the end (off the chain's critical path), so the
    compiler must keep each load 64 bits wide."""
    lines = [
        f".visible .entry {entry}(.param .u64 out_param, .param .u64 state_param, "
        ".param .u64 init_param, .param .u32 initw_param)",
        "{",
        ".reg .b64 %out, %state, %init, %p64, %q, %t0, %t1, %dt, %a64;",
        ".reg .b32 %p32, %j, %nw, %v, %i, %base, %tx, %ntx, %hi, %acc;",
        ".reg .pred %never, %more;",
        "ld.param.u64 %out, [out_param];",
        "ld.param.u64 %state, [state_param];",
        "ld.param.u64 %init, [init_param];",
        "ld.param.u32 %nw, [initw_param];",
        "mov.u32 %tx, %tid.x;",
        "mov.u32 %ntx, %ntid.x;",
        "mul.wide.u32 %a64, %tx, 8;",
        "add.u64 %state, %state, %a64;",
        "mul.wide.u32 %a64, %tx, 24;",
        "add.u64 %out, %out, %a64;",
        "ld.global.u64 %p64, [%state];",
        *_smem_fill("%tx", "setp.ge.u32 %more, %j, %nw;", "%ntx"),
        "cvt.u32.u64 %p32, %p64;",
        "add.u32 %p32, %p32, %base;",
        "mov.u32 %acc, %tx;",
        "mov.u64 %t0, %clock64;",
        "setp.eq.u64 %never, %t0, -1;",
        "@%never bra $BODY_END;",
    ]
    for _ in range(n):
        if width == 32:
            lines.append("ld.shared.u32 %p32, [%p32];")
        else:
            lines += ["ld.shared.u64 %q, [%p32];", "mov.b64 {%p32, %hi}, %q;",
                      "min.u32 %acc, %acc, %hi;"]
    lines += [
        "$BODY_END:",
        "mov.u64 %t1, %clock64;",
        "sub.s64 %dt, %t1, %t0;",
        "st.global.u64 [%out], %dt;",
        "sub.u32 %p32, %p32, %base;",
        "cvt.u64.u32 %p64, %p32;",
        "st.global.u64 [%out+8], %p64;",
        "st.global.u32 [%out+16], %acc;",
        "ret;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _module_decls(needs_shared: bool, needs_const: bool) -> str:
    out = []
    if needs_shared:
        out.append(f".shared .align 16 .b8 gpuchar_smem[{SMEM_BYTES}];")
    if needs_const:
        out.append(f".const .align 8 .u32 gpuchar_cchain[{CONST_WORDS}] = "
                   "{" + ", ".join(str(v) for v in const_chain_words()) + "};")
    return "\n".join(out) + ("\n" if out else "")


def const_chain_words() -> list[int]:
    """The .const array's contents: a random single cycle over CONST_LINES pointers spaced
    CONST_STRIDE bytes apart. The values are byte offsets, i.e. constant-bank addresses if
    the array sits at offset 0 of its bank (the only .const variable of its module: ptxas puts
    it at c[0x3][0x0]); each launch's end pointer is checked against the host's walk, so a
    different placement fails loudly rather than chasing garbage."""
    nxt = random_cycle(CONST_LINES, np.random.default_rng(3))
    words = [0] * CONST_WORDS
    for i in range(CONST_LINES):
        words[i * CONST_STRIDE // 4] = int(nxt[i]) * CONST_STRIDE
    return words


# --- probes -------------------------------------------------------------------------------

def _entry(name: str) -> str:
    return "gpuchar_mem_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


def chase_probe(flavour: str, arch: str, kind: str = "chain") -> probes.Probe:
    """The chase of one load flavour: kind "chain" (unrolled, latency) or "loop"."""
    f = FLAVOURS[flavour]
    unit = f.sass(arch)
    name = f"memory/{kind}/{flavour}"
    kernels, entries = [], {}
    if kind == "chain":
        for n in CHAIN_LENGTHS:
            entries[n] = _entry(f"{name}_n{n}")
            kernels.append(chase_kernel(entries[n], f, n=n))
        ops = {n: n for n in CHAIN_LENGTHS}

        def intent(n, unit=unit):
            return Intent(n, unit, min_depth=n)
    elif kind == "loop":
        e = _entry(f"{name}_loop")
        kernels.append(chase_kernel(e, f, n=None))
        entries = {s: e for s in LOOP_STEPS}
        ops = {s: s for s in LOOP_STEPS}

        def intent(n, unit=unit):   # the loop body; the whole region: check_loop
            return Intent(1, unit + LOOP_UNIT)
    else:
        raise ValueError(f"unknown chase probe kind {kind!r}: chain or loop")
    text = ptx.header(arch) + _unique(
        _module_decls(f.space == "shared", f.space == "const") + "\n".join(kernels),
        f"{flavour}_{kind}")
    return probes.Probe(name, arch, text, entries, {k: [] for k in entries}, intent, ops,
                        {k: 3 for k in entries})


def check_loop(probe: probes.Probe, functions: dict) -> list:
    """The loop probe's timed region is setup (LOOP_SETUP_OPCODES, run once) followed by one
    loop whose body, from the backward branch's target to the branch, is exactly one chase
    step plus the counter add, compare and branch (so the slope over `steps` is the cost of
    one iteration as compiled). Raises ProbeInvalid with the listing otherwise; returns the
    loop body."""
    from . import sass as _sass
    from .verify import ProbeInvalid, check_exact
    e = next(iter(probe.entries.values()))
    func = functions[e]
    region = probes.regions_of(probe, functions)[min(probe.entries)]
    listing = _sass.format_listing(region)
    if not region or region[-1].base != "BRA":
        raise ProbeInvalid(f"probe invalid: {probe.name}: the timed region does not end with "
                           f"the loop's backward branch\n{listing}")
    target = re.search(r"\.L_x_\d+", region[-1].text)
    labels = getattr(func, "labels", None)
    if labels is None:
        # a sass.Function without branch labels: the body is what follows the setup run
        k = 0
        while k < len(region) and (region[k].opcode in LOOP_SETUP_OPCODES
                                   or region[k].pred == "@!PT"):
            k += 1
        start = region[min(k, len(region) - 1)].offset
    else:
        at = labels.get(target.group(0)) if target else None
        if at is None or at >= len(func.instrs):
            raise ProbeInvalid(f"probe invalid: {probe.name}: branch target of "
                               f"{region[-1].text} not found\n{listing}")
        start = func.instrs[at].offset
    # never-executed instructions (@!PT: sm_70's convergence placeholder) are not run
    body = [i for i in region if i.offset >= start and i.pred != "@!PT"]
    setup = [i for i in region if i.offset < start]
    if not region[0].offset <= start:
        raise ProbeInvalid(f"probe invalid: {probe.name}: the branch leaves the timed region "
                           f"(not a loop inside it)\n{listing}")
    stray = [i.opcode for i in setup
             if i.opcode not in LOOP_SETUP_OPCODES and i.pred != "@!PT"]
    if stray:
        raise ProbeInvalid(f"probe invalid: {probe.name}: instructions ahead of the loop that "
                           f"are not setup: {stray}\n{listing}")
    why = check_exact(body, probe.intent(min(probe.entries)).unit, 1)
    if why:
        raise ProbeInvalid(f"probe invalid: {probe.name}: loop body: {why}\n{listing}")
    return body


def verify(probe: probes.Probe, functions: dict):
    """Verify a memory probe's timed regions in `functions` (offline ptxas or driver JIT):
    chain probes through the suite's verifier (exact opcodes, count, dependence depth), loop
    probes with check_loop. Raises ProbeInvalid; returns the verdict's unit (opcode -> per
    step)."""
    from collections import Counter
    if "/loop/" in probe.name:
        body = check_loop(probe, functions)
        return dict(Counter(i.opcode for i in body))
    if probe.name == "memory/bank/u64":
        return _verify_bank64(probe, functions)
    _, verdict = probes.check(probe, functions)
    return dict(verdict.unit)


BANK64_SIDE = ("IMNMX*", "VIMNMX*", "VMNMX*", "ISETP*", "SEL", "LOP3.LUT")
BANK64_SIDE_MAX = 2


def _verify_bank64(probe: probes.Probe, functions: dict) -> dict:
    from collections import Counter
    from .verify import ProbeInvalid, matches
    from .verify import verify as _verify
    regions = probes.regions_of(probe, functions)
    loads = {}
    for n, region in regions.items():
        side = [i for i in region if any(matches(i.opcode, p) for p in BANK64_SIDE)]
        if len(side) > BANK64_SIDE_MAX * n:
            raise ProbeInvalid(f"probe invalid: {probe.name}: chain length {n}: {len(side)} "
                               f"side instructions for {n} loads (at most "
                               f"{BANK64_SIDE_MAX} per load)")
        loads[n] = [i for i in region if i not in side]
    verdict = _verify(probe.name, loads, probe.intent)
    unit = dict(verdict.unit)
    n0 = min(regions)
    unit.update({k: round(v / n0, 3) for k, v in Counter(
        i.opcode for i in regions[n0] if i not in loads[n0]).items()})
    return unit


_STATIC: dict[tuple[str, str], dict] = {}


def static_functions(arch: str) -> tuple[object, dict]:
    """Every memory probe of `arch` assembled in ONE ptxas run (cached per session):
    (the ptxas Tool, kernel name -> SASS Function)."""
    from . import toolchain
    tool = toolchain.find("ptxas", arch)
    toolchain.find("nvdisasm", arch)
    key = (arch, tool.version)
    if key not in _STATIC:
        _STATIC[key] = probes.functions_of(toolchain.assemble(module_text(arch), arch), arch)
    return tool, _STATIC[key]


def module_text(arch: str) -> str:
    """One PTX module holding every memory probe of `arch`; the .const chain (shared by the
    const probes, identical in each) declared once."""
    decl = _module_decls(False, True)
    body = "".join(p.kernels.replace(decl, "") for p in suite_probes(arch))
    return ptx.header(arch) + decl + body


@dataclass(frozen=True)
class BankRow:
    """A row of Table 10: access width and conflict degree (0 = broadcast)."""
    width: int
    ways: int

    @property
    def name(self) -> str:
        return f"u{self.width}.{'broadcast' if self.ways == 0 else f'{self.ways}way'}"

    @property
    def key(self) -> str:
        return f"memory.bank.{self.name}"


BANK_ROWS = tuple([BankRow(32, 0)] + [BankRow(32, k) for k in (1, 2, 4, 8, 16, 32)] +
                  [BankRow(64, k) for k in (2, 4, 8, 16, 32)])


def bank_probe(row: BankRow, arch: str) -> probes.Probe:
    """Shared loads of one warp under a conflict degree; the PTX depends only on the width
    (the degree is in the data), so all rows of one width share one module."""
    name = f"memory/bank/u{row.width}"
    entries = {n: _entry(f"{name}_n{n}") for n in CHAIN_LENGTHS}
    text = ptx.header(arch) + _unique(_module_decls(True, False) + "\n".join(
        bank_kernel(entries[n], row.width, n) for n in CHAIN_LENGTHS), f"bank_u{row.width}")
    unit = sass_unit("shared_ld" if row.width == 32 else "lds64", arch)

    def intent(n, unit=unit):
        return Intent(n, unit, min_depth=n)
    return probes.Probe(name, arch, text, entries, {n: [] for n in entries}, intent,
                        {n: n for n in CHAIN_LENGTHS}, {n: 3 for n in entries})


def _unique(text: str, suffix: str) -> str:
    """Module-level variables named after their probe, so every memory probe of an arch fits
    in one module (one ptxas run, one JIT link). The .const chain stays the module's only
    .const variable (it must sit at offset 0 of its bank)."""
    return text.replace("gpuchar_smem", f"gpuchar_smem_{suffix}")


def suite_probes(arch: str) -> list[probes.Probe]:
    """Every memory probe of `arch` (for one batched ptxas run / one driver JIT link)."""
    out = []
    for f in FLAVOURS:
        out += [chase_probe(f, arch, "chain"), chase_probe(f, arch, "loop")]
    out += [bank_probe(BankRow(32, 1), arch), bank_probe(BankRow(64, 2), arch)]
    return out


# --- chains -------------------------------------------------------------------------------

def random_cycle(n: int, rng: np.random.Generator) -> np.ndarray:
    """next[i] for a uniformly random cyclic permutation of range(n): one cycle through every
    element. Same distribution as Sattolo's algorithm, built vectorised: a random visiting
    order, each element pointing to the next one in that order."""
    if n < 1:
        raise ValueError(f"a cycle needs at least one element, got {n}")
    return _cycle_from_order(rng.permutation(n))


def _cycle_from_order(order: np.ndarray) -> np.ndarray:
    nxt = np.empty(len(order), dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    return nxt


def sattolo(n: int, rng: np.random.Generator) -> np.ndarray:
    """Sattolo's algorithm itself (sequential; for tests and small chains): next[i]."""
    a = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = int(rng.integers(0, i))
        a[i], a[j] = a[j], a[i]
    return a


def cycle_order(nxt: np.ndarray, start: int = 0) -> np.ndarray:
    """The elements in the order the chain visits them from `start`, for one pass. Raises if
    the chain is not one cycle through every element (vectorised check, no walk needed for
    the verdict: the walk itself is the proof)."""
    n = len(nxt)
    order = np.empty(n, dtype=np.int64)
    x = start
    for k in range(n):   # numpy scalar loop, fine up to ~10^6 (a few tenths of a second)
        order[k] = x
        x = nxt[x]
    if x != start or len(np.unique(order)) != n:
        seen = len(np.unique(order))
        raise ChainError(f"chain is not a single cycle: from {start}, {n} steps visit {seen} "
                         f"distinct lines and end at {x}")
    return order


class ChainError(AssertionError):
    """A chain does not visit the lines it was meant to visit."""


def is_single_cycle(nxt: np.ndarray) -> bool:
    """True iff `nxt` is one cycle through every element (vectorised: follow the cycle by
    pointer doubling, log2(n) gathers)."""
    n = len(nxt)
    if n == 0 or not np.array_equal(np.sort(nxt), np.arange(n)):
        return False
    # position of every element along the cycle from 0, by doubling: reach[k] = next^(2^j)
    # Single cycle <=> the orbit of 0 has length n <=> next^m(0) != 0 for 0 < m < n.
    # Compute visited set by repeated squaring of the set {0}: S_{j+1} = S_j U f^(2^j)(S_j).
    f = nxt.copy()
    visited = np.zeros(n, dtype=bool)
    visited[0] = True
    steps = 1
    while steps < n:
        visited[f[visited]] = True
        f = f[f]
        steps *= 2
    return bool(visited.all())


@dataclass
class Layout:
    """Where the pointers of one chase live: `n` pointers `stride` bytes apart from the start
    of a buffer, pointer i holding the address of pointer nxt[i]."""
    nxt: np.ndarray
    stride: int
    kind: str = "random"        # random | sequential
    cursor: int = 0             # where the next chase starts (the last one's end)

    @property
    def n(self) -> int:
        return len(self.nxt)

    @property
    def footprint(self) -> int:
        return self.n * self.stride

    def word_index(self) -> np.ndarray:
        return np.arange(self.n, dtype=np.int64) * (self.stride // 8)

    def pointers(self, base: int) -> np.ndarray:
        return (np.uint64(base) + self.nxt.astype(np.uint64) * np.uint64(self.stride))

    def distinct_lines(self, line: int = LINE) -> int:
        """How many distinct `line`-byte lines a full walk of the chain touches."""
        return len(np.unique(np.arange(self.n, dtype=np.int64) * self.stride // line))

    def walk(self, start: int, steps: int) -> int:
        """Index reached after `steps` steps from `start` (host model of the chase)."""
        pos = self.position()
        return int(self.visit_order[(pos[start] + steps) % self.n])

    def position(self) -> np.ndarray:
        if getattr(self, "_pos", None) is None:
            self._pos = np.empty(self.n, dtype=np.int64)
            self._pos[self.visit_order] = np.arange(self.n)
        return self._pos

    @property
    def visit_order(self) -> np.ndarray:
        if getattr(self, "_order", None) is None:
            self._order = cycle_order(self.nxt, 0)
        return self._order


def random_layout(footprint: int, stride: int = LINE, seed: int = 0) -> Layout:
    """A random single cycle with one pointer per `stride` bytes over `footprint` bytes,
    asserted to visit exactly footprint / stride distinct lines."""
    if stride < 8 or stride % 8:
        raise ValueError(f"stride must be a multiple of 8 bytes, got {stride}")
    n = footprint // stride
    if n < 2:
        raise ValueError(f"footprint {footprint} B holds fewer than 2 lines of {stride} B")
    order = np.random.default_rng(seed).permutation(n)
    lay = Layout(_cycle_from_order(order), stride)
    lay._order = np.roll(order, -int(np.flatnonzero(order == 0)[0]))   # visit order from 0
    check_layout(lay, footprint // stride)
    return lay


def sequential_layout(n: int, stride: int) -> Layout:
    """Pointer i -> i+1 (wrapping): a forward walk at a fixed stride (stride sweep)."""
    lay = Layout(np.roll(np.arange(n, dtype=np.int64), -1), stride, "sequential")
    lay._order = np.arange(n, dtype=np.int64)
    check_layout(lay, n)
    return lay


def check_layout(lay: Layout, intended: int) -> None:
    """The chain is one cycle through exactly `intended` pointers, each on its own line when
    the stride is at least a line."""
    if lay.n != intended:
        raise ChainError(f"chain holds {lay.n} pointers, {intended} intended")
    if getattr(lay, "_order", None) is None and not is_single_cycle(lay.nxt):
        raise ChainError(f"chain over {lay.n} pointers is not a single cycle")
    # with a known visit order, order being a permutation and each pointer leading to the
    # next element of the order proves one cycle through all n pointers
    order = lay.visit_order
    if not (np.array_equal(lay.nxt[order], np.roll(order, -1))
            and np.array_equal(np.sort(order), np.arange(lay.n))):
        raise ChainError("chain's recorded visit order does not follow its pointers")
    if lay.stride >= LINE and lay.distinct_lines() != intended:
        raise ChainError(f"chain touches {lay.distinct_lines()} distinct {LINE}-byte lines, "
                         f"{intended} intended")


# --- footprints from the device -------------------------------------------------------------

@dataclass
class Geometry:
    """Cache sizes the footprints are chosen from, and where each came from."""
    l1_bytes: int          # unified L1/shared per SM (the L1 can be at most this)
    l2_bytes: int
    free_bytes: int | None
    notes: list[str] = field(default_factory=list)

    def footprint(self, level: str) -> int:
        """Footprint of a Table IV level (bytes)."""
        if level == "l1":
            return 16 * 1024          # fits the smallest L1 of every arch (sm_50: 24 KB)
        if level == "l2":
            # well above any L1, well below the L2 (and below one partition of a split L2)
            return max(4 * self.l1_bytes, min(self.l2_bytes // 8, 8 * 2**20))
        if level == "dram":
            return self.dram_footprint()[0]
        if level == "shared":
            return 4096
        if level == "const":
            return CONST_LINES * CONST_STRIDE
        raise ValueError(f"unknown level footprint {level!r}")

    def dram_footprint(self) -> tuple[int, str]:
        want = 1 << math.ceil(math.log2(DRAM_FACTOR * self.l2_bytes))
        return fit_to_memory(want, self.free_bytes, floor=2 * self.l2_bytes)

    def sweep(self, per_octave: int = 3) -> list[int]:
        """Staircase footprints: 4 KB to the device-memory footprint, `per_octave` points per
        doubling, multiples of the line size."""
        top = self.dram_footprint()[0]
        k_max = int(math.floor(math.log2(top / 4096) * per_octave + 1e-9))
        pts = sorted({int(round(4096 * 2 ** (k / per_octave) / LINE)) * LINE
                      for k in range(k_max + 1)})
        return pts


def fit_to_memory(want: int, free: int | None, *, floor: int = 0) -> tuple[int, str]:
    """`want` bytes, or less when free device memory (minus MEMORY_RESERVE) cannot hold it:
    halved until it fits, and the reason said. Never below `floor` silently: if even that does
    not fit, the largest power of two that fits is returned with a note saying the level
    cannot be reached."""
    if free is None:
        return want, ""
    budget = int(free * (1 - MEMORY_RESERVE))
    if want <= budget:
        return want, ""
    got = want
    while got > budget and got > 4096:
        got //= 2
    note = (f"footprint reduced from {want / 2**20:.0f} MiB to {got / 2**20:.0f} MiB: only "
            f"{free / 2**20:.0f} MiB device memory free")
    if got < floor:
        note += f" (below {floor / 2**20:.0f} MiB: device memory latency NOT reached)"
    return got, note


def geometry(dev) -> Geometry:
    """Footprint inputs from a DeviceInfo (or a fallback when attributes are missing):
    L2 from the device's l2CacheSize, L1 from the unified L1/shared size per SM, free memory
    from cudaMemGetInfo. Fallback (documented): L1 256 KiB, L2 64 MiB (above every L2 of the
    archs the suite knows), so the sweep still spans every level, only coarser."""
    notes = []
    l2 = getattr(dev, "l2_bytes", 0) or 0
    if l2 <= 0:
        l2 = FALLBACK_L2
        notes.append(f"L2 size unreadable: assumed {FALLBACK_L2 // 2**20} MiB (fallback)")
    l1 = getattr(dev, "l1_shared_bytes", 0) or 0
    if l1 <= 0:
        l1 = FALLBACK_L1
        notes.append(f"L1/shared size unknown: assumed {FALLBACK_L1 // 1024} KiB (fallback)")
    free = getattr(dev, "free_memory_bytes", None)
    g = Geometry(l1, l2, free, notes)
    _, note = g.dram_footprint()
    if note:
        g.notes.append(note)
    return g


def bank_layout(row: BankRow, positions: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Shared-memory contents (u32 offsets from the array base) and each thread's start
    offset for a Table 10 row: at step m thread t reads offset m*B + t*4k (k = ways; 0 =
    broadcast: every thread the same word), B a multiple of 128 bytes, so every step is a
    k-way conflict; each thread cycles through its own `positions` addresses."""
    k = row.ways
    tstride = 4 * k
    block = max(128, 32 * tstride)
    words = np.zeros(SMEM_BYTES // 4, dtype=np.uint32)
    if positions * block > SMEM_BYTES:
        raise ValueError(f"{row.name}: {positions} x {block} B exceeds {SMEM_BYTES} B shared")
    starts = np.zeros(32, dtype=np.uint64)
    for t in range(32):
        for m in range(positions):
            a = m * block + t * tstride
            nxt = ((m + 1) % positions) * block + t * tstride
            words[a // 4] = nxt
            if row.width == 64:
                words[a // 4 + 1] = 0
        starts[t] = t * tstride
    return words, starts


def bank_banks(row: BankRow) -> int:
    """Conflict degree the layout produces at step 0 (for tests): the most distinct 4-byte
    words any bank must serve to the warp."""
    words, starts = bank_layout(row)
    per_bank: dict[int, set[int]] = {}
    for t in range(32):
        a = int(starts[t])
        for w in range(row.width // 32):
            word = a // 4 + w
            per_bank.setdefault(word % 32, set()).add(word)
    return max(len(s) for s in per_bank.values())


# --- staircase analysis ---------------------------------------------------------------------

@dataclass
class Plateau:
    first: int          # index of the first point
    last: int
    latency: float      # median latency over the plateau
    lo_bytes: int       # footprint of the first / last point
    hi_bytes: int


def plateaus(footprints: list[int], latency: list[float], *, rel: float = 0.08,
             abs_tol: float = 4.0, min_points: int = 2) -> list[Plateau]:
    """Runs of consecutive points whose latency stays within max(rel*lat, abs_tol) of the
    run's median: the levels of the staircase. Points between plateaus (partial hits) belong
    to none. Runs shorter than `min_points` are dropped."""
    lat = np.asarray(latency, dtype=float)
    out: list[Plateau] = []
    i = 0
    n = len(lat)
    while i < n:
        j = i
        while j + 1 < n:
            med = float(np.median(lat[i:j + 2]))
            if np.all(np.abs(lat[i:j + 2] - med) <= max(rel * med, abs_tol)):
                j += 1
            else:
                break
        if j - i + 1 >= min_points:
            out.append(Plateau(i, j, float(np.median(lat[i:j + 1])), footprints[i],
                               footprints[j]))
            i = j + 1
        else:
            i += 1
    # merge neighbours at the same level (a noisy point split one plateau in two)
    merged: list[Plateau] = []
    for p in out:
        if merged and abs(p.latency - merged[-1].latency) <= max(rel * p.latency, abs_tol):
            q = merged[-1]
            merged[-1] = Plateau(q.first, p.last, float(np.median(lat[q.first:p.last + 1])),
                                 q.lo_bytes, p.hi_bytes)
        else:
            merged.append(p)
    return merged


@dataclass
class Knee:
    """A capacity: the largest footprint still on the lower plateau (`lo`), the first point
    of the next plateau (`hi`); the capacity lies in [lo, hi)."""
    lo: int
    hi: int
    below: float        # latency of the lower plateau
    above: float

    @property
    def estimate(self) -> int:
        return self.lo


def knees(footprints: list[int], latency: list[float], **kw) -> list[Knee]:
    ps = plateaus(footprints, latency, **kw)
    return [Knee(a.hi_bytes, footprints[b.first], a.latency, b.latency)
            for a, b in zip(ps, ps[1:]) if b.latency > a.latency]


SWEEP_STEP = 2 ** (1 / 3)      # footprints: 3 points per doubling


def last_level_knee(footprints: list[int], latency: list[float], *, rel: float = 0.08,
                    abs_tol: float = 4.0) -> Knee | None:
    """The last cache level's capacity: the device-memory plateau is the last one found;
    walking down from the largest footprint, every point within its band (as `plateaus`
    groups points) is a device-memory point; the first of them is `hi`, the point before it
    `lo`. Points between the caches and device memory that happen to form a plateau of their
    own (H100: 50.8 MiB at 571 and 64 MiB at 653 cycles, then device memory at ~680) can then
    not be taken for the last level, as `knees(...)[-1]` would."""
    ps = plateaus(footprints, latency, rel=rel, abs_tol=abs_tol)
    if len(ps) < 2:
        return None
    dram = ps[-1].latency
    band = max(rel * dram, abs_tol)
    first = len(latency)
    while first > 0 and abs(latency[first - 1] - dram) <= band:
        first -= 1
    if first == 0 or first == len(latency):
        return None
    below = [q for q in ps if q.last < first]
    return Knee(footprints[first - 1], footprints[first],
                below[-1].latency if below else float(latency[first - 1]), dram)


def fill_granularity(strides: list[int], latency: list[float], *, frac: float = 0.9) -> int | None:
    """Bytes fetched per miss, from a forward walk at each stride: below the fill size a miss
    serves stride/fill of the accesses, so the mean latency grows with the stride until it
    reaches the all-miss level at stride = fill. Returns the smallest stride whose latency
    reaches `frac` of the way from the smallest stride's latency to the all-miss level (the
    largest strides' median), or None when the curve does not rise (no misses seen)."""
    lat = np.asarray(latency, dtype=float)
    top = float(np.median(lat[-2:]))
    bottom = float(lat[0])
    if top - bottom < 4.0:
        return None
    for s, v in zip(strides, lat):
        if v >= bottom + frac * (top - bottom):
            return int(s)
    return None


def plot_staircase(footprints: list[int], latency: list[float], found: list[Knee],
                   g: Geometry, title: str):
    """The staircase figure (latency against footprint, log x), with the device's L1/L2
    sizes and the detected knees marked."""
    from .plots import pyplot
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.semilogx([f / 1024 for f in footprints], latency, "o-", ms=3, lw=1,
                label="load-to-use latency (slope)")
    ax.axvline(g.l1_bytes / 1024, color="grey", ls=":", lw=1, label="L1/shared per SM (device)")
    ax.axvline(g.l2_bytes / 1024, color="grey", ls="--", lw=1, label="L2 (device attribute)")
    for k in found:
        ax.axvspan(k.lo / 1024, k.hi / 1024, color="tab:orange", alpha=0.2)
    ax.set_xlabel("footprint (KiB, log scale)")
    ax.set_ylabel("cycles per dependent load")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


# --- on the GPU -----------------------------------------------------------------------------

@dataclass
class ChaseRun:
    """Raw cycles of one chase measurement: length -> samples (warm-up launch dropped), plus
    what the launches visited."""
    probe: probes.Probe
    cycles: dict[int, list[int]]
    ops: dict[int, int]
    footprint: int
    lines: int                  # distinct lines (pointers) of the chain
    timed_steps: int            # dependent loads timed over all launches
    smids: list[int]
    notes: list[str] = field(default_factory=list)


class Session:
    """The memory suite's GPU state for one pytest session: every memory probe JIT-linked
    once (one driver link) and its SASS kept for verification; one device buffer, sized for
    the device-memory footprint, allocated once and reused by every global chase."""

    def __init__(self, dev, *, watchdog_s: float) -> None:
        from . import jit
        self.dev = dev
        self.watchdog_s = watchdog_s
        self.geo = geometry(dev)
        self.compiled = jit.compile_probe(module_text(dev.arch), dev.driver,
                                          "gpuchar_memory.ptx")
        self.functions = probes.functions_of(self.compiled.cubin, dev.arch)
        self._buf = None
        self._verified: dict[str, dict] = {}

    def verified(self, probe: probes.Probe) -> dict:
        """Verify the probe's timed regions in the driver's own SASS (once)."""
        if probe.name not in self._verified:
            self._verified[probe.name] = verify(probe, self.functions)
        return self._verified[probe.name]

    def buffer(self):
        import cupy as cp
        if self._buf is None:
            size = self.geo.dram_footprint()[0]
            self._buf = cp.zeros(size // 8, dtype=np.uint64)
        return self._buf

    def flush_l2(self) -> None:
        """Evict the L2 by writing a scratch buffer of twice its size."""
        import cupy as cp
        n = 2 * self.geo.l2_bytes // 8
        scratch = cp.empty(n, dtype=np.uint64)
        scratch.fill(1)
        del scratch

    def _upload(self, lay: Layout) -> int:
        import cupy as cp
        buf = self.buffer()
        if lay.footprint > buf.nbytes:
            raise ChainError(f"chain of {lay.footprint} B exceeds the buffer ({buf.nbytes} B)")
        base = int(buf.data.ptr)
        buf[cp.asarray(lay.word_index())] = cp.asarray(lay.pointers(base))
        return base

    def _wait(self, name: str) -> None:
        from . import measure
        measure._wait(name, self.watchdog_s)

    def chase(self, probe: probes.Probe, lay: Layout, *, repeats: int, warm: str = "every",
              lengths: dict[int, int] | None = None, flush: bool | None = None) -> ChaseRun:
        """Launch the probe's kernels on `lay` (uploaded to the buffer for global probes; the
        shared probes copy it into shared memory; the const probe's chain is in its PTX),
        1 + `repeats` times per length, each launch continuing the chain where the last one
        stopped (``lay.cursor``). warm: "every" (walk the whole cycle before every timed chain), "first" (only
        before the first launch: levels that persist across launches, the L2), "none".
        `flush` (default: when warm is "none") evicts the L2 after the upload.
        Every launch's end pointer is checked against the host's walk of the same chain."""
        import cupy as cp
        from . import measure
        if measure.wedged():
            raise measure.GPUWedged(f"GPU wedged by probe {measure.wedged()}; not launching "
                                    f"{probe.name}")
        self.verified(probe)
        space = FLAVOURS[probe.name.split("/")[-1]].space
        stuck = probe.name.endswith("shared_st_ld")   # st [p], p: the chain stays put
        start = lay.cursor
        if space == "global":
            base = self._upload(lay)
            init, initw = 0, 0
            keep = None
            if warm == "none" if flush is None else flush:
                self.flush_l2()   # the upload itself left the last-written lines in the L2
        elif space == "shared":
            if lay.footprint > SMEM_BYTES:
                raise ChainError(f"shared chain of {lay.footprint} B > {SMEM_BYTES} B")
            base = 0
            words = np.zeros(SMEM_BYTES // 4, dtype=np.uint32)
            words[(lay.word_index() * 2)] = (lay.nxt * lay.stride).astype(np.uint32)
            keep = cp.asarray(words)
            init, initw = int(keep.data.ptr), int(lay.footprint // 4)
        else:
            base, init, initw, keep = 0, 0, 0, None
        state = cp.asarray(np.array([base + start * lay.stride], dtype=np.uint64))
        lengths = lengths or dict(probe.ops)
        outs, expect, warms = {}, [], []
        pos = start
        first = True
        for n in sorted(lengths):
            fn = self.compiled.function(probe.entries[n])
            steps_timed = lengths[n]
            out = cp.zeros((repeats + 1, 3), dtype=np.uint64)
            for r in range(repeats + 1):
                w = lay.n if (warm == "every" or (warm == "first" and first)) else 0
                first = False
                fn((1,), (1,), (out[r], state, np.uint32(w), np.uint32(steps_timed),
                                np.uint64(init), np.uint32(initw)))
                if not stuck:
                    pos = lay.walk(pos, w + steps_timed)
                expect.append((n, r, base + pos * lay.stride))
                warms.append(w)
            outs[n] = out
        self._wait(probe.name)
        host = {n: out.get() for n, out in outs.items()}
        for n, r, want in expect:
            got = int(host[n][r, 1])
            if got != want:
                raise ChainError(
                    f"{probe.name}: launch {r} of length {n} ended at {got:#x}, the host's walk "
                    f"of the same chain at {want:#x}: the chase did not visit the intended "
                    f"lines (footprint {lay.footprint} B, {lay.n} pointers)")
        del keep
        lay.cursor = pos
        cycles = {n: [int(v) for v in host[n][1:, 0]] for n in host}
        smids = sorted({int(v) for n in host for v in host[n][:, 2]})
        timed = sum(lengths[n] * (repeats + 1) for n in lengths)
        return ChaseRun(probe, cycles, {n: lengths[n] for n in lengths}, lay.footprint, lay.n,
                        timed, smids)

    def bank(self, row: BankRow, *, repeats: int) -> ChaseRun:
        """One warp's conflicted chase (Table 10 row); thread 0's cycles; every thread's end
        offset checked."""
        import cupy as cp
        probe = bank_probe(row, self.dev.arch)
        self.verified(probe)
        words, starts = bank_layout(row)
        d_words = cp.asarray(words)
        state = cp.asarray(starts)
        k, positions = row.ways, 4
        block = max(128, 32 * 4 * k)
        outs = {}
        for n in CHAIN_LENGTHS:
            fn = self.compiled.function(probe.entries[n])
            out = cp.zeros((repeats + 1, 32 * 3), dtype=np.uint64)
            for r in range(repeats + 1):
                fn((1,), (32,), (out[r], state, np.uint64(d_words.data.ptr),
                                 np.uint32(len(words))))
            outs[n] = out
        self._wait(probe.name)
        cycles = {}
        for n, out in outs.items():
            h = out.get().reshape(repeats + 1, 32, 3)
            for t in range(32):
                want = (n % positions) * block + t * 4 * k
                if int(h[0, t, 1]) != want:
                    raise ChainError(f"{probe.name} {row.name}: thread {t} ended at offset "
                                     f"{int(h[0, t, 1])}, expected {want}")
            cycles[n] = [int(v) for v in h[1:, 0, 0]]
        return ChaseRun(probe, cycles, {n: n for n in CHAIN_LENGTHS}, positions * block,
                        positions * 32, 0, [])


def const_layout() -> Layout:
    """The host's model of the .const chain (for end-pointer checks)."""
    words = const_chain_words()
    nxt = np.array([words[i * CONST_STRIDE // 4] // CONST_STRIDE for i in range(CONST_LINES)])
    lay = Layout(nxt.astype(np.int64), CONST_STRIDE)
    check_layout(lay, CONST_LINES)
    return lay


def level_layout(level: Level, g: Geometry, seed: int = 1) -> Layout:
    """The chain a Table IV level chases through."""
    if level.footprint == "const":
        return const_layout()
    if level.footprint == "shared":
        return random_layout(g.footprint("shared"), LINE, seed)
    return random_layout(g.footprint(level.footprint), LINE, seed)


def session_for(gpuchar) -> Session:
    """The memory suite's Session of this pytest session (created on first use)."""
    key = "memory.session"
    if key not in gpuchar.runs:
        gpuchar.runs[key] = Session(gpuchar.device, watchdog_s=gpuchar.watchdog_s)
    return gpuchar.runs[key]


def measured(gpuchar, key: tuple, make):
    """Run `make()` once per session under `key` (several tests share one measurement)."""
    k = ("memory",) + tuple(key)
    if k not in gpuchar.runs:
        gpuchar.runs[k] = make()
    return gpuchar.runs[k]


METHOD_CHAIN = ("pointer chase, 1 thread: slope of %clock64 cycles over {lengths} dependent "
                "{op} unrolled between two clock reads (clock amortised over the chain, never "
                "read per access), median of {reps} launches after a warm-up launch; footprint "
                "{fp}, {lines} pointers one per {stride} B in a random single cycle{warm}")
METHOD_LOOP = ("pointer chase as a nounroll loop (one {op} + counter add + compare + branch "
               "per iteration, verified), 1 thread: slope of %clock64 cycles over {lengths} "
               "iterations, median of {reps} launches; same footprint as the latency row")


def human_bytes(n: int) -> str:
    for unit, div in (("MiB", 2**20), ("KiB", 1024)):
        if n >= div:
            v = n / div
            return f"{v:.0f} {unit}" if abs(v - round(v)) < 0.05 else f"{v:.1f} {unit}"
    return f"{n} B"


SWEEP_REPEATS = 3
STRIDES = (8, 16, 32, 64, 128, 256)
FILL_REGION = 512 * 1024


@dataclass
class Sweep:
    footprints: list[int]
    latency: list[float]
    spread: list[float]
    smids: list[int]
    warm: list[str]

    def as_data(self) -> dict:
        return {"footprint_bytes": self.footprints, "latency_cycles": [round(v, 2) for v in
                                                                        self.latency],
                "spread_cycles": [round(v, 2) for v in self.spread], "warm": self.warm,
                "smids": self.smids}


def sweep_warm(f: int, g: Geometry) -> str:
    """Warm-up policy of one staircase point: the L1 is emptied between launches, so small
    footprints are walked before every timed chain; the L2 keeps its lines between launches,
    so larger ones once; above 1.25x L2 a warm-up walk cannot leave the timed lines cached
    (a cyclic walk longer than the cache evicts each line before its reuse): none, and the L2
    is flushed after the upload instead."""
    if f <= 1 << 20:
        return "every"
    if f <= 1.25 * g.l2_bytes:
        return "first"
    return "none"


def staircase(s: Session, repeats: int = SWEEP_REPEATS) -> Sweep:
    """Load-to-use latency (ld.global.ca chase, slope over CHAIN_LENGTHS) at every footprint
    of Geometry.sweep(): the cache staircase."""
    from . import measure
    probe = chase_probe("ca", s.dev.arch, "chain")
    fps, lat, spread, smids, warms = [], [], [], set(), []
    for f in s.geo.sweep():
        lay = random_layout(f, LINE, seed=f % 9973)
        w = sweep_warm(f, s.geo)
        run = s.chase(probe, lay, repeats=repeats, warm=w)
        fit = measure.fit(run.cycles, run.ops)
        fps.append(f)
        lat.append(fit.value)
        spread.append(fit.spread)
        warms.append(w)
        smids.update(run.smids)
    return Sweep(fps, lat, spread, sorted(smids), warms)


def fill_sweep(s: Session, repeats: int = SWEEP_REPEATS) -> Sweep:
    """Mean latency of a forward ld.global.ca walk at each stride of STRIDES over a region
    held in the L2 but not the L1 (walked once with .cg first): misses are L1 fills from the
    L2, so the curve gives the L1 fill granularity.

    The same walk for L2 fills from device memory (.cg over a flushed region) is NOT offered:
    on the H200 its latency was not monotonic in the stride and differed between sessions
    ([325, 335, 588, 807, 765, 641] and [318, 359, 458, 546, 650, 692] cycles for 8..256 B:
    DRAM row-buffer locality and prefetching dominate), so no fill size can be read from it."""
    from . import measure
    probe = chase_probe("ca", s.dev.arch, "chain")
    warm_probe = chase_probe("cg", s.dev.arch, "loop")
    fps, lat, spread, smids, warms = [], [], [], set(), []
    for stride in STRIDES:
        lay = sequential_layout(FILL_REGION // stride, stride)
        s.chase(warm_probe, lay, repeats=0, warm="none", flush=True,
                lengths={min(warm_probe.entries): lay.n})
        run = s.chase(probe, lay, repeats=repeats, warm="none", flush=False)
        fit = measure.fit(run.cycles, run.ops)
        fps.append(stride)
        lat.append(fit.value)
        spread.append(fit.spread)
        warms.append("l2-resident")
        smids.update(run.smids)
    return Sweep(fps, lat, spread, sorted(smids), warms)


def fill_model_error(strides: list[int], latency: list[float], fill: int) -> float:
    """Largest deviation, as a fraction of (miss - hit), of the measured curve from the fill
    model: hit + min(1, stride/fill) * (miss - hit), hit and miss taken from the curve's ends
    (hit extrapolated from the smallest stride)."""
    lat = np.asarray(latency, dtype=float)
    miss = float(np.median(lat[-2:]))
    s0 = strides[0]
    # lat0 = hit + s0/fill (miss - hit)  =>  hit = (lat0 - s0/fill miss) / (1 - s0/fill)
    a = min(1.0, s0 / fill)
    hit = (lat[0] - a * miss) / (1 - a) if a < 1 else lat[0]
    span = miss - hit
    model = np.array([hit + min(1.0, s / fill) * span for s in strides])
    return float(np.max(np.abs(model - lat)) / span) if span > 0 else float("inf")
