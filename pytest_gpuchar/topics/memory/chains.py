"""Pointer chains, pure maths: random single cycles (Sattolo's distribution), where a chase's
pointers live (``Layout``) and the host's walk of them, so every launch's end pointer can be
checked against it. ``check_layout`` asserts a chain is one cycle through exactly the intended
lines: a chase that touched fewer lines than intended (the "1 GB at a 4 KB stride visited only
17 MB" mistake) cannot pass."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...core.runner import ChainError
from .rows import LINE

CONST_WORDS = 128               # the .const chain (u32 words), CONST_LINES pointers in it
CONST_STRIDE = 64
CONST_LINES = CONST_WORDS * 4 // CONST_STRIDE


def random_cycle(n: int, rng: np.random.Generator) -> np.ndarray:
    """next[i] for a uniformly random cyclic permutation of range(n): one cycle through every
    element. Same distribution as Sattolo's algorithm, built vectorised: a random visiting
    order, each element pointing to the next one in that order."""
    if n < 1:
        raise ValueError(f"a cycle needs at least one element, got {n}")
    return _cycle_from_order(rng.permutation(n))


def _cycle_from_order(order: np.ndarray) -> np.ndarray:
    nxt = np.empty(len(order), dtype=np.int64)
    nxt[order[:-1]] = order[1:]          # each element points to the next in the order,
    nxt[order[-1]] = order[0]            # the last to the first (np.roll without its copy)
    return nxt


def sattolo(n: int, rng: np.random.Generator) -> np.ndarray:
    """Sattolo's algorithm itself (sequential; for tests and small chains): next[i]."""
    a = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = int(rng.integers(0, i))
        a[i], a[j] = a[j], a[i]
    return a


def cycle_order(nxt: np.ndarray, start: int = 0) -> np.ndarray:
    """The elements in the order the chain visits them from `start`, for one pass. Raises if
    the chain is not one cycle through every element (the walk itself is the proof)."""
    n = len(nxt)
    order = np.empty(n, dtype=np.int64)
    x = start
    for k in range(n):   # numpy scalar loop, fine up to ~10^6 (a few tenths of a second)
        order[k] = x
        x = nxt[x]
    if x != start or len(np.unique(order)) != n:
        seen = len(np.unique(order))
        raise ChainError(f"chain is not a single cycle: from {start}, {n} steps visit {seen} "
                         f"distinct lines and end at {x}")
    return order


def is_permutation(a: np.ndarray, n: int) -> bool:
    """True iff `a` holds every integer of range(n) once: n values in range, each marked
    (a mark per value instead of a sort: a 256 MB chain's sort took 0.24 s of the check)."""
    if len(a) != n:
        return False
    if n == 0:
        return True
    if int(a.min()) < 0 or int(a.max()) >= n:
        return False
    seen = np.zeros(n, dtype=bool)
    seen[a] = True
    return bool(seen.all())


def is_single_cycle(nxt: np.ndarray) -> bool:
    """True iff `nxt` is one cycle through every element (vectorised: the orbit of 0 grown by
    pointer doubling, S_{j+1} = S_j U f^(2^j)(S_j), log2(n) gathers)."""
    n = len(nxt)
    if n == 0 or not is_permutation(nxt, n):
        return False
    f = nxt.copy()
    visited = np.zeros(n, dtype=bool)
    visited[0] = True
    steps = 1
    while steps < n:
        visited[f[visited]] = True
        f = f[f]
        steps *= 2
    return bool(visited.all())


@dataclass
class Layout:
    """Where the pointers of one chase live: `n` pointers `stride` bytes apart from the start
    of a buffer, pointer i holding the address of pointer nxt[i]."""
    nxt: np.ndarray
    stride: int
    kind: str = "random"        # random | sequential (a label for reports)
    cursor: int = 0             # where the next chase starts (the last one's end)
    _order: np.ndarray | None = field(default=None, repr=False)   # visit order from 0
    _pos: np.ndarray | None = field(default=None, repr=False)     # index -> place in it
    _bytes: np.ndarray | None = field(default=None, repr=False)   # nxt x stride, u64
    _words: np.ndarray | None = field(default=None, repr=False)   # word_index()

    @property
    def n(self) -> int:
        return len(self.nxt)

    @property
    def footprint(self) -> int:
        return self.n * self.stride

    def word_index(self) -> np.ndarray:
        """The u64 word of the buffer each pointer sits at, from the chain's start."""
        if self._words is None:
            self._words = np.arange(self.n, dtype=np.int64) * (self.stride // 8)
        return self._words

    def byte_offsets(self) -> np.ndarray:
        """Pointer i's value less the chain's base: the byte offset of pointer nxt[i] (u64)."""
        if self._bytes is None:
            self._bytes = self.nxt.astype(np.uint64) * np.uint64(self.stride)
        return self._bytes

    def ready(self) -> "Layout":
        """The chain with what a chase reads of it made now (the walk's positions, the
        pointers' words and byte offsets): on a host worker, while the GPU chases the chain
        before."""
        self.position()
        self.word_index()
        self.byte_offsets()
        return self

    def distinct_lines(self, line: int = LINE) -> int:
        """How many distinct `line`-byte lines a full walk of the chain touches: pointer i sits
        at byte i x stride, so the lines floor(i x stride / line) rise by at least one per
        pointer when stride >= line and by at most one otherwise (then every line from 0 to
        the last is touched). Closed form: a 256 MB chain's np.unique took 2.4 s."""
        if self.n == 0:
            return 0
        if self.stride >= line:
            return self.n
        return (self.n - 1) * self.stride // line + 1

    def walk(self, start: int, steps: int) -> int:
        """Index reached after `steps` steps from `start` (host model of the chase)."""
        pos = self.position()
        return int(self.visit_order[(pos[start] + steps) % self.n])

    def position(self) -> np.ndarray:
        if self._pos is None:
            self._pos = np.empty(self.n, dtype=np.int64)
            self._pos[self.visit_order] = np.arange(self.n)
        return self._pos

    @property
    def visit_order(self) -> np.ndarray:
        if self._order is None:
            self._order = cycle_order(self.nxt, 0)
        return self._order


def random_layout(footprint: int, stride: int = LINE, seed: int = 0) -> Layout:
    """A random single cycle with one pointer per `stride` bytes over `footprint` bytes,
    asserted to visit exactly footprint / stride distinct lines."""
    if stride < 8 or stride % 8:
        raise ValueError(f"stride must be a multiple of 8 bytes, got {stride}")
    n = footprint // stride
    if n < 2:
        raise ValueError(f"footprint {footprint} B holds fewer than 2 lines of {stride} B")
    order = np.random.default_rng(seed).permutation(n)
    lay = Layout(_cycle_from_order(order), stride)
    lay._order = np.roll(order, -int(np.flatnonzero(order == 0)[0]))   # visit order from 0
    check_layout(lay, footprint // stride)
    return lay


def sequential_layout(n: int, stride: int) -> Layout:
    """Pointer i -> i+1 (wrapping): a forward walk at a fixed stride (stride sweep)."""
    lay = Layout(np.roll(np.arange(n, dtype=np.int64), -1), stride, "sequential")
    lay._order = np.arange(n, dtype=np.int64)
    check_layout(lay, n)
    return lay


def check_layout(lay: Layout, intended: int) -> None:
    """The chain is one cycle through exactly `intended` pointers, each on its own line when
    the stride is at least a line."""
    if lay.n != intended:
        raise ChainError(f"chain holds {lay.n} pointers, {intended} intended")
    if lay._order is None and not is_single_cycle(lay.nxt):
        raise ChainError(f"chain over {lay.n} pointers is not a single cycle")
    # with a known visit order, order being a permutation and each pointer leading to the
    # next element of the order proves one cycle through all n pointers
    order = lay.visit_order
    if not (is_permutation(order, lay.n)
            and np.array_equal(lay.nxt[order[:-1]], order[1:])
            and (lay.n == 0 or lay.nxt[order[-1]] == order[0])):
        raise ChainError("chain's recorded visit order does not follow its pointers")
    if lay.stride >= LINE and lay.distinct_lines() != intended:
        raise ChainError(f"chain touches {lay.distinct_lines()} distinct {LINE}-byte lines, "
                         f"{intended} intended")


# --- the constant-cache chain -----------------------------------------------------------------

def const_chain_words() -> list[int]:
    """The .const array's contents: a random single cycle over CONST_LINES pointers spaced
    CONST_STRIDE bytes apart. The values are byte offsets, i.e. constant-bank addresses if
    the array sits at offset 0 of its bank (the only .const variable of its module: ptxas puts
    it at c[0x3][0x0]); each launch's end pointer is checked against the host's walk, so a
    different placement fails loudly rather than chasing garbage."""
    nxt = random_cycle(CONST_LINES, np.random.default_rng(3))
    words = [0] * CONST_WORDS
    for i in range(CONST_LINES):
        words[i * CONST_STRIDE // 4] = int(nxt[i]) * CONST_STRIDE
    return words


def const_layout() -> Layout:
    """The host's model of the .const chain (for end-pointer checks)."""
    words = const_chain_words()
    nxt = np.array([words[i * CONST_STRIDE // 4] // CONST_STRIDE for i in range(CONST_LINES)])
    lay = Layout(nxt.astype(np.int64), CONST_STRIDE)
    check_layout(lay, CONST_LINES)
    return lay
