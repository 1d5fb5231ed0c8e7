"""Table V of the Ampere paper: PTX instructions, the SASS they become, and their cycles.

Per row: the PTX->SASS mapping (static, any machine: offline ptxas for the arch, verified and
snapshotted, compared with the paper's printed SASS for sm_80), and on a GPU of the arch the
cycles per instruction of an independent sequence (what the paper reports) and the latency of a
dependent chain, both SASS-verified on the driver's own JIT output and measured as slopes.
"""
from __future__ import annotations

import re

import pytest

from pytest_gpuchar import catalog, probes, toolchain
from pytest_gpuchar.report import Result
from pytest_gpuchar.sass import RegionError
from pytest_gpuchar.verify import ProbeInvalid

from _common import METHOD_CPI, METHOD_LATENCY, measure_row

ROWS = [pytest.param(r, id=r.name) for r in catalog.TABLE_V]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_table_v_mapping(arch, row, offline_tools, expected, sass_snapshot, gpuchar):
    """The row's probes assemble for `arch`, their timed regions hold exactly the intended
    SASS, and the SASS matches this compiler's snapshot."""
    if archs_too_old(arch, row):
        pytest.skip(f"static: {row.name} needs sm_{row.min_arch}+ ({arch} lacks it)")
    built = []
    try:
        if row.dep is not None:
            built.append(probes.build_static(probes.latency_probe(row, arch)))
        if row.indep:
            built.append(probes.build_static(probes.cpi_probe(row, arch)))
    except (ProbeInvalid, RegionError) as e:
        # Recorded as "invalid" (never a number); on hardware the same probe errors.
        gpuchar.recorder.add(Result(f"sass.{row.name}", arch, "invalid", test=row.name,
                                    detail=str(e).splitlines()[0]))
        pytest.xfail(str(e).splitlines()[0])
    assert built, f"{row.name}: neither a dependent nor an independent probe exists"
    tag = built[0].compiler
    text = "".join(f"// {s.probe.name} ({arch}, {tag.name} {tag.version}), "
                   f"chain length {min(s.probe.entries)}\n{s.snapshot_text()}\n" for s in built)
    unit = dict(built[-1].verdict.unit)
    paper = (expected.mappings.get(row.name, {}).get("paper") if expected else None)
    if paper is not None:
        gpuchar.recorder.add(Result(
            f"sass.{row.name}", arch, "info", expected=str(paper), source="paper",
            detail=f"ptxas {tag.version}: {unit}", test=f"{row.name}",
            data={"paper": paper, "ptxas": tag.version, "unit": unit,
                  "differs": _paper_agrees(paper, unit) is False}))
    assert text == sass_snapshot(toolchain.compiler_tag(tag))


def archs_too_old(arch: str, row) -> bool:
    from pytest_gpuchar import archs
    return archs.number(arch) < getattr(row, "min_arch", 0)


def _paper_agrees(paper: str, unit: dict) -> bool | None:
    """Do the opcodes we see match the paper's printed mapping? None when the paper printed no
    opcodes ("multiple instructions"). Counts are not compared (the paper's 'N*' notation)."""
    printed = {t.strip().lstrip("0123456789*").strip("()[] ").split(" ")[0].upper()
               for t in re.split(r"\+|\bor\b", paper) if t.strip()}
    printed = {p for p in printed if p and p not in ("MULTIPLE", "[MULTIPLE")}
    if not printed:
        return None
    return printed == set(unit)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_v_cycles(arch, row, gpu, gpuchar, record, sass_snapshot):
    """Cycles per instruction of an independent sequence (Table V's figure)."""
    if not row.indep:
        pytest.skip(f"no independent probe: {row.indep_note}")
    measure_row(gpuchar, record, sass_snapshot, probes.cpi_probe(row, arch), f"cpi.{row.name}",
                METHOD_CPI)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_v_latency(arch, row, gpu, gpuchar, record, sass_snapshot):
    """Latency: cycles per op of a dependent chain."""
    if row.dep is None:
        pytest.skip(f"no dependent chain: {row.dep_note}")
    measure_row(gpuchar, record, sass_snapshot, probes.latency_probe(row, arch),
                f"latency.{row.name}", METHOD_LATENCY)
