"""core.device: the UUID that tells boards of one model apart, the header lines (no GPU
needed; the driver's answers come from a stand-in where the real bindings need libcuda)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_gpuchar.core import device

UUID = "3b4917e600cd83d8394c5b22e402788e"      # a zero byte at offset 4


def test_uuid_from_properties_needs_all_16_bytes():
    raw = bytes.fromhex(UUID)
    assert device._uuid({"uuid": raw}) == "GPU-3b4917e6-00cd-83d8-394c-5b22e402788e"
    assert device._uuid({"uuid": raw[:4]}) == ""       # CuPy cut it at the zero byte


def test_uuid_from_the_driver_api_when_properties_lack_it():
    cb = pytest.importorskip("cuda.bindings.driver")
    ok = cb.CUresult.CUDA_SUCCESS

    class Api:
        def __getattr__(self, name):
            return getattr(cb, name)

        def cuInit(self, flags):
            return (ok,)

        def cuDeviceGet(self, index):
            return ok, cb.CUdevice(index)

        def cuDeviceGetUuid(self, dev):     # a CUuuid's .bytes (read-only in the binding)
            return ok, SimpleNamespace(bytes=bytes.fromhex(UUID))
    assert device._driver_uuid(0, Api()) == "GPU-3b4917e6-00cd-83d8-394c-5b22e402788e"

    class Failing(Api):
        def cuDeviceGetUuid(self, dev):
            return cb.CUresult.CUDA_ERROR_INVALID_DEVICE, cb.CUuuid()
    assert device._driver_uuid(0, Failing()) == ""
    # the real bindings with no libcuda: unknown, never an exception
    assert device._driver_uuid(0) == ""


def _info(**kw) -> device.DeviceInfo:
    base = dict(index=0, name="NVIDIA H100 80GB HBM3", arch="sm_90", sm_count=132,
                l2_bytes=50 << 20, shared_per_sm=233472, memory_bytes=80 << 30,
                sm_clock_max_mhz=1980.0, sm_clock_now_mhz=None, mem_clock_mhz=None,
                driver="13.0", cuda_driver_api="13.0", cuda_runtime="13.0")
    return device.DeviceInfo(**{**base, **kw})


def test_header_without_nvml_says_what_it_does_not_know():
    lines = _info(board={"skipped": "NVML: NVML Shared Library Not Found"}).header_lines()
    assert "SM clock ? MHz now / 1980 max" in lines[0]
    assert lines[2] == "board (NVML): NVML: NVML Shared Library Not Found"
    assert len(_info().header_lines()) == 2
