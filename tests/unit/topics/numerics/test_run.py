"""The numerics rows through run.py on a CPU model of a tensor core (a fake session whose
runner is the model): keys, units, methods (against the method texts the sm_90 expectations
recorded from the hardware), the invalid / not-applicable / known-anomaly outcomes, and the
static step's expectations on the offline SASS (synthetic). No GPU needed."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.probe import DeclaredUnmeasurable, NotApplicable
from pytest_gpuchar.fixtures import Checked
from pytest_gpuchar.results.judge import NoFigure, Status
from pytest_gpuchar.results.schema import YAML_LOADER
from pytest_gpuchar.results.expectations import PACKAGE_ROOT, Store
from pytest_gpuchar.session import GpuCharSession, RunCache
from pytest_gpuchar.topics.numerics import kernels, rows, run
from pytest_gpuchar.topics.numerics.analysis import ModelTensorCore

ROOT = Path(__file__).resolve().parents[4]
# read at every collection: libyaml, as the suite reads the files (pure Python took 0.36 s)
SM90 = yaml.load((ROOT / "expectations/numerics/sm_90.yaml").read_text(),
                 Loader=YAML_LOADER)["characteristics"]


def _func(describe: str, name: str = "k") -> sass.Function:
    """A kernel holding the instructions a TensorPath description lists."""
    lines = [op + " R0, R1, R2 ;" for part in describe.split(" + ")
             for n, op in [part.split("x ", 1)] for _ in range(int(n))]
    return sass.Function(name, [sass.parse_instr(16 * i, x) for i, x in enumerate(lines)])


def sm90_path(s: rows.MmaRow) -> kernels.TensorPath:
    """The path the driver JIT took on sm_90, as the recorded native_tensor_core method says."""
    combo = next(c for c, name in rows.ELEMENTWISE.items() if name == s.name)
    method = SM90[rows.FasiRow(combo, "native_tensor_core").key]["method"]
    return kernels.tensor_path(s, _func(method.split(f"{s.instruction}: ", 1)[1]))


class Notes(list):
    def note(self, r):
        self.append(r)
        return r


def session_with(tc, arch="sm_90", declared=True):
    """A fake session whose runner is `tc`; the arch's `unmeasurable:` declarations are the
    package's expectation files (declared=True) or none."""
    dev = SimpleNamespace(arch=arch, driver="580.159.04", name="model tensor core")
    real = GpuCharSession(SimpleNamespace(), None, 7, 20.0, None, None,
                          Store(PACKAGE_ROOT if declared else ROOT / "no-such-directory"))
    s = SimpleNamespace(gpu=SimpleNamespace(dev=dev), device=dev, runs=RunCache(),
                        unmeasurable=real.unmeasurable, not_declared=real.not_declared)
    s.runs.once(("numerics", "runner", arch, dev.driver), lambda: tc)
    return s


class Sm90Model(ModelTensorCore):
    def verify(self, s):
        return sm90_path(s)


@pytest.fixture
def sm90():
    return session_with(Sm90Model(extra_bits=3, block=8, rounding="rz"))


@pytest.fixture
def sm90_undeclared():
    return session_with(Sm90Model(extra_bits=3, block=8, rounding="rz"), declared=False)


def test_row_ids_and_keys():
    """The ids and keys the characterisation tests and expectation files use."""
    assert [r.id for r in rows.TABLE_12] == [
        "mul-init_bf16-vs_fp32", "inner-init_bf16-vs_fp32", "acc-init_bf16-vs_fp32",
        "mul-init_fp32-vs_fp32", "inner-init_fp32-vs_fp32", "acc-init_fp32-vs_fp32"]
    assert rows.TABLE_14[-1].id == "acc-init_fp32-vs_fp32cvt16" and len(rows.TABLE_14) == 12
    assert rows.TABLE_14[-1].key == "numerics.elementwise.f16_f16.init_fp32.acc.vs_fp32cvt16"
    assert [r.id for r in rows.FP8_ELEMENTWISE[:3]] == [
        "mul-init_fp8-vs_fp32-e4m3-f32", "mul-init_fp8-vs_fp32-e5m2-f32",
        "inner-init_fp8-vs_fp32-e4m3-f32"]
    assert rows.FP8_ELEMENTWISE[0].key == "numerics.elementwise.e4m3_f32.init_e4m3.mul"
    assert rows.FASI[0].id == "f16-f32-native_tensor_core" and len(rows.FASI) == 102
    assert rows.FasiRow("tf32-f32", "rounding_products_rn").asked == ("rounding_products", "rn")
    assert [r.id for r in rows.FIG_20][:2] == ["tf32-init_tf32", "tf32-init_fp32"]
    keys = {r.key for t in (rows.TABLE_12, rows.TABLE_13, rows.TABLE_14, rows.TABLE_15,
                            rows.FP8_ELEMENTWISE) for r in t} | {r.key for r in rows.FASI}
    keys |= {f"{r.label}.{x}" for r in rows.FIG_20 for x in
             ("l2err_n1", "l2err_n4", "l2err_n8", "overflow_link")}
    from pytest_gpuchar.topics.numerics import fp8_questions
    keys |= {r.key for r in fp8_questions.FP8_ROWS}
    keys |= {f"numerics.fp8_wgmma.{t}.k_error.k{k}" for t in ("e4m3", "e5m2")
             for k in fp8_questions.K_REPORTED}
    assert set(SM90) <= keys      # every recorded characteristic is some row's


def test_elementwise_rows_match_the_recorded_methods(sm90):
    notes = Notes()
    done = 0
    for table in (rows.TABLE_12, rows.TABLE_13, rows.TABLE_14, rows.TABLE_15,
                  rows.FP8_ELEMENTWISE):
        for row in table:
            if row.op == "acc" and row.combo.startswith("e"):
                # declared unmeasurable on sm_90 (expectations/numerics/sm_90.yaml): skipped
                # with the reason, no invalid row (issue 33 item 9)
                with pytest.raises(DeclaredUnmeasurable, match="tensor.fp8_emulated"):
                    run.elementwise(sm90, notes, row, "sm_90")
                done += 1
                continue
            m = run.elementwise(sm90, notes, row, "sm_90")
            (fig,) = m.figures
            assert fig.key == row.key and fig.unit == "error" and m.sass is None
            assert fig.data["tolerance"] == {"abs": 1e-12, "rel": 0.05}
            assert fig.method == SM90[row.key]["method"].replace("\n", " ")
            done += 1
    assert done == 42 and len(notes) == 0


def test_fp8_accumulation_without_its_declaration_is_an_invalid_row(sm90_undeclared):
    """What the declaration replaces: C added on the FPU is recorded invalid, an expected
    failure with the SASS."""
    for row in rows.FP8_ELEMENTWISE:
        if row.op == "acc":
            with pytest.raises(NoFigure, match="adds C with") as e:
                run.elementwise(sm90_undeclared, Notes(), row, "sm_90")
            [n] = e.value.notes
            assert n.status == Status.INVALID and n.key == row.key
    with pytest.raises(NoFigure, match="C is added by") as e:
        run.fasi(sm90_undeclared, Notes(), rows.FasiRow("e4m3-f32", "rounding_c_rn"), "sm_90")
    assert e.value.notes[0].status == Status.INVALID


def test_a_declared_fp8_key_measured_on_the_tensor_core_is_a_stale_declaration():
    from pytest_gpuchar.session import StaleDeclaration
    row = next(r for r in rows.FP8_ELEMENTWISE if r.op == "acc")
    native = session_with(ModelTensorCore(extra_bits=3, block=8, rounding="rz"))
    with pytest.raises(StaleDeclaration, match=row.key):
        run.elementwise(native, Notes(), row, "sm_90")


def test_elementwise_outcomes():
    row = rows.TABLE_12[0]
    with pytest.raises(NotApplicable, match="sm_75: mma.m16n8k16 bf16 needs sm_80"):
        run.elementwise(session_with(ModelTensorCore(), "sm_75"), Notes(), row, "sm_75")

    class NoTC(ModelTensorCore):
        def verify(self, s):
            return kernels.tensor_path(s, _func("1x FFMA"))
    notes = Notes()
    with pytest.raises(kernels.NotTensorCore):
        run.elementwise(session_with(NoTC()), notes, row, "sm_90")
    assert [(n.key, n.status) for n in notes] == [(row.key, Status.INVALID)]

    class Overflowing(ModelTensorCore):      # every element inf
        def run(self, s, A, B, C=None):
            return np.full((np.asarray(A).shape[0], s.m, s.n), np.inf)
    m = run.elementwise(session_with(Overflowing(extra_bits=3)), Notes(), row, "sm_90")
    assert np.isnan(m.figures[0].value) and "NaN/Inf" in m.figures[0].detail and not m.checks
    rn = session_with(ModelTensorCore(extra_bits=3, block=8, rounding="rn"))
    ok = run.elementwise(rn, Notes(), rows.TABLE_12[3], "sm_90")
    assert ok.checks == [] and ok.figures[0].value > 1e-4


def test_fasi_rows(sm90):
    notes = Notes()
    native = run.fasi(sm90, notes, rows.FasiRow("bf16-f32", "native_tensor_core"), "sm_90")
    (fig,) = native.figures
    assert fig.value == 1.0 and fig.unit == "bool"
    assert fig.method == SM90[fig.key]["method"]
    fp8 = run.fasi(sm90, notes, rows.FasiRow("e4m3-f32", "native_tensor_core"), "sm_90")
    assert fp8.figures[0].value == 0.0
    assert fp8.figures[0].method == SM90[fp8.figures[0].key]["method"]
    rz = run.fasi(sm90, notes, rows.FasiRow("bf16-f32", "rounding_c_rz"), "sm_90").figures[0]
    rn = run.fasi(sm90, notes, rows.FasiRow("bf16-f32", "rounding_c_rn"), "sm_90").figures[0]
    assert (rz.value, rn.value, rz.unit) == (1.0, 0.0, "bool")
    assert rz.detail == "consistent rounding modes: ['rz']" and rz.data["modes"] == ["rz"]
    assert rz.method.startswith("Fasi et al. 2021 style probe on mma.sync.aligned.m16n8k16")
    eb = run.fasi(sm90, notes, rows.FasiRow("bf16-f32", "extra_bits"), "sm_90").figures[0]
    assert (eb.value, eb.unit, eb.data["tolerance"]) == (3.0, "bits", {"abs": 0})
    with pytest.raises(NotApplicable, match="overflow_to_inf does not apply to f16 -> f32"):
        run.fasi(sm90, notes, rows.FasiRow("f16-f32", "overflow_to_inf"), "sm_90")
    with pytest.raises(DeclaredUnmeasurable, match="C is added|adding C"):
        run.fasi(sm90, notes, rows.FasiRow("e4m3-f32", "rounding_c_rn"), "sm_90")
    with pytest.raises(NotApplicable, match="cannot be subnormal"):
        run.fasi(sm90, notes, rows.FasiRow("e4m3-f32", "subnormal_outputs"), "sm_90")
    assert len(notes) == 0


def test_fasi_undetermined_is_noted_and_skipped():
    """An answer the hardware left undetermined (here: an adder with no extra bit, so no
    block size) is an info note and a skip, never a number."""
    s = session_with(ModelTensorCore(extra_bits=0, block=8, rounding="rz"))
    notes = Notes()
    with pytest.raises(NotApplicable, match="undetermined"):
        run.fasi(s, notes, rows.FasiRow("f16-f32", "block_size"), "sm_90")
    assert [n.status for n in notes] == [Status.INFO]


def test_chain_rows(sm90, monkeypatch, tmp_path):
    monkeypatch.setattr(rows, "CHAIN_TRIALS", 50)
    for row in rows.FIG_20:
        m = run.chain(sm90, row, "sm_90")
        keys = [f.key for f in m.figures]
        assert keys[:3] == [f"{row.label}.l2err_n{n}" for n in (1, 4, 8)]
        assert keys[3:] == ([f"{row.label}.overflow_link"] if row.in_type == "f16" else [])
        for f in m.figures:
            assert f.method == SM90[f.key]["method"].replace("\n", " ")
        assert isinstance(m.checks, list)
    png = run.chain_figure(sm90, "sm_90", lambda name, caption: None, tmp_path)
    assert png == tmp_path / "chain.png" and png.stat().st_size > 1000
    assert set(yaml.safe_load((tmp_path / "chain.json").read_text())) == {
        "tf32-init_low", "tf32-init_fp32", "bf16-init_low", "bf16-init_fp32", "f16-init_low",
        "f16-init_fp32"}
    with pytest.raises(NotApplicable, match="no chain kernel"):
        run.chain_figure(session_with(None, "sm_70"), "sm_70", lambda n, c: None, tmp_path)


def test_tensor_core_bits(monkeypatch):
    notes = Notes()
    good = session_with(ModelTensorCore(extra_bits=30, block=16, rounding="rn"))
    text = run.tensor_core_bits(good, notes, "bf16.m16n8k16.f32", "sm_90")
    assert text.startswith("// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 on sm_90: "
                           "1x HMMA\n") and text.count("tile ") == 12
    # no anomaly is known: m16n8k8 f16 is snapshotted like any row
    assert rows.KNOWN_LAYOUT_ANOMALIES == {}
    assert run.tensor_core_bits(good, notes, "f16.m16n8k8.f32", "sm_90").count("tile ") == 12
    # a known anomaly must keep reproducing: a right layout fails the test
    monkeypatch.setitem(rows.KNOWN_LAYOUT_ANOMALIES, ("sm_90", "f16.m16n8k8.f32"),
                        "an anomaly of this test")
    with pytest.raises(AssertionError, match="no longer reproduces"):
        run.tensor_core_bits(good, notes, "f16.m16n8k8.f32", "sm_90")

    class Swapped(ModelTensorCore):
        def run(self, s, A, B, C=None):
            return super().run(s, A, np.asarray(B)[:, ::-1, :], C)
    with pytest.raises(NoFigure, match="known anomaly on sm_90") as e:
        run.tensor_core_bits(session_with(Swapped(extra_bits=30, block=16, rounding="rn")),
                             notes, "f16.m16n8k8.f32", "sm_90")
    assert [(n.key, n.status) for n in e.value.notes] == [
        ("numerics.layout.f16.m16n8k8.f32", Status.INFO)]


def _checked(s: rows.MmaRow, arch: str, describe: str) -> Checked:
    p = kernels.probe(s, arch)
    funcs = {s.entry: _func(describe, s.entry)}
    tool = SimpleNamespace(name="ptxas", version="13.5.37")
    return Checked([(Built(p, funcs, tool=tool), p.check(funcs))])


def test_static_path_and_snapshot():
    bf = rows.mma("bf16.m16n8k16.f32")
    c = _checked(bf, "sm_90", "1x HMMA.16816.F32.BF16")
    assert run.static_path(c, "sm_90") == ([], [])
    snap = run.static_snapshot(c)
    assert snap.splitlines()[0] == ("// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                                    "(sm_90, ptxas 13.5.37): 1x HMMA.16816.F32.BF16")
    assert snap.endswith(bf.entry and sass.normalise(c[0][0].functions[bf.entry]))
    problems, _ = run.static_path(_checked(bf, "sm_90", "2x F2F + 1x HMMA.16816.F32"), "sm_90")
    assert "not a single tensor-core op" in problems[0]
    assert run.static_path(_checked(bf, "sm_90", "1x IMMA.16816"), "sm_90")[0] == ["1x IMMA.16816"]
    f8 = rows.mma("e4m3.m16n8k32.f32")
    assert run.static_path(_checked(f8, "sm_89", "1x QMMA.16832.F32.E4M3.E4M3"), "sm_89") == \
        ([], [])
    assert run.static_path(_checked(f8, "sm_89", "2x HMMA.16816.F32"), "sm_89")[0]
    hopper = "12x F2FP.F16.E4M3.UNPACK_B + 2x HMMA.16816.F32 + 4x FADD"
    problems, (note,) = run.static_path(_checked(f8, "sm_90", hopper), "sm_90")
    assert problems == [] and note.status == Status.INFO and note.data == {"native": False}
    assert note.key == "numerics.sass.e4m3.m16n8k32.f32" and hopper in note.detail
    assert re.match(r"mma\.sync\.aligned\.m16n8k32", note.detail)


# --- the tensor core through the launch stage (the real Runner and Gpu, NumPy for CuPy) -------

class MmaKernel:
    """The mma kernel's model: unpack A, B, C from the fragments, D = A*B + C in float64
    (rounded to the C type), packed back into D's fragments."""

    def __init__(self, s, log):
        self.s, self.log = s, log

    def __call__(self, grid, block, args, shared_mem=0):
        from pytest_gpuchar.topics.numerics import reference
        ga, gb, gc, gd, T = args
        s = self.s
        assert block == (run.THREADS,) and grid == ((int(T) * 32 + run.THREADS - 1)
                                                     // run.THREADS,)
        A = reference.decode(kernels.unpack(s, "a", ga), s.in_type)
        B = reference.decode(kernels.unpack(s, "b", gb), s.in_type)
        C = reference.decode(kernels.unpack(s, "c", gc), s.c_type)
        D = reference.to_type(A @ B + C, s.c_type)
        gd[...] = kernels.pack(s, "c", reference.encode(D, s.c_type))
        self.log.append(int(T))


def test_the_gpu_tensor_core_launches_once_per_batch_of_tiles(fake_cupy):
    fake_cupy.uint32 = np.uint32
    from pytest_gpuchar.core.gpu import Gpu
    from pytest_gpuchar.core.runner import Runner
    s = rows.mma("f16.m16n8k16.f32")
    dev = SimpleNamespace(arch="sm_80", driver="580", name="fake")
    gpu = Gpu(dev, None, 5.0)
    log, verified = [], []
    probe = run._probe(SimpleNamespace(gpu=gpu), s)
    funcs = {probe.entries[n]: _func("1x HMMA.16816.F32", probe.entries[n]) for n in probe.entries}
    compiled = SimpleNamespace(function=lambda e: MmaKernel(s, log))
    session = SimpleNamespace(
        gpu=gpu, runner=Runner(gpu), runs=RunCache(),
        builds=SimpleNamespace(jit_groups=lambda d, g: {},
                               jit=lambda p, d: Built(p, funcs, compiled=compiled)),
        verify=lambda p, f: (verified.append(p.name), p.check(f))[1])
    tc = run.runner(session)
    rng = np.random.default_rng(1)
    A = rng.standard_normal((3, s.m, s.k))
    B = rng.standard_normal((3, s.k, s.n))
    D = tc.run(s, A, B)
    ref = ModelTensorCore(extra_bits=30, block=s.k, rounding="rn").run(s, A, B)
    assert D.shape == (3, s.m, s.n) and np.allclose(D, ref, rtol=1e-2, atol=1e-2)
    assert log == [3] and session.runner.launch_count == 1
    tc.run(s, A, B)
    assert verified == [probe.name]          # the door is passed once per kernel
