"""The exact CPU references (topics/numerics/reference.py): bit-exact low-precision
emulation and exact references (CPU only)."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuchar.topics.numerics import reference

SETTINGS = settings(derandomize=True, max_examples=300, deadline=None, database=None)
f32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


def _rna_tf32(x: float) -> float:
    """Reference cvt.rna.tf32.f32 with Fractions: nearest tf32 (10 mantissa bits, FP32
    exponent range incl. subnormals), ties away from zero."""
    if x == 0:
        return x
    q = Fraction(x)
    e = max(math.floor(math.log2(abs(x))), -126)
    step = Fraction(2) ** (e - 10)
    n = abs(q) / step
    r = math.floor(n + Fraction(1, 2))
    return math.copysign(float(r * step), x)


def _rne(x: float, mant: int, emin: int) -> float:
    """Reference round-to-nearest-even into a type with `mant` mantissa bits, min exponent."""
    if x == 0:
        return x
    q = Fraction(x)
    e = max(math.floor(math.log2(abs(x))), emin)
    step = Fraction(2) ** (e - mant)
    n = abs(q) / step
    f = math.floor(n)
    rem = n - f
    r = f + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and f % 2) else 0)
    return math.copysign(float(r * step), x)


class TestTF32:
    @pytest.mark.parametrize("x,want", [
        (1 + 2 ** -11, 1 + 2 ** -10),             # tie: away from zero
        (-(1 + 2 ** -11), -(1 + 2 ** -10)),
        (1 + 3 * 2 ** -11, 1 + 2 * 2 ** -10),     # tie, odd: still away (not to even)
        (1 + 2 ** -12, 1.0),
        (1 + 2 ** -11 + 2 ** -23, 1 + 2 ** -10),
        (2.0 ** -149, 0.0),                        # smallest subnormal rounds to zero
        (2.0 ** -137, 2.0 ** -136),                # subnormal tie: away
        (-0.0, -0.0),
    ])
    def test_cases(self, x, want):
        got = float(reference.round_tf32(np.float32(x)))
        assert got == want and math.copysign(1, got) == math.copysign(1, want)

    def test_low_bits_clear_and_specials(self):
        big = np.float32(np.finfo(np.float32).max)
        out = reference.round_tf32(np.array([big, np.inf, -np.inf, np.nan], dtype=np.float32))
        assert np.isinf(out[0]) and out[0] > 0            # rounds past the largest finite
        assert out[1] == np.inf and out[2] == -np.inf
        assert np.isnan(out[3])
        nan_payload = np.array([0x7F800001], dtype=np.uint32).view(np.float32)
        assert np.isnan(reference.round_tf32(nan_payload))[0]   # a NaN never becomes inf

    @SETTINGS
    @given(f32s)
    def test_matches_reference(self, x):
        if abs(x) > 3.4e38:
            return
        got = reference.round_tf32(np.float32(x))
        assert int(np.asarray(got).view(np.uint32)) & 0x1FFF == 0
        assert float(got) == _rna_tf32(float(np.float32(x)))


@pytest.mark.parametrize("name,mant,emin", [("bf16", 7, -126), ("f16", 10, -14),
                                            ("e4m3", 3, -6), ("e5m2", 2, -14)])
class TestRNE:
    @SETTINGS
    @given(x=f32s)
    def test_matches_reference(self, name, mant, emin, x):
        t = reference.numtype(name)
        if abs(x) >= t.max_finite:
            return
        got = float(reference.to_type(np.float32(x), name).astype(np.float64))
        want = _rne(float(np.float32(x)), mant, emin)
        if abs(want) > t.max_finite:      # rounds past the largest finite
            assert math.isinf(got) or math.isnan(got)
        else:
            assert got == want

    def test_bits_round_trip_exhaustive(self, name, mant, emin):
        t = reference.numtype(name)
        bits = np.arange(2 ** t.bits, dtype=t.uint)
        vals = reference.decode(bits, name)
        with np.errstate(invalid="ignore"):
            back = reference.encode(vals.astype(np.float32).astype(t.storage), name)
        finite = ~np.isnan(vals)
        assert np.array_equal(back[finite], bits[finite])

    def test_edges(self, name, mant, emin):
        t = reference.numtype(name)
        assert t.min_normal == 2.0 ** emin
        assert t.min_subnormal == 2.0 ** (emin - mant)
        edge = np.array([t.min_subnormal, -t.min_subnormal, t.min_normal, t.max_finite, -0.0])
        assert reference.is_representable(edge, name).all()
        assert not reference.is_representable(np.array([t.min_subnormal / 2 * 3]), name).all() \
            or mant == 0
        z = reference.to_type(np.float32(-0.0), name)
        assert math.copysign(1, float(z)) == -1
        sat = reference.to_type(np.finfo(np.float32).max, name, satfinite=True)
        assert float(sat) == t.max_finite


def test_tf32_type_edges():
    t = reference.numtype("tf32")
    assert t.max_finite == float(reference.round_tf32(np.float32(t.max_finite)))
    assert t.min_subnormal == 2.0 ** -136
    with pytest.raises(ValueError, match="unknown numeric type"):
        reference.numtype("fp4")


class TestRounding:
    def test_f32_modes(self):
        one = Fraction(1)
        u = Fraction(2) ** -23
        assert reference.round_f32(one + u / 2, "rn") == 1.0          # tie to even
        assert reference.round_f32(one + 3 * u / 2, "rn") == 1 + 2 * 2 ** -23
        assert reference.round_f32(one + 3 * u / 4, "rz") == 1.0
        assert reference.round_f32(-(one + 3 * u / 4), "rz") == -1.0
        assert reference.round_f32(-(one + 3 * u / 4), "rd") == -(1 + 2 ** -23)
        assert reference.round_f32(one + u / 4, "ru") == 1 + 2 ** -23
        with pytest.raises(ValueError, match="rounding mode"):
            reference.round_f32(one, "rna")

    def test_f16_overflow(self):
        assert reference.round_exact(Fraction(65520), "f16", "rn") == math.inf
        assert reference.round_exact(Fraction(65519), "f16", "rn") == 65504.0
        assert reference.round_exact(Fraction(70000), "f16", "rz") == 65504.0
        assert reference.round_exact(Fraction(-70000), "f16", "rn") == -math.inf

    def test_classify(self):
        q = Fraction(1) + Fraction(3, 4) * Fraction(2) ** -23
        assert reference.classify_rounding([(q, 1.0)]) == ["rz", "rd"]
        assert reference.classify_rounding([(q, 1 + 2 ** -23), (-q, -(1 + 2 ** -23))]) == ["rn"]

    @SETTINGS
    @given(st.lists(st.tuples(f32s, f32s), min_size=1, max_size=8))
    def test_dot_f64_is_correctly_rounded(self, pairs):
        a = np.array([[reference.to_type(np.float32(x), "bf16").astype(float) for x, _ in pairs]])
        b = np.array([[reference.to_type(np.float32(y), "bf16").astype(float) for _, y in pairs]])
        if not (np.isfinite(a).all() and np.isfinite(b).all()) or np.abs(a * b).max() > 1e300:
            return
        exact = reference.exact_dot(a[0], b[0])
        assert reference.dot_f64(a, b)[0] == float(exact)

    def test_cancellation(self):
        a = np.array([[1.0, 2.0 ** -30, -1.0]])
        b = np.array([[1.0, 1.0, 1.0]])
        assert reference.dot_f64(a, b)[0] == 2.0 ** -30
        assert reference.exact_dot([2.0 ** 60, 1.0, -(2.0 ** 60)], [1, 1, 1]) == 1


class TestElementwise:
    def test_same_draws_across_ops_and_types(self):
        m = reference.element_case("mul", "fp32", "bf16", "f32", 64)
        i = reference.element_case("inner", "fp32", "f16", "f32", 64)
        a = reference.element_case("acc", "fp32", "tf32", "f32", 64)
        assert np.array_equal(m.cpu["a0"], i.cpu["a0"])
        assert np.array_equal(i.cpu["a1"], a.cpu["c"])       # a1 of inner == c of acc (paper)
        assert (i.cpu["b1"] == 1).all() and (m.cpu["a1"] == 0).all()

    @pytest.mark.parametrize("t,c", [("bf16", "f32"), ("f16", "f16"), ("tf32", "f32"),
                                     ("e4m3", "f32")])
    def test_low_init_is_representable_and_shared(self, t, c):
        e = reference.element_case("acc", "low", t, c, 256)
        assert reference.is_representable(e.dev["a0"], t).all()
        assert reference.is_representable(e.dev["c"], c if c != "f32" else t).all()
        assert np.array_equal(e.cpu["a0"].astype(float), e.dev["a0"])

    def test_exact_products_have_zero_error(self):
        e = reference.element_case("mul", "low", "bf16", "f32", 512)
        base = reference.cpu_fp32_baseline(e)
        exact = reference.exact_reference(e)
        assert reference.error_stat(base, exact).mean_abs == 0.0

    def test_bad_args(self):
        with pytest.raises(ValueError, match="element-wise op"):
            reference.element_case("div", "low", "bf16", "f32", 4)
        with pytest.raises(ValueError, match="init"):
            reference.element_case("mul", "fp64", "bf16", "f32", 4)

    def test_nonfinite_is_counted_not_averaged(self):
        s = reference.error_stat([1.0, np.inf, np.nan], [1.0, 2.0, 3.0])
        assert s.nonfinite == 2 and s.mean_abs is None and not s.finite
        ok = reference.error_stat([1.0, 2.5], [1.0, 2.0])
        assert ok.finite and ok.mean_abs == 0.25 and ok.exact_fraction == 0.5


class TestChain:
    def test_low_init_shares_values(self):
        a_cpu, bs_cpu, a_dev, bs_dev = reference.chain_inputs("f16", "low", 3, 5, 16, 8)
        assert np.array_equal(a_cpu, a_dev) and all(np.array_equal(x, y)
                                                    for x, y in zip(bs_cpu, bs_dev))
        a32, _, a16, _ = reference.chain_inputs("f16", "fp32", 3, 5, 16, 8)
        assert not np.array_equal(a32, a16)
        assert reference.is_representable(a16, "f16").all()

    def test_errors(self):
        ref = np.ones((2, 4, 4))
        got = ref.copy()
        got[1, 0, 0] = 3.0
        e = reference.l2_relative_errors(ref, got)
        assert e[0] == 0 and e[1] == pytest.approx(reference.l2_relative_error(ref[1], got[1]))
        got[0, 0, 0] = np.inf
        assert not np.isfinite(reference.l2_relative_errors(ref, got)[0])
        curve = reference.ChainCurve("f16", "low", 10, [0.1, 0.2, np.nan], [0, 0.4, 0.6])
        assert curve.overflow_link() == 3 and curve.overflow_link(0.3) == 2


class TestModel:
    def test_wide_adder_rn_is_correctly_rounded(self):
        rng = np.random.default_rng(1)
        A = reference.to_type(rng.standard_normal((4, 16, 16)).astype(np.float32), "bf16")
        B = reference.to_type(rng.standard_normal((4, 16, 8)).astype(np.float32), "bf16")
        A, B = A.astype(float), B.astype(float)
        D = reference.model_mma(A, B, np.zeros((4, 16, 8)), extra_bits=40, block=16,
                             rounding="rn")
        want = (A @ B).astype(np.float32).astype(float)
        assert np.array_equal(D, want)

    def test_truncation_and_alignment(self):
        A = np.array([[[1.0, 2.0 ** -26, -1.0]]])
        B = np.ones((1, 3, 1))
        C = np.zeros((1, 1, 1))
        assert reference.model_mma(A, B, C, extra_bits=3)[0, 0, 0] == 2.0 ** -26
        assert reference.model_mma(A, B, C, extra_bits=2)[0, 0, 0] == 0.0
        with pytest.raises(ValueError, match="model rounding"):
            reference.model_mma(A, B, C, rounding="rd")


f64s = st.floats(allow_nan=False, allow_infinity=False, width=64)


@SETTINGS
@given(f64s)
def test_round_exact_rn_matches_ieee_casts(x):
    """Rounding the exact value of a double once to FP32/FP16 (incl. subnormals, the largest
    finite value and overflow to inf) agrees with numpy's IEEE round-to-nearest-even casts."""
    import warnings
    q = Fraction(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want32, want16 = float(np.float32(x)), float(np.float16(x))
    assert reference.round_exact(q, "f32", "rn") == want32
    assert reference.round_exact(q, "f16", "rn") == want16


@SETTINGS
@given(f64s, st.sampled_from(["f32", "f16"]))
def test_round_exact_directed_modes_bracket(x, out):
    q = Fraction(x)
    lo, hi = reference.round_exact(q, out, "rd"), reference.round_exact(q, out, "ru")
    assert lo <= x <= hi
    z = reference.round_exact(q, out, "rz")
    assert abs(z) <= abs(x) and z in (lo, hi)
    assert math.copysign(1, z) == math.copysign(1, x) or z == 0


def test_dot_f64_is_fsum_row_by_row_bit_for_bit():
    import math
    rng = np.random.default_rng(11)
    a = rng.standard_normal((300, 4)).astype(np.float16).astype(np.float64)
    b = rng.standard_normal((300, 4)).astype(np.float16).astype(np.float64)
    a[0, 0], a[1, :], a[2, 0], b[2, 0] = np.inf, 0.0, 2.0 ** -20, 2.0 ** -1000   # inf, zeros,
    c = rng.standard_normal(300) * 2.0 ** 40                                     # subnormal
    want = np.array([math.fsum([*(x * y), z]) for x, y, z in zip(a, b, c)])
    got = reference.dot_f64(a, b, c)
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    with pytest.raises(ValueError):
        reference.dot_f64([[np.inf, -np.inf]], [[1.0, 1.0]])


def test_the_static_suite_does_not_import_ml_dtypes():
    """The numerics topic is imported at every collection of the suite; ml_dtypes (about a
    second to import in some versions) only when a bf16 or fp8 value is made."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from pytest_gpuchar.topics.numerics import analysis, kernels, reference, run\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported with the topic'\n"
            "reference.numtype('f16').max_finite\n"
            "assert 'ml_dtypes' not in sys.modules, 'imported for f16'\n"
            "import ml_dtypes\n"
            "t = reference.numtype('e4m3')\n"
            "assert t.storage is ml_dtypes.float8_e4m3fn and t.max_finite == 448.0\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
