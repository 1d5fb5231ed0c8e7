"""A user's own probes (docs/user-probes.md): an FFMA chain and a two-instruction sequence,
through pytest-gpuchar's pipeline. Offline (no GPU) the static checks run: each probe
assembled with ptxas, its timed regions verified, its SASS compared with the snapshot in
__sass__/. On a GPU of the arch the latencies are measured, verified in the driver's SASS,
fitted and judged against ./expectations/<arch>.yaml.

    pytest --gpu-arch=sm_90           # static checks anywhere; all of it on an sm_90 GPU
"""
import pytest

from pytest_gpuchar.api import Sequence

FFMA = Sequence(
    name="user.ffma",
    ptx="fma.rn.f32 {d}, {a}, {b}, {c};",
    operands={"d": 32, "a": 32, "b": 32, "c": 32},
    kind="near1",                 # values near 1: a long chain neither overflows nor vanishes
    sass=("FFMA",),
)

MUL_ADD = Sequence(
    name="user.mul_add",
    ptx="""mul.rn.f32 {d}, {a}, {b};
           add.rn.f32 {d}, {d}, {c};""",   # .rn: not contracted into one FFMA
    operands={"d": 32, "a": 32, "b": 32, "c": 32},
    kind="near1",
    sass=("FMUL", "FADD"),
)

SEQUENCES = [pytest.param(s, id=s.name) for s in (FFMA, MUL_ADD)]


@pytest.mark.static
@pytest.mark.parametrize("seq", SEQUENCES)
def test_static(seq, gpuchar_probe):
    gpuchar_probe.static(seq)


@pytest.mark.hardware
@pytest.mark.parametrize("seq", SEQUENCES)
def test_latency(seq, gpuchar_probe):
    gpuchar_probe.latency(seq)


@pytest.mark.hardware
def test_ffma_throughput(gpuchar_probe):
    gpuchar_probe.throughput(FFMA)
