"""The data the probes walk, as pure NumPy: single random cycles, chains through blocks chosen
at random from a large buffer (each block holding where the next one is, in the form each TMA
mechanism reads), the heatmap's self-pointing lines, and the host's walk of every chain (the
end state every launch is checked against)."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...core.runner import Bounds
from .rows import LINE, TMA_BYTES, Mechanism

TENSOR_ELEM = 4                       # the tensor maps' element: u32
TENSOR1D_BOX = TMA_BYTES // TENSOR_ELEM   # 256 elements (the largest 1D box)
TENSOR2D_BOX = (64, 4)                # 64 u32 (256 B) x 4 rows = 1 KiB
TENSOR2D_WIDTH = 1024                 # u32 per row (4 KiB pitch): the rows are strided


def random_cycle(n: int, rng: np.random.Generator) -> np.ndarray:
    """next[] of a single cycle through 0..n-1 (Sattolo's algorithm)."""
    perm = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = int(rng.integers(0, i))
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def walk(nxt, start: int, steps: int) -> int:
    """Where a chase starting at `start` is after `steps` steps."""
    p = int(start)
    for _ in range(steps):
        p = int(nxt[p])
    return p


@dataclass
class BlockChain:
    """A cycle through `order` (block positions, visiting order) inside a buffer of blocks."""
    order: np.ndarray
    block: int                 # bytes per block

    @property
    def count(self) -> int:
        return len(self.order)

    def position(self, step: int) -> int:
        """The block visited at step `step` of the cycle (counting from order[0])."""
        return int(self.order[step % self.count])


FRESH_SPARE = 8      # blocks a fresh-block chain holds beyond its launches' steps


def fresh_launches(asked: int, launches: Bounds, capacity: int,
                   per_launch: int) -> tuple[int, int]:
    """(timed launches, chain blocks) of a chain whose every step goes to a block of its own
    (device memory: no block twice): `launches` of the `asked` after a warm-up, its least
    only as far as `capacity` blocks hold them (never fewer than asked); `per_launch` steps a
    launch."""
    fit = (capacity - FRESH_SPARE) // per_launch - 1
    reps = replace(launches, room=fit).of(asked)
    return reps, (reps + 1) * per_launch + FRESH_SPARE


def block_chain(count: int, capacity: int, block: int, rng: np.random.Generator,
                sparse: bool = True) -> BlockChain:
    """A cycle through `count` distinct blocks of `block` bytes out of `capacity` blocks: at
    random positions (sparse) or the first `count` blocks, in random order."""
    if count > capacity:
        raise ValueError(f"a chain of {count} blocks does not fit in {capacity} blocks")
    where = rng.choice(capacity, count, replace=False) if sparse else rng.permutation(count)
    return BlockChain(np.asarray(where, dtype=np.int64), block)


def tma_words(mech: Mechanism, chain: BlockChain) -> tuple[np.ndarray, np.ndarray]:
    """(u32 word indices, values) that make the buffer hold `chain` as `mech` reads it:
    plain and bulk: every 32-byte piece of a block starts with the next block's byte offset
    and has a zero at +16 (one warp, 32 B per thread, adds both); tensor1d: the first word is
    the next block's element coordinate; tensor2d: the box's first two words are the next
    box's (x, y)."""
    nxt = np.roll(chain.order, -1)
    if mech in (Mechanism.PLAIN, Mechanism.BULK):
        pieces = chain.block // 32
        base = (chain.order * chain.block // 4)[:, None] + 8 * np.arange(pieces)[None, :]
        offsets = np.repeat((nxt * chain.block)[:, None], pieces, axis=1)
        idx = np.concatenate([base.ravel(), (base + 4).ravel()])
        val = np.concatenate([offsets.ravel(), np.zeros(base.size, dtype=np.int64)])
        return idx, val.astype(np.uint32)
    if mech is Mechanism.TENSOR1D:
        return chain.order * TENSOR1D_BOX, (nxt * TENSOR1D_BOX).astype(np.uint32)
    x, y = box_xy(chain.order)
    nx, ny = box_xy(nxt)
    first = y * TENSOR2D_WIDTH + x
    return (np.concatenate([first, first + 1]),
            np.concatenate([nx, ny]).astype(np.uint32))


def box_xy(boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) element coordinates of 2D boxes numbered row-major over the tensor."""
    cols = TENSOR2D_WIDTH // TENSOR2D_BOX[0]
    boxes = np.asarray(boxes, dtype=np.int64)
    return (boxes % cols) * TENSOR2D_BOX[0], (boxes // cols) * TENSOR2D_BOX[1]


def tma_position(mech: Mechanism, block: int) -> int:
    """The kernel's start value / end value of a chain at `block`: a byte offset, an element
    coordinate, or x | y << 32."""
    if mech in (Mechanism.PLAIN, Mechanism.BULK):
        return int(block) * TMA_BYTES
    if mech is Mechanism.TENSOR1D:
        return int(block) * TENSOR1D_BOX
    x, y = box_xy(np.array([block]))
    return int(x[0]) | int(y[0]) << 32


def tma_capacity(mech: Mechanism, buffer_bytes: int) -> int:
    """How many 1 KiB blocks (2D: boxes) the buffer holds for `mech`."""
    if mech is Mechanism.TENSOR2D:
        rows = buffer_bytes // (TENSOR2D_WIDTH * TENSOR_ELEM)
        return (rows // TENSOR2D_BOX[1]) * (TENSOR2D_WIDTH // TENSOR2D_BOX[0])
    return buffer_bytes // TMA_BYTES


def pointer_words(chain: BlockChain, base: int) -> tuple[np.ndarray, np.ndarray]:
    """(u64 word indices, values): each visited block's first word is the next block's
    address (base + its byte offset)."""
    nxt = np.roll(chain.order, -1)
    return chain.order * chain.block // 8, (base + nxt * chain.block).astype(np.uint64)


def heat_lines(count: int, region: int, rng: np.random.Generator) -> np.ndarray:
    """Byte offsets of `count` distinct random lines in a region of `region` bytes."""
    return np.sort(rng.choice(region // LINE, count, replace=False)).astype(np.int64) * LINE
