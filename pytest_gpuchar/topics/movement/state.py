"""What every movement measurement of one pytest session shares, as functions of the session
(kept in session.runs and the launch stage, made once): the driver-JIT SASS of each probe
verified once (the verification door), the launch geometry that keeps one CTA per SM, the
device buffers (a buffer several times the L2, its copy target, a clean scratch buffer that
evicts the L2 by being read) and the one random generator the chains are drawn from. Every
launch goes through the session's launch stage (core.runner): cuLaunchKernelEx, with the
cluster attribute where a row asks for one."""
from __future__ import annotations


import numpy as np

from ...core.build import Built
from ...core.gpu import PASSES
from ...core.probe import Probe
from ...core.runner import Launch, Runner
from ...core import topic
from ...core.topic import Context
from ...core.verify import Verdict
from ...results import tolerances
from .rows import STREAM_ROWS, TMA_STAGE, TMA_TRIPS, Region


MIB = 1 << 20
GROW = 2 * MIB


def round_up(n: int, step: int) -> int:
    return -(-n // step) * step


def once(session: Context, key: tuple, make):
    """A measurement several tests share, made once per session."""
    return session.runs.once(("movement", *key), make)


# --- probes --------------------------------------------------------------------------------------

def built(session: Context, probe: Probe) -> tuple[Built, Verdict]:
    """The probe as the driver JIT-linked it (its group's module) and its verdict on the
    driver's SASS (once; ProbeInvalid is raised, never a number)."""
    return topic.built(session, probe)


def function(session: Context, probe: Probe, n: int):
    return built(session, probe)[0].compiled.function(probe.entries[n])


def functions(session: Context, probe: Probe, lengths) -> dict:
    """length -> the launchable kernel of that length."""
    return {n: function(session, probe, n) for n in lengths}


def sass(session: Context, probe: Probe) -> str:
    return probe.snapshot_text(built(session, probe)[0].functions)


def unit(session: Context, probe: Probe) -> dict:
    return dict(built(session, probe)[1].unit)


# --- geometry ------------------------------------------------------------------------------------

def tol(kind: str) -> dict:
    """The tolerance of `kind` a movement figure records for a new expectation entry
    (expectations/tolerances.yaml)."""
    return tolerances.of("movement", kind)


def sms(session: Context) -> int:
    return session.gpu.dev.sm_count


def lone_smem(session: Context) -> int:
    """Dynamic shared memory that keeps a second CTA off an SM (more than half of it)."""
    return session.gpu.dev.shared_per_sm // 2 + 1024


def smem_for(session: Context, need: int) -> int:
    return max(need, lone_smem(session))


def geometry(grid, block, *, smem: int = 0, cluster: int | None = None) -> Launch:
    """A movement launch: through cuLaunchKernelEx, with the cluster attribute if given."""
    return Launch(tuple(grid), tuple(block), cluster, smem, driver=True)


def big_bytes(session: Context) -> int:
    """Several times the L2 (the device-memory rows read slices of it): at least 4 x L2
    and room for every CTA's slice of the longest stream."""
    longest = max([r.trips[-1] * r.advance for r in STREAM_ROWS if r.region is Region.SLICE]
                  + [(2 + 2 * TMA_TRIPS[-1]) * TMA_STAGE])
    return round_up(max(4 * session.gpu.dev.l2_bytes, sms(session) * longest), GROW)


def slice_bytes(session: Context) -> int:
    """Each CTA's share of the big buffer, in whole 64 KiB steps."""
    return (big_bytes(session) // sms(session)) // 65536 * 65536


# --- buffers -------------------------------------------------------------------------------------

def buffer(session: Context, name: str, nbytes: int):
    """A zeroed device buffer of u64 words, made once per name."""
    return session.runner.buffer(f"movement.{name}", nbytes)


def big(session: Context):
    return buffer(session, "big", big_bytes(session))


def dst(session: Context):
    return buffer(session, "dst", big_bytes(session))


def flush_l2(session: Context) -> None:
    """Evict the L2 by reading a clean buffer of twice its size (a read leaves no dirty
    line to be written back during the next measurement)."""
    session.runner.evict_l2_by_reading(session.gpu.dev.l2_bytes, "movement.scratch")


def address(buf) -> int:
    """The device address of a buffer."""
    return int(buf.data.ptr)


def upload(buf, idx: np.ndarray, values: np.ndarray, dtype) -> None:
    """Write `values` at word indices `idx` of `buf` viewed as `dtype`."""
    view = buf.view(dtype)
    Runner.scatter(view, np.asarray(idx, dtype=np.int64), values.astype(dtype))


def rng(session: Context) -> np.random.Generator:
    """The session's one generator of chains and layouts (drawn in the order rows run)."""
    return once(session, ("rng",), lambda: np.random.default_rng(15))


def passes() -> np.uint32:
    """The pass count of the single-record latency kernels (the first pass warms the
    instruction cache; the record is the last pass's)."""
    return np.uint32(PASSES)
