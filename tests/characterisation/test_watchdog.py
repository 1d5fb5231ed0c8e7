"""The watchdog on real hardware: a kernel that runs past the limit ends the wait with an error
naming the probe, and the session treats the GPU as wedged (the rest of the hardware tests
skip). Run in a subprocess, with a kernel that spins for a bounded 0.5 s (the watchdog gives up
after 0.25 s; the subprocess's exit then waits for the kernel's end), so this session's GPU is
never wedged."""
from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import sys
from pytest_gpuchar.core import device, gpu as g
gpu = g.Gpu(device.detect(), g.JitCache(), watchdog_s=0.25)
try:
    gpu.spin(0.5, timeout_s=0.25, name="latency/spin.selftest")
except g.ProbeHang as e:
    print("HANG:", e)
    print("WEDGED:", gpu.wedged)
    sys.exit(3)
print("no hang detected")
"""


@pytest.mark.hardware
def test_watchdog_names_the_hung_probe(arch, gpu):
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "watchdog: probe latency/spin.selftest did not finish within 0.25 s" in proc.stdout
    assert "WEDGED: latency/spin.selftest" in proc.stdout
