"""The pytest plugin: options, markers, report header, fixtures, results and summary.

Importing this module imports neither CuPy nor anything that touches CUDA: the GPU is
detected lazily, once per session, the first time a header, fixture or test asks.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from . import archs, expectations, toolchain
from .report import Recorder, Result, judge

MARKERS = {
    "hardware": "needs an NVIDIA GPU of the arch under test; skipped (with the reason) otherwise",
    "static": "offline PTX->SASS check with ptxas/nvdisasm; runs on any machine",
    "nightly": "part of the nightly driver-upgrade check",
    "slow": "takes more than a few seconds",
}

STATE = pytest.StashKey["GpuChar"]()
MAX_LISTED = 30   # rows of one kind listed in the terminal summary


class GpuChar:
    """Per-session state: requested archs, lazily detected GPU, results."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        raw = config.getoption("gpu_arch") or config.getini("gpu_arch") or ""
        self.requested: str | None = None
        if raw:
            try:
                self.requested = archs.validate(raw)
            except archs.UnknownArch as e:
                raise pytest.UsageError(f"--gpu-arch: {e}") from None
        self.repeats = int(config.getoption("gpuchar_repeats"))
        self.watchdog_s = float(config.getoption("gpuchar_watchdog"))
        report = config.getoption("gpuchar_report") or config.getini("gpuchar_report")
        self.report_dir = Path(report) if report else None
        self.recorder = Recorder()
        self._device = None
        self.runs: dict = {}
        self.started = time.time()
        self.skip_reasons: dict[str, int] = {}
        self.is_controller_of_workers = False

    # -- device ---------------------------------------------------------------------------
    @property
    def device(self):
        if self._device is None:
            from . import device
            idx = self.config.getoption("gpuchar_device")
            worker = getattr(self.config, "workerinput", {}).get("workerid", "")
            if idx is None and worker.startswith("gw") and not os.environ.get("GPUCHAR_DEVICE"):
                # pytest-xdist: one worker per GPU, worker gwN on GPU N (run with -n <GPUs>)
                idx = device.worker_device(int(worker[2:]))
            self._device = device.detect(None if idx is None else int(idx))
        return self._device

    def archs(self) -> list[str]:
        """The archs this run covers."""
        if self.requested:
            return [self.requested]
        dev = self.device
        if dev:
            return [dev.arch]
        have = set(expectations.available())
        return [a for a in archs.STATIC_ARCHS if a in have] or list(archs.STATIC_ARCHS)

    def require_gpu(self, arch: str):
        """The GPU if it is of `arch`, else pytest.skip naming what is missing."""
        from . import measure
        dev = self.device
        if not dev:
            pytest.skip(f"hardware: {dev.reason}")
        if dev.arch != arch:
            pytest.skip(f"hardware: GPU is {dev.arch} ({dev.name}) but {arch} was asked")
        w = measure.wedged()
        if w:
            pytest.skip(f"hardware: GPU wedged by probe {w} earlier in this run")
        return dev

    def artifact(self, name: str, caption: str, test: str = "") -> Path | None:
        """Path for a plot or data file of the run's report (listed in its Markdown), or None
        when no report directory was asked for (--gpuchar-report)."""
        if not self.report_dir:
            return None
        from .report import ARTIFACTS
        d = self.report_dir / ARTIFACTS
        d.mkdir(parents=True, exist_ok=True)
        self.recorder.add_artifact(name, caption, test)
        return d / name

    def provenance(self) -> dict:
        dev = self.device
        if not dev:
            return {}
        if "sm_clock_measured_mhz" not in self.recorder.meta:
            from . import measure
            try:
                mhz = round(measure.sm_clock_mhz(dev), 1)
            except Exception as e:  # noqa: BLE001 - reported, never fatal
                mhz = None
                self.recorder.meta["sm_clock_error"] = f"{type(e).__name__}: {e}"
            self.recorder.meta["sm_clock_measured_mhz"] = mhz
        return dev.provenance(sm_clock_measured_mhz=self.recorder.meta["sm_clock_measured_mhz"])


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gpuchar", "GPU instruction-level characterisation")
    g.addoption("--gpu-arch", dest="gpu_arch", default=None, metavar="sm_XX",
                help="arch to characterise (default: the GPU present; with no GPU, every arch "
                     "that has an expectations file, static checks only). Valid: "
                     + ", ".join(archs.KNOWN_ARCHS))
    g.addoption("--gpuchar-report", dest="gpuchar_report", default=None, metavar="DIR",
                help="write gpuchar-results.json and gpuchar-summary.md into DIR")
    g.addoption("--gpuchar-repeats", dest="gpuchar_repeats", default=7, type=int,
                help="timed launches per chain length after the warm-up (default 7)")
    g.addoption("--gpuchar-watchdog", dest="gpuchar_watchdog", default=20.0, type=float,
                help="seconds a probe kernel may run before it is declared hung (default 20)")
    g.addoption("--gpuchar-device", dest="gpuchar_device", default=None,
                help="CUDA device index to use (default $GPUCHAR_DEVICE or 0)")
    parser.addini("gpu_arch", "default for --gpu-arch", default="")
    parser.addini("gpuchar_report", "default for --gpuchar-report", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    # Expectation files: $GPUCHAR_EXPECTATIONS, else the project's expectations/ directory
    # (an installed, non-editable package has none of its own).
    if not os.environ.get("GPUCHAR_EXPECTATIONS") and (config.rootpath / "expectations").is_dir():
        expectations.ROOT = config.rootpath / "expectations"
    config.stash[STATE] = GpuChar(config)
    _configure_benchmark(config)


# --- pytest-benchmark integration -----------------------------------------------------------
BENCHMARK_DEFAULT_STORAGE = "file://./.benchmarks"


def _configure_benchmark(config: pytest.Config) -> None:
    """Before pytest-benchmark reads its options (this hook runs first): benchmarks off under
    pytest-xdist (one process per GPU measures; run benchmarks with -p no:xdist or -n 0), and
    the history stored per arch (.benchmarks/<arch>/...) so --benchmark-compare never compares
    two GPUs of different archs. The arch is --gpu-arch, else the GPU's (detected only when a
    benchmark history is saved or compared)."""
    opt = config.option
    if not hasattr(opt, "benchmark_storage"):
        return   # pytest-benchmark not installed or disabled
    if getattr(opt, "numprocesses", None) or hasattr(config, "workerinput"):
        opt.benchmark_disable = True
    if opt.benchmark_storage != BENCHMARK_DEFAULT_STORAGE:
        return   # the user chose a storage: keep it
    st = state(config)
    arch = st.requested
    uses_history = (getattr(opt, "benchmark_autosave", False) or getattr(opt, "benchmark_save", None)
                    or getattr(opt, "benchmark_compare", None))
    if arch is None and uses_history:
        dev = st.device
        arch = dev.arch if dev else "no-gpu"
    if arch:
        opt.benchmark_storage = f"{BENCHMARK_DEFAULT_STORAGE}/{arch}"


def benchmark_machine_info(st: "GpuChar") -> dict:
    """The GPU part of pytest-benchmark's machine_info."""
    dev = st.device
    if not dev:
        return {"gpu": None, "gpu_reason": dev.reason}
    info = {"name": dev.name, "arch": dev.arch, "sm_count": dev.sm_count,
            "driver": dev.driver, "cuda_driver_api": dev.cuda_driver_api,
            "cuda_runtime": dev.cuda_runtime, "sm_clock_max_mhz": dev.sm_clock_max_mhz,
            "sm_clock_at_start_mhz": dev.sm_clock_now_mhz, "mem_clock_mhz": dev.mem_clock_mhz,
            "sm_clock_measured_mhz": st.provenance().get("sm_clock_measured_mhz")}
    return {"gpu": info}


@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_machine_info(config, machine_info) -> None:
    machine_info.update(benchmark_machine_info(state(config)))


def state(config: pytest.Config) -> GpuChar:
    return config.stash[STATE]


def pytest_report_header(config: pytest.Config) -> list[str]:
    st = state(config)
    lines = [f"gpuchar: archs {', '.join(st.archs())}"
             + (" (requested)" if st.requested else "")]
    dev = st.device
    if dev:
        lines += [f"gpuchar: {x}" for x in dev.header_lines()]
    else:
        lines.append(f"gpuchar: {dev.reason}; hardware tests will be skipped")
    lines += [f"gpuchar: {x}" for x in toolchain.describe()]
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "arch" not in metafunc.fixturenames:
        return
    for m in metafunc.definition.iter_markers("parametrize"):
        names = m.args[0] if m.args else m.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if "arch" in names:
            return   # the test chooses its own archs
    st = state(metafunc.config)
    metafunc.parametrize("arch", st.archs(), scope="session")


@pytest.fixture(scope="session")
def gpuchar(request) -> GpuChar:
    return state(request.config)


@pytest.fixture
def gpu(gpuchar: GpuChar, arch: str):
    """The GPU under test (of `arch`), or the test is skipped with the reason."""
    return gpuchar.require_gpu(arch)


@pytest.fixture
def offline_tools(arch: str):
    """ptxas and nvdisasm for `arch`, or the test is skipped with the install command."""
    try:
        return toolchain.find("ptxas", arch), toolchain.find("nvdisasm", arch)
    except toolchain.ToolMissing as e:
        pytest.skip(f"static: {e}")


@pytest.fixture
def expected(arch: str):
    """The arch's expectation file (validated), or None if there is none."""
    return expectations.load(arch)


@pytest.fixture
def sass_snapshot(snapshot, request):
    """sass_snapshot(tag) -> a syrupy assertion for SASS made by compiler `tag` (kept in the
    directory of that compiler and of the test's arch)."""
    from .snapshot import SASSSnapshotExtension, use_compiler

    def _for(tag: str):
        arch = request.getfixturevalue("arch") if "arch" in request.fixturenames else "any"
        use_compiler(request.node, f"{tag}/{arch}")
        return snapshot.use_extension(SASSSnapshotExtension)
    return _for


@pytest.fixture
def record(request, gpuchar: GpuChar):
    """record(key, arch, fit|value, unit, ...) -> Result; compares with the expectation file
    (per-device override first) and keeps the result for the reports."""
    def _record(key: str, arch: str, value=None, unit: str = "cycles/op", *, fit=None,
                method: str = "", detail: str = "", data: dict | None = None) -> Result:
        exp_file = expectations.load(arch)
        dev = gpuchar.device
        exp = exp_file.get(key, dev.name if dev else None) if exp_file else None
        if fit is not None:
            value = fit.value
        r = judge(key, arch, value, unit, fit.spread if fit else None,
                  bool(fit and fit.unstable), fit.why_unstable if fit else "", exp,
                  method=method, test=request.node.nodeid, detail=detail, data=data or {},
                  provenance=gpuchar.provenance())
        if fit is not None:
            r.data.setdefault("slopes", [round(s, 3) for s in fit.slopes])
            r.data.setdefault("medians", fit.medians)
            r.data.setdefault("intercept", round(fit.intercept, 2))
        request.node.user_properties.append(("gpuchar_result", asdict(r)))
        return gpuchar.recorder.add(r)
    return _record


@pytest.fixture
def gpuchar_artifact(request, gpuchar: GpuChar):
    """gpuchar_artifact(name, caption) -> Path to write a plot/curve into the run's report
    (<report>/artifacts/<name>, listed in gpuchar-summary.md), or None without
    --gpuchar-report."""
    def _artifact(name: str, caption: str) -> Path | None:
        path = gpuchar.artifact(name, caption, request.node.nodeid)
        if path is not None:
            request.node.user_properties.append(
                ("gpuchar_artifact", {"name": name, "caption": caption,
                                      "test": request.node.nodeid}))
        return path
    return _artifact


def assert_result(r: Result) -> None:
    """Turn a judged result into the test outcome."""
    if r.status == "unstable":
        pytest.xfail(f"unstable: {r.key} = {r.value:.2f} {r.unit}: {r.detail}")
    if r.status == "fail":
        raise AssertionError(
            f"{r.key} on {r.arch}: measured {r.value if r.value is None else round(r.value, 2)}"
            f" {r.unit}, expected {r.expected} [{r.source}]"
            + (f"; deviation {r.deviation:+.2f}" if r.deviation is not None else "")
            + (f"; {r.detail}" if r.detail else ""))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    st = getattr(pytest_runtest_logreport, "_state", None)
    # results recorded on pytest-xdist workers reach the controller through user_properties
    if st is not None and st.is_controller_of_workers and report.when == "call":
        for name, value in report.user_properties:
            if name == "gpuchar_result":
                st.recorder.add(Result(**value))
            elif name == "gpuchar_artifact":
                st.recorder.add_artifact(**value)
    if report.skipped and report.when in ("setup", "call") and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        group = reason.split(";")[0][:120]
        if st is not None:
            st.skip_reasons[group] = st.skip_reasons.get(group, 0) + 1


def pytest_sessionstart(session: pytest.Session) -> None:
    st = state(session.config)
    st.is_controller_of_workers = bool(getattr(session.config.option, "numprocesses", None)) \
        and not hasattr(session.config, "workerinput")
    pytest_runtest_logreport._state = st


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    st = state(session.config)
    dev = st._device
    st.recorder.meta.update({
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "archs": st.archs() if (st.requested or dev is not None) else [],
        "wall_s": round(time.time() - st.started, 1),
        "exitstatus": int(exitstatus),
        "skipped": st.skip_reasons,
    })
    if dev:
        st.recorder.meta.update(dev.provenance())
    if st.report_dir and not hasattr(session.config, "workerinput"):
        paths = st.recorder.write(st.report_dir)
        st.recorder.meta["written"] = [str(p) for p in paths]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    st = state(config)
    rec = st.recorder
    if not rec.results and not st.skip_reasons:
        return
    tr = terminalreporter
    tr.section("gpuchar")
    measured = [r for r in rec.results if r.value is not None]
    counts: dict[str, int] = {}
    for r in rec.results:
        counts[r.status] = counts.get(r.status, 0) + 1
    if counts:
        tr.write_line("results: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    bad = [r for r in rec.results if r.status in ("fail", "unstable", "error")]
    moved = [r for r in rec.results if r.moved]
    shown = bad + moved if len(measured) > 40 else measured + [r for r in bad if r.value is None]
    if shown:
        if len(measured) > 40:
            tr.write_line(f"failed, unstable or moved (passed using more than half of the "
                          f"tolerance): {len(bad)} + {len(moved)} of {len(measured)} measured")
        tr.write_line(f"{'arch':7s} {'characteristic':34s} {'measured':>9s} {'unit':9s} "
                      f"{'expected':30s} {'dev':>7s} status")
        for r in shown[:MAX_LISTED * 2]:
            tr.write_line(r.line() + (" (moved)" if r.moved else ""))
        if len(shown) > MAX_LISTED * 2:
            tr.write_line(f"  ... {len(shown) - MAX_LISTED * 2} more in the report "
                          f"(--gpuchar-report DIR)")
    invalid = [r for r in rec.results if r.status == "invalid"]
    if invalid:
        per_arch: dict[str, int] = {}
        for r in invalid:
            per_arch[r.arch] = per_arch.get(r.arch, 0) + 1
        tr.write_line(f"{len(invalid)} probes invalid, no number reported ("
                      + ", ".join(f"{a} {n}" for a, n in sorted(per_arch.items())) + "):")
        for r in invalid[:MAX_LISTED]:
            tr.write_line(f"  {r.arch} {r.detail[:150]}")
        if len(invalid) > MAX_LISTED:
            tr.write_line(f"  ... {len(invalid) - MAX_LISTED} more in the report "
                          f"(--gpuchar-report DIR)")
    info = [r for r in rec.results if r.status == "info" and r.data.get("differs")]
    if info:
        tr.write_line(f"{len(info)} PTX->SASS mappings differ from the paper's record "
                      f"(row: paper -> today's compiler):")
        for r in info:
            unit = " + ".join(f"{v:g}*{k}" if v != 1 else k for k, v in r.data["unit"].items())
            tr.write_line(f"  {r.arch} {r.key[len('sass.'):]:18s} {r.data['paper']} -> "
                          f"{unit} (ptxas {r.data['ptxas']})")
    for reason, n in sorted(st.skip_reasons.items(), key=lambda x: -x[1])[:10]:
        tr.write_line(f"skipped {n}: {reason}")
    if "written" in rec.meta:
        tr.write_line("reports: " + ", ".join(rec.meta["written"]))
