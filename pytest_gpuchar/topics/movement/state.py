"""The movement topic's GPU state for one pytest session (made once through session.runs):
the driver-JIT SASS of each probe verified once, the cluster launcher, and the device
buffers every measurement shares (a buffer several times the L2, its copy target, a clean
scratch buffer that evicts the L2 by being read). Every launch goes through the session's
Gpu (ensure_alive) and every batch ends with its watchdog wait."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...core.build import Built
from ...core.gpu import PASSES
from ...core.probe import Probe
from ...core.verify import Verdict
from ...core.driver import ClusterLauncher
from .rows import STREAM_ROWS, TMA_STAGE, TMA_TRIPS, Region

if TYPE_CHECKING:
    from ...session import GpuCharSession

MIB = 1 << 20
GROW = 2 * MIB


class ChainError(AssertionError):
    """A launch ended somewhere the host's walk of the same chain does not: the probe did not
    walk what it was meant to (no figure)."""


def round_up(n: int, step: int) -> int:
    return -(-n // step) * step


class MovementGpu:
    """See the module docstring."""

    def __init__(self, session: "GpuCharSession") -> None:
        self.session = session
        self.gpu = session.gpu
        self.dev = self.gpu.dev
        self.launcher = ClusterLauncher(self.gpu)
        self.repeats = session.repeats
        self._built: dict[str, tuple[Built, Verdict]] = {}
        self._buffers: dict[str, object] = {}
        self.rng = np.random.default_rng(15)

    # --- probes --------------------------------------------------------------------------
    def built(self, probe: Probe) -> tuple[Built, Verdict]:
        """The probe as the driver JIT-linked it (its group's module) and its verdict on the
        driver's SASS (once; ProbeInvalid is raised, never a number)."""
        if probe.name not in self._built:
            built = self.session.builds.jit(probe, self.dev)
            self._built[probe.name] = (built, self.session.verify(probe, built.functions))
        return self._built[probe.name]

    def function(self, probe: Probe, n: int):
        return self.built(probe)[0].compiled.function(probe.entries[n])

    def sass(self, probe: Probe) -> str:
        return probe.snapshot_text(self.built(probe)[0].functions)

    def unit(self, probe: Probe) -> dict:
        return dict(self.built(probe)[1].unit)

    # --- geometry -------------------------------------------------------------------------
    @property
    def sms(self) -> int:
        return self.dev.sm_count

    @property
    def lone_smem(self) -> int:
        """Dynamic shared memory that keeps a second CTA off an SM (more than half of it)."""
        return self.dev.shared_per_sm // 2 + 1024

    def smem_for(self, need: int) -> int:
        return max(need, self.lone_smem)

    @property
    def big_bytes(self) -> int:
        """Several times the L2 (the device-memory rows read slices of it): at least 4 x L2
        and room for every CTA's slice of the longest stream."""
        longest = max([r.trips[-1] * r.advance for r in STREAM_ROWS if r.region is Region.SLICE]
                      + [(2 + 2 * TMA_TRIPS[-1]) * TMA_STAGE])
        return round_up(max(4 * self.dev.l2_bytes, self.sms * longest), GROW)

    def slice_bytes(self) -> int:
        """Each CTA's share of the big buffer, in whole 64 KiB steps."""
        return (self.big_bytes // self.sms) // 65536 * 65536

    # --- buffers --------------------------------------------------------------------------
    def buffer(self, name: str, nbytes: int):
        """A zeroed device buffer of u64 words, made once per name."""
        import cupy as cp
        buf = self._buffers.get(name)
        if buf is None or buf.nbytes < nbytes:
            buf = cp.zeros(round_up(nbytes, 8) // 8, dtype=np.uint64)
            self._buffers[name] = buf
        return buf

    def big(self):
        return self.buffer("big", self.big_bytes)

    def dst(self):
        return self.buffer("dst", self.big_bytes)

    def flush_l2(self) -> None:
        """Evict the L2 by reading a clean buffer of twice its size (a read leaves no dirty
        line to be written back during the next measurement)."""
        scratch = self.buffer("scratch", 2 * self.dev.l2_bytes)
        scratch.sum()

    @staticmethod
    def address(buf) -> int:
        """The device address of a buffer."""
        return int(buf.data.ptr)

    def upload(self, buf, idx: np.ndarray, values: np.ndarray, dtype) -> None:
        """Write `values` at word indices `idx` of `buf` viewed as `dtype`."""
        import cupy as cp
        view = buf.view(dtype)
        view[cp.asarray(np.asarray(idx, dtype=np.int64))] = cp.asarray(values.astype(dtype))

    # --- launching ------------------------------------------------------------------------
    def launch(self, fn, grid, block, args, *, name: str, cluster: int | None = None,
               shared_mem: int = 0) -> None:
        self.launcher.launch(fn, tuple(grid), tuple(block), args, name=name, cluster=cluster,
                             shared_mem=shared_mem)

    def wait(self, name: str) -> None:
        self.gpu.wait(name)

    @staticmethod
    def records(shape: tuple, dtype=np.uint64):
        import cupy as cp
        return cp.zeros(shape, dtype=dtype)

    @staticmethod
    def to_device(values: np.ndarray):
        import cupy as cp
        return cp.asarray(values)


def passes() -> np.uint32:
    """The pass count of the single-record latency kernels (the first pass warms the
    instruction cache; the record is the last pass's)."""
    return np.uint32(PASSES)
