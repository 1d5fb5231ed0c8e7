"""Static (no GPU): the numerics kernels assemble offline for every static arch and each mma
becomes tensor-core SASS (HMMA/QMMA), snapshotted per compiler and arch. Archs without the
instruction skip with the reason (no tensor cores; mma shape or type too new for the arch).
All kernels of an arch are assembled in ONE ptxas run (one module), cached per session."""
from __future__ import annotations

import functools

import pytest

from pytest_gpuchar import archs, numerics, probes, toolchain
from pytest_gpuchar.report import Result

ROWS = [pytest.param(name, id=name) for name in numerics.SPECS]


@functools.lru_cache(maxsize=None)
def _module_sass(arch: str):
    ptx, specs = numerics.module_ptx(arch)
    return probes.functions_of(toolchain.assemble(ptx, arch), arch), specs


@pytest.mark.static
@pytest.mark.parametrize("name", ROWS)
def test_numerics_kernels_static(arch, name, offline_tools, gpuchar, sass_snapshot):
    s = numerics.spec(name)
    why = numerics.unsupported(s, arch)
    if why:
        pytest.skip(f"static: {why}")
    functions, specs = _module_sass(arch)
    path = numerics.tensor_path(s, functions[s.entry])   # NotTensorCore fails with the SASS
    n = archs.number(arch)
    if s.in_type in ("e4m3", "e5m2"):
        if n == 89:
            assert path.native and "QMMA" in " ".join(path.tensor), path.describe()
        else:
            # Hopper: mma.sync FP8 is converted to f16 (F2FP) and run as HMMA; C is added by
            # FADD on the FPU (the accumulation characteristics are then "invalid" on hardware)
            gpuchar.recorder.add(Result(f"numerics.sass.{name}", arch, "info",
                                        detail=f"{s.instruction}: {path.describe()}",
                                        data={"native": path.native}))
    else:
        assert path.native, f"{name} on {arch}: not a single tensor-core op: {path.describe()}"
        assert any(op.startswith("HMMA") for op in path.tensor), path.describe()
    tool = offline_tools[0]
    text = (f"// {s.instruction} ({arch}, {tool.name} {tool.version}): {path.describe()}\n"
            + numerics.sass_text(functions, s))
    assert text == sass_snapshot(toolchain.compiler_tag(tool))
