"""A tool that is there but broken, an arch no extra covers, and the install line's form: each
said once, in one line naming the tool and what to do (issue 44, rows 1, 7, 8)."""
from __future__ import annotations

import os
import traceback
from pathlib import Path

import pytest

from pytest_gpuchar.core import build, install, toolchain
from pytest_gpuchar.topics.instructions import kernels, rows

FAKE_PTXAS = """#!/bin/sh
# a ptxas that answers --version and exits 0 without writing its output
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.5, V13.5.37"; exit 0; fi
echo run >> "{count}"
exit 0
"""


@pytest.fixture
def fake_ptxas(tmp_path, monkeypatch, need_offline_tools):
    """The only ptxas is one that exits 0 and writes nothing; nvdisasm is the real one."""
    need_offline_tools("sm_80")
    count = tmp_path / "runs"
    exe = tmp_path / "bin" / "ptxas"
    exe.parent.mkdir()
    exe.write_text(FAKE_PTXAS.format(count=count))
    exe.chmod(0o755)
    fake = toolchain.Tool("ptxas", str(exe), "13.5.37", "PATH")
    real = toolchain.all_tools

    def tools(name):
        return (fake,) if name == "ptxas" else real(name)
    monkeypatch.setattr(toolchain, "all_tools", tools)
    monkeypatch.setattr(toolchain, "_broken", {}, raising=False)
    return fake, count


def test_a_ptxas_that_writes_nothing_is_named_once_and_never_run_again(fake_ptxas):
    fake, count = fake_ptxas
    probes = [kernels.latency_probe(rows.row(r), "sm_80")
              for r in ("add.u32", "fma.rn.f32", "mul.lo.u32", "add.f32")]
    b = build.Builds()
    b.offline_groups([build.Group("t", "sm_80", probes)], wait=False)
    errors = []
    for p in probes:
        with pytest.raises(toolchain.ToolMissing) as ei:
            b.offline(p)
        errors.append(ei.value)
    b.close()
    first = str(errors[0])
    assert first == (f"ptxas 13.5.37 at {fake.path} is broken: it exited 0 but wrote no "
                     f"output file for -o; no other ptxas handles sm_80: remove it from PATH "
                     f"(or repair it) and install a working one: {toolchain.INSTALL_STATIC}")
    assert "\n" not in first and all(str(e) == first for e in errors)
    # one run of the broken tool, then never again; every error is a short one of its own
    assert count.read_text().count("run") == 1
    assert all(len(traceback.extract_tb(e.__traceback__)) < 8 for e in errors)
    with pytest.raises(toolchain.ToolMissing, match="is broken"):
        toolchain.find("ptxas", "sm_80")


def test_a_ptxas_that_writes_an_empty_file_is_broken(fake_ptxas):
    fake, _ = fake_ptxas
    Path(fake.path).write_text(FAKE_PTXAS.split("echo run")[0] +
                               'for a; do last="$a"; done\n: > "$last"\nexit 0\n')
    with pytest.raises(toolchain.ToolMissing, match="wrote an empty file for -o"):
        toolchain.assemble(".version 8.0\n.target sm_80\n.address_size 64\n", "sm_80")


def test_kepler_names_no_extra_that_does_not_cover_it(monkeypatch):
    """sm_3x: CUDA 12 (the legacy extra) dropped it; the hint is not `install [legacy]`."""
    monkeypatch.setattr(toolchain, "all_tools", lambda name: (
        toolchain.Tool(name, f"/t/{name}", "12.4.131", "wheel:triton"),))
    with pytest.raises(toolchain.ToolMissing) as ei:
        toolchain.find("ptxas", "sm_30")
    msg = str(ei.value)
    assert "[legacy]" not in msg and "pip install" not in msg
    assert msg.endswith("no extra of pytest-gpuchar has them (CUDA 12 dropped sm_30..sm_37; the "
                        "legacy extra covers sm_50..sm_72): put a CUDA 11 toolkit's bin/ on "
                        "PATH or set CUDA_HOME to it")


def test_install_lines_have_the_readme_s_form_in_a_checkout():
    """This repository is installed editable (README: pip install -e ".[static,legacy,test]"):
    the hints say so in the README's form."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert install.editable()
    assert 'pip install -e ".[static,legacy,test]"' in readme
    assert toolchain.INSTALL_STATIC == 'pip install -e ".[static]"'
    assert toolchain.INSTALL_LEGACY == 'pip install -e ".[legacy]"'


def test_install_lines_name_the_package_when_installed_from_an_index(monkeypatch):
    class Dist:
        def read_text(self, name):
            return None          # a wheel from an index has no direct_url.json
    install.editable.cache_clear()
    monkeypatch.setattr(install.metadata, "distribution", lambda name: Dist())
    monkeypatch.setattr(install, "in_checkout", lambda: False)
    try:
        assert install.line("cuda13") == 'pip install "pytest-gpuchar[cuda13]"'
    finally:
        install.editable.cache_clear()


STATIC_SUITE = """
import pytest
from pytest_gpuchar.topics.instructions import kernels, rows


@pytest.mark.static
@pytest.mark.parametrize("row", ["add.u32", "fma.rn.f32", "mul.lo.u32", "add.f32"])
def test_static(row, static_check, arch):
    static_check(kernels.latency_probe(rows.row(row), arch))
"""


def test_a_run_with_a_broken_ptxas_says_so_once(fake_ptxas, pytester, monkeypatch):
    """The issue's run: 274 tests failed with a raw FileNotFoundError whose traceback grew
    with every test (97 MB of output). Now each static check skips with the one line, which
    the gpuchar summary gives once (and on its arch's line of static checks)."""
    fake, count = fake_ptxas
    monkeypatch.setenv("GPUCHAR_NO_GPU", "1")
    monkeypatch.setenv("GPUCHAR_LISTING_CACHE", "0")
    pytester.makepyfile(test_s=STATIC_SUITE)
    result = pytester.runpytest("--gpu-arch=sm_80", "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=4)
    out = result.stdout.str()
    assert "Traceback" not in out and "FileNotFoundError" not in out
    # the arch's line of static checks and the grouped skip, not one per test
    assert out.count(f"ptxas 13.5.37 at {fake.path} is broken") == 2
    result.stdout.fnmatch_lines([f"skipped 4: static: ptxas 13.5.37 at {fake.path} is broken*"])
    assert count.read_text().count("run") == 1
