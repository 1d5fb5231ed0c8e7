"""SASS: parse nvdisasm output, find the timed region, normalise for snapshots."""
from __future__ import annotations

import contextlib
import functools
import gc
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

_COMMENT_RE = re.compile(r"/\*.*?\*/")
# one line of a listing: an instruction (offset, text), a function header (name) or a branch
# label (name); a line matches at most one of the three
_LINE_RE = re.compile(r"^[ \t]*/\*([0-9a-f]{4,})\*/[ \t](.*)$"
                      r"|^//-+[ \t]+\.text\.(\S+)[ \t]+-+"
                      r"|^[ \t]*(\.L_x_\d+|[A-Za-z_$][\w$.]*):[ \t]*$", re.M)
_BRACKETS = re.compile(r"[][()]")


# Special-register reads that can read the clock: CS2R / S2R into a register, S2UR and (ptxas
# 13.x for sm_120) CS2UR into a uniform register.
CLOCK_READ_OPCODES = ("CS2R", "CS2UR", "S2R", "S2UR")
# Tensor-core instructions by base opcode: mma.sync / wmma (HMMA, IMMA, DMMA, BMMA, QMMA FP8,
# OMMA FP4 on sm_120) and Hopper's wgmma (HGMMA, IGMMA, QGMMA)
TENSOR_OPCODES = ("HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA", "HGMMA", "IGMMA", "QGMMA")


class Instr(NamedTuple):
    """One instruction of a listing (a NamedTuple: a listing holds millions and a tuple is
    made three times faster than a frozen dataclass; compared and hashed by value alike)."""
    offset: int
    pred: str          # "" or "@P0", "@!P1", ...
    opcode: str        # mnemonic with its modifiers: "IMAD.MOV.U32"
    operands: tuple[str, ...]
    text: str          # as printed, without offset and encoding

    @property
    def base(self) -> str:
        """Opcode without modifiers: IMAD.MOV.U32 -> IMAD."""
        return self.opcode.split(".")[0]

    @property
    def is_clock_read(self) -> bool:
        return self.opcode.startswith(CLOCK_READ_OPCODES) and any(
            "SR_CLOCKLO" in o for o in self.operands)

    @property
    def is_conditional_branch(self) -> bool:
        """A BRA guarded by a predicate (@P0 BRA ...) or, on sm_100+, a uniform branch taking
        its predicate as an operand (BRA.U !UP0, ...)."""
        if self.base != "BRA":
            return False
        return bool(self.pred) or bool(self.operands) and \
            self.operands[0].lstrip("!").startswith(("UP", "P")) and \
            self.operands[0].lstrip("!") not in ("PT", "UPT")

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.text


@dataclass
class Function:
    name: str
    instrs: list[Instr]
    # branch labels (".L_x_3") -> index in instrs of the instruction they precede
    labels: dict[str, int] = field(default_factory=dict)
    normal: str | None = field(default=None, repr=False, compare=False)  # normalise's text
    # clock_groups' answer: a parsed listing is not changed, and the verifier, the snapshot
    # and the region lookup each ask for it
    clocks: list | None = field(default=None, repr=False, compare=False)

    def opcodes(self) -> Counter:
        return Counter(i.opcode for i in self.instrs)


def parse_instr(offset: int, body: str) -> Instr:
    # Maxwell/Pascal listings group dual-issued pairs in { ... }
    body = body.strip().strip("{}").strip().rstrip(";").strip()
    pred = ""
    rest = body
    if rest.startswith("@"):
        pred, _, rest = rest.partition(" ")
    opcode, _, ops = rest.strip().partition(" ")
    operands = tuple([o.strip() for o in _split_operands(ops)]) if ops.strip() else ()
    return Instr(offset, pred, opcode, operands, body)


def _split_operands(ops: str) -> list[str]:
    """The operands of an instruction: split at the commas outside brackets and parentheses
    (``[R2.64+0x10]``, ``c[0x0][0x160]``, ``desc[UR4][R2.64]``); a trailing empty operand is
    dropped. Splits at every comma first and joins the pieces back while a bracket is open
    (the bracket depth at a comma is the count of openers minus closers before it): a listing
    of a million instructions parses in a third of the time a character loop took."""
    pieces = ops.split(",")
    if len(pieces) == 1:
        return pieces if ops else []
    if not _BRACKETS.search(ops):
        return pieces if pieces[-1] else pieces[:-1]
    out, depth, cur = [], 0, None
    for piece in pieces:
        cur = piece if cur is None else cur + "," + piece
        if _BRACKETS.search(piece):
            depth += piece.count("[") + piece.count("(") - piece.count("]") - piece.count(")")
        if depth == 0:
            out.append(cur)
            cur = None
    if cur is not None:
        if cur:
            out.append(cur)
    elif out and not out[-1]:
        out.pop()
    return out


def parse(text: str) -> dict[str, Function]:
    """nvdisasm text -> {function name: Function}, in file order.

    One pass of one pattern over the whole text (lines that are not an instruction, a
    function header or a label are skipped inside the regex engine). An instruction's text is
    split into predicate, opcode and operands once per distinct text: an unrolled probe
    repeats the same instruction thousands of times (about one text in nine is new over the
    static suite's listings). Python's cyclic garbage collector is paused meanwhile: the
    millions of small objects made here contain no cycles, and its young-generation passes
    were a third of the time (_collector_paused: what becomes of them after)."""
    funcs: dict[str, Function] = {}
    current: Function | None = None
    split: dict[str, tuple] = {}
    new = tuple.__new__
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    with _collector_paused():
        for off, rest, name, label in _LINE_RE.findall(text):
            if off:
                if current is None:
                    continue
                fields = split.get(rest)
                if fields is None:
                    fields = split[rest] = _fields(rest)
                if fields:
                    current.instrs.append(new(Instr, (int(off, 16), *fields)))
            elif name:
                current = funcs[name] = Function(name, [])
            elif current is not None:
                current.labels[label] = len(current.instrs)
    return funcs


def _fields(rest: str) -> tuple:
    """(pred, opcode, operands, text) of an instruction line's text after its offset; () for
    an empty one. (String operations, no backtracking regex: the listings of Maxwell/Pascal
    pad their lines with runs of blanks that made a lazy pattern quadratic.)"""
    body = _COMMENT_RE.sub("", rest).rstrip()
    body = body[:-1].strip() if body.endswith(";") else body.strip()
    return parse_instr(0, body)[1:] if body else ()


_paused = 0
_paused_lock = threading.Lock()
_was_enabled = False


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while any thread is inside (parses run in background
    threads at once); back as it was when the last one leaves, the objects made meanwhile
    moved to its permanent generation first (gc.freeze). A parsed listing lives to the end of
    the session and holds no cycle, but its millions of objects were scanned again by the
    next young-generation pass and by every older one: 2.4 of the 3.9 s the collector took in
    a serial run of every arch's static checks, 2.9 of 7.7 s in the two workers of the test
    command (docs/run-time.md). Freezing takes every object alive at that moment, so a cycle
    that is garbage then stays in memory until the process ends: the static suite's peak
    memory grew by 2-7%."""
    global _paused, _was_enabled
    with _paused_lock:
        if _paused == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0 and _was_enabled:
                gc.freeze()
                gc.enable()


class RegionError(ValueError):
    pass


# On sm_50..sm_62 a 64-bit clock read is a retry loop: CS2R CLOCKHI, CS2R CLOCKLO, CS2R CLOCKHI,
# then "if the high words differ, count and retry". These opcodes close such a read.
RETRY_TAIL = ("ISETP.NE.U32.AND", "BRA", "IADD32I", "ISETP.GE.U32.AND", "BRA")


def _is_clock_sr(ins: Instr) -> bool:
    return ins.opcode.startswith(CLOCK_READ_OPCODES) and any(
        o.startswith("SR_CLOCK") for o in ins.operands)


def _srs(ins: list[Instr]) -> list[str]:
    return [o for i in ins for o in i.operands if o.startswith("SR_CLOCK")]


def clock_groups(func: Function) -> list[tuple[int, int]]:
    """(first, last) instruction index of each clock read.

    Volta and later read %clock64 with one CS2R. sm_50..sm_62 read hi/lo/hi in one of two
    idioms, both taken as one read here: "hi, lo, hi" followed by a retry loop
    (ISETP.NE/BRA/IADD32I/ISETP.GE/BRA), or "hi, lo, ISETP.LT lo<0, @!P hi" (re-read the high
    word if the low word wrapped)."""
    if func.clocks is not None:
        return func.clocks
    groups = []
    k, ins = 0, func.instrs
    while k < len(ins):
        if not _is_clock_sr(ins[k]):
            k += 1
            continue
        start = k
        three = ins[k:k + 3]
        four = ins[k:k + 4]
        if len(three) == 3 and all(_is_clock_sr(i) for i in three) and \
                _srs(three) == ["SR_CLOCKHI", "SR_CLOCKLO", "SR_CLOCKHI"]:
            k += 2
            tail = [i.opcode for i in ins[k + 1:k + 1 + len(RETRY_TAIL)]]
            if tail == list(RETRY_TAIL):
                k += len(RETRY_TAIL)
        elif len(four) == 4 and _is_clock_sr(four[0]) and _is_clock_sr(four[1]) and \
                four[2].opcode.startswith("ISETP") and _is_clock_sr(four[3]) and \
                four[3].pred and _srs(four[:2] + four[3:]) == ["SR_CLOCKHI", "SR_CLOCKLO",
                                                               "SR_CLOCKHI"]:
            k += 3
        groups.append((start, k))
        k += 1
    func.clocks = groups
    return groups


def timed_region(func: Function) -> list[Instr]:
    """Instructions strictly between the first two clock reads of a function."""
    groups = clock_groups(func)
    if len(groups) < 2:
        raise RegionError(
            f"{func.name}: expected two clock reads (CS2R ... SR_CLOCKLO), found {len(groups)}")
    region = func.instrs[groups[0][1] + 1:groups[1][0]]
    # Maxwell/Pascal: the second read's retry counter is reset (MOV Rn, RZ) wherever the
    # scheduler likes; it belongs to the clock read, not to the probe.
    start, end = groups[1]
    counters = {i.operands[0] for i in func.instrs[start:end + 1]
                if i.opcode == "IADD32I" and len(i.operands) == 3 and i.operands[0] == i.operands[1]}
    return [i for i in region if not (i.opcode == "MOV" and len(i.operands) == 2
                                      and i.operands[1] == "RZ" and i.operands[0] in counters)]


def clock_reads(func: Function) -> list[list[Instr]]:
    """The instructions of each clock read (one CS2R, or a Maxwell/Pascal retry loop)."""
    return [func.instrs[a:b + 1] for a, b in clock_groups(func)]


def format_listing(instrs: list[Instr]) -> str:
    return "\n".join(f"  /*{i.offset:04x}*/ {i.text}" for i in instrs)


# --- normalisation for snapshots ------------------------------------------------------

# Registers renamed by kind: UR<n>, UP<n> (uniform; not inside a word) and R<n>, P<n>, B<n>
# (not after a capital or "_": SR_TID.X, PT keep their names), numbered by kind. One pattern,
# its one group the register (at most one kind matches at a position: their first letters
# differ): re.split gives the text between registers and the registers in turn, renamed by a
# table made once per function, with no Python call per register (half normalise's time)
_REG_KINDS = ("UR", "UP", "R", "P", "B")
_REGS = re.compile(r"((?:\bU[RP]|(?<![A-Z_])[RPB])\d+\b)")
_LABEL_USE = re.compile(r"\.L_x_\d+")
_INTERNAL = re.compile(r"\$__internal_\d+_\$")   # per-module numbering of shared subroutines


def normalise(func: Function) -> str:
    """Canonical text of a function: offsets and encodings dropped, registers and labels
    renumbered in order of first appearance, so only real code changes show in a diff.
    Computed once per function (a listing is not changed once parsed)."""
    if func.normal is not None:
        return func.normal
    labels: dict[str, str] = {}
    # the whole function's text at once (no pattern spans a line; renumbering follows the
    # order of first appearance, as line by line): one pass of each pattern, not one per line
    text = "\n".join(ins.text for ins in func.instrs)
    if "$__internal_" in text:
        text = _INTERNAL.sub("$__internal_$", text)
    if ".L_x_" in text:
        text = _LABEL_USE.sub(lambda m: labels.setdefault(m.group(0), f"L{len(labels)}"),
                              text)
    parts = _REGS.split(text)
    count, names = dict.fromkeys(_REG_KINDS, 0), {}
    for reg in dict.fromkeys(parts[1::2]):          # in order of first appearance
        kind = reg[:2] if reg[0] == "U" else reg[0]
        names[reg] = f"{kind.lower()}{count[kind]}"
        count[kind] += 1
    parts[1::2] = [names[r] for r in parts[1::2]]
    text = "".join(parts)
    lines = [" ".join(line.split()) for line in text.split("\n")] if func.instrs else []
    # mark the timed region so a reader sees it
    groups = clock_groups(func)
    marks = {}
    if len(groups) >= 2:
        marks = {groups[0][1]: "    // ---- timed region start",
                 groups[1][0]: "    // ---- timed region end"}
    out = [line + marks.get(k, "") for k, line in enumerate(lines)]
    func.normal = "\n".join(out) + "\n"
    return func.normal


# --- dependence depth ---------------------------------------------------------------------

_REG_TOKEN = re.compile(r"(?<![A-Za-z_.])(U?R\d+|U?P\d+)(?![\w])")
_PRED_REG = re.compile(r"U?P\d+")
_TWO_PRED_DESTS = ("ISETP", "FSETP", "DSETP", "HSETP2", "PSETP", "PLOP3", "UISETP", "CSETP")


def _dests_and_sources(ins: Instr) -> tuple[frozenset[str], frozenset[str]]:
    return _registers(ins.base, ins.operands, ins.pred)


@functools.lru_cache(maxsize=1 << 16)
def _registers(base: str, ops: tuple[str, ...], pred: str) -> tuple[frozenset[str], frozenset[str]]:
    """(registers written, registers read) of one instruction; cached, as the same
    instruction text recurs in every copy of a probe's body and every chain length."""
    if not ops:
        return frozenset(), frozenset()
    ndest = 1
    if base in _TWO_PRED_DESTS:
        ndest = 2
    elif len(ops) > 1 and _PRED_REG.fullmatch(ops[1].strip()):
        ndest = 2   # a carry-out predicate after the destination (IADD3 R4, P0, ...)
    dests = {t for o in ops[:ndest] for t in _REG_TOKEN.findall(o)
             if not o.strip().startswith("[")}
    srcs = {t for o in ops[ndest:] for t in _REG_TOKEN.findall(o)}
    srcs |= {t for o in ops[:ndest] if o.strip().startswith("[") for t in _REG_TOKEN.findall(o)}
    if pred:
        srcs |= set(_REG_TOKEN.findall(pred))
    return frozenset(dests), frozenset(srcs)


def dependence_depth(region: list[Instr]) -> int:
    """Length, in instructions, of the longest chain of register dependences through the
    region (a value written by one instruction and read by a later one). A dependent chain
    of N ops must be at least N deep: a compiler that re-associated it into a shallower tree
    (each op computed from the op two back) fails this even when the opcodes all match.
    Calls count as one step on every register (see below), so through a subroutine the
    depth is an upper estimate."""
    depth_of: dict[str, int] = {}
    floor = 0     # depth of every register a call may have written
    best = 0
    for ins in region:
        if ins.base in ("CALL", "CAL", "JCAL"):
            # a subroutine reads and writes registers its operands do not name: take it as
            # one step that depends on, and defines, every register
            floor = 1 + max([floor, *depth_of.values()])
            depth_of = {}
            best = max(best, floor)
            continue
        dests, srcs = _dests_and_sources(ins)
        d = 1 + max((depth_of.get(r, floor) for r in srcs), default=floor)
        for r in dests:
            depth_of[r] = d
        best = max(best, d)
    return best
