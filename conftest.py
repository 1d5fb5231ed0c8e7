"""Repository-level conftest: the repository's tests need the gpuchar plugin (its fixtures,
markers and options). pytester, for the plugin's own unit tests (tests/unit), is loaded by
pyproject.toml's addopts (`-p pytester`), not by `pytest_plugins` here: pytest refuses that in
a conftest that is not at the run's rootdir, as this one is not when the suite of a checkout
is run from another directory (pytest --gpuchar-suite).

Compiled bytecode: where Python is told not to write it (PYTHONDONTWRITEBYTECODE, as on some
CI images), every run of this repository's tests compiled and assertion-rewrote every module
again, and so did each of the pytest and nightly runs the unit tests start in subprocesses
(about a second each). The tests' own runs keep it in pytest's cache directory instead
(`.pytest_cache/d/pycache`, through sys.pycache_prefix and PYTHONPYCACHEPREFIX for the
subprocesses), so no __pycache__ lands beside the sources; -p no:cacheprovider or
`pytest --cache-clear` leave it as Python was told.

Distribution: `pytest -n N` here without a GPU (the project's test command on a CI machine)
uses pytest-xdist's work stealing, unless --dist or --gpuchar-distribute is given. The
plugin's split distribution (loadgroup) falls back to whole test modules under pytest 9.2
with pytest-xdist 3.8 (pytest-xdist#1386): the last long module ran alone on one worker
while the other idled, and the controller's load-scope bookkeeping counted every test it had
handed out once per finished test (tens of seconds of the controller's CPU over this
repository's 15,000 tests). On a GPU host the plugin's distribution is kept (a topic's
hardware tests share one worker's measurements)."""
import os
import sys

import pytest

_SAVED = "gpuchar_bytecode_env"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if not config.pluginmanager.has_plugin("gpuchar"):
        raise pytest.UsageError(
            "this repository's tests need the gpuchar plugin (pytest_gpuchar.plugin): run "
            "them without -p no:gpuchar, with the package installed (pip install -e .)")
    _steal_work_without_a_gpu(config)


def pytest_sessionstart(session):
    """Bytecode kept from here on (module docstring): after every pytest_configure, so
    pytest's cache directory exists (this module's configure runs first, before the cache
    provider's: it had no cache to put the bytecode in), and before pytest-xdist starts the
    workers (its sessionstart comes last)."""
    _keep_bytecode(session.config)


def _steal_work_without_a_gpu(config) -> None:
    """-n N, no GPU, no distribution asked for: pytest-xdist's worksteal (module docstring).
    Runs before the plugin's pytest_configure, which keeps a --dist it did not set."""
    opt = config.option
    if (hasattr(config, "workerinput") or not getattr(opt, "numprocesses", None)
            or getattr(opt, "dist", "no") not in ("no", "load")
            or config.getoption("gpuchar_distribute", None)):
        return
    if any(a == "-d" or a.startswith(("--dist", "--gpuchar-distribute"))
           for a in config.invocation_params.args):
        return
    from pytest_gpuchar.core import device
    if device.disabled() or device.device_count() == 0:
        opt.dist = "worksteal"


def _keep_bytecode(config) -> None:
    cache = getattr(config, "cache", None)
    if not sys.dont_write_bytecode or cache is None or config.getoption("cacheclear", False):
        return
    prefix = str(cache.mkdir("pycache"))
    setattr(config, _SAVED, (sys.dont_write_bytecode, sys.pycache_prefix,
                             {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE",
                                                             "PYTHONPYCACHEPREFIX")}))
    sys.dont_write_bytecode, sys.pycache_prefix = False, prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix


def pytest_unconfigure(config):
    saved = getattr(config, _SAVED, None)
    if saved is None:
        return
    sys.dont_write_bytecode, sys.pycache_prefix, env = saved
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
