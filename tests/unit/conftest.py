"""Fixtures shared by the unit tests."""
from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest


class FakeEvent:
    """A CUDA event that is always done; record() stamps it with a clock that advances by a
    microsecond per record, so two events' elapsed time is known."""
    clock = 0
    done = True

    def __init__(self):
        self.t = None

    def record(self):
        FakeEvent.clock += 1
        self.t = FakeEvent.clock


class FakeCupy:
    """numpy in place of CuPy for the topics' runs on a fake GPU: arrays with .get(), the
    driver error type, events that are always done (1 us between two records)."""

    class Array(np.ndarray):
        def get(self):
            return np.asarray(self).copy()

    class CUDADriverError(Exception):
        pass

    def __init__(self):
        self.cuda = types.SimpleNamespace(
            driver=types.SimpleNamespace(CUDADriverError=self.CUDADriverError),
            Event=FakeEvent, get_elapsed_time=lambda a, b: (b.t - a.t) * 1e-3)

    def asarray(self, x):
        """A host array copied to the 'device' (as CuPy copies it), a device array as is."""
        if isinstance(x, self.Array):
            return x
        return np.array(x).view(self.Array)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype).view(self.Array)


@pytest.fixture
def need_offline_tools():
    """need(arch): skip the test, with the install command as the reason, unless the ptxas and
    nvdisasm for `arch` are installed."""
    from pytest_gpuchar.core import toolchain

    def need(arch: str) -> None:
        try:
            toolchain.find("ptxas", arch)
            toolchain.find("nvdisasm", arch)
        except toolchain.ToolMissing as e:
            pytest.skip(str(e))
    return need


@pytest.fixture
def fake_cupy(monkeypatch) -> FakeCupy:
    """A FakeCupy installed as the `cupy` module for the test."""
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    return cp


# the options of every pytest these tests start (see _child_runs)
CHILD_ADDOPTS = "-p no:hypothesispytest"
# what pytest-xdist sets in a worker's environment
XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(scope="session")
def listing_cache_dir(request, tmp_path_factory) -> str:
    """Where the runs pytester starts keep their offline SASS listings: this session's own
    listing cache (pytest's cache directory), so a run of the real suite inside a test reads
    the modules the static suite (or an earlier test) assembled; a directory of this session
    under -p no:cacheprovider."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return str(cache.mkdir("gpuchar-sass"))
    return str(tmp_path_factory.mktemp("gpuchar-sass"))


@pytest.fixture(autouse=True)
def _child_runs(monkeypatch, listing_cache_dir):
    """The pytest runs these tests start (pytester, the nightly command) share the session's
    listing cache and run without Hypothesis's plugin: its end-of-run summary imports all of
    Hypothesis, about a second per run on a 2-core machine, and no run started here uses it.
    (pytester clears PYTEST_ADDOPTS: its fixture below sets it again.) Their terminal is
    wide, so a summary line is matched whole (the gpuchar summary wraps at the terminal's
    width: test_plugin_faults.py checks it at 80 columns)."""
    monkeypatch.setenv("GPUCHAR_LISTING_CACHE", listing_cache_dir)
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    for name in XDIST_ENV:          # under -n N: the runs started here are not workers
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def offline_builds(listing_cache_dir):
    """One core.build.Builds for the tests that assemble a topic's real PTX offline (ptxas +
    nvdisasm), with this session's listing cache: a warm run reads the listing an earlier run
    or the static suite stored, keyed by the arch, the PTX and the exact binaries, as the
    static suite does; an assembly that fails is never kept, so a test of one runs the tools
    every time. The tests of the assembling itself (test_build.py) keep their own."""
    from pytest_gpuchar.core.build import Builds
    from pytest_gpuchar.core.listings import ListingCache
    builds = Builds(listings=ListingCache(Path(listing_cache_dir)))
    yield builds
    builds.close()


@pytest.fixture
def demo_project(tmp_path, monkeypatch) -> Path:
    """tmp_path as the project of a demo suite the nightly runs: the current directory, with
    an expectations directory of its own that holds no file (results/expectations.py's
    default_root). The demos' figures (demo.*) are in no shipped file; with the shipped files
    each night's report also read all of them for its generations table (about 0.3 s of CPU
    per night on 2 cores). test_nightly.py's end-to-end nights keep the shipped files."""
    (tmp_path / "expectations").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def write_module():
    """write(path, text): a test module that a child pytest will import, its modification time
    at least a second past the version it replaces. The child runs keep bytecode (the root
    conftest), and Python and pytest's assertion rewriting tell it out of date by the source's
    size and whole-second mtime: an edit of the same size within a second ran the old module
    (a nightly test's second night ran its first night's figures)."""
    def write(path: Path, text: str) -> None:
        before = path.stat().st_mtime_ns if path.exists() else None
        path.write_text(text)
        if before is not None:
            t = max(path.stat().st_mtime_ns, before + 1_000_000_000)
            os.utime(path, ns=(t, t))
    return write


@pytest.fixture
def pytester(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_ADDOPTS)
    return pytester


class _FinishedSuite:
    """What the nightly reads of its suite's process (returncode, pid, wait) for a run made
    in this process."""

    def __init__(self, returncode: int):
        self.returncode = returncode
        self.pid = os.getpid()

    def wait(self) -> int:
        return self.returncode


@pytest.fixture
def inprocess_nights(pytester, monkeypatch):
    """The nights of the test run their suite's pytest in this process (pytester's
    inline_run: the real pytest and plugin, this process's imports), not in a fresh
    interpreter, which costs about 0.45 s of CPU a night on 2 cores. For the tests of what
    a night judges (boards, history, previous runs). What needs the process itself (its
    environment at start-up, a broken CuPy on its path, an interruption, the end-to-end
    exit codes of test_nightly.py) keeps the real one. The run is made in the directory
    the night was started in, as the command's is."""
    from pytest_gpuchar.cli import nightly
    # what the night reads after its run, imported before any: an inner run's own first
    # imports are undone when it ends (pytester's snapshot of sys.modules)
    for name in ("html", "report"):
        importlib.import_module(f"pytest_gpuchar.results.{name}")

    def start(cmd: list[str], log, env: dict) -> _FinishedSuite:
        assert cmd[1:3] == ["-m", "pytest"], cmd
        with monkeypatch.context() as mp:
            for name in os.environ.keys() - env.keys():
                mp.delenv(name)
            for name, value in env.items():
                mp.setenv(name, value)
            mp.setattr(sys, "stdout", log)
            mp.setattr(sys, "stderr", log)
            ret = pytester.inline_run(*cmd[3:]).ret
        return _FinishedSuite(int(ret))
    monkeypatch.setattr(nightly, "start_suite", start)


# --- a real PostgreSQL server for the history store's tests ----------------------------------

@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL 16 server for the session, started from the `pgserver` wheel (PyPI;
    extra: test) in a fresh directory under the system's temp dir and deleted at the end. As
    root, pgserver runs the server as its own system user `pgserver` (PostgreSQL refuses to
    run as root). Skips, with the reason, where none can start."""
    import tempfile
    import time
    import warnings
    try:
        with warnings.catch_warnings():     # platformdirs: XDG_RUNTIME_DIR not set
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as e:
        pytest.skip(f"no PostgreSQL server: pgserver is not installed ({e}); "
                    f"pip install -e '.[test]'")
    pgdata = tempfile.mkdtemp(prefix="gpuchar-pg-")
    started = time.monotonic()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            srv = pgserver.get_server(pgdata, cleanup_mode="delete")
    except Exception as e:  # noqa: BLE001 - any failure to start is the skip's reason
        import shutil
        shutil.rmtree(pgdata, ignore_errors=True)
        pytest.skip(f"no PostgreSQL server: pgserver could not start one in {pgdata}: "
                    f"{type(e).__name__}: {e}")
    srv.start_s = round(time.monotonic() - started, 2)
    yield srv
    srv.cleanup()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh, empty database on the session's PostgreSQL server (its URL), dropped after
    the test."""
    import uuid

    import psycopg
    import sqlalchemy as sa
    name = f"gpuchar_{uuid.uuid4().hex[:12]}"
    admin = pg_server.get_uri()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield sa.make_url(admin).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def hdocs():
    """tests/unit/history_docs.py (the history tests' reports) as a module."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).with_name("history_docs.py")
    spec = importlib.util.spec_from_file_location("gpuchar_history_docs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
