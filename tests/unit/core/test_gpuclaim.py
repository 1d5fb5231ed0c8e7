"""One measuring process per GPU (core/gpuclaim.py): a claim held by another process is named
to the next, dies with its holder, and a session whose GPU is claimed skips its hardware tests
saying by whom."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from pytest_gpuchar.core import device, gpuclaim

HOLDER = r"""
import sys, time
from pytest_gpuchar.core import gpuclaim
assert gpuclaim.claim(sys.argv[1]) == ""
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def uuid():
    u = f"GPU-test{secrets.token_hex(4)}-0000-0000-0000-000000000000"
    yield u
    gpuclaim.release(u)
    gpuclaim.path(u).unlink(missing_ok=True)


@pytest.fixture
def held_elsewhere(uuid):
    """`uuid` claimed by another process for the test's length."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, uuid], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "held"
    yield p
    p.kill()
    p.wait(timeout=60)


def test_a_claim_is_this_process_s_until_it_is_released(uuid):
    assert gpuclaim.claim(uuid) == "" and gpuclaim.claim(uuid) == ""   # ours, again
    gpuclaim.release(uuid)
    assert gpuclaim.claim(uuid) == ""


def test_another_process_s_claim_is_named(uuid, held_elsewhere):
    holder = gpuclaim.claim(uuid)          # pid, host, since when, its command line
    assert holder.startswith(f"pid {held_elsewhere.pid} on ") and " since 20" in holder
    assert holder.endswith(f": -c {uuid}")


def test_a_claim_dies_with_its_holder(uuid, held_elsewhere):
    assert gpuclaim.claim(uuid)
    held_elsewhere.kill()
    held_elsewhere.wait(timeout=60)
    assert gpuclaim.claim(uuid) == ""


def test_no_uuid_claims_nothing():
    assert gpuclaim.claim("") == ""


def _session(tmp_path, uuid, *, controller=False):
    from types import SimpleNamespace
    from pytest_gpuchar.results.expectations import Store
    from pytest_gpuchar.session import GpuCharSession
    s = GpuCharSession(SimpleNamespace(), None, 7, 20.0, None, 0, Store(tmp_path))
    s._device = device.DeviceInfo(0, "NVIDIA H200", "sm_90", 132, 60 * 2**20, 228 * 1024,
                                  141 * 2**30, 1980.0, 1980.0, 2619.0, "580.159.04", "13.0",
                                  "13.0", uuid=uuid)
    s.controller_of_workers = controller
    return s


def test_a_session_on_a_claimed_gpu_skips_its_hardware_tests(tmp_path, uuid, held_elsewhere):
    why = _session(tmp_path, uuid).hardware_skip("sm_90")
    assert why.startswith(f"hardware: {uuid} (NVIDIA H200, GPU 0) is being measured by "
                          f"another process (pid {held_elsewhere.pid} on ")
    assert why.endswith("two processes on one GPU would time each other's kernels: run when "
                        "it has ended, or pick another GPU with --gpuchar-device")
    # the controller of pytest-xdist workers measures nothing: it neither claims nor skips
    assert _session(tmp_path, uuid, controller=True).hardware_skip("sm_90") is None


def test_a_session_on_a_free_gpu_claims_it(tmp_path, uuid):
    assert _session(tmp_path, uuid).hardware_skip("sm_90") is None
    assert gpuclaim.path(uuid).read_text().startswith(f"pid {os.getpid()} on ")


def test_a_session_asks_once(tmp_path, uuid, held_elsewhere):
    """Every hardware test of a session gets the first answer: a claim given up while the
    tests are collected does not make some of them measure and others skip."""
    s = _session(tmp_path, uuid)
    first = s.hardware_skip("sm_90")
    held_elsewhere.kill()
    held_elsewhere.wait(timeout=60)
    assert first and s.hardware_skip("sm_90") == first
    assert _session(tmp_path, uuid).hardware_skip("sm_90") is None     # a new session's


CLAIM_AND_EXIT = r"""
import sys
from pytest_gpuchar.core import gpuclaim
assert gpuclaim.claim(sys.argv[1]) == ""
assert gpuclaim.path(sys.argv[1]).exists()
"""


def test_a_claim_leaves_no_file_when_its_process_ends(uuid):
    """Every test-suite run left its sessions' lock files in the temporary directory (issue
    44 row 11): a process that ends removes its claims' files."""
    subprocess.run([sys.executable, "-c", CLAIM_AND_EXIT, uuid], check=True, timeout=60)
    assert not gpuclaim.path(uuid).exists()


def test_a_released_claim_removes_its_file_and_can_be_claimed_again(uuid):
    assert gpuclaim.claim(uuid) == "" and gpuclaim.path(uuid).exists()
    gpuclaim.release(uuid)
    assert not gpuclaim.path(uuid).exists()
    assert gpuclaim.claim(uuid) == "" and gpuclaim.path(uuid).exists()


def test_a_killed_holder_s_file_is_taken_over(uuid, held_elsewhere):
    held_elsewhere.kill()
    held_elsewhere.wait(timeout=60)
    assert gpuclaim.path(uuid).exists()                   # a killed process removes nothing
    assert gpuclaim.claim(uuid) == ""
    assert gpuclaim.path(uuid).read_text().startswith(f"pid {os.getpid()} on ")
