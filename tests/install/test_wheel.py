"""The package as users get it: the wheel built from this tree, installed into a fresh virtual
environment outside the repository, used from an empty directory (no PYTHONPATH, no
checkout in reach).

It builds and installs (pip, with pip's cache: the `static` extra's CUDA wheels are the
cost), so it runs where GPUCHAR_WHEEL_TEST=1 is set, as .ci/run sets it; elsewhere it is a
skip that says how to run it.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# the ptxas the `static` extra pins: its snapshots are the ones the installed suite reads
PTXAS = re.search(r'"nvidia-cuda-nvcc==([\d.]+)"', (REPO / "pyproject.toml").read_text()).group(1)
ARCH = "sm_80"
COUNTS = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected)")

pytestmark = pytest.mark.skipif(
    os.environ.get("GPUCHAR_WHEEL_TEST") != "1",
    reason="the wheel test builds and installs the package (minutes): run it with "
           "GPUCHAR_WHEEL_TEST=1 pytest tests/install (.ci/run does)")


def _run(cmd: list, cwd: Path, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _counts(out: str) -> dict[str, int]:
    last = [ln for ln in out.splitlines() if COUNTS.search(ln) and " in " in ln][-1]
    return {k: int(n) for n, k in COUNTS.findall(last)}


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin directory, the clean environment for its commands, an empty directory)."""
    top = tmp_path_factory.mktemp("wheel")
    dist = top / "dist"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "GPUCHAR_EXPECTATIONS", "PYTEST_ADDOPTS")
           and not k.startswith(("PYTEST_XDIST", "GPUCHAR_"))}
    env.update(GPUCHAR_NO_GPU="1", GPUCHAR_HOME=str(top / "home"),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    # built from a copy: setuptools builds in <source>/build, and two pytest-xdist workers
    # building from the checkout at once raced there (one's copy step found the other's
    # half-made tree: "No such file or directory")
    src = top / "src"
    skip = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", ".pytest_cache",
                                  "__pycache__", ".whl", ".tox", ".benchmarks")

    def ignore(where: str, names: list[str]) -> set[str]:
        # the repository's results/ (run reports, not package data); the package's own
        # pytest_gpuchar/results/ stays
        return set(skip(where, names)) | ({"results"} if Path(where) == REPO else set())
    shutil.copytree(REPO, src, ignore=ignore)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, src], top, env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel, = dist.glob("pytest_gpuchar-*.whl")
    print(f"wheel: {wheel.name}, {wheel.stat().st_size} bytes")
    venv = top / "venv"
    made = _run([sys.executable, "-m", "venv", venv], top, env)
    assert made.returncode == 0, made.stderr
    bin_ = venv / "bin"
    env["PATH"] = f"{bin_}{os.pathsep}{env.get('PATH', '')}"
    got = _run([bin_ / "python", "-m", "pip", "install", f"{wheel}[static]"], top, env)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    empty = top / "empty"
    empty.mkdir()
    return bin_, env, empty


def _site_package(bin_: Path, env: dict) -> Path:
    out = _run([bin_ / "python", "-c", "import pytest_gpuchar; print(pytest_gpuchar.__file__)"],
               bin_, env)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip()).parent


def test_the_wheel_carries_the_suite_and_runs_outside_the_checkout(installed):
    bin_, env, _ = installed
    pkg = _site_package(bin_, env)
    assert REPO not in pkg.parents
    assert (pkg / "suite" / "test_table_v_instructions.py").is_file()
    assert (pkg / "data" / "expectations" / "sm_90.yaml").is_file()
    assert (pkg / "data" / "sass.tar.xz").stat().st_size < 2_000_000


def test_the_static_suite_of_one_arch_counts_as_in_the_clone(installed):
    bin_, env, empty = installed
    here = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    clone = _run([sys.executable, "-m", "pytest", "tests/characterisation", f"--gpu-arch={ARCH}",
                  "-q", "-p", "no:cacheprovider"], REPO, {**here, "GPUCHAR_NO_GPU": "1"})
    assert clone.returncode == 0, clone.stdout[-3000:]
    wheel = _run([bin_ / "pytest", f"--gpu-arch={ARCH}", "-p", "no:cacheprovider"], empty, env)
    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr[-2000:]
    assert f"gpuchar: suite {_site_package(bin_, env) / 'suite'} (no test path given" \
        in wheel.stdout
    print(f"clone {_counts(clone.stdout)}, wheel {_counts(wheel.stdout)}")
    assert _counts(wheel.stdout) == _counts(clone.stdout)
    assert _counts(wheel.stdout).get("passed", 0) > 100
    assert sorted(p.name for p in empty.iterdir()) in ([], [".benchmarks"])


def test_snapshot_update_writes_only_in_the_users_directory(installed):
    bin_, env, empty = installed
    pkg = _site_package(bin_, env)
    before = _tree(pkg)
    store = Path(env["GPUCHAR_HOME"]) / "__sass__"
    select = ["-k", "test_launch_barrier or test_dpx", "-m", "static"]
    first = _run([bin_ / "pytest", f"--gpu-arch={ARCH}", "-q", "-p", "no:cacheprovider", *select],
                 empty, env)
    assert first.returncode == 0, first.stdout[-3000:]
    snaps = sorted((store / f"ptxas-{PTXAS}" / ARCH / "test_launch_barrier").glob("*.sass"))
    assert snaps, "the installed suite's snapshots are read from the user's store"
    gone = snaps[0]                             # (one of the tests selected)
    gone.unlink()
    subprocess.run(["chmod", "-R", "a-w", str(pkg)], check=True)
    try:
        upd = _run([bin_ / "pytest", f"--gpu-arch={ARCH}", "-q", "-p", "no:cacheprovider",
                    "--snapshot-update", *select], empty, env)
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(pkg)], check=True)
    assert upd.returncode == 0, upd.stdout[-3000:]
    assert gone.is_file(), "the update wrote the missing snapshot into the user's store"
    assert _tree(pkg) == before, "nothing in site-packages changed"


def test_the_user_probe_example_runs_offline(installed, tmp_path):
    bin_, env, _ = installed
    project = tmp_path / "my-project"
    shutil.copytree(REPO / "docs" / "examples" / "user-probes", project)
    out = _run([bin_ / "pytest", "-p", "no:cacheprovider", "-rs"], project, env)
    assert out.returncode == 0, out.stdout[-3000:]
    assert _counts(out.stdout) == {"passed": 2, "skipped": 3}
    assert "hardware: GPUCHAR_NO_GPU is set" in out.stdout


def test_the_expectation_files_check_and_the_static_nightly_pass(installed, tmp_path):
    bin_, env, empty = installed
    check = _run([bin_ / "gpuchar-expectations", "check"], empty, env)
    assert check.returncode == 0, check.stdout[-3000:]
    assert "ok  [shipped] " in check.stdout and "BAD" not in check.stdout
    night = _run([bin_ / "gpuchar-nightly", "--out", tmp_path / "n", "--static-only", "--",
                  f"--gpu-arch={ARCH}"], empty, env)
    assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-2000:]
