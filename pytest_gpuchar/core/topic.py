"""The topic contract, written once.

A topic is a package under pytest_gpuchar/topics: rows (data), kernels (PTX on the shared
frame), a run module that measures a row through a ``Context``, analysis as plain functions,
and one test module per paper table. ``TOPICS`` is the one list of topics: the registry
(topics/registry.py) maps each name to its package's code, and the expectation files are laid
out by it (results/expectations.py: a topic's keys start with its name and live in
expectations/<topic>/<arch>.yaml, the instruction tables' in expectations/<arch>.yaml).

``Topic`` is what a topic package offers the suite (its ``__init__``): the modules it compiles
for an arch. ``Context`` is what a topic's run sees of a session: the GPU and its launch
stage, the compiled modules, the measurements shared between tests, the repeats, the
verification door, the expectations and the results so far. The pytest session implements
it; a topic never imports the pytest layer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar

from . import timing, toolchain
from .build import Builds, Built, Group
from .gpu import Gpu
from .probe import Probe
from .runner import Runner
from .topic_list import TOPICS, TopicInfo, TopicTaken, register
from .verify import Verdict

T = TypeVar("T")
# host worker threads of a session (RunCache.ahead): layouts, inputs and references made
# while the GPU measures; numpy releases the GIL in its array loops
HOST_WORKERS = 2


class Topic(Protocol):
    """A topic package (its ``__init__``): the modules it compiles for an arch (offline for
    the static checks, by the driver's JIT for the hardware tests)."""

    def groups(self, arch: str) -> list[Group]: ...

    # optional: host_ahead(session, arch) -> [(key, module-level function, arguments)], the
    # host work of the topic's hardware rows that depends on the rows alone, made ahead in
    # worker processes on a GPU (RunCache.in_processes; registry.host_ahead)


class Runs(Protocol):
    def once(self, key: tuple, make: Callable[[], T]) -> T: ...

    def __contains__(self, key: tuple) -> bool: ...


class Notes(Protocol):
    """Where a topic notes a result made outside the judge (an invalid probe, a mapping)."""

    def note(self, result: Any) -> Any: ...


class Context(Protocol):
    """What a topic's run is given (see the module docstring)."""
    repeats: int
    runs: Runs
    builds: Builds
    expectations: Any           # results.expectations.Store
    recorder: Any               # results.report.Recorder: the results recorded so far

    @property
    def gpu(self) -> Gpu: ...

    @property
    def runner(self) -> Runner: ...

    @property
    def device(self) -> Any: ...

    def verify(self, probe: Probe, functions: dict, compiler: str | None = None) -> Verdict: ...

    # the declaration policy (core.declarations) with the session's expectation files: a
    # figure found invalid though its probe is valid asks `unmeasurable` (a declared fact is
    # skipped with the reason), one found measurable asks `not_declared` (a stale declaration
    # fails)
    def unmeasurable(self, arch: str, name: str, verdict: str, compiler: str = "") -> None: ...

    def not_declared(self, arch: str, name: str, compiler: str = "") -> None: ...

    def provenance(self) -> dict: ...


Groups = Callable[[str], "list[Group]"]     # a topic's groups(arch)


def linked(ctx: Context, probe: Probe, groups: Groups | None = None) -> Built:
    """The probe as the driver JIT-linked it on the context's GPU: with the topic's
    `groups`, every module of them for the device's arch linked once per session first (in
    parallel), and the probe taken from its part; otherwise the probe's module alone."""
    gpu = ctx.gpu
    gpu.ensure_alive(probe.name)
    dev = gpu.dev
    if groups is not None:
        ctx.runs.once(("jit", groups.__module__, groups.__qualname__, dev.arch, dev.driver),
                      lambda: ctx.builds.jit_groups(dev, groups(dev.arch)))
    return ctx.builds.jit(probe, dev)


def built(ctx: Context, probe: Probe, groups: Groups | None = None) -> tuple[Built, Verdict]:
    """The probe linked (``linked``) and its driver SASS verified through the context's one
    door, once per session (a probe found invalid raises, every time it is asked for)."""
    def make() -> tuple[Built, Verdict]:
        b = linked(ctx, probe, groups)
        return b, ctx.verify(probe, b.functions)
    ctx.gpu.ensure_alive(probe.name)
    return ctx.runs.once(("built", probe.digest), make)


class RunCache:
    """Measurements shared between tests (Table II reuses Table V's runs, a sweep feeds many
    rows): each made once per session under its key. Host work a later step needs (a chase's
    layout, a kernel's inputs, a CPU reference) can be started ``ahead`` on a worker thread
    while the test thread launches and waits for the GPU; ``once`` then takes it, waiting
    only for what is not done yet."""

    def __init__(self, workers: int = HOST_WORKERS) -> None:
        self._runs: dict[tuple, Any] = {}
        self._workers = workers
        self._pool: Any = None
        self._processes: Any = None      # core.hostpool.HostPool, started by in_processes

    def once(self, key: tuple, make: Callable[[], T]) -> T:
        if key not in self._runs:
            self._runs[key] = make()
        value = self._runs[key]
        if isinstance(value, _Ahead):
            if value.process and value.future.cancel():
                value = make()            # no worker has picked it up: made here, now
            else:
                value = self._wait(key, value)
            self._runs[key] = value
        return value

    def _wait(self, key: tuple, ahead: "_Ahead") -> Any:
        try:
            with timing.blocked(timing.HOST):
                made = ahead.future.result()
                if not ahead.process:
                    return made
                from .hostpool import load
                return load(made)
        except BaseException as e:
            del self._runs[key]           # made again (or failing again) when asked again
            if ahead.process and isinstance(e, Exception):
                from .hostpool import HostWorkFailed
                raise HostWorkFailed(f"host work {key!r} failed in a worker process: "
                                     f"{type(e).__name__}: {e}") from e
            raise

    def take(self, key: tuple, make: Callable[[], T]) -> T:
        """A value for one use (a large layout, inputs): made ahead or now, handed over and
        not kept."""
        try:
            return self.once(key, make)
        finally:
            self._runs.pop(key, None)

    def ahead(self, key: tuple, make: Callable[[], Any]) -> None:
        """Start making `key` on a host worker thread (nothing when it is made or started):
        pure host work only (numpy, no launch), which the GIL-free parts of numpy overlap
        with the test thread's waits for the GPU; its error is raised by ``once``."""
        if key in self._runs:
            return
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor
            self._pool = ThreadPoolExecutor(max_workers=self._workers,
                                            thread_name_prefix="gpuchar-host")
        self._runs[key] = _Ahead(self._pool.submit(make))

    def in_processes(self, jobs: list[tuple[tuple, Callable[..., Any], tuple]]) -> None:
        """Start each (key, module-level function, arguments) not made or started yet in the
        session's worker processes (core/hostpool.py), in the order given: host work that
        depends only on the rows. ``once(key, make)`` takes it (`make` computes the same
        value in place: when no worker has picked the job up, it is made there)."""
        jobs = [j for j in jobs if j[0] not in self._runs]
        if not jobs:
            return
        if self._processes is None:
            from .hostpool import HostPool
            self._processes = HostPool()
        for key, fn, args in jobs:
            self._runs[key] = _Ahead(self._processes.submit(fn, *args), process=True)

    @property
    def has_processes(self) -> bool:
        """Whether the session's worker processes are started (in_processes)."""
        return self._processes is not None

    def close(self) -> None:
        """Stop the worker processes (jobs not started are dropped) and threads."""
        if self._processes is not None:
            self._processes.close()
            self._processes = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __contains__(self, key: tuple) -> bool:
        return key in self._runs


@dataclass(frozen=True)
class _Ahead:
    """A value being made on a host worker thread (RunCache.ahead) or in a worker process
    (RunCache.in_processes)."""
    future: Any
    process: bool = False


class Checked(list):
    """What a static check verified: (Built, Verdict) per probe."""

    @property
    def tool(self) -> toolchain.Tool:
        return self[0][0].tool
