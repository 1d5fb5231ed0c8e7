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
from dataclasses import dataclass, field

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
            return r
        r = self.reg(width)
        self.loads.append(f"ld.global.b{width} {r}, [%in+{slot * SLOT_BYTES}];")
        return r

    def declarations(self) -> list[str]:
        return [f".reg {WIDTH_TYPES[w]} %{ {1: 'p', 16: 'h', 32: 'r', 64: 'x'}[w] }<{n}>;"
                for w, n in sorted(self.decls.items())]


def header(arch: str, version: str | None = None) -> str:
    return (f".version {version or archs.ptx_isa_version(arch)}\n"
            f".target {archs.ptx_target(arch)}\n.address_size 64\n")


def kernel(name: str, frame: Frame, body: list[str], results: list[tuple[str, int]],
           *, clock64: bool = True) -> str:
    """One timed probe kernel: loads, clock, body, clock, stores."""
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
    dt_store = (f"st.global.b64 [%out], {dt};" if clock64 else
                f"st.global.b32 [%out], {dt};")
    lines = [
        f".visible .entry {name}(.param .u64 out_param, .param .u64 in_param)",
        "{",
        ".reg .b64 %out, %in, %toff;",
        ".reg .b32 %tidx;",
        *frame.declarations(),
        "ld.param.u64 %out, [out_param];",
        "ld.param.u64 %in, [in_param];",
        "mov.u32 %tidx, %tid.x;",
        f"mul.wide.u32 %toff, %tidx, {max(1, len(frame.inputs)) * SLOT_BYTES};",
        "add.u64 %in, %in, %toff;",
        f"mul.wide.u32 %toff, %tidx, {off};",
        "add.u64 %out, %out, %toff;",
        *frame.loads,
        f"mov.u{tw} {t0}, {clk};",
        *body,
        f"mov.u{tw} {t1}, {clk};",
        f"sub.s{tw} {dt}, {t1}, {t0};",
        dt_store,
        *stores,
        "ret;",
        "}",
    ]
    return "\n".join(lines) + "\n"


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


def _glue_lines(t: Template, frame: Frame, d: str, a: str) -> list[str]:
    if not t.glue:
        return []
    fields = {"d": d, "a": a}
    for f in set(_FIELD_RE.findall(t.glue)) - {"d", "a"}:
        fields[f] = frame.reg(t.operands[f].width)
    return [_FIELD_RE.sub(lambda m: fields[m.group(1)], t.glue)]


CHAIN_STYLES = ("acc", "self", "fib", "distinct")


def dependent_chain(t: Template, n: int, frame: Frame, style: str = "acc",
                    pool: int = 8) -> Body:
    """N ops, each consuming the previous op's result as {a}.

    Styles say where the other sources come from:
      acc      - fixed loaded values (x = op(x, s, t))
      self     - the chain value itself (x = op(x, x, x))
      fib      - two chain registers taking turns (x = op(x, y); y = op(y, x))
      distinct - a different loaded value per position, cycling over `pool` registers
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
             for f in src if f != "a"} if style in ("acc", "fib") else {}
    pools = {f: [frame.load(t.operands[f].width, t.operands[f].kind) for _ in range(pool)]
             for f in src if f != "a"} if style == "distinct" else {}
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
            elif style == "distinct":
                regs[f] = pools[f][(k + src.index(f)) % pool]
            else:
                regs[f] = fixed[f]
        d = cur if same else frame.reg(d_op.width)
        regs["d"] = d
        lines.append(t.render(regs))
        if not same:
            lines += _glue_lines(t, frame, d, cur)
        if style == "fib":
            cur, other = other, cur
    results = [(x, a_op.width)] + ([(y, a_op.width)] if y else [])
    return Body(lines, results)


def independent_ops(t: Template, n: int, frame: Frame) -> Body:
    """N ops with no dependence between them: each reads a distinct combination of loaded
    operands (one pool of registers per source field, so no two ops share an operand tuple
    and nothing can be merged) and every result is stored."""
    src = t.sources
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


def empty_body() -> Body:
    return Body([], [])
