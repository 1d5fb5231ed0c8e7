"""The data the movement probes walk (topics/movement/layouts.py): single cycles, block
chains, and each TMA mechanism's block layout read back the way its kernel reads it (the
host's walk is what every launch's end position is checked against)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuchar.core.runner import Bounds
from pytest_gpuchar.topics.movement import layouts
from pytest_gpuchar.topics.movement.layouts import (TENSOR1D_BOX, TENSOR2D_BOX, TENSOR2D_WIDTH,
                                                    box_xy)
from pytest_gpuchar.topics.movement.rows import LINE, TMA_BYTES, Mechanism


@given(st.integers(2, 500), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_random_cycle_visits_everything_once(n, seed):
    nxt = layouts.random_cycle(n, np.random.default_rng(seed))
    seen, p = set(), 0
    for _ in range(n):
        seen.add(p)
        p = int(nxt[p])
    assert p == 0 and seen == set(range(n))


def test_walk_and_positions():
    nxt = np.array([2, 0, 3, 1])
    assert layouts.walk(nxt, 0, 0) == 0 and layouts.walk(nxt, 0, 3) == 1
    assert layouts.walk(nxt, 0, 4) == 0
    ch = layouts.BlockChain(np.array([5, 9, 2]), TMA_BYTES)
    assert [ch.position(k) for k in range(5)] == [5, 9, 2, 5, 9]


def test_block_chain_distinct_and_bounded():
    rng = np.random.default_rng(4)
    ch = layouts.block_chain(100, 1000, TMA_BYTES, rng)
    assert len(set(ch.order.tolist())) == 100 and ch.order.max() < 1000
    dense = layouts.block_chain(32, 1000, TMA_BYTES, rng, sparse=False)
    assert sorted(dense.order.tolist()) == list(range(32))
    with pytest.raises(ValueError):
        layouts.block_chain(10, 5, TMA_BYTES, rng)


def _buffer(mech: Mechanism, chain, nbytes: int) -> np.ndarray:
    words = np.full(nbytes // 4, 0xDEADBEEF, dtype=np.uint32)   # stale data elsewhere
    idx, val = layouts.tma_words(mech, chain)
    words[idx] = val
    return words


def _read_step(mech: Mechanism, words: np.ndarray, pos: int) -> int:
    """One step of the kernel: from its current value, read the next one as it does."""
    if mech is Mechanism.PLAIN:     # every thread: word at +32t plus word at +32t+16
        starts = [pos // 4 + 8 * t for t in range(32)]
        nxt = {int(words[s]) + int(words[s + 4]) for s in starts}
        assert len(nxt) == 1
        return nxt.pop()
    if mech is Mechanism.BULK:
        return int(words[pos // 4])
    if mech is Mechanism.TENSOR1D:
        return int(words[pos])        # the box's first element
    x, y = pos & 0xFFFFFFFF, pos >> 32
    first = y * TENSOR2D_WIDTH + x
    return int(words[first]) | int(words[first + 1]) << 32


@given(st.integers(1, 20), st.integers(1, 100), st.integers(0, 100_000), st.integers(1, 500))
def test_fresh_launches_fit_their_chain(floor, want, capacity, per_launch):
    """A fresh-block chain holds a block for every step of the warm-up and every timed
    launch; it takes `want` launches when they fit, else as many as fit, never under `floor`."""
    reps, blocks = layouts.fresh_launches(floor, Bounds(want), capacity, per_launch)
    assert blocks == (reps + 1) * per_launch + layouts.FRESH_SPARE
    assert reps >= floor and (reps <= want or reps == floor)
    if reps > floor:            # not raised to the floor: it fits
        assert blocks <= capacity
    if (want + 1) * per_launch + layouts.FRESH_SPARE <= capacity:
        assert reps == max(floor, want)


@pytest.mark.parametrize("mech", list(Mechanism))
def test_tma_layouts_read_back_as_the_kernels_read_them(mech):
    nbytes = 4 << 20
    rng = np.random.default_rng(7)
    cap = layouts.tma_capacity(mech, nbytes)
    chain = layouts.block_chain(50, cap, TMA_BYTES, rng)
    words = _buffer(mech, chain, nbytes)
    pos = layouts.tma_position(mech, chain.position(0))
    for step in range(1, 120):
        pos = _read_step(mech, words, pos)
        assert pos == layouts.tma_position(mech, chain.position(step))


def test_tensor2d_boxes_are_strided_rows():
    x, y = box_xy(np.array([0, 1, 16, 17]))
    assert x.tolist() == [0, 64, 0, 64] and y.tolist() == [0, 0, 4, 4]
    assert TENSOR2D_BOX[0] * 4 * TENSOR2D_BOX[1] == TMA_BYTES
    assert TENSOR1D_BOX * 4 == TMA_BYTES
    assert layouts.tma_capacity(Mechanism.TENSOR2D, 1 << 20) == (1 << 20) // TMA_BYTES


def test_pointer_words_chase_to_the_host_walk():
    rng = np.random.default_rng(9)
    chain = layouts.block_chain(64, 4096, 2048, rng)
    base = 0x7F0000000000
    mem = np.zeros(4096 * 2048 // 8, dtype=np.uint64)
    idx, val = layouts.pointer_words(chain, base)
    mem[idx] = val
    p = base + chain.position(0) * 2048
    for step in range(1, 200):
        p = int(mem[(p - base) // 8])
        assert p == base + chain.position(step) * 2048


def test_heat_lines_are_distinct_lines():
    offs = layouts.heat_lines(160, 1 << 24, np.random.default_rng(1))
    assert len(set(offs.tolist())) == 160 and (offs % LINE == 0).all()
    assert offs.max() < 1 << 24
