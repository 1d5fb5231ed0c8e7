"""The one list of topics (``TOPICS``): each topic's name, what it measures, and how its
expectation files are laid out. Kept apart from the topic contract (core/topic.py) so that
reading the expectation files never imports the toolchain, the JIT or NumPy."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TopicInfo:
    """A topic: its name (the prefix of its keys and its package), what it measures, whether
    its keys have a directory of expectation files of their own, and whether its hardware
    figures compare the driver's SASS with the offline ptxas of the driver's CUDA version
    (a hardware run then assembles its modules with that ptxas too). `package`: the import
    name of its code (default pytest_gpuchar.topics.<name>; a topic kept outside the suite,
    registered with ``register``, names its own)."""
    name: str
    doc: str
    own_files: bool = True
    jit_vs_ptxas: bool = False
    package: str = ""

    @property
    def module(self) -> str:
        return self.package or f"pytest_gpuchar.topics.{self.name}"


TOPICS: dict[str, TopicInfo] = {t.name: t for t in (
    TopicInfo("instructions", "Tables I, II, V: latency and CPI per PTX instruction",
              own_files=False, jit_vs_ptxas=True),
    TopicInfo("memory", "Table IV, Table 10, cache staircase: the memory hierarchy"),
    TopicInfo("tensor", "Table III, 004 Tables 3-9, wgmma: tensor-core speed"),
    TopicInfo("numerics", "004 Tables 12-15, Fasi: tensor-core numerics"),
    TopicInfo("throughput", "seeds 001/002: FMA and unit throughput, launch costs"),
    TopicInfo("movement", "Hopper data movement: clusters/DSM, TMA, async copies, barriers, "
                          "bandwidths, L2 by SM, loaded latency"),
    TopicInfo("dpx", "Hopper DPX intrinsics: SASS per arch, latency and throughput on sm_90"),
    TopicInfo("bsp", "Many-BSP predictions (seed 002) of Hotspot, KNN, MM against measured "
                     "cycles"),
)}


class TopicTaken(ValueError):
    """A topic registered under a name another topic has."""


def register(info: TopicInfo) -> TopicInfo:
    """Add a topic kept outside the suite's package (a conftest.py or a plugin calls this
    before collection; docs/new-topic.md). Its keys live in the instruction tables' files
    (expectations/<arch>.yaml): a topic with a directory of expectation files of its own is
    one of the suite's, listed in TOPICS above. Registering the same topic again is a no-op."""
    have = TOPICS.get(info.name)
    if have == info:
        return have
    if have is not None:
        raise TopicTaken(f"topic {info.name!r} is already registered ({have.module}); "
                         f"give {info.module}'s topic another name")
    if info.own_files:
        raise ValueError(f"topic {info.name!r}: a registered topic keeps its keys in "
                         f"expectations/<arch>.yaml: register it with own_files=False, or add "
                         f"it to core.topic.TOPICS with its expectations/{info.name}/ directory")
    TOPICS[info.name] = info
    return info


def expectation_topics() -> tuple[str, ...]:
    """The topics whose keys live in expectations/<topic>/<arch>.yaml."""
    return tuple(t.name for t in TOPICS.values() if t.own_files)
