"""The Many-BSP prediction table as data: the report's three kernels (seed 002: Hotspot, KNN,
MM), the problem sizes measured (the report's own first, then two larger ones), their launch
geometry, and the parts of the kernels' BLOCK description that the report derives by hand
(its steps 3 and 4): the level-1 supersteps with their iteration counts, and the warp access
pattern of each global load and store (from which n_ma follows).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

SEGMENT = 128          # bytes of a global-memory segment (the report's Table 1-1, 128 B)
WARP = 32
PYRAMID = 2            # Hotspot's pyramid height (iterations per launch), as the report ran it

# The model's per-device factor mu of eqs. (24)/(25) is not measured by the suite, and the
# report gives it per GPU without a derivation (3.36 GTX 760, 1.93 940MX, 3.49 GTX 1070):
# taken by hand as the GTX 1070's, the report's newest GPU. Each row also records the mu
# that would make its prediction exact.
MU = 3.49
MU_SOURCE = "by hand: the report's mu of the GTX 1070 (Pascal), its newest GPU"


class App(str, Enum):
    HOTSPOT = "hotspot"
    KNN = "knn"
    MM = "mm"


@dataclass(frozen=True)
class Access:
    """How one warp's 32 lanes address a global array: ``elem`` bytes per element, ``stride``
    elements between neighbouring lanes, ``run`` lanes per contiguous row (16 for a 16 x 16
    block). n_ma = segments of SEGMENT bytes one warp access touches, rows aligned (as the
    report counts them: Hotspot 2, KNN loads 2, MM 1)."""
    elem: int = 4
    stride: int = 1
    run: int = WARP

    def n_ma(self) -> int:
        return (WARP // self.run) * math.ceil(self.run * self.stride * self.elem / SEGMENT)


# By hand, per kernel: the access pattern of each global load/store (report row -> Access).
ACCESS = {
    App.KNN: {21: Access(4, 2), 23: Access(4, 2), 28: Access(4, 1)},   # LatLong = 2 floats
    App.MM: {36: Access(), 41: Access(), 155: Access()},
    App.HOTSPOT: {42: Access(run=16), 51: Access(run=16), 196: Access(run=16)},
}


@dataclass(frozen=True)
class Size:
    """One row of the prediction table: a kernel and its problem size. dims: KNN (records,),
    MM (hA, wA, wB), Hotspot (rows, cols)."""
    app: App
    dims: tuple[int, ...]
    seed: bool = False          # the report's own size

    @property
    def id(self) -> str:
        return f"{self.app.value}-{self.name}"

    @property
    def name(self) -> str:
        return "x".join(str(d) for d in self.dims)

    @property
    def block(self) -> tuple[int, int]:
        return {App.KNN: (256, 1), App.MM: (32, 32), App.HOTSPOT: (16, 16)}[self.app]

    @property
    def n_t(self) -> int:
        return self.block[0] * self.block[1]

    @property
    def grid(self) -> tuple[int, int]:
        if self.app is App.KNN:
            return (math.ceil(self.dims[0] / 256), 1)
        if self.app is App.MM:
            h_a, _, w_b = self.dims
            return (w_b // 32, h_a // 32)
        small = 16 - 2 * PYRAMID
        rows, cols = self.dims
        return (math.ceil(cols / small), math.ceil(rows / small))

    @property
    def n_b(self) -> int:
        return self.grid[0] * self.grid[1]

    def footprint(self) -> int:
        """Bytes of the kernel's global arrays."""
        if self.app is App.KNN:
            return 12 * self.dims[0]
        if self.app is App.MM:
            h_a, w_a, w_b = self.dims
            return 4 * (h_a * w_a + w_a * w_b + h_a * w_b)
        return 12 * self.dims[0] * self.dims[1]

    def level1(self) -> list[tuple[int, int, int]]:
        """By hand (the report's step 4): the level-1 supersteps (first and last report row,
        iterations), as Tables 3-3, 4-3 and 2-3 cut them. The loops among them are also
        found in the PTX (tests check both agree); the iteration counts follow from the
        size; KNN's cut at its range test and Hotspot's at the loop's final-iteration
        break are the report's."""
        if self.app is App.KNN:
            return [(1, 14, 1), (15, 28, 1)]
        if self.app is App.MM:
            return [(1, 32, 1), (33, 144, self.dims[1] // 32), (145, 155, 1)]
        return [(1, 96, 1), (97, 170, PYRAMID), (171, 182, PYRAMID - 1), (183, 196, 1)]


SIZES = (
    Size(App.HOTSPOT, (512, 512), seed=True), Size(App.HOTSPOT, (1024, 1024)),
    Size(App.HOTSPOT, (2048, 2048)),
    Size(App.KNN, (42764,), seed=True), Size(App.KNN, (1 << 20,)), Size(App.KNN, (1 << 24,)),
    Size(App.MM, (320, 320, 640), seed=True), Size(App.MM, (1024, 1024, 1024)),
    Size(App.MM, (2048, 2048, 2048)),
)

BY_ID = {s.id: s for s in SIZES}
