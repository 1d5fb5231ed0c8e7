"""Instruction templates and the bodies built from them: dependent chains (latency) and
independent operations (cycles per instruction of an independent sequence)."""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from .frame import Operand, Registers

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


@dataclass
class Body:
    """PTX lines of a timed body plus the results to store after the region."""
    lines: list[str]
    results: list[tuple[str, int]]   # (register, width)


def _glue_lines(t: Template, regs: Registers, d: str, a: str, *, load: bool = False) -> list[str]:
    """The glue after one op; its extra fields are fresh registers, or (``load``) values
    loaded per position (e.g. the high half that widens a 32-bit result to the next 64-bit
    source: a value the compiler cannot know, so the widened value is a real operand)."""
    if not t.glue:
        return []
    fields = {"d": d, "a": a}
    for f in sorted(set(_FIELD_RE.findall(t.glue)) - {"d", "a"}):
        o = t.operands[f]
        fields[f] = regs.load(o.width, o.kind) if load else regs.reg(o.width)
    return [_FIELD_RE.sub(lambda m: fields[m.group(1)], t.glue)]


@dataclass(frozen=True)
class ChainStyle:
    """Where a dependent chain's other sources come from and which registers it writes.

    sources: "fixed" (loaded once), "pool" (a different loaded value per position, cycling
    over a pool), "each" (a different loaded value for every op: no two ops share one),
    "self" (the chain value itself where the widths allow), "fib" (two chain registers taking
    turns as {a} and {b}).
    fresh: every op writes a fresh register (no chain register is written twice).
    keep: "all" stores every intermediate result (each value has a second use, so the
    compiler can neither merge two ops nor drop one), "last" only the last, "none".
    glue: "inplace" rewrites the chain register, "fresh" writes a fresh one each time.
    load_glue: the glue's extra fields are loaded per position (widening ops).
    seed: the first source is the low half of a loaded word twice its width (``mov.b32 {x, _},
    w;``, no SASS), a small nonzero value (1..15: a valid divisor or dividend of any 16-bit
    op), so the compiler must zero-extend it in the region as it zero-extends each 16-bit
    result before the next op (a loaded 16-bit value is known zero-extended, and the first
    op would then differ from the others). The seed is an input (stored before the region
    with every input), not a result: it is not stored again. No glue.
    """
    name: str
    sources: str = "fixed"
    fresh: bool = False
    keep: str = "none"
    glue: str = "inplace"
    load_glue: bool = False
    seed: bool = False
    doc: str = ""


STYLES = {s.name: s for s in (
    ChainStyle("acc", doc="fixed loaded values (x = op(x, s, t))"),
    ChainStyle("self", sources="self", doc="the chain value itself (x = op(x, x, x))"),
    ChainStyle("fib", sources="fib", doc="two chain registers taking turns "
               "(x = op(x, y); y = op(y, x))"),
    ChainStyle("distinct", sources="pool", doc="a different loaded value per position"),
    ChainStyle("keep", sources="pool", fresh=True, keep="all",
               doc="as distinct, every intermediate result stored: no two ops merged "
                   "(two and/or/xor into one LOP3, min(min(x, s), t), ...), none dropped"),
    ChainStyle("widen", load_glue=True,
               doc="as acc, the glue's extra fields loaded per position (popc.b64, clz.b64, "
                   "bfind.u64: 32-bit result, 64-bit source {result, loaded high half})"),
    ChainStyle("fresh", fresh=True, keep="last", glue="fresh",
               doc="as acc, every op (and glue) writes a fresh register, only the last "
                   "result stored: no final copy of a 16-bit result into the loaded register"),
    ChainStyle("keep_fresh", sources="pool", fresh=True, keep="all", glue="fresh",
               doc="as keep, the glue writes a fresh register that becomes the next source"),
    ChainStyle("widen_fresh", fresh=True, keep="last", glue="fresh", load_glue=True,
               doc="as widen, the widened value a fresh register each time"),
    ChainStyle("each", sources="each",
               doc="as acc, every op's other sources loaded for that op alone (nothing made "
                   "from them, a divisor's reciprocal or a product beside a chained addend, "
                   "is common to two ops)"),
    ChainStyle("fresh_seed", fresh=True, keep="last", glue="fresh", seed=True,
               doc="as fresh, the first source the low half of a loaded word: zero-extended "
                   "in the region like every result that feeds the next op (div/rem.u16)"),
)}
CHAIN_STYLES = tuple(STYLES)


def _chain_sources(t: Template, style: ChainStyle, regs: Registers, pool: int):
    """(fixed, pools): the loaded registers of the non-chain source fields."""
    others = [f for f in t.sources if f != "a"]

    def load(f: str) -> str:
        return regs.load(t.operands[f].width, t.operands[f].kind)
    fixed = {f: load(f) for f in others} if style.sources in ("fixed", "fib") else {}
    pools = {f: [load(f) for _ in range(pool)] for f in others} \
        if style.sources in ("pool", "each") else {}
    return fixed, pools


def _op_sources(t: Template, style: ChainStyle, regs: Registers, k: int, cur: str, other,
                fixed: dict, pools: dict, pool: int) -> dict[str, str]:
    src = t.sources
    a_width = t.operands["a"].width
    out: dict[str, str] = {"a": cur}
    for f in src:
        if f == "a":
            continue
        if style.sources == "self":
            # (the load is made even when the field is already fixed: kept, it decides the
            # input slots and so the probes' PTX)
            out[f] = cur if t.operands[f].width == a_width else fixed.setdefault(
                f, regs.load(t.operands[f].width, t.operands[f].kind))
        elif style.sources == "fib" and f == "b":
            out[f] = other
        elif style.sources == "pool":
            out[f] = pools[f][(k + src.index(f)) % pool]
        elif style.sources == "each":
            out[f] = pools[f][k]
        else:
            out[f] = fixed[f]
    return out


def dependent_chain(t: Template, n: int, regs: Registers, style: str = "acc",
                    pool: int = 8) -> Body:
    """N ops, each consuming the previous op's result as {a}; `style` (STYLES) says where the
    other sources come from and which registers the chain writes."""
    if style not in STYLES:
        raise ValueError(f"unknown chain style {style!r}; one of {CHAIN_STYLES}")
    st = STYLES[style]
    a_op, d_op = t.operands["a"], t.operands["d"]
    same = not t.glue and d_op.width == a_op.width
    kept: list[tuple[str, int]] = []
    lines: list[str] = []
    if st.seed:
        if t.glue:
            raise ValueError(f"chain style {style!r} takes a template without glue")
        seed = regs.load(2 * a_op.width, "small")
        x, rest = regs.reg(a_op.width), regs.reg(a_op.width)
        lines.append(f"mov.b{2 * a_op.width} {{{x}, {rest}}}, {seed};")
    else:
        x = regs.load(a_op.width, a_op.kind)
    y = regs.load(a_op.width, t.operands.get("b", a_op).kind) if st.sources == "fib" else None
    if st.sources == "each":
        pool = n
    fixed, pools = _chain_sources(t, st, regs, pool)
    cur, other = x, y
    for k in range(n):
        ops = _op_sources(t, st, regs, k, cur, other, fixed, pools, pool)
        d = cur if same and not st.fresh else regs.reg(d_op.width)
        ops["d"] = d
        lines.append(t.render(ops))
        if st.keep == "all":
            kept.append((d, d_op.width))
        if st.glue == "fresh":
            if t.glue:
                nxt = regs.reg(a_op.width)
                lines += _glue_lines(t, regs, d, nxt, load=st.load_glue)
                cur = nxt
            else:
                cur = d
        elif st.fresh:
            if t.glue:
                lines += _glue_lines(t, regs, d, cur)
            else:
                cur = d
        elif not same:
            lines += _glue_lines(t, regs, d, cur, load=st.load_glue)
        if st.keep == "last" and k == n - 1:
            kept.append((d, d_op.width))
        if st.sources == "fib":
            cur, other = other, cur
    results = ([] if st.seed else [(x, a_op.width)]) + ([(y, a_op.width)] if y else []) + kept
    return Body(lines, results)


def independent_ops(t: Template, n: int, regs: Registers, *, unique: bool = False,
                    shared: tuple[str, ...] = ()) -> Body:
    """N ops with no dependence between them: each reads a distinct combination of loaded
    operands (one pool of registers per source field, so no two ops share an operand tuple
    and nothing can be merged) and every result is stored. With `unique`, no two ops share
    any operand register at all, except the `shared` fields: one loaded register that every
    op reads (e.g. setp's predicate input: one live predicate instead of one per op)."""
    src = t.sources
    if unique:
        lines, results = [], []
        common = {f: regs.load(t.operands[f].width, t.operands[f].kind) for f in shared}
        for _ in range(n):
            ops = {f: common[f] if f in common else
                   regs.load(t.operands[f].width, t.operands[f].kind) for f in src}
            ops["d"] = regs.reg(t.operands["d"].width)
            lines.append(t.render(ops))
            results.append((ops["d"], t.operands["d"].width))
        return Body(lines, results)
    per_field = 1
    while per_field ** len(src) < n:
        per_field += 1
    pools = {f: [regs.load(t.operands[f].width, t.operands[f].kind) for _ in range(per_field)]
             for f in src}
    lines, results = [], []
    for combo in itertools.islice(itertools.product(range(per_field), repeat=len(src)), n):
        ops = {f: pools[f][i] for f, i in zip(src, combo)}
        d = regs.reg(t.operands["d"].width)
        ops["d"] = d
        lines.append(t.render(ops))
        results.append((d, t.operands["d"].width))
    return Body(lines, results)


def independent_pairs(t: Template, n: int, regs: Registers, kind: str) -> Body:
    """N independent 16-bit ops (N even) whose operands come in pairs: each source of ops 2k
    and 2k+1 is the low and the high half of one loaded 32-bit word (``mov.b32 {lo, hi}, w;``:
    register halves, no SASS), and the two results are one 32-bit word again, stored. Two
    independent f16 ops are what ptxas packs into one f16x2 instruction (HADD2, HMUL2,
    HFMA2, HMNMX2): with their operands paired already, the region is N/2 packed
    instructions and nothing else (no PRMT packing halves that were loaded apart). `kind`:
    the value kind of the 32-bit words (both halves meaningful, e.g. "neg2.f16x2")."""
    if n % 2:
        raise ValueError(f"independent_pairs needs an even number of ops, got {n}")
    lines: list[str] = []
    results: list[tuple[str, int]] = []
    for _ in range(n // 2):
        halves: dict[str, tuple[str, str]] = {}
        for f in t.sources:
            w = regs.load(32, kind)
            lo, hi = regs.reg(16), regs.reg(16)
            lines.append(f"mov.b32 {{{lo}, {hi}}}, {w};")
            halves[f] = (lo, hi)
        ds = []
        for k in (0, 1):
            ops = {f: halves[f][k] for f in t.sources}
            ops["d"] = regs.reg(t.operands["d"].width)
            lines.append(t.render(ops))
            ds.append(ops["d"])
        word = regs.reg(32)
        lines.append(f"mov.b32 {word}, {{{ds[0]}, {ds[1]}}};")
        results.append((word, 32))
    return Body(lines, results)
