"""core.device: the UUID that tells boards of one model apart (no GPU needed)."""
from __future__ import annotations

from pytest_gpuchar.core import device

UUID = "3b4917e600cd83d8394c5b22e402788e"      # a zero byte at offset 4


def test_uuid_from_properties_needs_all_16_bytes():
    raw = bytes.fromhex(UUID)
    assert device._uuid({"uuid": raw}) == "GPU-3b4917e6-00cd-83d8-394c-5b22e402788e"
    assert device._uuid({"uuid": raw[:4]}) == ""       # CuPy cut it at the zero byte


def test_uuid_from_the_driver_api_when_properties_lack_it(monkeypatch):
    class Lib:
        def cuInit(self, flags):
            return 0

        def cuDeviceGet(self, ref, index):
            ref._obj.value = index
            return 0

        def cuDeviceGetUuid_v2(self, raw, dev):
            for k, b in enumerate(bytes.fromhex(UUID)):
                raw[k] = b
            return 0
    monkeypatch.setattr(device, "_libcuda", Lib)
    assert device._driver_uuid(0) == "GPU-3b4917e6-00cd-83d8-394c-5b22e402788e"

    class Failing(Lib):
        def cuDeviceGetUuid_v2(self, raw, dev):
            return 100
    monkeypatch.setattr(device, "_libcuda", Failing)
    assert device._driver_uuid(0) == ""
