"""Offline CUDA tools (ptxas, nvdisasm, cuobjdump): where they are, what they cover, running them.

Tools are looked up in the PyPI wheels first (``nvidia-cuda-nvcc`` / ``nvidia-cuda-nvdisasm``
for CUDA 13, the CUDA 12.4 copies bundled in the ``triton==3.2.0`` wheel for sm_50..sm_72),
then on PATH / CUDA_HOME. Nothing here needs a GPU.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import archs

INSTALL_STATIC = 'pip install "pytest-gpuchar[static]"'
INSTALL_LEGACY = 'pip install "pytest-gpuchar[legacy]"'


class ToolMissing(RuntimeError):
    """A tool needed for this arch is not installed; the message says how to install it."""


class AssemblyError(RuntimeError):
    """ptxas rejected a PTX probe; the message carries its log."""


@dataclass(frozen=True)
class Tool:
    name: str
    path: str
    version: str  # e.g. "13.5.37"
    origin: str   # "wheel:nvidia-cuda-nvcc", "wheel:triton", "PATH"

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def _package_dir(pkg: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(pkg)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _candidates(name: str) -> list[tuple[Path, str]]:
    """Places a tool may live, in order of preference."""
    out: list[tuple[Path, str]] = []
    nvidia = _package_dir("nvidia")
    if nvidia is not None:
        for sub in ("cu13", "cuda_nvcc", "cuda_nvdisasm", "cuda_cuobjdump", "cu12"):
            out.append((nvidia / sub / "bin" / name, f"wheel:nvidia/{sub}"))
    triton = _package_dir("triton")
    if triton is not None:
        out.append((triton / "backends" / "nvidia" / "bin" / name, "wheel:triton"))
    found = shutil.which(name)
    if found:
        out.append((Path(found), "PATH"))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            out.append((Path(home) / "bin" / name, "CUDA_HOME"))
    return out


@functools.lru_cache(maxsize=None)
def _version(path: str) -> str:
    try:
        text = subprocess.run([path, "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = re.search(r"V(\d+\.\d+\.\d+)", text) or re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else ""


@functools.lru_cache(maxsize=None)
def all_tools(name: str) -> tuple[Tool, ...]:
    seen: set[str] = set()
    tools = []
    for path, origin in _candidates(name):
        if not path.is_file() or not os.access(path, os.X_OK):
            continue
        real = str(path.resolve())
        if real in seen:
            continue
        seen.add(real)
        ver = _version(str(path))
        if ver:
            tools.append(Tool(name, str(path), ver, origin))
    return tuple(tools)


def _supports(tool: Tool, arch: str) -> bool:
    n = archs.number(arch)
    if tool.major >= 13:
        # CUDA 13 dropped sm_50..sm_72 from ptxas and nvdisasm.
        return n >= 75
    if tool.major == 12:
        minor = int(tool.version.split(".")[1])
        return 50 <= n <= 90 or (n in (100, 120) and minor >= 8)
    return n <= 86


def find(name: str, arch: str) -> Tool:
    """The preferred `name` (ptxas/nvdisasm/cuobjdump) that handles `arch`, or ToolMissing."""
    arch = archs.validate(arch)
    for tool in all_tools(name):
        if _supports(tool, arch):
            return tool
    hint = INSTALL_LEGACY if archs.number(arch) < 75 else INSTALL_STATIC
    have = ", ".join(f"{t.path} ({t.version})" for t in all_tools(name)) or "none found"
    raise ToolMissing(f"no {name} that handles {arch} is installed (have: {have}); "
                      f"install it with: {hint}")


def describe() -> list[str]:
    """One line per tool found, for the report header."""
    lines = []
    for name in ("ptxas", "nvdisasm"):
        tools = all_tools(name)
        if not tools:
            lines.append(f"{name}: not found (install: {INSTALL_STATIC})")
        for t in tools:
            lines.append(f"{name} {t.version} [{t.origin}] {t.path}")
    return lines


def compiler_tag(tool: Tool) -> str:
    """Directory-safe tag of a compiler, used to key SASS snapshots: 'ptxas-13.5.37'."""
    return f"{tool.name}-{tool.version}"


_CACHE: dict[tuple[str, str, str, tuple[str, ...]], bytes] = {}


def assemble(ptx: str, arch: str, *, extra: tuple[str, ...] = ()) -> bytes:
    """ptxas the PTX for `arch`; returns the cubin. Cached by (PTX hash, arch, ptxas version)."""
    tool = find("ptxas", arch)
    key = (hashlib.sha256(ptx.encode()).hexdigest(), arch, tool.version, extra)
    if key in _CACHE:
        return _CACHE[key]
    with tempfile.TemporaryDirectory(prefix="gpuchar-") as tmp:
        src = Path(tmp) / "probe.ptx"
        out = Path(tmp) / "probe.cubin"
        src.write_text(ptx)
        proc = subprocess.run([tool.path, f"-arch={arch}", *extra, str(src), "-o", str(out)],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise AssemblyError(f"ptxas {tool.version} failed for {arch}:\n{proc.stderr.strip()}")
        if re.search(r"warning", proc.stderr, re.I) and "C75" in proc.stderr:
            # wgmma serialisation warnings and the like must not pass silently
            raise AssemblyError(f"ptxas {tool.version} warned for {arch}:\n{proc.stderr.strip()}")
        cubin = out.read_bytes()
    _CACHE[key] = cubin
    return cubin


def disassemble(cubin: bytes, arch: str) -> str:
    """nvdisasm text of a cubin (no encodings, one instruction per line)."""
    tool = find("nvdisasm", arch)
    with tempfile.TemporaryDirectory(prefix="gpuchar-") as tmp:
        path = Path(tmp) / "probe.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([tool.path, "-c", str(path)], capture_output=True, text=True,
                              timeout=300)
    if proc.returncode != 0:
        raise AssemblyError(f"nvdisasm {tool.version} failed for {arch}:\n{proc.stderr.strip()}")
    return proc.stdout
