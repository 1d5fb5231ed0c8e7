"""The typed state of one pytest session (as syrupy's SnapshotSession or pytest-benchmark's
BenchmarkSession): created in pytest_configure, registered as a plugin, read by the fixtures.
Nothing of a run is kept at module level: the device, the compiled modules, the measurements
shared between tests, the wedged-GPU flag and the results all live here."""
from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .core import archs, declarations
from .core.build import Builds
from .core.declarations import StaleDeclaration  # noqa: F401 - raised through this session
from .core.probe import Probe
from .core.topic import RunCache
from .core.verify import Verdict
from .results import tolerances
from .results.changes import measured_skip
from .results.expectations import Expected, Store, default_layers
from .results.durations import Durations
from .results.judge import Result
from .results.report import ARTIFACTS, Recorder


@dataclass(eq=False)     # registered as a plugin: hashed by identity
class GpuCharSession:
    config: pytest.Config
    requested: str | None
    repeats: int
    watchdog_s: float
    report_dir: Path | None
    device_index: int | None
    expectations: Store
    recorder: Recorder = field(default_factory=Recorder)
    builds: Builds = field(default_factory=Builds)
    runs: RunCache = field(default_factory=RunCache)
    skip_reasons: Counter = field(default_factory=Counter)
    # tests skipped for what their own measurement saw (changes.measured_skip): nodeid -> why
    measured_skips: dict = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex)   # meta.session_id
    controller_of_workers: bool = False
    broken: list[str] = field(default_factory=list)      # tests that failed or errored
    static_ran: Counter = field(default_factory=Counter)  # arch -> static checks that ran
    hardware_ran: int = 0          # hardware tests that ran on a GPU (0: measured nothing)
    static_skipped: dict = field(default_factory=dict)    # arch -> why its static checks skip
    # failed tests that made this run keep unused snapshots ("interrupted": the run was)
    snapshots_kept: int | str = 0
    user_disabled_unused: bool = False   # --snapshot-disable-unused given (command line, ini)
    accept_level: str = "device"   # --gpuchar-accept-level
    accept_fleet: str = "extend"   # --gpuchar-accept-fleet
    acceptance: Any = None         # results.accept.Acceptance of a --snapshot-update GPU run
    durations: Durations = field(default_factory=Durations)   # the topics' tests' seconds
    not_measuring: str = ""   # why this process's GPU is not its own to measure (xdist)
    _device: Any = None
    _claim_refused: str | None = None   # gpuclaim's answer: None not asked, "" ours
    _gpu: Any = None
    _runner: Any = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> "GpuCharSession":
        raw = config.getoption("gpu_arch")
        if raw is None:
            raw = config.getini("gpu_arch") or None
        requested = None
        if raw is not None:
            if not raw.strip():
                raise pytest.UsageError("--gpu-arch: empty value; valid values: "
                                        + ", ".join(archs.KNOWN_ARCHS))
            try:
                requested = archs.validate(raw)
            except archs.UnknownArch as e:
                raise pytest.UsageError(f"--gpu-arch: {e}") from None
        from . import options
        options.environment_dirs()
        report = options.report_dir(config.getoption("gpuchar_report")
                                    or config.getini("gpuchar_report"))
        idx = options.device_index(config.getoption("gpuchar_device"))
        layers = default_layers(config.rootpath)
        tolerances.use(layers[0])
        return cls(config, requested,
                   int(options.positive(config, "gpuchar_repeats", "--gpuchar-repeats",
                                        whole=True)),
                   float(options.positive(config, "gpuchar_watchdog", "--gpuchar-watchdog",
                                          whole=False)),
                   report, idx,
                   Store(layers=layers), accept_level=config.getoption("gpuchar_accept_level"),
                   accept_fleet=config.getoption("gpuchar_accept_fleet"))

    # --- device -------------------------------------------------------------------------------
    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    @property
    def device(self):
        """The GPU (DeviceInfo) or an Absent carrying the reason; detected once."""
        if self._device is None:
            from .core import device
            idx = self.device_index
            worker = getattr(self.config, "workerinput", {}).get("workerid", "")
            if idx is None and worker.startswith("gw") and not os.environ.get("GPUCHAR_DEVICE"):
                # pytest-xdist: one worker per GPU, worker gwN on GPU N (run with -n <GPUs>)
                n = device.device_count()
                idx = device.worker_device(int(worker[2:]), n)
                if idx is None and n:
                    self.not_measuring = (
                        f"pytest-xdist worker {worker} has no GPU of its own ({n} visible, "
                        f"measured by gw0..gw{n - 1}; two workers on one GPU would time each "
                        f"other's kernels): run with -n {n} or -n auto")
                    # the host's GPU still decides the archs it collects, as its peers do
                    idx = int(worker[2:]) % n
            self._device = device.detect(idx)
        return self._device

    @property
    def gpu(self):
        """The launcher of this session's GPU (core.gpu.Gpu)."""
        if self._gpu is None:
            from .core.gpu import Gpu
            dev = self.device
            self.builds.jit_cache.device_index = dev.index
            self._gpu = Gpu(dev, self.builds.jit_cache, self.watchdog_s,
                            on_long_wait=self.builds.go)
        return self._gpu

    @property
    def runner(self):
        """The launch stage of this session's GPU (core.runner.Runner)."""
        if self._runner is None:
            from .core.runner import Runner
            self._runner = Runner(self.gpu)
        return self._runner

    def archs(self) -> list[str]:
        """The archs this run covers."""
        if self.requested:
            return [self.requested]
        dev = self.device
        if dev:
            return [dev.arch]
        have = set(self.expectations.available())
        return [a for a in archs.STATIC_ARCHS if a in have] or list(archs.STATIC_ARCHS)

    def hardware_skip(self, arch: str) -> str | None:
        """Why a hardware test of `arch` cannot run here (None: it can)."""
        dev = self.device
        if not dev:
            return f"hardware: {dev.reason}"
        if self.not_measuring:
            return f"hardware: {self.not_measuring}"
        if dev.arch != arch:
            return f"hardware: GPU is {dev.arch} ({dev.name}) but {arch} was asked"
        return self._claim_gpu(dev)

    def _claim_gpu(self, dev) -> str | None:
        """The measuring process's claim on its GPU (core/gpuclaim.py), tried once, at its
        first hardware test: every hardware test of the session gets the same answer (a
        claim given up mid-collection does not split the run). The controller of
        pytest-xdist workers measures nothing and claims nothing. None: ours; else why the
        hardware tests skip."""
        if self.controller_of_workers:
            return None
        if self._claim_refused is None:
            from .core import gpuclaim
            holder = gpuclaim.claim(dev.uuid)
            self._claim_refused = holder and (
                f"hardware: {dev.uuid} ({dev.name}, GPU {dev.index}) is being measured by "
                f"another process ({holder}); two processes on one GPU would time each "
                f"other's kernels: run when it has ended, or pick another GPU with "
                f"--gpuchar-device")
        return self._claim_refused or None

    def require_gpu(self, arch: str):
        """The GPU if it is of `arch`, else pytest.skip naming what is missing."""
        why = self.hardware_skip(arch)
        if why:
            pytest.skip(why)
        dev = self.device
        if self._gpu is not None and self._gpu.wedged:
            pytest.skip(f"hardware: GPU wedged by probe {self._gpu.wedged} earlier in this run")
        return dev

    def expected(self, arch: str, key: str) -> Expected | None:
        """The expectation of `key` on `arch` (this device's override first)."""
        exp = self.expectations.load(arch)
        dev = self._device if self._device else None
        return exp.get(key, dev.name if dev else None) if exp else None

    def verify(self, probe: Probe, functions: dict, compiler: str | None = None) -> Verdict:
        """The one verification door of every probe, static or hardware: probe.check with
        the arch's declarations. A probe declared unmeasurable (expectation file,
        `unmeasurable:`; for SASS of the `compiler` named by its snapshot tag, default the
        driver's JIT of this session's GPU) whose verdict shows the declared SASS fact is not
        applicable (skipped with the reason); one that is valid now, or invalid for another
        reason, fails."""
        if compiler is None:
            dev = self._device
            compiler = f"jit-driver-{dev.driver}" if dev else ""
        return declarations.verify(self.expectations, probe, functions, compiler)

    def unmeasurable(self, arch: str, name: str, verdict: str, compiler: str = "") -> None:
        """core.declarations.unmeasurable with this session's expectations."""
        declarations.unmeasurable(self.expectations, arch, name, verdict, compiler)

    def not_declared(self, arch: str, name: str, compiler: str = "") -> None:
        """core.declarations.not_declared with this session's expectations."""
        declarations.not_declared(self.expectations, arch, name, compiler)

    # --- hooks (this object is registered as a plugin) ---------------------------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.controller_of_workers = bool(getattr(session.config.option, "numprocesses",
                                                  None)) and not self.is_worker
        from .core import listings
        if self.controller_of_workers or self.requested or self.device:
            self.validate_expectations(self.archs())
        self.builds.listings = listings.from_config(self.config)
        if getattr(self.config.option, "update_snapshots", False) and not self.is_worker \
                and self.accept_level != "none":
            from .results.accept import Acceptance
            self.acceptance = Acceptance(self.accept_level, self.expectations.root,
                                         self.accept_fleet)

    def validate_expectations(self, archs) -> None:
        """Every expectation file of the run's archs, validated once before any test runs: a
        bad one is a usage error naming file:line:key (not one error per test). The run's
        archs are the one asked for (--gpu-arch) or found (the GPU), validated at the
        session's start; a run without either covers every arch with an expectations file,
        and validates those its collected tests are parametrised with, after the collection:
        a run of other tests (a user's own suite, the unit tests' pytest runs) parses none.
        A controller of pytest-xdist workers validates them all at its start, before any
        worker starts; its workers of such a run read the files as their tests need them."""
        from .results.expectations import ExpectationError
        for arch in archs:
            try:
                self.expectations.load(arch)
            except ExpectationError as e:
                raise pytest.UsageError(f"bad expectation file: {e}") from None

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Static checks say which arch they check (counted per arch in the summary). Under
        pytest-xdist's loadgroup distribution, one arch's static checks go to one worker and
        one topic's hardware tests of an arch to one worker (they share its measurements:
        a sweep is made once), so each worker compiles only what it runs. On a GPU the
        hardware tests go first (schedule.hardware_first)."""
        from . import schedule
        from .topics.registry import TOPICS, topic_of
        schedule.hardware_first(self, self.config, items)
        named = {item.nodeid.split("::")[0]: topic_of(item) for item in items}
        topics = {m: t for m, t in named.items() if t}
        if topics:     # each test module's topic: the HTML report's sections
            self.recorder.meta.setdefault("topics", {}).update(topics)
            self.recorder.meta.setdefault("topic_docs", {}).update(
                {t: TOPICS[t].doc for t in topics.values() if t in TOPICS})
        of_item = [getattr(item, "callspec", None) and item.callspec.params.get("arch")
                   for item in items]
        if not self.is_worker:
            self.validate_expectations(sorted({arch for arch in of_item if arch}))
        for item, arch in zip(items, of_item):
            if not arch:
                continue
            why = self.hardware_skip(arch) if item.get_closest_marker("hardware") else None
            if why:
                # skipped before any fixture is set up (a few thousand of them without a GPU)
                item.add_marker(pytest.mark.skip(reason=why))
            if item.get_closest_marker("static") is not None:
                item.user_properties.append(("gpuchar_static", arch))
                item.add_marker(pytest.mark.xdist_group(arch))
            else:
                topic = topic_of(item) or item.module.__name__.rsplit(".", 1)[-1]
                item.add_marker(pytest.mark.xdist_group(f"{arch}-{topic}"))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Start the run's compiles at its first characterisation test (schedule.py)."""
        from . import schedule
        schedule.before_test(self, item)

    def static_once(self, items: list[pytest.Item]) -> None:
        """--gpuchar-distribute=replicate runs every test on every GPU's worker; the static
        checks (no GPU, the same on every board) run on the first worker only. Deselected
        after syrupy has listed the collected tests (plugin.py, trylast), so every worker
        reports the same collection to it: a worker that collected fewer tests made syrupy's
        controller warn that the selected tests were missing from the collected ones."""
        worker = getattr(self.config, "workerinput", {}).get("workerid", "gw0")
        if worker == "gw0" or self.config.getoption("gpuchar_distribute") != "replicate":
            return
        static = [i for i in items if i.get_closest_marker("static") is not None]
        if static:
            items[:] = [i for i in items if i.get_closest_marker("static") is None]
            self.config.hook.pytest_deselected(items=static)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        """A topic's test says its topic and, with its last report, its GPU-busy seconds
        (they travel with the report from a pytest-xdist worker)."""
        report = yield
        m = item.get_closest_marker("topic")
        if m and m.args:
            report.user_properties.append(("gpuchar_topic", m.args[0]))
            if call.when == "teardown":
                from .core import timing
                report.user_properties.append(("gpuchar_busy_s",
                                               round(timing.busy().get(item.nodeid, 0.0), 6)))
        return report

    def _time(self, report: pytest.TestReport) -> None:
        if self.is_worker:
            return
        if report.skipped and report.when == "setup":
            self.durations.skipped_at_setup(report.nodeid)
            return
        props = dict(report.user_properties)
        kind = "static" if "static" in report.keywords else \
            "hardware" if "hardware" in report.keywords else None
        if kind and "gpuchar_topic" in props:
            self.durations.add(report.nodeid, props["gpuchar_topic"], kind, report.duration,
                               props.get("gpuchar_busy_s"))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._time(report)
        if self.acceptance is not None and report.when == "call":
            self._consider(report)
        if report.failed:
            self.broken.append(report.nodeid)
            crash = getattr(report.longrepr, "reprcrash", None)
            text = "\n".join(ln for ln in report.longreprtext.splitlines()
                             if ln.startswith("E "))
            self.recorder.meta.setdefault("failures", []).append(
                {"test": report.nodeid, "when": report.when, "text": text[:20000],
                 "message": (crash.message if crash else str(report.longrepr))[:500]})
        self._count_static(report)
        self._count_hardware(report)
        # results recorded on pytest-xdist workers reach the controller in user_properties
        if self.controller_of_workers and report.when == "call":
            for name, value in report.user_properties:
                if name == "gpuchar_result":
                    self.recorder.add(Result(**value))
                elif name == "gpuchar_artifact":
                    self.recorder.add_artifact(**value)
        if report.skipped and report.when in ("setup", "call") and \
                isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.skip_reasons[reason] += 1      # whole: it says what to do (terminal wraps it)
            if measured_skip(reason):
                self.measured_skips[report.nodeid] = reason[:300]

    def _consider(self, report: pytest.TestReport) -> None:
        """A --snapshot-update run: the results of a test that passed, or failed only by a
        figure out of tolerance, are candidates for the new expectations."""
        props = report.user_properties
        results = [v for n, v in props if n == "gpuchar_result"]
        if not results or "hardware" not in report.keywords:
            return
        ok = not report.failed or ("gpuchar_tolerance_only", True) in props
        crash = getattr(report.longrepr, "reprcrash", None)
        self.acceptance.consider(results, ok, crash.message if crash else "")

    def _count_hardware(self, report: pytest.TestReport) -> None:
        """A hardware test that reached its call on a GPU (passed, failed, or an expected
        failure such as an unstable figure): the night measured something."""
        if report.when == "call" and "hardware" in report.keywords and (
                not report.skipped or hasattr(report, "wasxfail")):
            self.hardware_ran += 1

    def _count_static(self, report: pytest.TestReport) -> None:
        """How many static checks ran per arch, and why those that did not were skipped."""
        props = dict(report.user_properties)
        arch = props.get("gpuchar_static")
        if not arch:
            return
        if report.when == "call" and not report.skipped or \
                report.skipped and hasattr(report, "wasxfail"):
            self.static_ran[arch] += 1
        elif report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            self.static_skipped.setdefault(arch, reason)

    # --- pytest-xdist: what the workers did that the controller's summary reports ------------
    def publish_to_controller(self) -> None:
        """A worker's offline compile counts, for the controller's summary line (called once
        the worker's compiles are done: plugin.pytest_sessionfinish)."""
        out = getattr(self.config, "workeroutput", None)
        if out is not None:
            listings = self.builds.listings
            out["gpuchar_builds"] = {"assembled": self.builds.assembled,
                                     "hits": listings.hits if listings else 0}

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """pytest-xdist: what a worker did that the controller reports - its offline compile
        counts, its board (NVML, start and end), its test modules' topics."""
        out = getattr(node, "workeroutput", None) or {}
        got = out.get("gpuchar_builds")
        if got:
            self.builds.assembled += got["assembled"]
            if self.builds.listings is not None:
                self.builds.listings.hits += got["hits"]
        if out.get("gpuchar_boards"):
            self.recorder.meta.setdefault("boards", []).extend(out["gpuchar_boards"])
        for key in ("topics", "topic_docs"):
            if out.get(f"gpuchar_{key}"):
                self.recorder.meta.setdefault(key, {}).update(out[f"gpuchar_{key}"])
        if out.get("gpuchar_grouped") is False and "xdist_grouping" not in self.recorder.meta:
            self.recorder.meta["xdist_grouping"] = xdist_grouping_failed()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """A run in which a test failed or errored deletes no snapshot: a test that stopped
        before its snapshot assertion leaves its snapshot "unused" to syrupy, which
        --snapshot-update would otherwise delete (and a plain run would advise deleting).
        A --snapshot-update run on a GPU accepts its measured figures (results/accept.py),
        unless it was interrupted."""
        self._accept(exitstatus)
        opt = self.config.option
        self.user_disabled_unused = bool(getattr(opt, "disable_unused_snapshots", False))
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        if (self.broken or interrupted) and hasattr(opt, "no_cleanup") and not self.is_worker:
            # (interrupted: the tests it did not reach left their snapshots "unused"; under
            # pytest-xdist syrupy also warned that a worker's report was missing)
            opt.no_cleanup = True
            opt.disable_unused_snapshots = True
            self.snapshots_kept = len(self.broken) or "interrupted"

    @pytest.hookimpl(wrapper=True)
    def pytest_terminal_summary(self, terminalreporter):
        """syrupy's "Unused snapshot detection is disabled (--snapshot-disable-unused). This is
        not recommended." names an option the user never gave (on the command line or in an
        ini's addopts) when this session turned the detection off (a test failed:
        snapshots_kept, said in the gpuchar summary) or syrupy did (an interrupted run under
        pytest-xdist): it is left out, with syrupy's heading when nothing else is under it."""
        if self.is_worker or self.user_disabled_unused:
            return (yield)
        tr = terminalreporter
        write_line, write_sep, section = tr.write_line, tr.write_sep, tr.section
        held: list = []

        def other_section(*args, **kw):
            held.clear()            # another section: syrupy's had nothing to show
            section(*args, **kw)

        def sep(*args, **kw):
            if SYRUPY_HEADING in " ".join(map(str, args)):
                held[:] = [(args, kw)]
            else:
                held.clear()        # another section: syrupy's had nothing to show
                write_sep(*args, **kw)

        def line(text="", **kw):
            if SYRUPY_DISABLED in str(text):
                return
            if held and str(text).strip():
                write_sep(*held[0][0], **held[0][1])
                held.clear()
            write_line(text, **kw)
        tr.write_line, tr.write_sep, tr.section = line, sep, other_section
        try:
            return (yield)
        finally:
            del tr.write_line, tr.write_sep, tr.section

    def _accept(self, exitstatus: int) -> None:
        acc = self.acceptance
        if acc is None:
            return
        meta = self.recorder.meta
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            meta["acceptance"] = {"note": "interrupted: no expectation was touched"}
            return
        if not acc.candidates and not acc.refused:
            meta["acceptance"] = {"note": "no hardware figure in this run (no GPU of the arch):"
                                          " no expectation was touched"}
            return
        acc.write(self.expectations)
        meta["acceptance"] = acc.as_meta()

    # --- reports ------------------------------------------------------------------------------
    def artifact(self, name: str, caption: str, test: str = "") -> Path | None:
        """Path for a plot or data file of the run's report (listed in its Markdown), or None
        when no report directory was asked for (--gpuchar-report)."""
        if not self.report_dir:
            return None
        d = self.report_dir / ARTIFACTS
        d.mkdir(parents=True, exist_ok=True)
        self.recorder.add_artifact(name, caption, test)
        if self._device:       # a hardware run's plots are written beside its tests
            from .results import plots
            plots.start_background()
        return d / name

    def board_entry(self) -> dict:
        """This session's GPU as NVML saw it when it was detected (the start) and now (the
        end), and what makes its figures suspect (core/nvml.flags)."""
        from .core import nvml
        dev = self._device
        start = dict(getattr(dev, "board", None) or {})
        end = nvml.read(uuid=getattr(dev, "uuid", ""), pci_bus_id=getattr(dev, "pci_bus_id", ""))
        return {"device_index": dev.index, "uuid": getattr(dev, "uuid", ""), "device": dev.name,
                "start": start, "end": end, "flags": nvml.flags(start, end)}

    def provenance(self) -> dict:
        dev = self.device
        if not dev:
            return {}
        meta = self.recorder.meta
        if "sm_clock_measured_mhz" not in meta:
            try:        # the clock probe verified through the door of every probe
                mhz = round(self.gpu.sm_clock_mhz(
                    verify=self.verify,
                    module=lambda text, name: self.builds.jit_module(dev, text, name)), 1)
            except Exception as e:  # noqa: BLE001 - reported (invalid: no number), never fatal
                mhz = None
                meta["sm_clock_error"] = f"{type(e).__name__}: {e}"
            meta["sm_clock_measured_mhz"] = mhz
        return dev.provenance(sm_clock_measured_mhz=meta["sm_clock_measured_mhz"])


SYRUPY_DISABLED = "Unused snapshot detection is disabled"
SYRUPY_HEADING = "snapshot report summary"


def xdist_grouping_failed() -> str:
    """What a split run whose groups pytest-xdist could not form did instead."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        xd = version("pytest-xdist")
    except PackageNotFoundError:
        xd = "?"
    return (f"split: pytest-xdist {xd} could not group the tests under pytest "
            f"{pytest.__version__} (pytest-xdist#1386): they were handed out one by one, "
            f"so an arch's static checks and a topic's hardware tests ran on several workers "
            f"(every figure is still its own board's; only the compile sharing is lost)")
