"""core.nvml: the board state through nvidia-ml-py. Here there is no libnvidia-ml.so, so the
real library gives the one "no NVML" reason; reading a board is exercised on a stand-in for
the NVML C library behind pynvml (its answers, its NotSupported); the reason names come from
pynvml's own constants."""
from __future__ import annotations

from types import SimpleNamespace

import pynvml

from pytest_gpuchar.core import nvml


def test_without_nvml_there_is_one_reason():
    s = nvml.read(uuid="GPU-3b4917e6-00cd-83d8-394c-5b22e402788e")
    assert set(s) == {"skipped", "time"}
    assert s["skipped"].startswith("NVML: ") and "libnvidia-ml.so" in s["skipped"]
    assert nvml.summary(s) == s["skipped"] and nvml.flags(s, s) == []


def test_reason_names_are_pynvml_s_bits():
    mask = (pynvml.nvmlClocksEventReasonGpuIdle | pynvml.nvmlClocksEventReasonSwThermalSlowdown
            | pynvml.nvmlClocksEventReasonHwSlowdown)
    assert nvml.reason_names(mask) == ["GPU idle", "HW slowdown", "SW thermal slowdown"]
    assert nvml.reason_names(0) == []
    assert nvml.reason_names(1 << 40) == ["unknown reason 0x10000000000"]


class Lib:
    """pynvml's functions answered as a board would (real pynvml constants and errors)."""
    NVMLError, NVMLError_NotSupported = pynvml.NVMLError, pynvml.NVMLError_NotSupported

    def __init__(self, **state) -> None:
        self.state, self.calls = state, []

    def __getattr__(self, name):
        if name.startswith(("NVML_", "nvmlClocks", "NVMLError_")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    def nvmlInit(self):
        self.calls.append("init")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid != "GPU-1":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return "h"

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        return "h"

    def _get(self, key, default=0):
        v = self.state.get(key, default)
        if v is NotImplemented:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return v

    def nvmlSystemGetDriverVersion(self):
        return "580.95.05"

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, h):
        return "GPU-1"

    def nvmlDeviceGetSerial(self, h):
        return self._get("serial")

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=b"00000000:1B:00.0")

    def nvmlDeviceGetClockInfo(self, h, kind):
        return {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}[kind]

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}[kind]

    def nvmlDeviceGetApplicationsClock(self, h, kind):
        return self._get("app")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._get("reasons")

    def nvmlDeviceGetPowerUsage(self, h):
        return 312_500

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 41

    def nvmlDeviceGetEccMode(self, h):
        return [1, 1]

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        return self._get(("corrected" if kind == pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
                          else "uncorrected") + ("_vol" if counter == pynvml.NVML_VOLATILE_ECC
                                                 else "_agg"))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return self.state.get("width", 16)

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetMigMode(self, h):
        return self._get("mig", [0, 0])

    def nvmlDeviceGetPersistenceMode(self, h):
        return 1


def test_a_board_is_read_field_by_field():
    lib = Lib(serial="1654922001234", app=1755, reasons=pynvml.nvmlClocksEventReasonGpuIdle,
              mig=NotImplemented)
    s = nvml.read(uuid="GPU-1", lib=lib)
    assert s["matched_by"] == "UUID GPU-1" and s["driver"] == "580.95.05"
    assert (s["name"], s["serial"], s["pci_bus_id"]) == ("NVIDIA H100 80GB HBM3",
                                                         "1654922001234", "00000000:1B:00.0")
    assert (s["sm_mhz"], s["sm_max_mhz"], s["sm_app_mhz"], s["mem_mhz"]) == (1980, 1980, 1755,
                                                                             2619)
    assert (s["power_w"], s["power_limit_w"], s["temperature_c"]) == (312.5, 700.0, 41)
    assert s["clock_event_reasons"] == ["GPU idle"] and s["ecc_mode"] == "enabled"
    assert s["mig_mode"] is None and s["unsupported"] == ["mig_mode"] and not s["errors"]
    assert s["persistence_mode"] == "enabled" and (s["pcie_gen"], s["pcie_width"]) == (5, 16)
    assert lib.calls == ["init", "shutdown"]
    line = nvml.summary(s)
    assert line.startswith("NVIDIA H100 80GB HBM3 GPU-1 serial 1654922001234: SM 1980/1980 MHz")
    assert "clock events: GPU idle" in line and "MIG -" in line


def test_an_unknown_uuid_falls_back_to_the_pci_bus_id():
    s = nvml.read(uuid="GPU-2", pci_bus_id="0000:1B:00.0", lib=Lib())
    assert s["matched_by"] == "PCI bus id 0000:1B:00.0"
    s = nvml.read(uuid="GPU-2", lib=Lib())
    assert s["skipped"].startswith("NVML: no NVML device matches UUID GPU-2")


def test_a_throttled_ecc_erroring_board_is_named():
    start = nvml.read(uuid="GPU-1", lib=Lib(reasons=1, corrected_vol=2))
    end = nvml.read(uuid="GPU-1", lib=Lib(
        reasons=pynvml.nvmlClocksEventReasonSwThermalSlowdown | pynvml.nvmlClocksEventReasonGpuIdle,
        corrected_vol=5, uncorrected_vol=1, width=8, mig=[1, 1]))
    f = nvml.flags(start, end)
    assert f[0] == "clocks held at the end: SW thermal slowdown (clock-event reasons 0x21)"
    assert "ECC: 1 uncorrected memory errors since the driver loaded (0 at the start)" in f
    assert "ECC: 3 corrected memory errors during the run" in f
    assert "PCIe link x8, narrower than the board's x16" in f
    assert any(x.startswith("MIG mode is on") for x in f)
    assert nvml.flags(start, start) == []          # idle, no errors: nothing to say


def test_a_driver_that_does_not_answer_is_one_reason():
    lib = Lib()

    def refuse():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    lib.nvmlInit = refuse
    s = nvml.read(uuid="GPU-1", lib=lib)
    assert s["skipped"] == "NVML: Driver Not Loaded"
