"""The DPX probes on the shared frames: a dependent chain of one intrinsic (latency) on the
instruction probes' operand frame (core.ptx.operand_kernel), and a whole-GPU counted loop of
independent chains (throughput per SM) verified by core.loop.

Chain: op k+1's {a} is op k's result {d}; every op's other sources are loaded for that op
alone (no two ops share an operand, so nothing is common to two calls), and the outputs are
stored after the region (``keeps_all`` says which). Which input word feeds which op is fixed
by ``chain_layout`` (the CPU reference replays it).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ...core import archs, ptx, sass
from ...core.loop import LoopVerdict, verify_loop
from ...core.probe import NotApplicable, OneKernelProbe, Probe
from ...core.ptx import Body, Kernel, Registers
from ...core.verify import MOVE_OPCODES, Verdict, verify
from .rows import HARDWARE_ARCH, DpxRow

LENGTHS = (8, 16, 32)         # chain lengths (64 calls would keep too many results live)
SIGNATURES = {"bmax": ("SEL",), "bmin": ("SEL",)}   # what a select sequence must hold

BLOCK = 256                   # throughput loop: threads per block ...
BLOCKS_PER_SM = 4             # ... blocks per SM (32 warps, 8 per scheduler)
CHAINS = 8                    # independent chains per thread
UNROLL = 16                   # calls per chain per loop iteration
REC_WORDS = 3                 # per warp: start clock, end clock, smid

_FIELD = re.compile(r"\{(\w+)\}")


def render(template: str, fields: dict[str, str]) -> str:
    """A row's PTX template with its fields ({a} {b} {c} sources, {d} {e} {f} outputs)."""
    return _FIELD.sub(lambda m: fields[m.group(1)], template)


def entry_base(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")


# --- the dependent chain --------------------------------------------------------------------

def chain_layout(row: DpxRow, n: int) -> list[dict[str, int]]:
    """Input slot of every source of every op of a chain of n ops (slot 0: the chain's
    start, then for each op its own other sources in field order); {a} of op k > 0 is op
    k-1's result (-1)."""
    out, slot = [], 1
    for k in range(n):
        ops = {"a": 0 if k == 0 else -1}
        for f in row.sources[1:]:
            ops[f] = slot
            slot += 1
        out.append(ops)
    return out


def keeps_all(row: DpxRow, arch: str) -> bool:
    """Whether every op's result is stored, or only the last one's (predicate outputs are
    always stored). An emulated call (sm_80..89) must keep all: with only the next op to
    read a result, ptxas folds its repacking into the next op's unpacking and the region is
    no longer n copies of one sequence. A 2-input max-relu must keep all: two of them with an
    unobserved value between them are fused into one VIMNMX3.RELU. The others keep only the
    last result on sm_90: storing every 16x2 result makes the allocator copy some of them
    (IMAD.MOV) inside the region."""
    return archs.number(arch) < HARDWARE_ARCH or row.family in ("relu_max", "relu_min")


def chain_body(row: DpxRow, arch: str, n: int, regs: Registers) -> Body:
    template = row.ptx_at(arch)
    keep_all = keeps_all(row, arch)
    layout = chain_layout(row, n)
    words = [regs.load(32, "int") for _ in range(1 + n * (len(row.sources) - 1))]
    lines, results, cur = [], [], words[0]
    for k, srcs in enumerate(layout):
        fields = {f: (cur if s < 0 else words[s]) for f, s in srcs.items()}
        fields.update({f: regs.reg(32) for f in row.outputs})
        lines.append(render(template, fields))
        results += [(fields[f], 32) for f in stored_fields(row, k, n, keep_all)]
        cur = fields["d"]
    return Body(lines, results)


def stored_fields(row: DpxRow, k: int, n: int, keep_all: bool) -> tuple[str, ...]:
    """The outputs of op k (of n) stored after the region."""
    return row.outputs if keep_all or k == n - 1 else row.outputs[1:]


def stored(row: DpxRow, arch: str, n: int) -> list[tuple[int, str]]:
    """(op, field) of each result slot after the cycle count, in store order."""
    keep_all = keeps_all(row, arch)
    return [(k, f) for k in range(n) for f in stored_fields(row, k, n, keep_all)]


@dataclass
class DpxProbe(Probe):
    """A dependent chain of one intrinsic. Register moves the allocator places in the
    region are allowed where their number is the same at every length (a fixed cost that
    cancels in the slope); they are named in the verdict."""
    row: DpxRow | None = None

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        moves = {n: Counter(i.opcode for i in r if i.opcode in MOVE_OPCODES)
                 for n, r in regions.items()}
        counts = list(moves.values())
        if self.unit is None or any(c != counts[0] for c in counts):
            return verify(self.name, regions, self.intent)
        kept = {n: [i for i in r if i.opcode not in MOVE_OPCODES] for n, r in regions.items()}
        verdict = verify(self.name, kept, self.intent)
        verdict.base = +counts[0]
        if counts[0]:
            verdict.message += f"; fixed register moves {dict(counts[0])}"
        return verdict


def latency_probe(row: DpxRow, arch: str) -> DpxProbe:
    """Dependent chain of the row's call on `arch` (sm_90: the DPX instruction; sm_80..89:
    the emulated sequence). NotApplicable before sm_80."""
    row.ptx_at(arch)
    unit = row.unit_at(arch)
    lengths = LENGTHS
    kernels, entries, inputs, slots = [], {}, {}, {}
    name = f"dpx/latency/{row.name}"
    for n in lengths:
        regs = Registers()
        body = chain_body(row, arch, n, regs)
        entry = f"dpx_{entry_base(row.name)}_n{n}"
        kernels.append(ptx.operand_kernel(entry, regs, body.lines, body.results))
        entries[n], inputs[n] = entry, regs.inputs
        slots[n] = ptx.out_bytes(len(body.results), len(regs.inputs)) // ptx.SLOT_BYTES
    signature = () if unit is not None else SIGNATURES.get(row.family, ())
    return DpxProbe(name, arch, "\n" + "\n".join(kernels), entries, {n: n for n in lengths},
                    unit=unit, signature=signature, chained=True, inputs=inputs,
                    out_slots=slots, row=row)


# --- the throughput loop --------------------------------------------------------------------

def loop_body(row: DpxRow, regs: Registers, chains: int, unroll: int) -> Body:
    """`chains` independent chains x_c = op(x_c, b[, c]), interleaved op by op; the other
    sources are two loaded words every call reads (one register per source field: the operand
    reuse cache serves them, as the throughput topic's FMA rows)."""
    template = row.hardware
    xs = [regs.load(32, "int") for _ in range(chains)]
    shared = {f: regs.load(32, "int") for f in row.sources[1:]}
    lines = [render(template, {"a": x, "d": x, **shared}) for _ in range(unroll) for x in xs]
    return Body(lines, [(x, 32) for x in xs])


def loop_kernel(row: DpxRow, entry: str, *, chains: int = CHAINS,
                unroll: int = UNROLL) -> tuple[Kernel, Registers, int]:
    """Per thread `chains` x `unroll` calls per iteration of a counted loop (trip count a
    parameter, not unrolled) between two %clock64 reads; lane 0 of each warp stores its
    clocks and %smid; every chain's value is stored after the loop."""
    regs = Registers()
    body = loop_body(row, regs, chains, unroll)
    stores = [f"st.global.b32 [%res+{k * ptx.SLOT_BYTES}], {reg};"
              for k, (reg, _) in enumerate(body.results)]
    k = ptx.loop_kernel(entry, regs, body.lines, stores, label="DPX_LOOP", block=BLOCK,
                        blocks_per_sm=BLOCKS_PER_SM,
                        res_bytes=len(body.results) * ptx.SLOT_BYTES, rec_words=REC_WORDS)
    return k, regs, len(body.results)


@dataclass(kw_only=True)
class LoopProbe(OneKernelProbe):
    """The throughput kernel: one counted loop between the clock reads holding exactly
    CHAINS x UNROLL DPX instructions per iteration plus loop control (core.loop)."""
    row: DpxRow

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> LoopVerdict:
        return verify_loop(self.name, self.arch, self.unit, self.ops[self.length],
                           self.sass_of(functions))


def loop_probe(row: DpxRow, arch: str) -> LoopProbe:
    """The row's throughput loop on sm_90 (NotApplicable where the call is no single DPX
    instruction with one result, or on another arch)."""
    if archs.number(arch) != HARDWARE_ARCH:
        raise NotApplicable(f"{row.intrinsic}: DPX throughput is timed on sm_90 ({arch} "
                            f"has no DPX instructions)")
    if not row.loop:
        raise NotApplicable(f"{row.intrinsic}: no throughput loop: {row.why_no_loop}")
    entry = f"dpx_loop_{entry_base(row.name)}"
    k, regs, n_res = loop_kernel(row, entry)
    n = CHAINS * UNROLL
    return LoopProbe(f"dpx/throughput/{row.name}", arch, "\n" + k.render(), {n: entry}, {n: n},
                     unit=row.unit, inputs={n: regs.inputs}, out_slots={n: n_res},
                     guarded=False, row=row)


def mapping_probes(row: DpxRow, arch: str) -> list[Probe]:
    """What the static test checks for the row on `arch`: its dependent chain and, on
    sm_90 where it has one, its throughput loop."""
    out: list[Probe] = [latency_probe(row, arch)]
    if row.loop and archs.number(arch) == HARDWARE_ARCH:
        out.append(loop_probe(row, arch))
    return out


def check_mapping(row: DpxRow, arch: str, verdicts: list[Verdict]) -> list[str]:
    """The mapping the row claims: on sm_90 one DPX instruction per call (exact) or the
    select sequence; before sm_90 an emulation without any DPX opcode."""
    unit = dict(verdicts[0].unit)
    dpx = sorted(op for op in unit if op.startswith(("VIMNMX3", "VIADDMNMX")))
    if archs.number(arch) < HARDWARE_ARCH:
        return [f"{row.intrinsic} on {arch}: DPX opcodes {dpx} in an emulated sequence "
                f"{unit}"] if dpx else []
    if archs.number(arch) == HARDWARE_ARCH and row.unit is not None and \
            verdicts[0].message.split(";")[0] != "exact":
        return [f"{row.intrinsic} on {arch}: not one {row.unit[0]} per call: {unit}"]
    return []


def module_text(arch: str, probes: list[Probe]) -> str:
    return ptx.header(arch) + "\n".join(p.kernels for p in probes)
