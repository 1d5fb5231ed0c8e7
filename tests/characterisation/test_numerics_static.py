"""Static (no GPU): the numerics kernels assemble offline for every static arch and each mma
becomes tensor-core SASS (HMMA/QMMA), snapshotted per compiler and arch. Archs without the
instruction skip with the reason (no tensor cores; mma shape or type too new for the arch).
All kernels of an arch are assembled in ONE ptxas run (the topic's "numerics" module)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.numerics import rows, run

pytestmark = pytest.mark.topic("numerics")
ROWS = [pytest.param(name, id=name) for name in rows.MMA]


@pytest.mark.static
@pytest.mark.parametrize("name", ROWS)
def test_numerics_kernels_static(arch, name, static_check, record):
    checked = static_check(run.static_probe(name, arch), snapshot=run.static_snapshot,
                           key=f"numerics.sass.{name}")
    problems, notes = run.static_path(checked, arch)
    for note in notes:
        record.note(note)
    assert not problems, "\n".join(problems)
