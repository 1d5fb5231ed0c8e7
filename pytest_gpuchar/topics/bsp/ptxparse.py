"""PTX instructions of a kernel body as data: opcode, predicate guard, the registers each
writes and reads, branch targets and memory operands. Enough for the Many-BSP analysis of
bodies.py (straight PTX, one instruction per line); not a general PTX parser."""
from __future__ import annotations

import re
from dataclasses import dataclass

_REG = re.compile(r"%(?:rd|fd|rs|r|f|p)\d+\b")
_LABEL = re.compile(r"^([A-Za-z_$][\w$]*):$")
_ADDR = re.compile(r"\[\s*(%\w+|[A-Za-z_$][\w$]*)\s*(?:\+\s*(-?\d+))?\s*\]")
NO_DEST = ("st", "bra", "bar", "ret", "exit")


@dataclass(frozen=True)
class PtxInstr:
    """One PTX instruction: ``index`` counts instructions from 1 (labels do not count), as
    the report numbers its tables."""
    index: int
    text: str
    guard: str           # "" or the predicate register of "@%p1" / "@!%p1"
    opcode: str          # "fma.rn.f32", "ld.global.f32", "bra.uni", ...
    dests: tuple[str, ...]
    srcs: tuple[str, ...]
    target: str = ""     # branch target label

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")

    @property
    def base(self) -> str:
        return self.parts[0]

    @property
    def space(self) -> str:
        """State space of a ld/st ("global", "shared", "param"), else ""."""
        if self.base not in ("ld", "st"):
            return ""
        return next((p for p in self.parts[1:] if p in ("global", "shared", "param", "local",
                                                         "const")), "generic")

    @property
    def is_branch(self) -> bool:
        return self.base == "bra"

    @property
    def is_barrier(self) -> bool:
        return self.base == "bar"

    @property
    def ptype(self) -> str:
        """The last type suffix: "f32", "f64", "s32", "u64", "pred", "b32", ..."""
        for p in reversed(self.parts[1:]):
            if re.fullmatch(r"[sufb]\d+|pred|f16x2", p):
                return p
        return ""

    def address(self) -> tuple[str, int] | None:
        """(base register or symbol, byte offset) of a ld/st memory operand."""
        m = _ADDR.search(self.text)
        return (m.group(1), int(m.group(2) or 0)) if m else None


@dataclass(frozen=True)
class PtxBody:
    """A kernel body: its instructions and, per label, the index of the instruction that
    follows it."""
    instrs: tuple[PtxInstr, ...]
    labels: dict

    def __getitem__(self, index: int) -> PtxInstr:
        return self.instrs[index - 1]

    def __len__(self) -> int:
        return len(self.instrs)

    def loops(self) -> list[tuple[int, int]]:
        """(first, last) instruction of each loop: a branch back to a label before it."""
        return [(self.labels[i.target], i.index) for i in self.instrs
                if i.is_branch and i.target in self.labels and self.labels[i.target] <= i.index]

    def count(self, opcode_prefix: str) -> int:
        return sum(1 for i in self.instrs if i.opcode.startswith(opcode_prefix))


def parse_instr(index: int, line: str) -> PtxInstr:
    text = line.strip().rstrip(";").strip()
    guard = ""
    if text.startswith("@"):
        g, _, text = text.partition(" ")
        guard = g.lstrip("@!")
        text = text.strip()
    opcode, _, ops = text.partition(" ")
    operands = [o.strip() for o in ops.split(",")] if ops.strip() else []
    base = opcode.split(".")[0]
    target = operands[0] if base == "bra" and operands else ""
    if base in NO_DEST or not operands:
        dests, src_ops = (), operands
    else:
        dests, src_ops = tuple(_REG.findall(operands[0])), operands[1:]
    srcs = [r for o in src_ops for r in _REG.findall(o)] + ([guard] if guard else [])
    return PtxInstr(index, line.strip(), guard, opcode, dests, tuple(srcs), target)


def parse(lines: list[str]) -> PtxBody:
    """A body's lines (instructions and labels, one per line; // comments allowed)."""
    instrs, labels = [], {}
    for raw in lines:
        line = raw.split("//")[0].strip()
        if not line:
            continue
        m = _LABEL.match(line)
        if m:
            labels[m.group(1)] = len(instrs) + 1
            continue
        instrs.append(parse_instr(len(instrs) + 1, line))
    return PtxBody(tuple(instrs), labels)


def register_decls(lines: list[str]) -> list[str]:
    """.reg declarations for every numbered register the lines use (%r<n> etc.)."""
    kinds = {"rd": ".b64", "fd": ".f64", "rs": ".b16", "r": ".b32", "f": ".f32", "p": ".pred"}
    top: dict[str, int] = {}
    for line in lines:
        for reg in _REG.findall(line.split("//")[0]):
            m = re.fullmatch(r"%([a-z]+)(\d+)", reg)
            top[m.group(1)] = max(top.get(m.group(1), 0), int(m.group(2)))
    return [f".reg {kinds[k]} %{k}<{top[k] + 1}>;" for k in sorted(top)]
