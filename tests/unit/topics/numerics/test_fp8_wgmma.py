"""FP8 wgmma numerics without a GPU: the shared-memory and fragment layouts, the kernel, the
questions recovering the parameters of CPU models, the run functions on a model tensor core."""
from __future__ import annotations

import types
from fractions import Fraction

import numpy as np
import pytest

from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.numerics import fp8_questions as q
from pytest_gpuchar.topics.numerics import fp8_run, fp8_wgmma as fw, reference
from pytest_gpuchar.topics.numerics.kernels import TensorPath


def test_rows():
    s = fw.wgmma_row("e5m2", 8)
    assert (s.m, s.n, s.k, s.steps, s.c_type) == (64, 8, 256, 8, "f32")
    assert s.entry == "fp8wg_e5m2_s8" and s.unsupported("sm_90") is None
    assert s.instruction == "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2"
    assert s.unsupported("sm_89")
    with pytest.raises(ValueError):
        fw.wgmma_row("f16")
    assert [p.mma.name for p in fw.probes("sm_90")] == [
        "e4m3.m64n8k32.f32.wgmma", "e4m3.m64n8k256.f32.wgmma", "e5m2.m64n8k32.f32.wgmma",
        "e5m2.m64n8k256.f32.wgmma"]
    assert fw.probes("sm_86") == [] and fp8_run.groups("sm_80") == []
    with pytest.raises(NotApplicable, match="^static: sm_89"):
        fp8_run.static_probe("e4m3", 1, "sm_89")


def test_smem_layout_is_the_canonical_k_major_one():
    s = fw.wgmma_row("e4m3", 2)                      # K = 64: four 16-byte chunks per row
    off = fw.smem_offsets(64, s)
    assert off[0, 0] == 0 and off[1, 0] == 16 and off[0, 16] == 128 and off[8, 0] == 512
    assert sorted(off.ravel().tolist()) == list(range(64 * 64))   # every byte once
    a = np.arange(64 * 64, dtype=np.uint16).reshape(1, 64, 64) % 251
    b = (np.arange(64 * 8, dtype=np.uint16).reshape(1, 64, 8) * 7) % 253
    tile = fw.pack_ab(s, a.astype(np.uint8), b.astype(np.uint8))
    assert tile.shape == (1, 64 * 64 + 8 * 64)
    assert tile[0, off[5, 37]] == a[0, 5, 37]
    boff = fw.smem_offsets(8, s)
    assert tile[0, 4096 + boff[3, 21]] == b[0, 21, 3]     # B stored as N rows of K


def test_fragments_cover_the_tile_once():
    xy = fw.fragment_coords()
    assert xy.shape == (128, 4, 2)
    assert len({tuple(v) for v in xy.reshape(-1, 2).tolist()}) == 64 * 8
    assert xy[0, 0].tolist() == [0, 0] and xy[1, 1].tolist() == [0, 3]
    assert xy[4, 2].tolist() == [9, 0] and xy[32, 0].tolist() == [16, 0]
    c = np.arange(2 * 64 * 8, dtype=np.uint32).reshape(2, 64, 8)
    assert np.array_equal(fw.unpack_d(fw.pack_c(c)), c)


def test_kernel_text():
    text = fw.kernel(fw.wgmma_row("e4m3", 8))
    assert text.count("wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3") == 8
    assert "add.s64 %dA, %descA, 112;" in text and ".maxntid 128, 1, 1" in text
    assert "fence.proxy.async.shared::cta;" in text and "@%p bra $FP8_DONE;" in text
    assert f"or.b64 %descA, %descA, {(2048 >> 4 << 32) | (8 << 16)};" in text


class Model:
    """A CPU wgmma: per k block, the products and C aligned to the largest exponent and
    truncated to 24 + extra bits, summed, rounded (reference.model_mma)."""

    def __init__(self, extra=-10, rounding="rz", block=32):
        self.extra, self.rounding, self.block = extra, rounding, block
        self.runs = 0

    def verify(self, s):
        return TensorPath(s.name, {"QGMMA.64x8x32.F32.E4M3.E4M3": s.k // 32})

    def sass_text(self, s):
        return "QGMMA (model)\n"

    def run(self, s, A, B, C=None):
        self.runs += 1
        A = np.asarray(A, float)
        C = np.zeros((A.shape[0], s.m, s.n)) if C is None else C
        conv = [reference.to_type(x, t).astype(float)
                for x, t in ((A, s.in_type), (B, s.in_type), (C, "f32"))]
        return reference.model_mma(*conv, "f32", extra_bits=self.extra, block=self.block,
                                   rounding=self.rounding)


@pytest.mark.parametrize("t", fw.TYPES)
def test_questions_recover_a_14_bit_truncating_accumulator(t):
    s = fw.wgmma_row(t)
    tc = Model(-10)
    acc = q.ask_accumulator_bits(tc, s)
    assert acc.value == 14 and q.extra_bits(acc).value == -10
    assert q.ask_product_sum_bits(tc, s).value == 14
    assert q.ask_rounding(tc, s, "c", 14).modes == ["terms"]
    assert q.ask_rounding(tc, s, "products", 14).modes == ["terms"]
    assert q.ask_block_size(tc, s, 14).value is None


def test_questions_on_an_exact_f32_accumulator():
    s = fw.wgmma_row("e5m2")
    tc = Model(40, "rn")
    assert q.ask_accumulator_bits(tc, s).value == 24
    assert q.ask_rounding(tc, s, "c", 24).modes == ["rn"]
    e4 = q.ask_rounding(Model(40, "rn"), fw.wgmma_row("e4m3"), "products", 24)
    assert e4.value is None and e4.detail.startswith("undetermined")


def test_rounding_helpers():
    assert q.round_bits(Fraction(8193, 2), 13, "rn") == 4096       # 4096.5: tie to even
    assert q.round_bits(Fraction(8195, 2), 13, "rn") == 4098
    assert q.round_bits(Fraction(-8193, 2), 13, "rz") == -4096
    assert q.round_bits(Fraction(-8193, 2), 13, "rd") == -4097
    assert q.truncated_terms([Fraction(8192), Fraction(-1, 4)], 14) == 8192
    assert q.truncated_terms([Fraction(-8192), Fraction(3, 2)], 14) == -8191
    assert q.classify([([Fraction(8192), Fraction(3, 4)], 8192.0)], 14) == ["rz", "rd", "terms"]


def test_k_errors_grow_with_k_for_a_short_accumulator():
    s = fw.wgmma_row("e4m3")
    curves = q.k_errors({"short": Model(-10), "exact": Model(40, "rn")}, s, ks=(32, 512),
                        tiles=2)
    short, exact = curves["short"], curves["exact"]
    assert short[512] > short[32] > exact[32] and short[512] > 10 * exact[512]
    assert q.FP8_ROWS[0].key == "numerics.fp8_wgmma.e4m3.products_exact"
    assert q.Fp8Row("e4m3", "rounding_c_terms").asked == ("rounding_c", "terms")


class NoAheadRuns(RunCache):
    """The session's run cache without work ahead: a test that does not take the CPU models
    (a second of host work a type, started ahead once the kept bits are known) does not make
    them on a thread for nothing. The work ahead itself:
    test_the_cpu_models_start_once_the_bits_are_known_and_are_taken_by_k_growth."""

    def ahead(self, key, make):
        pass


def _session(monkeypatch, tc, runs=RunCache):
    monkeypatch.setattr(fp8_run, "runner", lambda session: tc)
    return types.SimpleNamespace(runs=runs())


class _Record:
    def __init__(self):
        self.notes = []

    def note(self, r):
        self.notes.append(r)
        return r


def test_questions_as_figures(monkeypatch):
    s = _session(monkeypatch, Model(-10))
    rec = _Record()
    m = fp8_run.question(s, rec, q.Fp8Row("e4m3", "accumulator_bits"), "sm_90")
    f, = m.figures
    assert f.key == "numerics.fp8_wgmma.e4m3.accumulator_bits" and f.value == 14
    assert f.unit == "bits" and f.data["tolerance"] == {"abs": 0}
    assert fp8_run.question(s, rec, q.Fp8Row("e4m3", "rounding_c_terms"), "sm_90"
                            ).figures[0].value == 1.0
    assert fp8_run.question(s, rec, q.Fp8Row("e4m3", "rounding_c_rn"), "sm_90"
                            ).figures[0].value == 0.0
    with pytest.raises(NotApplicable, match="no infinity in e4m3"):
        fp8_run.question(s, rec, q.Fp8Row("e4m3", "inf_propagates"), "sm_90")
    with pytest.raises(NotApplicable, match="undetermined"):
        fp8_run.question(s, rec, q.Fp8Row("e4m3", "block_size"), "sm_90")
    assert rec.notes and rec.notes[-1].key.endswith("block_size")
    with pytest.raises(NotApplicable, match="sm_90a"):
        fp8_run.question(s, rec, q.Fp8Row("e4m3", "accumulator_bits"), "sm_89")


def test_bits_text_and_layout_check(monkeypatch):
    s = _session(monkeypatch, Model(-10), NoAheadRuns)
    text = fp8_run.bits_text(s, "e5m2", "sm_90")
    assert text.startswith("// wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2 on sm_90")
    assert "// accumulator cases" in text and "\n13 46000400 " in text    # 2^13 + 1 exact
    fp8_run.layout_check(Model(-10), fw.wgmma_row("e4m3"))

    class Shuffled(Model):
        def run(self, s, A, B, C=None):
            return super().run(s, A, B, C)[:, ::-1, :]
    with pytest.raises(AssertionError, match="layout"):
        fp8_run.layout_check(Shuffled(), fw.wgmma_row("e4m3"))


def test_k_growth_figures_and_group_check(monkeypatch, tmp_path):
    s = _session(monkeypatch, Model(-10))
    monkeypatch.setattr(q, "K_GROWTH", (32, 64, 512))
    monkeypatch.setattr(q, "K_REPORTED", (32, 512))
    monkeypatch.setattr(q, "k_errors", lambda tcs, row, ks=(32, 64, 512), tiles=2, cases=None:
                        {name: {k: 1e-4 * k ** 0.5 for k in ks} for name in tcs})
    m = fp8_run.k_growth(s, "e4m3", "sm_90", None, tmp_path)
    assert [f.key for f in m.figures] == ["numerics.fp8_wgmma.e4m3.k_error.k32",
                                          "numerics.fp8_wgmma.e4m3.k_error.k512"]
    assert set(m.figures[0].data["models"]) == {"f32 accumulation",
                                                "14-bit truncated accumulation"}
    assert not m.checks and (tmp_path / "k-error-e4m3.png").exists()


def test_the_cpu_models_start_once_the_bits_are_known_and_are_taken_by_k_growth(monkeypatch,
                                                                               tmp_path):
    s = _session(monkeypatch, Model(-10))
    monkeypatch.setattr(q, "K_REPORTED", (32, 512))
    asked = []

    def k_errors(tcs, row, ks=(32, 64, 512), tiles=2, cases=None):
        asked.append(sorted(tcs))
        return {name: {k: 1e-4 * k ** 0.5 for k in ks} for name in tcs}
    monkeypatch.setattr(q, "k_errors", k_errors)
    bits = fp8_run.answers(s, "e4m3")["accumulator_bits"].value
    key = fp8_run._models_key("e4m3", bits)
    assert key in s.runs                                    # started beside the questions
    m = fp8_run.k_growth(s, "e4m3", "sm_90", None, tmp_path)
    assert key not in s.runs and sorted(asked) == [
        ["14-bit truncated accumulation", "f32 accumulation"], ["measured"]]
    assert set(m.figures[0].data["models"]) == {"f32 accumulation",
                                                "14-bit truncated accumulation"}


def test_a_k_case_is_made_once_and_read_only():
    a = q.k_case("e5m2", 32, 2)
    assert q.k_case("e5m2", 32, 2) is a
    A, B, ref = a
    assert not (A.flags.writeable or B.flags.writeable or ref.flags.writeable)
    A2, B2 = q.k_inputs("e5m2", 32, 2)
    assert np.array_equal(A, A2) and np.array_equal(ref, q.exact_product(A2, B2))
