"""The pytest plugin: options, markers, hooks. The session's state is a GpuCharSession
(session.py), created in pytest_configure; the fixtures are in fixtures.py.

Importing this module imports neither CuPy nor anything that touches CUDA: the GPU is
detected lazily, once per session, the first time a header, fixture or test asks.
"""
from __future__ import annotations

import gc
import json
import os
import socket
import time
import warnings

import pytest

from . import fixtures, suite_select
from .results import terminal
from .core import archs, locations, orphan, timing, toolchain
from .core.probe import DeclaredUnmeasurable, NotApplicable
from .fixtures import *  # noqa: F401,F403 - the fixtures, registered with the plugin
from .api import gpuchar_probe  # noqa: F401 - the public probe API's fixture
from .fixtures import STATE, state
from .results.history_rows import suite_version
from .results.judge import NoFigure, Result, Status
from .session import GpuCharSession

MARKERS = {
    "hardware": "needs an NVIDIA GPU of the arch under test; skipped (with the reason) otherwise",
    "static": "offline PTX->SASS check with ptxas/nvdisasm; runs on any machine",
    "nightly": "part of the nightly driver-upgrade check",
    "slow": "takes more than a few seconds",
    "topic(name)": "the topic (topics/registry.py) a characterisation module belongs to",
    "xdist_group(name)": "pytest-xdist: tests of one group run on one worker (gpuchar groups "
                         "by arch)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("gpuchar", "GPU instruction-level characterisation")
    g.addoption("--gpu-arch", dest="gpu_arch", default=None, metavar="sm_XX",
                help="arch to characterise (default: the GPU present; with no GPU, every arch "
                     "that has an expectations file, static checks only). Valid: "
                     + ", ".join(archs.KNOWN_ARCHS))
    g.addoption("--gpuchar-report", dest="gpuchar_report", default=None, metavar="DIR",
                help="write gpuchar-results.json and gpuchar-summary.md into DIR")
    g.addoption("--gpuchar-history", dest="gpuchar_history", default=None, metavar="TARGET",
                help="at the end of the run, record its results into the history database "
                     "TARGET: a file path (SQLite) or a database URL (postgresql://...); see "
                     "gpuchar-history and docs/history.md. A failing write warns, the run and "
                     "its report stand")
    g.addoption("--gpuchar-repeats", dest="gpuchar_repeats", default=7, type=int,
                help="timed launches per chain length after the warm-up (default 7)")
    g.addoption("--gpuchar-watchdog", dest="gpuchar_watchdog", default=20.0, type=float,
                help="seconds a probe kernel may run before it is declared hung (default 20)")
    g.addoption("--gpuchar-device", dest="gpuchar_device", default=None,
                help="CUDA device index to use (default $GPUCHAR_DEVICE or 0)")
    g.addoption("--gpuchar-distribute", dest="gpuchar_distribute", default=None,
                choices=("replicate", "split"),
                help="with pytest-xdist (-n GPUs, one worker per GPU): every GPU runs the "
                     "whole suite (replicate: a fleet's board-to-board comparison) or the "
                     "tests are shared out between the GPUs (split, the default: by arch for "
                     "static checks, by arch and topic for hardware tests)")
    g.addoption("--gpuchar-accept-level", dest="gpuchar_accept_level", default="device",
                choices=("device", "arch", "none"),
                help="with --snapshot-update on a GPU, accept the measured figures as this "
                     "device's expectations (default), as the arch's (SM-internal figures "
                     "that hold for every board of the arch), or not at all (none: snapshots "
                     "only)")
    g.addoption("--gpuchar-accept-fleet", dest="gpuchar_accept_fleet", default="extend",
                choices=("extend", "replace"),
                help="with --snapshot-update at the device level: add this board to the "
                     "model's boards, every other board's figure kept and the range spanning "
                     "them all (extend, the default), or make this board's figures the "
                     "model's alone (replace: drops the other boards)")
    g.addoption("--gpuchar-suite", dest="gpuchar_suite", action="store_true", default=False,
                help="run the characterisation suite that comes with the package (beside any "
                     "path given); without it, a run given no path in a directory with no "
                     "test file runs the suite, and otherwise your own tests (docs/installed.md)")
    parser.addini("gpu_arch", "default for --gpu-arch", default="")
    parser.addini("gpuchar_report", "default for --gpuchar-report", default="")
    parser.addini("gpuchar_history", "default for --gpuchar-history", default="")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for name, doc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {doc}")
    suite_select.choose(config)
    session = GpuCharSession.from_config(config)
    config.stash[STATE] = session
    config.pluginmanager.register(session, "gpuchar-session")
    _configure_benchmark(config)
    _configure_xdist(config)
    if config.pluginmanager.has_plugin("syrupy"):
        from .results.snapshot import sweep_reads_selection_once
        sweep_reads_selection_once()


def _configure_xdist(config: pytest.Config) -> None:
    """With -n: --gpuchar-distribute=replicate runs every test on every worker (xdist's
    `each`: one GPU each, the whole suite on every GPU); split (the default, when the user
    gave no --dist) distributes groups (loadgroup, session.py groups the tests): every worker
    compiles only the modules of the archs and topics it runs."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        orphan.end_with(workerinput.get("gpuchar_controller_pid"))
        # a worker's options come from the command line, not from the controller's config:
        # loadgroup (which suffixes each node id with its group, the unit the controller
        # distributes) must be passed on (pytest_configure_node), or groups are split up
        if workerinput.get("gpuchar_loadgroup"):
            config.option.loadgroup = True
        return
    if not getattr(config.option, "numprocesses", None):
        return
    mode = config.getoption("gpuchar_distribute")
    given = any(a == "--dist" or a.startswith("--dist=") or a == "-d"
                for a in config.invocation_params.args)
    if mode == "replicate":
        config.option.dist = "each"
    elif mode == "split" or (not given and getattr(config.option, "dist", "no") in ("no", "load")):
        config.option.dist = "loadgroup"
    else:
        return
    restart_given = any(a.startswith(("--max-worker-restart", "--maxworkerrestart"))
                        for a in config.invocation_params.args)
    if not restart_given:
        # A worker that dies (a GPU fault, kill -9) is not replaced: its test fails, the
        # other workers finish, the report keeps everything. Under loadgroup a replaced
        # worker makes pytest-xdist wait forever at the end of the run (pytest-xdist #1378:
        # the dead worker's finished groups are queued again as empty work; the static suite
        # hung at 99% until Ctrl-C). Under each (replicate) the replacement is a new worker id
        # (gw2 of 2 GPUs) that ran the whole suite again on GPU 0 beside gw0: every figure of
        # GPU 0 reported twice, each measured with another suite on the GPU (docs/run-time.md).
        config.option.maxworkerrestart = 0


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: one worker per GPU where the CUDA driver shows GPUs (each worker measures
    its own GPU: two on one GPU would time each other's kernels), else pytest-xdist's own
    choice, one per core (the static checks and unit tests need no GPU). GPUCHAR_NO_GPU
    counts as no GPU (every hardware test skips). Called before pytest-xdist's own answer
    (a first-result hook): otherwise xdist's one per core is taken, every core a measuring
    worker on a one-GPU host."""
    from .core import device
    if device.disabled():
        return None
    return device.device_count() or None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist, on the controller, per worker: whether the run distributes groups, and
    the process whose end ends the worker (core/orphan.py)."""
    node.workerinput["gpuchar_loadgroup"] = getattr(node.config.option, "dist", "") == "loadgroup"
    node.workerinput["gpuchar_controller_pid"] = os.getpid()     # the worker ends with it


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
    uses_history = (getattr(opt, "benchmark_autosave", False)
                    or getattr(opt, "benchmark_save", None)
                    or getattr(opt, "benchmark_compare", None))
    if arch is None and uses_history:
        dev = st.device
        arch = dev.arch if dev else "no-gpu"
    if arch:
        opt.benchmark_storage = f"{BENCHMARK_DEFAULT_STORAGE}/{arch}"


def benchmark_machine_info(st: GpuCharSession) -> dict:
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


# --- collection and running ---------------------------------------------------------------------

def pytest_report_header(config: pytest.Config) -> list[str]:
    st = state(config)
    lines = [f"gpuchar: archs {', '.join(st.archs())}"
             + (" (requested)" if st.requested else "")]
    if suite_select.CHOSEN in config.stash:
        lines.append(f"gpuchar: {config.stash[suite_select.CHOSEN]}")
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
    metafunc.parametrize("arch", state(metafunc.config).archs(), scope="session")


def pytest_ignore_collect(collection_path, config: pytest.Config) -> bool | None:
    """A SASS snapshot store (``__sass__``, beside its test modules) holds no tests: pytest
    would otherwise visit each of its thousands of files (the checkout's suite: 3,891 entries,
    a path check and a stat each) in every collection."""
    if collection_path.name == locations.SASS_DIR and collection_path.is_dir():
        return True
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state(config).static_once(items)
    _check_grouping(config, items)


def _check_grouping(config: pytest.Config, items: list) -> None:
    """On a worker of a split run, after pytest-xdist named each test's group in its node id:
    whether it did. Under pytest 9.2 with pytest-xdist 3.8 it cannot (pytest-xdist#1386: the
    node id it rewrites is no longer the one pytest reads), and the controller then hands out
    tests one by one; the controller says so (session.py, terminal summary, report meta)."""
    workerinput = getattr(config, "workerinput", None)
    if not workerinput or not workerinput.get("gpuchar_loadgroup"):
        return
    grouped = [i for i in items if i.get_closest_marker("xdist_group") is not None]
    if grouped:
        config.workeroutput["gpuchar_grouped"] = all(
            i.nodeid != fixtures.test_id(i) for i in grouped)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A topic's NotApplicable (no such probe on this arch or row) is a skip with its reason;
    a probe declared unmeasurable is also noted in the results (never a regression). A
    NoFigure (no figure for a known reason) records its notes and is an expected failure."""
    try:
        return (yield)
    except NotApplicable as e:
        if isinstance(e, DeclaredUnmeasurable):
            fixtures.Record(item, state(item.config)).note(Result(
                f"unmeasurable.{item.name}", _arch_of(item), Status.INFO,
                test=fixtures.test_id(item), detail=str(e)))
        outcome, why = pytest.skip, str(e)
    except NoFigure as e:
        record = fixtures.Record(item, state(item.config))
        for r in e.notes:
            r.test = r.test or fixtures.test_id(item)
            record.note(r)
        outcome, why = pytest.xfail, e.reason
    # raised outside the except clause: the outcome has no chained exception, whose traceback
    # pytest would otherwise read line by line from the sources to write the one-line reason
    outcome(why)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    """Waits (driver JIT, offline assembly, GPU) are charged to the test that waited."""
    timing.set_test(item.nodeid)
    try:
        return (yield)
    finally:
        timing.set_test("")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """An expected failure raised in a test (an invalid probe on an arch that cannot run it,
    an unstable figure) is reported with its reason alone. pytest would render its whole
    traceback, parsing every frame's source file, and then show only the reason: 742 parses,
    7 s of the static suite's 106 expected failures. --runxfail keeps pytest's report."""
    excinfo = call.excinfo
    if excinfo is None or item.config.option.runxfail or \
            not isinstance(excinfo.value, pytest.xfail.Exception):
        return None
    path, line, _ = item.location
    sections = [(f"Captured {key} {when}", content)
                for when, key, content in item._report_sections]
    return pytest.TestReport(item.nodeid, item.location, dict.fromkeys(item.keywords, 1),
                             "failed", f"{path}:{(line or 0) + 1}: XFailed: {excinfo.value.msg}",
                             call.when, sections, call.duration, call.start, call.stop,
                             user_properties=item.user_properties)


def _arch_of(item: pytest.Item) -> str:
    spec = getattr(item, "callspec", None)
    return spec.params.get("arch", "") if spec else ""


GC_SAVED = pytest.StashKey[tuple]()
GC_THRESHOLDS = (50_000, 20, 100)    # while the suite's tests run (Python's: 700, 10, 10)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collected tests (thousands of items, their markers and parameters) live to the end
    of the run: moved out of the cyclic garbage collector's reach, not scanned again by every
    full collection while the tests run. A run of the suite's tests (a topic's) parses
    millions of SASS instructions that live to its end: the collector runs less often
    (GC_THRESHOLDS; the static suite spent 12.8 s in 24 full collections, 5 s in 2),
    and its thresholds are restored at the end of the run."""
    gc.freeze()
    if any(item.get_closest_marker("topic") is not None for item in session.items):
        session.config.stash[GC_SAVED] = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)


def _finish_plots(st) -> None:
    """Wait for the plots written in the background (results/plots.py); one that could not be
    written is named in its artifact entry and the report, never listed as if it were there."""
    from .results import plots
    failed = plots.finish()
    if failed:
        for a in st.recorder.artifacts:
            if a["name"] in failed:
                a["error"] = failed[a["name"]]
        st.recorder.meta["artifacts_failed"] = failed


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    st = state(session.config)
    st.builds.close()
    st.runs.close()
    _finish_plots(st)
    st.publish_to_controller()
    if st.builds.listings is not None and not st.is_worker and (
            st.builds.listings.stored or st.controller_of_workers):
        st.builds.listings.prune()      # (under xdist the workers store, the controller prunes)
    dev = st._device
    st.recorder.meta.update({
        # the session's own identity: two runs that measured the same figures in the same
        # second are still two runs of the history store (its run identity hashes the meta)
        "session_id": st.session_id,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "archs": st.archs() if (st.requested or dev is not None) else [],
        "wall_s": round(time.time() - st.started, 1),
        "exitstatus": int(exitstatus),
        "skipped": dict(st.skip_reasons),
        "measured_skips": dict(sorted(st.measured_skips.items())),
        "static_checks": dict(sorted(st.static_ran.items())),
        "host": socket.gethostname(),
        "suite": suite_version(),
        "hardware_ran": st.hardware_ran,
    })
    if dev:
        st.recorder.meta.update(dev.provenance())
        # where a hardware run's time went: seconds blocked on the JIT, ptxas, the GPU
        st.recorder.meta["blocked_s"] = timing.summary()
        # NVML at the start and now (throttling, ECC): read where the tests ran; a controller
        # of pytest-xdist workers has its workers' boards (GpuCharSession.pytest_testnodedown)
        if st.is_worker:
            session.config.workeroutput["gpuchar_boards"] = \
                [] if st.not_measuring else [st.board_entry()]
        elif not st.controller_of_workers:
            st.recorder.meta["boards"] = [st.board_entry()]
    if st.is_worker:          # the controller's report sections the results by topic
        for key in ("topics", "topic_docs"):
            session.config.workeroutput[f"gpuchar_{key}"] = st.recorder.meta.get(key, {})
    if st.durations.tests:
        st.recorder.meta["time_by_topic"] = st.durations.by_topic()
    if st.report_dir and not st.is_worker:
        if any(r.value is not None for r in st.recorder.results):
            from .results import generations
            st.recorder.generations = generations.table(st.expectations,
                                                        results=st.recorder.results)
        paths = st.recorder.write(st.report_dir)
        st.recorder.meta["written"] = [str(p) for p in paths]
    if not st.is_worker:
        _record_history(st, exitstatus)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Everything the run made (parsed SASS listings, compiled modules, results) is moved out
    of the cyclic garbage collector's reach before pytest's clean-up collects five times in a
    row (its search for unraisable exceptions): on the static suite those collections scanned
    millions of parsed instructions, about ten seconds at the end of every run."""
    saved = config.stash.get(GC_SAVED, None)
    if saved is not None:
        gc.set_threshold(*saved)
    gc.freeze()


def _record_history(st, exitstatus: int) -> None:
    """--gpuchar-history: the run's report (as written, so that importing the file later
    adds nothing) recorded into the history store, one run per GPU; the outcome goes to
    meta["history"] for the terminal summary. A failing write warns and fails nothing. An
    interrupted run is not recorded: it would be its boards' previous run, missing what it
    did not reach."""
    cfg = st.config
    target = cfg.getoption("gpuchar_history") or cfg.getini("gpuchar_history")
    if not target:
        return
    meta = st.recorder.meta
    if not st.recorder.results or exitstatus in (pytest.ExitCode.INTERRUPTED,
                                                 pytest.ExitCode.INTERNAL_ERROR):
        why = ("no result in this run" if not st.recorder.results else
               f"the run was interrupted (exit {int(exitstatus)})")
        meta["history"] = {"target": target, "note": f"{why}: nothing recorded"}
        return
    written = [p for p in meta.get("written", []) if p.endswith(".json")]
    try:
        from .results.files import read_report
        from .results.history import open_history
        doc = read_report(written[0]) if written else json.loads(
            json.dumps(st.recorder.to_json(), default=str))
        with open_history(target) as h:
            ids = h.record(doc, source="pytest", path=written[0] if written else None)
            meta["history"] = {"target": h.name, "runs": list(ids), "existing": ids.existing}
    except Exception as e:  # noqa: BLE001 - the history never fails a run or its report
        meta["history"] = {"target": str(target), "error": f"{type(e).__name__}: {e}"}
        warnings.warn(pytest.PytestWarning(
            f"gpuchar: --gpuchar-history {target}: the run was not recorded: {e}"))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    terminal.write(terminalreporter, state(config))


__all__ = ["MARKERS", "fixtures"]
