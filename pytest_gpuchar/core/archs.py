"""GPU architecture names: parsing, validation and what each toolchain covers."""
from __future__ import annotations

import re

# Every arch the suite knows about (a valid --gpu-arch value), oldest first.
KNOWN_ARCHS = (
    "sm_30", "sm_35", "sm_37", "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62",
    "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
    "sm_100", "sm_100a", "sm_103", "sm_103a", "sm_110", "sm_120", "sm_120a", "sm_121",
    "sm_121a",
)

# Archs the static (offline) suite covers: CUDA 13 tools for sm_75 and up, the CUDA 12.4
# tools of the legacy extra for the older ones. Arch-specific features (wgmma: sm_90a,
# tcgen05: sm_100a) are compiled for the "a" target by the probes that need them.
STATIC_ARCHS_CUDA13 = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103",
                       "sm_120", "sm_121")
STATIC_ARCHS_LEGACY = ("sm_50", "sm_61", "sm_70")
STATIC_ARCHS = STATIC_ARCHS_LEGACY + STATIC_ARCHS_CUDA13

_ARCH_RE = re.compile(r"^sm_(\d+)(a?)$")

# Warp schedulers per SM: 4 from Maxwell sm_50 through Hopper sm_90 (Many-BSP Table 1-1).
SCHEDULERS_PER_SM = 4



class UnknownArch(ValueError):
    pass


def validate(arch: str) -> str:
    """Return the canonical arch name or raise UnknownArch listing the valid values."""
    a = arch.strip().lower()
    if a.startswith("compute_"):
        a = "sm_" + a[len("compute_"):]
    if re.fullmatch(r"\d+a?", a):
        a = "sm_" + a
    if a not in KNOWN_ARCHS:
        raise UnknownArch(
            f"unknown GPU arch {arch!r}; valid values: {', '.join(KNOWN_ARCHS)}")
    return a


def number(arch: str) -> int:
    """sm_86 -> 86, sm_90a -> 90."""
    m = _ARCH_RE.match(arch)
    if not m:
        raise UnknownArch(f"not an arch name: {arch!r}")
    return int(m.group(1))



def ptx_target(arch: str) -> str:
    """The .target line for PTX probes of this arch."""
    return arch


def ptx_isa_version(arch: str) -> str:
    """Lowest PTX ISA version that accepts every probe for this target."""
    n = number(arch)
    if n == 110:
        return "9.0"
    if n in (103, 121):
        return "8.8"
    if n >= 100:
        return "8.7"
    if n >= 90:
        return "8.0"
    if n >= 89:
        return "7.8"
    return "7.0" if n < 80 else "7.1"
