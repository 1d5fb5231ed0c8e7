"""The public probe API (pytest_gpuchar.api): a user's Sequence, its errors, and its probes
through the suite's static pipeline in a user's own project (pytester)."""
from __future__ import annotations

import pytest

from pytest_gpuchar import api
from pytest_gpuchar.core.probe import NotApplicable

FFMA = dict(name="user.ffma", ptx="fma.rn.f32 {d}, {a}, {b}, {c};",
            operands={"d": 32, "a": 32, "b": 32, "c": 32}, kind="near1", sass=("FFMA",))


@pytest.mark.parametrize("change, says", [
    ({"name": "My FFMA"}, "name: lower case"),
    ({"ptx": "fma.rn.f32 %f1, {a}, {b}, {c};"}, "needs {d}"),
    ({"operands": {"d": 32, "a": 32, "b": 32}}, "no width for {c}"),
    ({"operands": {"d": 32, "a": 24, "b": 32, "c": 32}}, "operands.a: width 24"),
    ({"operands": {"d": 32, "a": (32, "huge"), "b": 32, "c": 32}}, "value kind 'huge'"),
    ({"chain": "zigzag"}, "chain: 'zigzag'"),
    ({"sass": "FFMA"}, "sass: a tuple"),
])
def test_a_bad_sequence_is_one_error_naming_it_and_the_field(change, says):
    with pytest.raises(api.SequenceError) as e:
        api.Sequence(**{**FFMA, **change})
    assert str(e.value).startswith(f"Sequence {change.get('name', 'user.ffma')!r}: ")
    assert says in str(e.value)


def test_a_sequence_becomes_the_instruction_topics_two_probes():
    seq = api.Sequence(**FFMA)
    dep, ind = api.probes(seq, "sm_90")
    assert (dep.name, ind.name) == ("latency/user.ffma", "cpi/user.ffma")
    assert dep.chained and sorted(dep.ops.values()) == [16, 32, 64]
    assert dep.intent(16).unit == ("FFMA",) and dep.intent(16).count == 16
    assert "fma.rn.f32" in dep.ptx and ".target sm_90" in dep.ptx
    assert api.probes(seq, "sm_90")[0] is dep          # made once per Sequence and arch


def test_a_sequence_before_its_min_arch_is_not_applicable():
    seq = api.Sequence(**{**FFMA, "min_arch": 90})
    with pytest.raises(NotApplicable, match="needs sm_90"):
        api.probes(seq, "sm_80")


USER_TEST = '''
import pytest
from pytest_gpuchar.api import Sequence

SEQ = Sequence(name="user.mul_add", ptx="""{ptx}""",
               operands={{"d": 32, "a": 32, "b": 32, "c": 32}}, kind="near1",
               sass=("FMUL", "FADD"))

def test_static(gpuchar_probe):
    gpuchar_probe.static(SEQ)

@pytest.mark.hardware
def test_latency(gpuchar_probe):
    gpuchar_probe.latency(SEQ)
'''
SEPARATE = "mul.rn.f32 {d}, {a}, {b};\nadd.rn.f32 {d}, {d}, {c};"
CONTRACTED = "mul.f32 {d}, {a}, {b};\nadd.f32 {d}, {d}, {c};"   # ptxas makes one FFMA


@pytest.fixture
def user_project(pytester, monkeypatch, need_offline_tools):
    need_offline_tools("sm_90")
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    (pytester.path / "expectations").mkdir()
    (pytester.path / "expectations" / "sm_90.yaml").write_text(
        "schema: 2\narch: sm_90\ncharacteristics:\n  latency.user.mul_add:\n    value: 8.0\n"
        "    unit: cycles/op\n    tolerance: {abs: 1.0}\n    source: a user's guess\n")
    return pytester


def test_a_users_sequence_is_verified_and_snapshotted_beside_its_module(user_project):
    user_project.makepyfile(test_mine=USER_TEST.format(ptx=SEPARATE))
    first = user_project.runpytest("-p", "no:cacheprovider", "-rs")
    first.assert_outcomes(skipped=2)
    first.stdout.fnmatch_lines(["*no SASS snapshots recorded for ptxas-*/sm_90*"])
    user_project.runpytest("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1, skipped=1)
    snap, = (user_project.path / "__sass__").rglob("*.sass")
    text = snap.read_text()
    assert "FMUL" in text and "FADD" in text and "latency/user.mul_add" in text
    again = user_project.runpytest("-p", "no:cacheprovider", "-rs")
    again.assert_outcomes(passed=1, skipped=1)
    again.stdout.fnmatch_lines(["*hardware: GPUCHAR_NO_GPU is set*"])


def test_a_sequence_the_compiler_contracts_is_probe_invalid_with_the_sass(user_project):
    user_project.makepyfile(test_mine=USER_TEST.format(ptx=CONTRACTED))
    result = user_project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*probe invalid: latency/user.mul_add:*",
                                 "intended: 16 x [[]FMUL + FADD] per timed region", "*FFMA*"])
    assert not (user_project.path / "__sass__").exists()


# --- the hardware path, on a fake GPU (NumPy for CuPy, the real launch stage and Gpu) --------

class _Kernel:
    """Thread 0 reads 20 + per_op x ops cycles."""

    def __init__(self, ops: int, per_op: float):
        self.ops, self.per_op = ops, per_op

    def __call__(self, grid, block, args, shared_mem=0):
        args[0][0] = int(20 + self.per_op * self.ops)


class _Compiled:
    def __init__(self, probe, per_op):
        self.probe, self.per_op = probe, per_op

    def function(self, entry):
        n = next(k for k, e in self.probe.entries.items() if e == entry)
        return _Kernel(self.probe.ops[n], self.per_op)


def _fake_session(per_op: float):
    import types
    from pytest_gpuchar.core import sass, toolchain
    from pytest_gpuchar.core.build import Built
    from pytest_gpuchar.core.gpu import Gpu
    from pytest_gpuchar.core.runner import Runner
    from pytest_gpuchar.core.verify import Verdict
    from pytest_gpuchar.session import RunCache

    def offline(probe, tool=None):
        raise toolchain.ToolMissing("no ptxas here")
    dev = types.SimpleNamespace(arch="sm_90", driver="580", index=0, cuda_driver_api="13.0")
    gpu = Gpu(dev, None, 5.0)
    builds = types.SimpleNamespace(offline=offline, jit=lambda probe, d: Built(
        probe, {e: sass.Function(e, []) for e in probe.entries.values()},
        compiled=_Compiled(probe, per_op)))
    return types.SimpleNamespace(gpu=gpu, runner=Runner(gpu), builds=builds, runs=RunCache(),
                                 repeats=5, device=dev,
                                 verify=lambda p, f, tag="": Verdict(True, {"FFMA": 1.0}))


def test_a_sequences_latency_is_the_slope_over_its_chain_lengths(fake_cupy):
    seq = api.Sequence(**{**FFMA, "lengths": (8, 16, 32)})
    m = api.measure_latency(_fake_session(4.0), seq, "sm_90")
    fig, = m.figures
    assert fig.key == "latency.user.ffma" and fig.unit == "cycles/op"
    assert fig.value == pytest.approx(4.0, abs=0.01)
    assert "[8, 16, 32] ops" in fig.method
    assert m.sass is not None and fig.data["jit_equals_ptxas"] is None
    cpi, = api.measure_throughput(_fake_session(0.5), api.Sequence(**FFMA), "sm_90").figures
    assert cpi.key == "cpi.user.ffma" and cpi.value == pytest.approx(0.5, abs=0.05)
