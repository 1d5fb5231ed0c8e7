"""Offline CUDA tools (ptxas, nvdisasm, cuobjdump): where they are, what they cover, running them.

Tools are looked up in the PyPI wheels first (``nvidia-cuda-nvcc`` / ``nvidia-cuda-nvdisasm``
for CUDA 13, the CUDA 12.4 copies bundled in the ``triton==3.2.0`` wheel for sm_50..sm_72),
then on PATH / CUDA_HOME. Nothing here needs a GPU.
"""
from __future__ import annotations

import errno
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from . import archs, install

INSTALL_STATIC = install.line("static")
INSTALL_LEGACY = install.line("legacy")
# no extra has tools for Kepler (sm_3x): CUDA 12 dropped it, a CUDA 11 toolkit has them
INSTALL_KEPLER = ("no extra of pytest-gpuchar has them (CUDA 12 dropped sm_30..sm_37; the "
                  "legacy extra covers sm_50..sm_72): put a CUDA 11 toolkit's bin/ on PATH or "
                  "set CUDA_HOME to it")


def install_hint(arch: str) -> str:
    """How to get the ptxas and nvdisasm that handle `arch`."""
    n = archs.number(arch)
    return INSTALL_KEPLER if n < 50 else INSTALL_LEGACY if n < 75 else INSTALL_STATIC


_SPAWN = threading.Lock()
SPAWN_ATTEMPTS = 5


def run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run a tool and capture its output. Processes are started one at a time (the modules
    of a session compile in threads): concurrent vfork+exec from several threads failed here
    now and then with EFAULT ("Bad address"); the tools then run in parallel as before. The
    lock does not cover other threads of the process (pytest's, the JIT's), and EFAULT was still
    seen with it once every few hundred spawns on a 2-core machine: the start is retried then
    (an exec that failed ran nothing)."""
    for attempt in range(SPAWN_ATTEMPTS):
        try:
            with _SPAWN:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
            break
        except OSError as e:
            if e.errno != errno.EFAULT or attempt == SPAWN_ATTEMPTS - 1:
                raise
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


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
    options: tuple[str, ...] = ()    # given to every run of it (ptxas -c: relocatable)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def key(self) -> str:
        """What tells its outputs apart: the version and the options ("13.0.88 -c")."""
        return " ".join((self.version, *self.options))


RELOCATABLE = ("-c",)


def relocatable(tool: Tool) -> Tool:
    """ptxas compiling as the driver's JIT does for cuLinkAddData (PTX in a link: relocatable
    code, `ptxas -c`): on sm_90 its SASS is the 580 driver's JIT's instruction for instruction,
    where the default whole-program mode places moves, adds and subroutines differently
    (core/sassdiff.py says how)."""
    return replace(tool, options=RELOCATABLE)


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
        text = run([path, "--version"], timeout=30).stdout
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


# tools found broken by their first use (exit 0 without their output): path -> why
_broken: dict[str, str] = {}


def broken(tool: Tool, why: str, arch: str) -> "ToolMissing":
    """Mark `tool` broken (it is never chosen again in this process) and return the error
    its users get: the one find() gives from now on."""
    _broken.setdefault(tool.path, why)
    return _broken_error(tool, arch)


def _broken_error(tool: Tool, arch: str) -> "ToolMissing":
    return ToolMissing(f"{tool.name} {tool.version} at {tool.path} is broken: "
                       f"{_broken[tool.path]}; no other {tool.name} handles {arch}: remove it "
                       f"from PATH (or repair it) and install a working one: "
                       f"{install_hint(arch)}")


def find(name: str, arch: str, version: str | None = None) -> Tool:
    """The preferred `name` (ptxas/nvdisasm/cuobjdump) that handles `arch` (of a version
    starting with `version`, e.g. "13.0": the CUDA version of a driver), or ToolMissing.
    A tool found broken is passed over; when it was the only one, the error names it."""
    arch = archs.validate(arch)
    bad = None
    for tool in all_tools(name):
        if _supports(tool, arch) and (version is None or
                                      f"{tool.version}.".startswith(f"{version}.")):
            if tool.path not in _broken:
                return tool
            bad = bad or tool
    if bad is not None:
        raise _broken_error(bad, arch)
    have = ", ".join(f"{t.path} ({t.version})" for t in all_tools(name)) or "none found"
    what = f"{name} {version}" if version else name
    raise ToolMissing(f"no {what} that handles {arch} is installed (have: {have}); "
                      + ("" if archs.number(arch) < 50 else "install it with: ")
                      + install_hint(arch))


def describe() -> list[str]:
    """One line per tool version found (the first place it was found, and how many copies
    of that version there are elsewhere), for the report header."""
    lines = []
    for name in ("ptxas", "nvdisasm"):
        tools = all_tools(name)
        if not tools:
            lines.append(f"{name}: not found (install: {INSTALL_STATIC})")
        seen: dict[str, list[Tool]] = {}
        for t in tools:
            seen.setdefault(t.version, []).append(t)
        for version, same in seen.items():
            t = same[0]
            more = f" (+{len(same) - 1} more copies)" if len(same) > 1 else ""
            lines.append(f"{name} {version} [{t.origin}] {t.path}{more}")
    return lines


def compiler_tag(tool: Tool) -> str:
    """Directory-safe tag of a compiler, used to key SASS snapshots: 'ptxas-13.5.37'."""
    return f"{tool.name}-{tool.version}"


def _offending_lines(ptx: str, log: str, limit: int = 8) -> str:
    """The PTX lines ptxas complains about ("<file>, line N; error ..."), numbered, with one
    line of context either side."""
    lines = ptx.splitlines()
    numbers = sorted({int(m) for m in re.findall(r", line (\d+);", log)})[:limit]
    out = []
    for n in numbers:
        for k in range(max(1, n - 1), min(len(lines), n + 1) + 1):
            mark = ">" if k == n else " "
            out.append(f"{mark}{k:6d} | {lines[k - 1]}")
        out.append("")
    return "\n".join(out)


def assemble(ptx: str, arch: str, *, extra: tuple[str, ...] = (), name: str = "probe",
             tool: Tool | None = None) -> bytes:
    """ptxas (`tool`, default the preferred one) the PTX for `arch`; returns the cubin (the
    session's Builds caches it). On failure the error names the module (`name`, e.g. the
    probe) and shows the offending PTX lines."""
    tool = tool or find("ptxas", arch)
    if tool.path in _broken:
        raise _broken_error(tool, arch)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "probe"
    with tempfile.TemporaryDirectory(prefix="gpuchar-") as tmp:
        src = Path(tmp) / f"{safe}.ptx"
        out = Path(tmp) / f"{safe}.cubin"
        src.write_text(ptx)
        proc = run([tool.path, f"-arch={arch}", *tool.options, *extra, str(src), "-o", str(out)],
                   timeout=300)
        log = proc.stderr.strip().replace(str(src), f"{name}.ptx")
        if proc.returncode != 0:
            shown = log.splitlines()
            more = f"\n... {len(shown) - 20} more lines" if len(shown) > 20 else ""
            raise AssemblyError(f"ptxas {tool.version} failed for {arch} on {name}:\n"
                                + "\n".join(shown[:20]) + more + "\n"
                                + _offending_lines(ptx, log))
        if re.search(r"warning", log, re.I) and "C75" in log:
            # wgmma serialisation warnings and the like must not pass silently
            raise AssemblyError(f"ptxas {tool.version} warned for {arch} on {name}:\n{log}")
        cubin = out.read_bytes() if out.is_file() else None
    if not cubin or not cubin.startswith(b"\x7fELF"):
        what = "no output file" if cubin is None else \
            "an empty file" if not cubin else "a file that is not a cubin (no ELF header)"
        raise broken(tool, f"it exited 0 but wrote {what} for -o", arch)
    return cubin


def disassemble(cubin: bytes, arch: str) -> str:
    """nvdisasm text of a cubin (no encodings, one instruction per line)."""
    tool = find("nvdisasm", arch)
    with tempfile.TemporaryDirectory(prefix="gpuchar-") as tmp:
        path = Path(tmp) / "probe.cubin"
        path.write_bytes(cubin)
        proc = run([tool.path, "-c", str(path)], timeout=300)
    if proc.returncode != 0:
        raise AssemblyError(f"nvdisasm {tool.version} failed for {arch}:\n{proc.stderr.strip()}")
    if ".text." not in proc.stdout:
        raise broken(tool, "it exited 0 but printed no disassembly (no .text section) of a "
                           "cubin ptxas had just written", arch)
    return proc.stdout
