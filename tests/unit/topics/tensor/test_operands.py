"""Operand values of the tensor probes: sparse metadata, random registers, the ldmatrix chase
layout, the launch buffers (CPU only)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pytest_gpuchar.topics.tensor.mma import kernels, operands, rows

VALID = operands.META_NIBBLES["f16"]


def _word(nibbles):
    return sum(n << (4 * i) for i, n in enumerate(nibbles))


@given(st.lists(st.sampled_from(VALID), min_size=8, max_size=8))
def test_valid_2_4_metadata_accepted(nibbles):
    operands.validate_sparse_metadata([_word(nibbles)], "f16", "p")


@pytest.mark.parametrize("bad,why", [(0x0, "equal"), (0x5, "equal"), (0x1, "ascending"),
                                     (0x6, "ascending"), (0xF, "equal")])
def test_invalid_metadata_rejected_with_the_group(bad, why):
    word = _word([0x4] * 7 + [bad])
    with pytest.raises(operands.SparseMetadataError) as e:
        operands.validate_sparse_metadata([0x44444444, word], "f16", "mma.sp/x/ilp1")
    msg = str(e.value)
    assert "mma.sp/x/ilp1" in msg and "word 1" in msg and "group 7" in msg and why in msg


def test_tf32_metadata_is_1_2():
    operands.validate_sparse_metadata([_word([0x4, 0xE] * 4)], "tf32")
    with pytest.raises(operands.SparseMetadataError, match="not allowed for tf32"):
        operands.validate_sparse_metadata([_word([0x8] * 8)], "tf32")


def test_metadata_wider_than_32_bits_rejected():
    with pytest.raises(operands.SparseMetadataError, match="wider than 32 bits"):
        operands.validate_sparse_metadata([1 << 40], "f16")


def test_bad_metadata_rejected_before_launch(monkeypatch):
    """inputs() (what every launch uses) validates metadata: a bad draw never reaches the GPU."""
    p = kernels.sweep_probe(rows.row("mma.sp", "f16.f32.m16n8k32"), "sm_80", 1)
    real = operands.draw_regs

    def bad(kind, n, rng):
        out = real(kind, n, rng)
        return out & np.uint64(0xFFFFFFF0) if kind.startswith("meta.") else out
    monkeypatch.setattr(operands, "draw_regs", bad)
    with pytest.raises(operands.SparseMetadataError, match=p.name):
        operands.inputs(p, 64)


@settings(max_examples=20)
@given(st.sampled_from([k for k in operands.REG_KINDS]), st.integers(0, 2**32 - 1))
def test_random_inputs_never_zero(kind, seed):
    v = operands.draw_regs(kind, 64, np.random.default_rng(seed))
    assert v.shape == (64,) and (v != 0).all()
    if kind in ("s8x4", "u8x4", "e4m3x4", "e5m2x4"):
        for k in range(4):
            assert ((v >> np.uint64(8 * k)) & np.uint64(0xFF) != 0).all(), "a zero byte"
    if kind in ("f16x2", "bf16x2"):
        assert ((v & np.uint64(0x7FFF)) != 0).all() and ((v >> np.uint64(16)) & np.uint64(0x7FFF)
                                                          != 0).all()


def test_inputs_are_random_per_thread_and_valid():
    p = kernels.sweep_probe(rows.row("mma.sp", "tf32.f32.m16n8k8"), "sm_80", 2)
    buf, _ = operands.inputs(p, 128)
    assert buf.shape == (128, len(p.slots))
    assert len(np.unique(buf[:, 0])) > 100   # operands differ between threads


def test_shared_words_are_the_probes_own():
    """ldmatrix: the chase layout; wgmma: A/B values of the row's type (after the same
    dropped draw as every probe); the others: random non-zero words."""
    ldm = kernels.sweep_probe(rows.row("ldmatrix", "x2"), "sm_80", 3)
    assert (operands.inputs(ldm, 32)[1] == operands.ldmatrix_fill(3)).all()
    wg = kernels.wgmma_probe(rows.wgmma_row("f16.f32.m64n64k16.ss"), 1)
    fill = operands.inputs(wg, 128)[1]
    assert fill.dtype == np.uint32 and fill.shape == (wg.smem_words,) and (fill != 0).all()
    mma = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_80", 1)
    assert operands.inputs(mma, 32)[1].shape == (1,)


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("ilp", [1, 3])
def test_ldmatrix_pointer_chase_is_a_fixed_point(k, ilp):
    """Simulate ldmatrix.m8n8.xk on the fill: thread t addressing row t of its chain gets back
    (first register) word t%4 of row t//4 = the offset of row t; 8 distinct rows per matrix."""
    fill = operands.ldmatrix_fill(ilp)
    for c in range(ilp):
        addr = np.array([c * 512 + t * 16 for t in range(32)])
        rows_ = addr[:8 * k] // 16
        for m in range(k):
            assert len(set(rows_[8 * m:8 * m + 8] % 8)) == 8   # one 128-byte phase, no conflict
        got = np.array([fill[addr[t // 4] // 4 + t % 4] for t in range(32)])
        assert (got == addr).all()


def test_blackwell_narrow_format_registers():
    """e2m1 nibbles are +-0.5 / +-1 (never zero); block scales are 1.0 in every byte."""
    import ml_dtypes
    import numpy as np
    from pytest_gpuchar.topics.tensor.mma import operands
    rng = np.random.default_rng(0)
    words = operands.draw_regs("e2m1x8", 64, rng)
    nibbles = [(int(w) >> (4 * k)) & 0xF for w in words for k in range(8)]
    values = np.array(nibbles, np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32) \
        if hasattr(ml_dtypes, "float4_e2m1fn") else None
    assert set(nibbles) <= {0b0001, 0b0010, 0b1001, 0b1010}
    if values is not None:
        assert set(np.abs(values)) == {0.5, 1.0}
    assert set(operands.draw_regs("scale.ue8m0", 3, rng)) == {0x7F7F7F7F}
    assert set(operands.draw_regs("scale.ue4m3", 3, rng)) == {0x38383838}


def test_metadata_checked_at_once_names_the_first_bad_word():
    good = operands._pack([0x4, 0x8, 0xC, 0x9, 0xD, 0xE, 0x4, 0x8] * 3, 4)
    operands.validate_sparse_metadata(good, "f16")
    words = np.concatenate([good, [0x44444445, 0x44444446]]).astype(np.uint64)
    with pytest.raises(operands.SparseMetadataError, match=r"word 3 = 0x44444445: group 0 "):
        operands.validate_sparse_metadata(words, "f16", "p")


def test_uniform_pm_draws_the_stream_of_choice():
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    want = b.uniform(0.25, 1.0, 300) * b.choice([-1.0, 1.0], 300)
    assert np.array_equal(operands._uniform_pm(a, 300), want)
    assert a.integers(0, 1 << 30) == b.integers(0, 1 << 30)      # the stream goes on alike
