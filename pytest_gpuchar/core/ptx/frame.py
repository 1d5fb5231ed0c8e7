"""The one probe kernel frame, and the register/operand allocator probes build on.

Every kernel the suite launches is a ``Kernel``: a signature, declarations, setup run once,
and, for timed probes, the timed region between two clock reads (optionally behind the
never-taken guard branch, optionally inside the pass loop that runs the region ``iters``
times so the first pass warms the instruction cache). Topics supply only their own lines
(operand loads, the body, result stores); the clock reads, the guard, the pass loop and the
label layout are written here once.

``operand_kernel`` is the standard frame of the instruction probes (README, "Measurement
rules"): operands loaded per thread, stored to a scratch area and drained before the first
clock read, every result stored afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass, field

WIDTH_TYPES = {1: ".pred", 16: ".b16", 32: ".b32", 64: ".b64"}
PREFIX = {1: "p", 16: "h", 32: "r", 64: "x"}
SLOT_BYTES = 8


@dataclass(frozen=True)
class Clock:
    """The clock a timed region reads: register width and names of the two readings."""
    t0: str = "%t0"
    t1: str = "%t1"
    dt: str = "%dt"
    width: int = 64

    @property
    def source(self) -> str:
        return "%clock64" if self.width == 64 else "%clock"


@dataclass
class Kernel:
    """One kernel on the shared frame. ``render`` lays it out as::

        preamble (module-level lines: .shared/.const arrays)
        .visible .entry <entry>(<params>)
        directives (.maxntid, ...)
        {
        decls; setup
        [$PASS: loop head]                      passes
        operands; sync
        t0 = clock; [guard: branch over body]  clock is not None
        body
        [$BODY_END:]                            end_label (default: guard)
        t1 = clock (or t0 when exit_read is off: entry stamps)
        after
        [pass loop tail: iterate while %it < %iters, stepping by min(dt, 1)]
        ret;
        }

    ``clock=None`` is an untimed kernel (numerics, layouts): setup, body and after only.
    """
    entry: str
    params: list[str]
    decls: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    operands: list[str] = field(default_factory=list)
    sync: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    clock: Clock | None = field(default_factory=Clock)
    guard: bool = True
    end_label: bool | None = None
    passes: bool = False
    exit_read: bool = True
    directives: list[str] = field(default_factory=list)
    preamble: list[str] = field(default_factory=list)

    def timed(self) -> list[str]:
        c = self.clock
        w = c.width
        head = [f"mov.u{w} {c.t0}, {c.source};"]
        if self.guard:
            head += [f"setp.eq.u{w} %never, {c.t0}, -1;", "@%never bra $BODY_END;"]
        label = self.guard if self.end_label is None else self.end_label
        end = f"mov.u{w} {c.t1}, {c.source};" if self.exit_read else f"mov.u{w} {c.t1}, {c.t0};"
        return [*self.operands, *self.sync, *head, *self.body,
                *(["$BODY_END:"] if label else []), end, *self.after]

    def pass_tail(self) -> list[str]:
        """Iterate the pass loop; the step is min(dt, 1), which depends on the second clock
        read (dt >= 1 always, unknown to the compiler), so no loop-control instruction can be
        scheduled into the timed region."""
        c = self.clock
        w = c.width
        step = f"cvt.u32.u{w} %step, {c.dt};" if w == 64 else f"mov.u32 %step, {c.dt};"
        return [f"min.u{w} {c.dt}, {c.dt}, 1;", step, "add.u32 %it, %it, %step;",
                "setp.lt.u32 %again, %it, %iters;", "@%again bra $PASS;"]

    def render(self) -> str:
        if self.clock is None:
            inner = [*self.setup, *self.body, *self.after]
        elif self.passes:
            inner = [*self.setup, "mov.u32 %it, 0;", "$PASS:", *self.timed(),
                     *self.pass_tail()]
        else:
            inner = [*self.setup, *self.timed()]
        lines = [*self.preamble, f".visible .entry {self.entry}({', '.join(self.params)})",
                 *self.directives, "{", *self.decls, *inner, "ret;", "}"]
        return "\n".join(lines) + "\n"


# --- registers and per-thread operands ------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """One role of an instruction template: its register width and how inputs are drawn."""
    width: int            # 1 (predicate), 16, 32, 64
    kind: str = "int"     # value generator name, see values.py


@dataclass
class InputSlot:
    slot: int
    width: int
    kind: str


class Registers:
    """Register allocator, per-thread input loads (one 8-byte `in` slot per operand) and
    their declarations, for one kernel."""

    def __init__(self) -> None:
        self.decls: dict[int, int] = {}   # width -> count
        self.loads: list[str] = []
        self.inputs: list[InputSlot] = []
        self.loaded: list[str] = []       # register holding each input slot (32-bit for preds)

    def reg(self, width: int) -> str:
        n = self.decls.get(width, 0)
        self.decls[width] = n + 1
        return f"%{PREFIX[width]}{n}"

    def load(self, width: int, kind: str) -> str:
        """A register loaded from the next input slot (a value the compiler cannot know)."""
        slot = len(self.inputs)
        self.inputs.append(InputSlot(slot, width, kind))
        if width == 1:
            tmp = self.reg(32)
            r = self.reg(1)
            self.loads.append(f"ld.global.b32 {tmp}, [%in+{slot * SLOT_BYTES}];")
            self.loads.append(f"setp.ne.b32 {r}, {tmp}, 0;")
            self.loaded.append(tmp)
            return r
        r = self.reg(width)
        self.loads.append(f"ld.global.b{width} {r}, [%in+{slot * SLOT_BYTES}];")
        self.loaded.append(r)
        return r

    def declarations(self) -> list[str]:
        return [f".reg {WIDTH_TYPES[w]} %{PREFIX[w]}<{n}>;" for w, n in sorted(self.decls.items())]


def out_bytes(n_results: int, n_inputs: int) -> int:
    """Bytes one thread's `out` region needs: cycles, results, then the settle scratch."""
    return SLOT_BYTES * (1 + n_results) + max(1, n_inputs) * SLOT_BYTES


def operand_kernel(name: str, regs: Registers, body: list[str], results: list[tuple[str, int]],
                   *, clock64: bool = True, guard: bool = True) -> str:
    """The instruction probes' kernel: parameters (out, in, iters); each pass loads the
    operands (not loop-invariant as far as the compiler knows: the loop stores to memory that
    may alias), stores them to a scratch area and waits for those stores (membar.cta: their
    data reads would compete with the body for register ports), reads the clock, runs the
    body behind the guard, reads the clock again and stores the difference and every result.
    Launched with iters = 2: the first pass warms the instruction cache, the stored figure is
    the last pass's. ``guard=False`` leaves the body in the clock's basic block (Table I's
    few-instruction regions, as the paper timed them)."""
    tw = 64 if clock64 else 32
    t0, t1, dt = regs.reg(tw), regs.reg(tw), regs.reg(tw)
    stores = []
    off = SLOT_BYTES
    for reg, width in results:
        if width == 1:
            tmp = regs.reg(32)
            stores.append(f"selp.b32 {tmp}, 1, 0, {reg};")
            reg, width = tmp, 32
        stores.append(f"st.global.b{width} [%out+{off}], {reg};")
        off += SLOT_BYTES
    settle = [f"st.global.b{32 if s.width == 1 else s.width} "
              f"[%scratch+{s.slot * SLOT_BYTES}], {regs.loaded[s.slot]};" for s in regs.inputs]
    n_in = max(1, len(regs.inputs)) * SLOT_BYTES
    return Kernel(
        entry=name,
        params=[".param .u64 out_param", ".param .u64 in_param", ".param .u32 iters_param"],
        decls=[".reg .b64 %out, %in, %scratch, %toff;",
               ".reg .b32 %tidx, %iters, %it, %step;",
               ".reg .pred %never, %again;", *regs.declarations()],
        setup=["ld.param.u64 %out, [out_param];", "ld.param.u64 %in, [in_param];",
               "ld.param.u32 %iters, [iters_param];", "mov.u32 %tidx, %tid.x;",
               f"mul.wide.u32 %toff, %tidx, {n_in};", "add.u64 %in, %in, %toff;",
               f"mul.wide.u32 %toff, %tidx, {off + n_in};", "add.u64 %out, %out, %toff;",
               f"add.u64 %scratch, %out, {off};"],
        operands=[*regs.loads, *settle], sync=["membar.cta;"], body=body,
        after=[f"sub.s{tw} {dt}, {t1}, {t0};", f"st.global.b{tw} [%out], {dt};", *stores],
        clock=Clock(t0, t1, dt, tw), guard=guard, end_label=True, passes=True,
    ).render()


# --- the whole-GPU counted loop ----------------------------------------------------------------

LOOP_PARAMS = [".param .u64 rec_param", ".param .u64 res_param", ".param .u64 in_param",
               ".param .u32 iters_param"]


def loop_kernel(entry: str, regs: Registers, body: list[str], stores: list[str], *, label: str,
                block: int, blocks_per_sm: int, res_bytes: int, rec_words: int,
                preamble: list[str] | None = None, b32: tuple[str, ...] = (),
                setup: list[str] | None = None) -> Kernel:
    """The throughput kernel of the whole GPU: `body` once per iteration of a counted loop
    ($`label`, trip count the iters parameter, not unrolled) between two %clock64 reads;
    parameters rec (per warp: start, end, %smid, u64 each, `rec_words` apart), res (each
    thread's results, `res_bytes` apart, written by `stores` after the loop), in (the
    operands, one block of input slots per lane: not uniform, not foldable), iters. `block`
    threads a block and `blocks_per_sm` blocks an SM (.maxntid, .minnctapersm); `b32` names
    more 32-bit registers the `setup` lines (after the frame's) use."""
    n_in = max(1, len(regs.inputs)) * SLOT_BYTES
    return Kernel(
        entry=entry, params=LOOP_PARAMS, preamble=preamble or [],
        directives=[f".maxntid {block}, 1, 1", f".minnctapersm {blocks_per_sm}"],
        decls=[".reg .b64 %rec, %res, %in, %toff, %t0, %t1, %smid64;",
               ".reg .b32 " + ", ".join(("%tidx", "%nt", "%cta", "%gtid", "%lane", "%warp",
                                         "%iters", "%it", "%sm", *b32)) + ";",
               ".reg .pred %again, %lead;", *regs.declarations()],
        setup=["ld.param.u64 %rec, [rec_param];", "ld.param.u64 %res, [res_param];",
               "ld.param.u64 %in, [in_param];", "ld.param.u32 %iters, [iters_param];",
               "mov.u32 %tidx, %tid.x;", "mov.u32 %nt, %ntid.x;", "mov.u32 %cta, %ctaid.x;",
               "mad.lo.u32 %gtid, %cta, %nt, %tidx;", "and.b32 %lane, %tidx, 31;",
               f"mul.wide.u32 %toff, %lane, {n_in};", "add.u64 %in, %in, %toff;",
               f"mul.wide.u32 %toff, %gtid, {res_bytes};", "add.u64 %res, %res, %toff;",
               *(setup or [])],
        operands=regs.loads,
        body=["mov.u32 %it, 0;", f"${label}:", '.pragma "nounroll";', *body,
              "add.u32 %it, %it, 1;", "setp.lt.u32 %again, %it, %iters;",
              f"@%again bra ${label};"],
        after=[*stores, "setp.eq.u32 %lead, %lane, 0;", "shr.u32 %warp, %gtid, 5;",
               f"mul.wide.u32 %toff, %warp, {rec_words * 8};", "add.u64 %rec, %rec, %toff;",
               "mov.u32 %sm, %smid;", "cvt.u64.u32 %smid64, %sm;",
               "@%lead st.global.u64 [%rec], %t0;", "@%lead st.global.u64 [%rec+8], %t1;",
               "@%lead st.global.u64 [%rec+16], %smid64;"],
        clock=Clock(), guard=False)
