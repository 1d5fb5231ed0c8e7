"""The public probe API: a user measures a PTX sequence of their own, in their own test file,
through the suite's pipeline (docs/user-probes.md).

A ``Sequence`` describes one op: its PTX with named register fields (``{d}`` the result,
``{a}`` the source the next op of a dependent chain takes, ``{b}``, ``{c}``... other
sources), each field's register width and input values, and the SASS one op must become. The
``gpuchar_probe`` fixture then

- ``static(seq)``: builds its probes on the one kernel frame (operands loaded per thread, the
  body behind the clock-compare guard, every result stored), assembles them offline with the
  arch's ptxas, verifies each timed region (exactly the intended SASS, else "probe invalid"
  with the listing) and compares the SASS with its snapshot (``__sass__/`` beside the test
  module; ``--snapshot-update`` records it);
- ``latency(seq)`` / ``throughput(seq)``: on a GPU of the arch (else skipped with the reason),
  JIT-links the probe through the driver, verifies the driver's SASS, launches it (warm-up,
  ``--gpuchar-repeats`` launches per chain length, watchdog), fits cycles against the chain
  length (the slope, its spread, stability), judges the figure ``latency.<name>`` /
  ``cpi.<name>`` against the expectation files of the project (``expectations/<arch>.yaml``
  beside the tests), records it for the reports and compares the driver's SASS with its
  snapshot.

This is the instruction tables' own road (topics/instructions): a Sequence becomes an
InstrRow, its probes are that topic's dependent chain and independent sequence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping

import pytest

from .core import archs
from .core.probe import NotApplicable, Probe
from .core.ptx import CHAIN_STYLES, Operand, Template
from .core.values import KINDS
from .results.judge import Measured
from .topics.instructions import kernels, run

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.]*$")
FIELD_RE = re.compile(r"\{(\w+)\}")
WIDTHS = (1, 16, 32, 64)


class SequenceError(ValueError):
    """A Sequence that cannot become a probe (names the sequence and the field)."""


@dataclass(frozen=True)
class Sequence:
    """One op of a user's PTX sequence, to chain (latency) and to repeat independently
    (throughput as cycles per op).

    name:     the figures' keys are ``latency.<name>`` and ``cpi.<name>`` (lower case,
              digits, ``_`` and ``.``); choose names the suite does not use
    ptx:      one op, one or more PTX lines: ``{d}`` its result, ``{a}`` its chained source,
              other ``{x}`` fields further sources (loaded per thread, so nothing folds)
    operands: field -> register width (1 predicate, 16, 32, 64), or (width, value kind);
              every field of `ptx` needs one
    kind:     the value kind of fields given as a width alone (core/values.py: "int",
              "near1" keeps float chains near 1, "float", "small", "nonzero", ...)
    sass:     the SASS one op must become, opcode patterns (fnmatch, alternatives with
              ``|``), e.g. ("FFMA",) or ("FMUL", "FADD"); None: a compiler-chosen sequence
              (then `signature` names opcodes it must hold)
    chain:    how the dependent chain feeds {d} to {a} and draws the other sources
              (core/ptx/chains.py's styles; "acc" by default)
    min_arch: the first arch number that has the instructions (sm_<N>)
    lengths:  the dependent chain's lengths (16/32/64 by default; 8/16/32 for a sequence)
    """
    name: str
    ptx: str
    operands: Mapping[str, int | tuple[int, str]]
    sass: tuple[str, ...] | None
    kind: str = "int"
    signature: tuple[str, ...] = ()
    chain: str = "acc"
    min_arch: int = 0
    lengths: tuple[int, ...] | None = None
    note: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem:
            raise SequenceError(f"Sequence {self.name!r}: {problem}")

    def problem(self) -> str:
        if not NAME_RE.match(self.name):
            return "name: lower case letters, digits, '_' and '.' only (it becomes a key)"
        fields = set(FIELD_RE.findall(self.ptx))
        if not {"d", "a"} <= fields:
            return "ptx: needs {d} (the op's result) and {a} (the source a chain feeds)"
        missing = sorted(fields - set(self.operands))
        if missing:
            return f"operands: no width for {', '.join('{' + f + '}' for f in missing)}"
        for f, spec in self.operands.items():
            width, kind = spec if isinstance(spec, tuple) else (spec, self.kind)
            if width not in WIDTHS:
                return f"operands.{f}: width {width!r}; one of {WIDTHS}"
            if kind not in KINDS:
                return f"operands.{f}: value kind {kind!r}; one of {', '.join(KINDS)}"
        if self.chain not in CHAIN_STYLES:
            return f"chain: {self.chain!r}; one of {', '.join(CHAIN_STYLES)}"
        if self.sass is not None and (not self.sass or isinstance(self.sass, str)):
            return "sass: a tuple of opcode patterns, e.g. ('FFMA',), or None for a sequence"
        return ""

    def template(self) -> Template:
        ops = {}
        for f, spec in self.operands.items():
            width, kind = spec if isinstance(spec, tuple) else (spec, self.kind)
            ops[f] = Operand(width, kind)
        return Template(self.ptx.strip(), ops)

    def row(self) -> kernels.InstrRow:
        """The sequence as an instruction-table row (made once per Sequence)."""
        key = id(self)
        hit = _ROWS.get(key)
        if hit is None or hit[0] is not self:
            row = kernels.InstrRow(self.name, self.template(), self.sass, self.signature,
                                   dep=self.chain, min_arch=self.min_arch,
                                   latency_note=self.note, cpi_note=self.note)
            hit = _ROWS[key] = (self, row)
        return hit[1]


_ROWS: dict[int, tuple[Sequence, kernels.InstrRow]] = {}


def probes(seq: Sequence, arch: str) -> list[Probe]:
    """The sequence's probes for `arch`: its dependent chain, then its independent sequence
    (NotApplicable before `min_arch`)."""
    row = seq.row()
    why = row.supported(archs.validate(arch))
    if why:
        raise NotApplicable(why)
    return [kernels.latency_probe(row, arch, seq.lengths), kernels.cpi_probe(row, arch)]


class UserProbes:
    """What the gpuchar_probe fixture gives a test: the static check and the two hardware
    figures of a Sequence, on the test's `arch`."""

    def __init__(self, request: pytest.FixtureRequest, arch: str) -> None:
        self.request = request
        self.arch = arch

    def static(self, seq: Sequence):
        """Assemble offline, verify each timed region, compare the SASS with its snapshot
        (the suite's static_check). Returns the Checked list (probe, verdict)."""
        return self.request.getfixturevalue("static_check")(probes(seq, self.arch))

    def latency(self, seq: Sequence) -> list:
        """Cycles per op of the dependent chain, judged as ``latency.<name>``."""
        return self._hardware(seq, measure_latency)

    def throughput(self, seq: Sequence) -> list:
        """Cycles per op of independent ops (one thread), judged as ``cpi.<name>``."""
        return self._hardware(seq, measure_throughput)

    def _hardware(self, seq: Sequence, measure) -> list:
        why = seq.row().supported(self.arch)
        if why:
            raise NotApplicable(why)
        self.request.getfixturevalue("gpu")          # skips, with the reason, without one
        measured = measure(self.request.getfixturevalue("gpuchar"), seq, self.arch)
        return self.request.getfixturevalue("hardware_row")(measured)


def measure_latency(session, seq: Sequence, arch: str) -> Measured:
    """The dependent chain on the GPU (the instruction tables' figure: JIT, verify, launch,
    fit, the driver's SASS), as ``latency.<name>``."""
    row = seq.row()
    return run.figure(session, kernels.latency_probe(row, arch, seq.lengths),
                      f"latency.{row.name}", run.METHOD_LATENCY, row.latency_note)


def measure_throughput(session, seq: Sequence, arch: str) -> Measured:
    """The independent sequence on the GPU, as ``cpi.<name>``."""
    return run.cpi(session, seq.row(), arch)


@pytest.fixture
def gpuchar_probe(request, arch: str) -> UserProbes:
    """gpuchar_probe.static(seq) / .latency(seq) / .throughput(seq) for a user's Sequence on
    the test's arch (docs/user-probes.md)."""
    return UserProbes(request, arch)


__all__ = ["Sequence", "SequenceError", "UserProbes", "gpuchar_probe", "measure_latency",
           "measure_throughput", "probes"]
