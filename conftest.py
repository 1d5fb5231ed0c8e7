"""Repository-level conftest: pytester for the plugin's own unit tests (tests/unit); the
repository's tests need the gpuchar plugin (its fixtures, markers and options)."""
import pytest

pytest_plugins = ["pytester"]


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("gpuchar"):
        raise pytest.UsageError(
            "this repository's tests need the gpuchar plugin (pytest_gpuchar.plugin): run "
            "them without -p no:gpuchar, with the package installed (pip install -e .)")
