"""Compile stage: probes assembled offline (ptxas + nvdisasm, no GPU) and JIT-linked by the
driver (the code that runs), each module compiled once per session and compiler.

Probes are compiled in ``Group``s, one PTX module per group (large groups in parts that
compile in parallel); a probe's SASS is then looked up by its digest. A part that fails to
compile is dropped: its probes are compiled alone later, so the failing one names itself.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Callable

from . import jit, sass, timing, toolchain
from .listings import ListingCache
from .device import DeviceInfo
from .probe import Probe


def functions_of(cubin: bytes, arch: str) -> dict[str, sass.Function]:
    """The SASS of every kernel in a cubin (nvdisasm for `arch`), by kernel name."""
    return sass.parse(toolchain.disassemble(cubin, arch))


def default_text(arch: str, probes: list[Probe]) -> str:
    return probes[0].header + "\n".join(p.kernels for p in probes)


class Stage(str, Enum):
    """Which stage of a run needs a module: the static checks (assembled offline), the
    hardware tests (linked by the driver), or both."""
    STATIC = "static"
    HARDWARE = "hardware"
    BOTH = "both"


@dataclass
class Group:
    """Probes of one arch compiled as one module: `text(probes)` writes the module of a part
    (default: the first probe's header and every probe's kernels); `stage` says which runs
    need it (a hardware sweep's modules are not assembled by a static run)."""
    name: str
    arch: str
    probes: list[Probe]
    text: Callable[[list[Probe]], str] | None = None
    split: bool = False
    stage: Stage = Stage.BOTH

    def needed(self, stage: Stage) -> bool:
        return self.stage in (stage, Stage.BOTH)

    def parts(self) -> list[tuple[list[Probe], str, str]]:
        """(probes, module text, file name) of each part."""
        if not self.probes:
            return []
        ps = jit.chunks(self.probes) if self.split else [self.probes]
        make = self.text or (lambda part: default_text(self.arch, part))
        return [(part, make(part),
                 f"gpuchar_{self.name}{i if self.split else ''}.ptx")
                for i, part in enumerate(ps)]


@dataclass
class Built:
    """A probe's SASS from one compiler: the offline ptxas (tool) or the driver's JIT."""
    probe: Probe
    functions: dict[str, sass.Function]
    tool: toolchain.Tool | None = None        # offline
    compiled: jit.Compiled | None = None      # driver JIT (launchable)


_HEADER = re.compile(r"\A\.version (\d+)\.(\d+)\n\.target (\S+)\n\.address_size 64\n")


def merge_jobs(jobs: list[tuple]) -> list[tuple]:
    """One module per arch, compiler and .target out of the parts of a static run: nvdisasm
    costs about 0.5 s per cubin whatever its size (CUDA 13, 2-core machine), more than ptxas
    for most parts, and an arch has ten or more parts. The merged module takes the highest PTX
    ISA version of its parts; kernels are compiled one by one, so the SASS is that of the
    parts (the committed snapshots check it). Parts keep their order; a part whose text does
    not open with the plain header stays on its own. A merged job carries its parts, which
    are assembled one by one if the merged module fails."""
    order: list[tuple[str, tuple]] = []     # ("alone", job) or ("merged", key of `merged`)
    merged: dict[tuple, list] = {}
    for job in jobs:
        arch, tool, part, text, name = job
        m = _HEADER.match(text)
        if not m:
            order.append(("alone", job))
            continue
        key = (arch, tool.path, tool.key, m.group(3))
        if key not in merged:
            merged[key] = []
            order.append(("merged", key))
        merged[key].append((job, (int(m.group(1)), int(m.group(2))), m.end()))
    result = []
    for kind, item in order:
        pieces = merged[item] if kind == "merged" else [(item, None, None)]
        if len(pieces) == 1:
            result.append(pieces[0][0])
            continue
        arch, tool = pieces[0][0][0], pieces[0][0][1]
        major, minor = max(version for _, version, _ in pieces)
        target = item[3]
        text = (f".version {major}.{minor}\n.target {target}\n.address_size 64\n" +
                "".join("\n" + job[3][end:] for job, _, end in pieces))
        probes = [p for job, _, _ in pieces for p in job[2]]
        result.append((arch, tool, probes, text, f"gpuchar_{target}_merged.ptx",
                       tuple(job[2:] for job, _, _ in pieces)))
    return result


class Builds:
    """The session's compiled modules."""

    def __init__(self, jit_cache: jit.JitCache | None = None,
                 listings: ListingCache | None = None) -> None:
        self.jit_cache = jit_cache or jit.JitCache()
        self.listings = listings          # offline listings kept on disk between sessions
        self.assembled = 0                # offline modules assembled by ptxas this session
        self._lock = threading.Lock()
        self._offline: dict[tuple, dict[str, sass.Function]] = {}   # (arch, ptxas, sha)
        self._offline_probe: dict[tuple, dict[str, sass.Function]] = {}  # (arch, ptxas, digest)
        self._jit_probe: dict[tuple, tuple[jit.Compiled, dict]] = {}    # (digest, driver)
        self._jit_funcs: dict[tuple, dict[str, sass.Function]] = {}     # (sha, driver)
        self._jit_parts: dict[tuple, tuple[list[Probe], str, str]] = {}  # (digest, driver)
        self._offline_pending: dict[tuple, object] = {}    # (arch, ptxas, digest) -> Future
        self._pool: ThreadPoolExecutor | None = None       # background offline compiles
        # the SASS of prefetched driver-JIT modules, disassembled as soon as each is linked
        self._jit_disasm: dict[tuple, object] = {}         # (sha, driver) -> Future
        self._disasm_pool: ThreadPoolExecutor | None = None
        # queueing handed to a thread of its own (`later`), run once `go` is called;
        # `offline` waits for it first
        self._queued: list = []
        self._queue_pool: ThreadPoolExecutor | None = None
        self._go = threading.Event()
        self._closing = False

    # --- offline ----------------------------------------------------------------------------
    def offline_module(self, arch: str, text: str, name: str = "module",
                       tool: toolchain.Tool | None = None) -> tuple[toolchain.Tool, dict]:
        """(ptxas tool, kernel name -> SASS) of a PTX module, assembled once per session by
        `tool` (default: the preferred ptxas for the arch)."""
        tool = tool or toolchain.find("ptxas", arch)
        disasm = toolchain.find("nvdisasm", arch)
        key = (arch, tool.key, hashlib.sha256(text.encode()).hexdigest())
        if key not in self._offline:
            stored = self.listings.key(arch, text, tool, disasm) if self.listings else None
            listing = self.listings.get(stored) if stored else None
            if listing is None and stored:
                with self.listings.claim(stored):   # another process may be assembling it
                    listing = self.listings.get(stored) or self._assemble(
                        arch, text, name, tool, stored)
            elif listing is None:
                listing = self._assemble(arch, text, name, tool, None)
            funcs = sass.parse(listing)
            with self._lock:
                self._offline[key] = funcs
        return tool, self._offline[key]

    def _assemble(self, arch: str, text: str, name: str, tool: toolchain.Tool,
                  stored: str | None) -> str:
        listing = toolchain.disassemble(toolchain.assemble(text, arch, name=name, tool=tool),
                                        arch)
        with self._lock:
            self.assembled += 1
        if stored:
            self.listings.put(stored, listing)
        return listing

    def offline_groups(self, groups: list[Group], *, wait: bool = True,
                       version: str | None = None, relocatable: bool = False) -> None:
        """Assemble every part of these groups, one ptxas + nvdisasm process per part, as
        many at once as there are cores; remember each probe's SASS. With wait=False the
        parts compile in the background while tests run (`offline` waits for the part of
        the probe it is asked for). `version`: the ptxas of that CUDA version (a driver's,
        for comparing its JIT with the offline compiler), else the preferred one;
        `relocatable`: that ptxas with -c (toolchain.relocatable). Tools missing: nothing is
        done (the static tests skip with the install command)."""
        jobs = []
        for g in groups:
            try:
                tool = toolchain.find("ptxas", g.arch, version)
                tool = toolchain.relocatable(tool) if relocatable else tool
                toolchain.find("nvdisasm", g.arch)
            except toolchain.ToolMissing:
                continue
            todo = [p for p in g.probes if (g.arch, tool.key, p.digest) not in
                    self._offline_probe and (g.arch, tool.key, p.digest) not in
                    self._offline_pending]
            if todo:
                sub = Group(g.name, g.arch, todo, g.text, g.split)
                jobs += [(g.arch, tool, part, text, name) for part, text, name in sub.parts()]
        if not jobs:
            return
        jobs = merge_jobs(jobs)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2,
                                            thread_name_prefix="gpuchar-ptxas")
        futures = []
        for job in jobs:
            fut = self._pool.submit(self._build_part, *job)
            futures.append(fut)
            for p in job[2]:
                self._offline_pending[(job[0], job[1].key, p.digest)] = fut
        if wait:
            for fut in futures:
                fut.result()

    def later(self, queue: Callable[[], None]) -> None:
        """Run `queue` (work that queues offline assemblies: building groups' probes, their
        digests, `offline_groups(wait=False)`) on the session's queueing thread, after what
        was handed to it before, once `go` has been called: a GPU run calls it at the test
        thread's first long wait for the GPU (core.gpu.Gpu.on_long_wait), where the queueing
        does not compete with the test thread's own Python; `offline` calls it and waits for
        all of it before looking a probe up, and raises what it raised (once)."""
        if self._queue_pool is None:
            self._queue_pool = ThreadPoolExecutor(max_workers=1,
                                                  thread_name_prefix="gpuchar-queue")
        self._queued.append(self._queue_pool.submit(self._when_going, queue))

    def _when_going(self, queue: Callable[[], None]) -> None:
        self._go.wait()
        if not self._closing:
            queue()

    def go(self) -> None:
        """Let the queueing handed to `later` start."""
        self._go.set()

    def _queueing_done(self) -> None:
        self.go()
        while self._queued:
            fut = self._queued.pop(0)
            fut.result()

    def _build_part(self, arch: str, tool: toolchain.Tool, part: list[Probe], text: str,
                    name: str, pieces: tuple = ()) -> None:
        try:
            funcs = self.offline_module(arch, text, name, tool)[1]
        except toolchain.AssemblyError:
            for piece in pieces:        # a merged module failed: its parts one by one
                self._build_part(arch, tool, *piece)
            return      # (a single part's probes are assembled alone later)
        with self._lock:
            for p in part:
                self._offline_probe[(arch, tool.key, p.digest)] = {
                    e: funcs[e] for e in p.entries.values() if e in funcs}

    def close(self) -> None:
        """End of the session: queued parts are dropped, the running ones finish (a
        queueing still running first: it would queue parts after the pools are gone)."""
        if self._queue_pool is not None:
            self._closing = True            # a queueing not started yet does nothing
            self.go()
            self._queue_pool.shutdown(wait=True, cancel_futures=True)
            self._queue_pool = None
            self._queued.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._disasm_pool is not None:
            self._disasm_pool.shutdown(wait=False, cancel_futures=True)
            self._disasm_pool = None

    def offline(self, probe: Probe, tool: toolchain.Tool | None = None) -> Built:
        """The probe's SASS from the offline ptxas for its arch (`tool`, default the preferred
        one; from its group's module when that was assembled, else the probe alone). Raises
        ToolMissing / AssemblyError."""
        tool = tool or toolchain.find("ptxas", probe.arch)
        toolchain.find("nvdisasm", probe.arch)
        key = (probe.arch, tool.key, probe.digest)
        with timing.blocked(timing.OFFLINE):
            self._queueing_done()
            pending = self._offline_pending.pop(key, None)
            if pending is not None and not pending.cancelled():
                try:
                    pending.result()        # its part is compiling in the background
                except toolchain.ToolMissing as e:
                    # a new error per test: the future's one, raised again by every probe of
                    # the part, grew its traceback by every raise
                    raise toolchain.ToolMissing(str(e)) from None
            funcs = self._offline_probe.get(key)
            if funcs is None:
                funcs = self.offline_module(probe.arch, probe.ptx, probe.name, tool)[1]
        return Built(probe, funcs, tool=tool)

    # --- driver JIT ---------------------------------------------------------------------------
    def prefetch(self, dev: DeviceInfo, groups: list[Group]) -> None:
        """Start the driver JIT of every part of these groups in background threads; a probe
        of a prefetched part is later taken from its part's module (`jit`)."""
        parts = [part for g in groups for part in g.parts()]
        for part in parts:
            for p in part[0]:
                self._jit_parts.setdefault((p.digest, dev.driver), part)
        self.prefetch_modules(dev, [(text, name) for _, text, name in parts])

    def prefetch_modules(self, dev: DeviceInfo, modules: list[tuple[str, str]]) -> None:
        """Start the driver JIT of these (module text, file name) and then the nvdisasm of
        each, in background threads, in this order; `jit_module` takes both."""
        self.jit_cache.prefetch(modules, dev.driver)
        # nvdisasm of each linked module in the background too: done on first use it held the
        # test thread for most of a minute (docs/run-time.md, lab notes)
        if self._disasm_pool is None:
            self._disasm_pool = ThreadPoolExecutor(max_workers=jit.chunk_count(),
                                                   thread_name_prefix="gpuchar-nvdisasm")
        for text, _name in modules:
            key = (hashlib.sha256(text.encode()).hexdigest(), dev.driver)
            if key not in self._jit_funcs and key not in self._jit_disasm:
                self._jit_disasm[key] = self._disasm_pool.submit(self._disassemble_linked,
                                                                 dev, text)

    def _disassemble_linked(self, dev: DeviceInfo, text: str) -> dict | None:
        """The SASS of a prefetched module once the driver has linked it (None if the link
        failed or is not there: jit_module then disassembles in the caller's thread)."""
        cubin = self.jit_cache.linked_cubin(text, dev.driver)
        return None if cubin is None else functions_of(cubin, dev.arch)

    def jit_module(self, dev: DeviceInfo, text: str, name: str) -> tuple[jit.Compiled, dict]:
        """(Compiled, kernel name -> SASS) of a module linked by the driver, once per session."""
        compiled = self.jit_cache.compile(text, dev.driver, name)
        key = (hashlib.sha256(text.encode()).hexdigest(), dev.driver)
        if key not in self._jit_funcs:
            funcs = None
            pending = self._jit_disasm.pop(key, None)
            if pending is not None and not pending.cancelled():
                with timing.blocked(timing.OFFLINE):
                    try:
                        funcs = pending.result()
                    except Exception:   # noqa: BLE001 - disassembled again here: it names itself
                        funcs = None
            if funcs is None:
                funcs = functions_of(compiled.cubin, dev.arch)
            self._jit_funcs[key] = funcs
        return compiled, self._jit_funcs[key]

    def jit_groups(self, dev: DeviceInfo, groups: list[Group]) -> dict[str, Exception]:
        """Link every part of these groups (in parallel threads) and remember each probe's
        module; returns the errors of the parts the driver rejected, by module name (their
        probes are linked alone when asked for)."""
        return self._link(dev, [part for g in groups for part in g.parts()])

    def _link(self, dev: DeviceInfo, parts: list[tuple[list[Probe], str, str]]) -> dict:
        parts = [(p, t, n) for p, t, n in parts
                 if any((q.digest, dev.driver) not in self._jit_probe for q in p)]
        linked = self.jit_cache.compile_all([(t, n) for _, t, n in parts], dev.driver)
        errors = {}
        for (part, text, name), compiled in zip(parts, linked):
            if isinstance(compiled, Exception):
                errors[name] = compiled
                continue
            try:
                _, funcs = self.jit_module(dev, text, name)
            except toolchain.AssemblyError as e:
                errors[name] = e
                continue
            for p in part:
                self._jit_probe[(p.digest, dev.driver)] = (compiled, funcs)
        return errors

    def jit(self, probe: Probe, dev: DeviceInfo) -> Built:
        """The probe's module as the driver linked it: its group's part (prefetched or linked
        with jit_groups), else the probe alone (also when its part was rejected: the failing
        probe then names itself with its JIT log)."""
        key = (probe.digest, dev.driver)
        part = self._jit_parts.pop(key, None)
        if key not in self._jit_probe and part is not None:
            self._link(dev, [part])
        hit = self._jit_probe.get(key)
        if hit is None:
            hit = self.jit_module(dev, probe.ptx, probe.name.replace("/", "_") + ".ptx")
            self._jit_probe[key] = hit
        compiled, funcs = hit
        return Built(probe, funcs, compiled=compiled)
