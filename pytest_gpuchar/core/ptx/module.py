"""PTX module text: the header (ISA version, target) and modules of several kernels."""
from __future__ import annotations

from .. import archs


def header(arch: str, version: str | None = None, target: str | None = None) -> str:
    return (f".version {version or archs.ptx_isa_version(arch)}\n"
            f".target {target or archs.ptx_target(arch)}\n.address_size 64\n")


def module(arch: str, kernels: list[str], *, version: str | None = None) -> str:
    return header(arch, version) + "\n" + "\n".join(kernels)
