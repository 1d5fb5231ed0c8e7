"""reference.exact_matmul: A @ B correctly rounded, bit for bit what math.fsum over each
element's exact products returns (the FP8 error-growth reference, fp8_questions.exact_product,
computed in integers instead of 32768 fsum calls per type)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuchar.topics.numerics import fp8_questions as q
from pytest_gpuchar.topics.numerics import reference


def fsum_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """The definition: math.fsum over each element's exact products."""
    out = np.empty(A.shape[:-2] + (A.shape[-2], B.shape[-1]))
    for idx in np.ndindex(*A.shape[:-2]):
        for i in range(A.shape[-2]):
            for j in range(B.shape[-1]):
                out[idx + (i, j)] = math.fsum(A[idx][i, :] * B[idx][:, j])
    return out


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and np.array_equal(np.asarray(x, np.float64).view(np.int64),
                                                 np.asarray(y, np.float64).view(np.int64))


@pytest.mark.parametrize("in_type", ["e4m3", "e5m2"])
@pytest.mark.parametrize("k", [32, 256, 1024])
def test_the_fp8_error_growth_inputs(in_type, k):
    A, B = q.k_inputs(in_type, k, 2)
    assert same_bits(q.exact_product(A, B), fsum_matmul(A, B))


def _values(exps: tuple[int, int]):
    """Floats of few significant bits (products exact in float64) over an exponent range."""
    return st.builds(lambda m, e, s: s * m * 2.0 ** e, st.integers(0, 255),
                     st.integers(*exps), st.sampled_from([-1.0, 1.0]))


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(1, 4), st.integers(1, 40), st.integers(1, 4),
       st.sampled_from([(-30, 10), (-500, 400), (-1060, -1000), (480, 500), (-20, 20)]))
def test_bit_for_bit_what_fsum_gives(data, m, k, n, exps):
    A = np.array(data.draw(st.lists(_values(exps), min_size=m * k, max_size=m * k)))
    B = np.array(data.draw(st.lists(_values(exps), min_size=k * n, max_size=k * n)))
    A, B = A.reshape(1, m, k), B.reshape(1, k, n)
    try:
        want = fsum_matmul(A, B)
    except OverflowError:            # fsum's intermediate overflow: no reference to match
        return
    assert same_bits(reference.exact_matmul(A, B), want)


def test_cancellation_zeros_and_the_fallbacks():
    A = np.array([[[1.0, -1.0, 2.0 ** -60, 0.0]]])
    B = np.array([[[3.0], [3.0], [2.0 ** 70], [5.0]]])
    assert same_bits(reference.exact_matmul(A, B), fsum_matmul(A, B))      # 1024 exactly
    zero = np.zeros((1, 2, 3))
    assert same_bits(reference.exact_matmul(zero, np.ones((1, 3, 2))), np.zeros((1, 2, 2)))
    wide = np.array([[[2.0 ** 600, 2.0 ** -600]]])                            # too wide
    col = np.array([[[1.0], [1.0]]])
    assert same_bits(reference.exact_matmul(wide, col), fsum_matmul(wide, col))
    tiny = np.array([[[2.0 ** -1070, 3 * 2.0 ** -1074]]])                     # subnormal sum
    assert same_bits(reference.exact_matmul(tiny, col), fsum_matmul(tiny, col))
    inf = np.array([[[math.inf, 1.0]]])
    assert same_bits(reference.exact_matmul(inf, col), fsum_matmul(inf, col))
