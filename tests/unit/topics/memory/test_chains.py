"""Pointer chains (topics/memory/chains.py): random single cycles, layouts and the host's walk
of them, the constant-cache chain."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuchar.topics.memory import chains
from pytest_gpuchar.topics.memory.rows import LINE


@given(st.integers(1, 3000), st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_random_cycle_is_one_cycle_through_every_element(n, seed):
    nxt = chains.random_cycle(n, np.random.default_rng(seed))
    assert chains.is_single_cycle(nxt)
    order = chains.cycle_order(nxt, 0)
    assert sorted(order.tolist()) == list(range(n))


@given(st.integers(2, 400), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_sattolo_is_one_cycle(n, seed):
    assert chains.is_single_cycle(chains.sattolo(n, np.random.default_rng(seed)))


def test_single_cycle_check_rejects_two_cycles_and_non_permutations():
    assert not chains.is_single_cycle(np.array([1, 0, 3, 2]))      # two 2-cycles
    assert not chains.is_single_cycle(np.array([1, 1, 0]))         # not a permutation
    assert not chains.is_single_cycle(np.array([0, 2, 1]))         # fixed point + 2-cycle
    with pytest.raises(chains.ChainError, match="not a single cycle"):
        chains.cycle_order(np.array([1, 0, 3, 2]), 0)


@pytest.mark.parametrize("footprint", [4096, 1 << 20, 3 * (1 << 20) + 128])
def test_random_layout_visits_exactly_the_intended_lines(footprint):
    lay = chains.random_layout(footprint, LINE, seed=5)
    assert lay.n == footprint // LINE
    assert lay.distinct_lines() == lay.n
    # a walk of the chain from the host model visits every line once per cycle
    seen = {0}
    x = 0
    for _ in range(min(lay.n - 1, 5000)):
        x = int(lay.nxt[x])
        seen.add(x)
    assert len(seen) == min(lay.n, 5001)
    assert lay.walk(0, lay.n) == 0
    assert lay.walk(0, 1) == int(lay.nxt[0])
    assert lay.walk(0, 7) == int(lay.visit_order[7])


def test_a_chain_touching_fewer_lines_than_intended_is_refused():
    """The '1 GB at 4 KB stride touched only 17 MB' mistake: a layout whose pointers do not
    cover the intended lines fails check_layout."""
    lay = chains.random_layout(1 << 16, LINE, seed=1)
    with pytest.raises(chains.ChainError, match="pointers"):
        chains.check_layout(lay, (1 << 30) // 4096)
    broken = chains.Layout(np.array([1, 0, 3, 2]), LINE)
    with pytest.raises(chains.ChainError, match="single cycle"):
        chains.check_layout(broken, 4)
    sub = chains.Layout(np.roll(np.arange(16), -1), 64)     # 2 pointers per 128-byte line
    assert sub.distinct_lines() == 8


def test_pointers_are_addresses_of_the_next_line():
    lay = chains.random_layout(8192, 128, seed=2)
    base = 0x7F0000000000
    ptrs = base + lay.byte_offsets()
    assert int(ptrs[0]) == base + int(lay.nxt[0]) * 128
    assert lay.byte_offsets().dtype == np.uint64 and lay.ready() is lay
    assert (lay.word_index() * 8 == np.arange(lay.n) * 128).all()


def test_sequential_layout():
    lay = chains.sequential_layout(10, 16)
    assert lay.walk(3, 4) == 7 and lay.walk(9, 1) == 0


def test_const_chain_is_a_single_cycle():
    lay = chains.const_layout()
    assert lay.n == chains.CONST_LINES


@pytest.mark.parametrize("stride", [8, 24, 40, 64, 96, 128, 136, 4096])
def test_distinct_lines_closed_form_counts_the_lines(stride):
    for n in (1, 2, 5, 1000):
        lay = chains.Layout(np.roll(np.arange(n), -1), stride)
        assert lay.distinct_lines() == len(np.unique(np.arange(n) * stride // LINE))


def test_is_permutation_marks_each_value():
    assert chains.is_permutation(np.array([2, 0, 1]), 3)
    assert chains.is_permutation(np.array([], dtype=np.int64), 0)
    assert not chains.is_permutation(np.array([0, 0, 1]), 3)       # 2 missing
    assert not chains.is_permutation(np.array([0, 1, 3]), 3)       # out of range
    assert not chains.is_permutation(np.array([0, 1, -1]), 3)
    assert not chains.is_permutation(np.array([0, 1]), 3)


def test_a_layout_whose_pointers_leave_its_order_fails_the_check():
    lay = chains.random_layout(64 * LINE, LINE, seed=5)
    lay.nxt = lay.nxt.copy()
    a, b = lay.visit_order[3], lay.visit_order[10]
    lay.nxt[a], lay.nxt[b] = lay.nxt[b], lay.nxt[a]
    with pytest.raises(chains.ChainError):
        chains.check_layout(lay, 64)
