"""PTX builders: probes are PTX text assembled from small named pieces.

Every probe kernel has the same frame (``kernel``): two parameters (``out``, ``in``), operands
loaded per thread from ``in`` (the address depends on %tid.x, so the compiler can neither fold
the values nor move them to the uniform datapath), two 64-bit ``%clock64`` reads around the
body, the cycle count stored to ``out[0]`` and every result stored after it, so nothing the
body computes is dead.

The body builders (``dependent_chain``, ``independent_ops``) turn one PTX instruction template
into N instances: a dependent chain (each op consumes the previous result: latency) or N
independent ops over distinct operand tuples (cycles per instruction of an independent
sequence: what Table V of the Ampere paper reports).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from . import archs

WIDTH_TYPES = {1: ".pred", 16: ".b16", 32: ".b32", 64: ".b64"}
SLOT_BYTES = 8


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


@dataclass
class Body:
    """PTX lines of a timed body plus what it needs: operand pools, results to store."""
    lines: list[str]
    results: list[tuple[str, int]]   # (register, width) stored after the region


class Frame:
    """Register allocator, input loads and result stores of one kernel."""

    def __init__(self) -> None:
        self.decls: dict[int, int] = {}   # width -> count
        self.loads: list[str] = []
        self.inputs: list[InputSlot] = []
        self.loaded: list[str] = []       # register holding each input slot (32-bit for preds)

    def reg(self, width: int) -> str:
        n = self.decls.get(width, 0)
        self.decls[width] = n + 1
        prefix = {1: "p", 16: "h", 32: "r", 64: "x"}[width]
        return f"%{prefix}{n}"

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
        return [f".reg {WIDTH_TYPES[w]} %{ {1: 'p', 16: 'h', 32: 'r', 64: 'x'}[w] }<{n}>;"
                for w, n in sorted(self.decls.items())]


def header(arch: str, version: str | None = None) -> str:
    return (f".version {version or archs.ptx_isa_version(arch)}\n"
            f".target {archs.ptx_target(arch)}\n.address_size 64\n")


def kernel(name: str, frame: Frame, body: list[str], results: list[tuple[str, int]],
           *, clock64: bool = True, guard: bool = True) -> str:
    """One timed probe kernel.

    Layout: a loop run `iters` times (a kernel parameter; launched with 2): each pass loads the
    operands (not loop-invariant as far as the compiler knows: the loop stores to memory that
    may alias), stores them to a scratch area so they have arrived before the clock starts
    (and waits for those stores with a membar),
    reads the clock, branches over the body on a predicate computed from that clock value and
    never true in practice (the clock equal to 2^64-1), so the body is its own basic block that
    no body instruction can leave and the compare cannot be hoisted above the clock read,
    reads the clock again and stores the difference and every result. The first pass warms the
    instruction cache; the stored figure is the last pass's. ``guard=False`` leaves the body in
    the clock's basic block (Table I's few-instruction regions, as the paper timed them: the
    guard's own cycles would dominate a 1-instruction region).
    """
    clk = "%clock64" if clock64 else "%clock"
    tw = 64 if clock64 else 32
    t0, t1, dt = frame.reg(tw), frame.reg(tw), frame.reg(tw)
    stores = []
    off = 8
    for reg, width in results:
        if width == 1:
            tmp = frame.reg(32)
            stores.append(f"selp.b32 {tmp}, 1, 0, {reg};")
            reg, width = tmp, 32
        stores.append(f"st.global.b{width} [%out+{off}], {reg};")
        off += SLOT_BYTES
    settle = []
    for slot in frame.inputs:
        width = 32 if slot.width == 1 else slot.width
        settle.append(f"st.global.b{width} [%scratch+{slot.slot * SLOT_BYTES}], "
                      f"{frame.loaded[slot.slot]};")
    dt_store = (f"st.global.b64 [%out], {dt};" if clock64 else
                f"st.global.b32 [%out], {dt};")
    n_in = max(1, len(frame.inputs)) * SLOT_BYTES
    lines = [
        f".visible .entry {name}(.param .u64 out_param, .param .u64 in_param, "
        f".param .u32 iters_param)",
        "{",
        ".reg .b64 %out, %in, %scratch, %toff;",
        ".reg .b32 %tidx, %iters, %it, %step;",
        ".reg .pred %never, %again;",
        *frame.declarations(),
        "ld.param.u64 %out, [out_param];",
        "ld.param.u64 %in, [in_param];",
        "ld.param.u32 %iters, [iters_param];",
        "mov.u32 %tidx, %tid.x;",
        f"mul.wide.u32 %toff, %tidx, {n_in};",
        "add.u64 %in, %in, %toff;",
        f"mul.wide.u32 %toff, %tidx, {off + n_in};",
        "add.u64 %out, %out, %toff;",
        f"add.u64 %scratch, %out, {off};",
        "mov.u32 %it, 0;",
        "$PASS:",
        *frame.loads,
        *settle,
        # let the settle stores drain: their data reads compete with the body for register
        # ports (seen on H200: independent ops ran slower early in the region, the more
        # operands there were)
        "membar.cta;",
        f"mov.u{tw} {t0}, {clk};",
        *([f"setp.eq.u{tw} %never, {t0}, -1;", "@%never bra $BODY_END;"] if guard else []),
        *body,
        "$BODY_END:",
        f"mov.u{tw} {t1}, {clk};",
        f"sub.s{tw} {dt}, {t1}, {t0};",
        dt_store,
        *stores,
        # the increment depends on the second clock read (dt >= 1 always, unknown to the
        # compiler), so no loop-control instruction can be scheduled into the timed region
        f"min.u{tw} {dt}, {dt}, 1;",
        f"cvt.u32.u{tw} %step, {dt};" if tw == 64 else f"mov.u32 %step, {dt};",
        "add.u32 %it, %it, %step;",
        "setp.lt.u32 %again, %it, %iters;",
        "@%again bra $PASS;",
        "ret;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def out_bytes(n_results: int, n_inputs: int) -> int:
    """Bytes one thread's `out` region needs: cycles, results, then the settle scratch."""
    return SLOT_BYTES * (1 + n_results) + max(1, n_inputs) * SLOT_BYTES


def module(arch: str, kernels: list[str], *, version: str | None = None) -> str:
    return header(arch, version) + "\n" + "\n".join(kernels)


# --- instruction templates --------------------------------------------------------------

_FIELD_RE = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Template:
    """A PTX instruction (or short fixed sequence) with named register fields.

    ``text`` uses {d} for the result and {a}, {b}, {c}... for sources; ``operands`` gives each
    field's width and value kind. ``glue`` (optional) turns {d} into the next op's {a} without
    any SASS (register reinterpretation, e.g. ``mov.b64 {{{a}, {junk}}}, {d};``) where the
    result and the source differ in width or type.
    """
    text: str
    operands: dict[str, Operand]
    glue: str = ""

    @property
    def sources(self) -> list[str]:
        return [f for f in dict.fromkeys(_FIELD_RE.findall(self.text)) if f != "d"]

    def render(self, regs: dict[str, str]) -> str:
        return _FIELD_RE.sub(lambda m: regs[m.group(1)], self.text)


def _glue_lines(t: Template, frame: Frame, d: str, a: str, *, load: bool = False) -> list[str]:
    """The glue after one op; its extra fields are fresh registers, or (``load``) values
    loaded per position (e.g. the high half that widens a 32-bit result to the next 64-bit
    source: a value the compiler cannot know, so the widened value is a real operand)."""
    if not t.glue:
        return []
    fields = {"d": d, "a": a}
    for f in sorted(set(_FIELD_RE.findall(t.glue)) - {"d", "a"}):
        o = t.operands[f]
        fields[f] = frame.load(o.width, o.kind) if load else frame.reg(o.width)
    return [_FIELD_RE.sub(lambda m: fields[m.group(1)], t.glue)]


CHAIN_STYLES = ("acc", "self", "fib", "distinct", "keep", "widen", "fresh", "keep_fresh", "widen_fresh")


def dependent_chain(t: Template, n: int, frame: Frame, style: str = "acc",
                    pool: int = 8) -> Body:
    """N ops, each consuming the previous op's result as {a}.

    Styles say where the other sources come from:
      acc      - fixed loaded values (x = op(x, s, t))
      self     - the chain value itself (x = op(x, x, x))
      fib      - two chain registers taking turns (x = op(x, y); y = op(y, x))
      distinct - a different loaded value per position, cycling over `pool` registers
      keep     - as distinct, but every op writes a fresh register and every intermediate
                 result is stored after the region: each value has a second use, so the
                 compiler cannot merge two ops into one (two and/or/xor into one LOP3,
                 min(min(x, s), t) ...) or drop an op whose result is otherwise unused
      widen    - as acc, but the glue's extra fields are loaded per position instead of
                 left undefined: for ops whose result is narrower than their source
                 (popc.b64, clz.b64, bfind.u64: 32-bit result, 64-bit source), the next
                 source is {result, loaded high half}
      fresh    - as acc, but every op (and its glue, if any) writes a fresh register and
                 only the last result is stored: no chain register is written twice, so
                 the compiler needs no final copy of a 16-bit result back into the loaded
                 register (a PRMT / XMAD.PSL.CLO half-insert after the chain)
      keep_fresh - as keep, but the glue also writes a fresh register that becomes the next
                 source (keep's glue rewrites the loaded register, which is stored: the
                 last glue then survives as a move or half-insert after the chain)
      widen_fresh - as widen, but the widened value is a fresh register each time (widen
                 rewrites the loaded source, which is stored: a move after the chain)
    """
    if style not in CHAIN_STYLES:
        raise ValueError(f"unknown chain style {style!r}; one of {CHAIN_STYLES}")
    src = t.sources
    a_op = t.operands["a"]
    d_op = t.operands["d"]
    same = not t.glue and d_op.width == a_op.width
    x = frame.load(a_op.width, a_op.kind)
    y = frame.load(a_op.width, t.operands.get("b", a_op).kind) if style == "fib" else None
    fixed = {f: frame.load(t.operands[f].width, t.operands[f].kind)
             for f in src if f != "a"} if style in ("acc", "fib", "widen", "fresh", "widen_fresh") else {}
    pools = {f: [frame.load(t.operands[f].width, t.operands[f].kind) for _ in range(pool)]
             for f in src if f != "a"} if style in ("distinct", "keep", "keep_fresh") else {}
    kept: list[tuple[str, int]] = []
    lines: list[str] = []
    cur, other = x, y
    for k in range(n):
        regs: dict[str, str] = {"a": cur}
        for f in src:
            if f == "a":
                continue
            if style == "self":
                regs[f] = cur if t.operands[f].width == a_op.width else fixed.setdefault(
                    f, frame.load(t.operands[f].width, t.operands[f].kind))
            elif style == "fib" and f == "b":
                regs[f] = other
            elif style in ("distinct", "keep", "keep_fresh"):
                regs[f] = pools[f][(k + src.index(f)) % pool]
            else:
                regs[f] = fixed[f]
        d = cur if same and style not in ("keep", "fresh", "keep_fresh", "widen_fresh") else frame.reg(d_op.width)
        regs["d"] = d
        lines.append(t.render(regs))
        if style in ("fresh", "keep_fresh", "widen_fresh"):
            if style == "keep_fresh":
                kept.append((d, d_op.width))
            if t.glue:
                nxt = frame.reg(a_op.width)
                lines += _glue_lines(t, frame, d, nxt, load=style == "widen_fresh")
                cur = nxt
            else:
                cur = d
            if style in ("fresh", "widen_fresh") and k == n - 1:
                kept.append((d, d_op.width))
        elif style == "keep":
            kept.append((d, d_op.width))
            if t.glue:
                lines += _glue_lines(t, frame, d, cur)
            else:
                cur = d
        elif not same:
            lines += _glue_lines(t, frame, d, cur, load=style == "widen")
        if style == "fib":
            cur, other = other, cur
    results = [(x, a_op.width)] + ([(y, a_op.width)] if y else []) + kept
    return Body(lines, results)


def independent_ops(t: Template, n: int, frame: Frame, *, unique: bool = False) -> Body:
    """N ops with no dependence between them: each reads a distinct combination of loaded
    operands (one pool of registers per source field, so no two ops share an operand tuple
    and nothing can be merged) and every result is stored. With `unique`, no two ops share
    any operand register at all."""
    src = t.sources
    if unique:
        lines, results = [], []
        for _ in range(n):
            regs = {f: frame.load(t.operands[f].width, t.operands[f].kind) for f in src}
            regs["d"] = frame.reg(t.operands["d"].width)
            lines.append(t.render(regs))
            results.append((regs["d"], t.operands["d"].width))
        return Body(lines, results)
    per_field = 1
    while per_field ** len(src) < n:
        per_field += 1
    pools = {f: [frame.load(t.operands[f].width, t.operands[f].kind) for _ in range(per_field)]
             for f in src}
    lines, results = [], []
    for combo in itertools.islice(itertools.product(range(per_field), repeat=len(src)), n):
        regs = {f: pools[f][i] for f, i in zip(src, combo)}
        d = frame.reg(t.operands["d"].width)
        regs["d"] = d
        lines.append(t.render(regs))
        results.append((d, t.operands["d"].width))
    return Body(lines, results)
