"""The board's state through NVML (nvidia-ml-py's ``pynvml``): clocks (current, max,
application), the clock-event (throttle) reasons as names, power and its limit, temperature,
ECC mode and error counts, the PCIe link, MIG mode, UUID, serial and persistence mode.

Read when the GPU is detected (the start of a run) and at its end, into the provenance and the
nightly, so that a throttled or ECC-erroring board is named in the report (``flags``). A field
the board does not support is None and listed under "unsupported"; without NVML (no driver
library, no GPU, nvidia-ml-py missing) ``read`` gives one reason, under "skipped"."""
from __future__ import annotations

import datetime as _dt

INSTALL = 'pip install nvidia-ml-py (a dependency of pytest-gpuchar)'

# clock-event reasons: pynvml's constant, the name NVML's tools print. GPU idle is the normal
# state between launches; every other reason means the clock was held below what it could be
REASONS = [("nvmlClocksEventReasonGpuIdle", "GPU idle"),
           ("nvmlClocksEventReasonApplicationsClocksSetting", "applications clocks setting"),
           ("nvmlClocksEventReasonSwPowerCap", "SW power cap"),
           ("nvmlClocksEventReasonHwSlowdown", "HW slowdown"),
           ("nvmlClocksEventReasonSyncBoost", "sync boost"),
           ("nvmlClocksEventReasonSwThermalSlowdown", "SW thermal slowdown"),
           ("nvmlClocksEventReasonHwThermalSlowdown", "HW thermal slowdown"),
           ("nvmlClocksEventReasonHwPowerBrakeSlowdown", "HW power brake slowdown"),
           ("nvmlClocksEventReasonDisplayClockSetting", "display clock setting"),
           ("nvmlClocksThrottleReasonBoardLimit", "board limit"),
           ("nvmlClocksThrottleReasonReliability", "reliability")]
IDLE = "GPU idle"


def now() -> str:
    """The time now, UTC, to the second (ISO 8601): how a board's state, its provenance and a
    night are dated."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def reason_names(mask: int, lib=None) -> list[str]:
    """The names of the bits set in a clock-event reason mask (unknown bits by value)."""
    if lib is None:
        import pynvml as lib
    names, known = [], 0
    for const, name in REASONS:
        bit = getattr(lib, const, 0)
        if bit and mask & bit and not known & bit:
            names.append(name)
            known |= bit
    rest = mask & ~known
    for k in range(64):
        if rest >> k & 1:
            names.append(f"unknown reason {1 << k:#x}")
    return names


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def _handle(lib, uuid: str, pci_bus_id: str, index: int | None):
    """The NVML handle of the CUDA device: by UUID (NVML and CUDA number devices differently),
    else by PCI bus id, else by index (NVML's numbering: only when nothing else is known)."""
    tried = []
    for how, key, get in (("UUID", uuid, lib.nvmlDeviceGetHandleByUUID),
                          ("PCI bus id", pci_bus_id, lib.nvmlDeviceGetHandleByPciBusId)):
        if key and not (how == "UUID" and key.startswith("MIG-")):
            try:
                return get(key), f"{how} {key}"
            except lib.NVMLError as e:
                tried.append(f"{how} {key}: {e}")
    if index is not None and not uuid and not pci_bus_id:
        return lib.nvmlDeviceGetHandleByIndex(index), f"NVML index {index}"
    raise LookupError("no NVML device matches " + ("; ".join(tried) or "an unknown GPU"))


def _fields(lib) -> dict:
    """name -> reader(handle) of every field of the board state."""
    clock = lib.nvmlDeviceGetClockInfo
    ecc = lib.nvmlDeviceGetTotalEccErrors
    corr, unc = lib.NVML_MEMORY_ERROR_TYPE_CORRECTED, lib.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    vol, agg = lib.NVML_VOLATILE_ECC, lib.NVML_AGGREGATE_ECC
    on = (lambda v: "enabled" if v else "disabled")
    # nvidia-ml-py renamed "throttle reasons" to "clocks event reasons" (12.535)
    held = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        lib.nvmlDeviceGetCurrentClocksThrottleReasons
    return {
        "name": lambda h: _text(lib.nvmlDeviceGetName(h)),
        "uuid": lambda h: _text(lib.nvmlDeviceGetUUID(h)),
        "serial": lambda h: _text(lib.nvmlDeviceGetSerial(h)),
        "pci_bus_id": lambda h: _text(lib.nvmlDeviceGetPciInfo(h).busId),
        "sm_mhz": lambda h: clock(h, lib.NVML_CLOCK_SM),
        "mem_mhz": lambda h: clock(h, lib.NVML_CLOCK_MEM),
        "sm_max_mhz": lambda h: lib.nvmlDeviceGetMaxClockInfo(h, lib.NVML_CLOCK_SM),
        "mem_max_mhz": lambda h: lib.nvmlDeviceGetMaxClockInfo(h, lib.NVML_CLOCK_MEM),
        "sm_app_mhz": lambda h: lib.nvmlDeviceGetApplicationsClock(h, lib.NVML_CLOCK_SM),
        "mem_app_mhz": lambda h: lib.nvmlDeviceGetApplicationsClock(h, lib.NVML_CLOCK_MEM),
        "clock_event_mask": lambda h: int(held(h)),
        "power_w": lambda h: lib.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "power_limit_w": lambda h: lib.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "temperature_c": lambda h: lib.nvmlDeviceGetTemperature(h, lib.NVML_TEMPERATURE_GPU),
        "ecc_mode": lambda h: on(lib.nvmlDeviceGetEccMode(h)[0]),
        "ecc_volatile_corrected": lambda h: int(ecc(h, corr, vol)),
        "ecc_volatile_uncorrected": lambda h: int(ecc(h, unc, vol)),
        "ecc_aggregate_corrected": lambda h: int(ecc(h, corr, agg)),
        "ecc_aggregate_uncorrected": lambda h: int(ecc(h, unc, agg)),
        "pcie_gen": lambda h: lib.nvmlDeviceGetCurrPcieLinkGeneration(h),
        "pcie_gen_max": lambda h: lib.nvmlDeviceGetMaxPcieLinkGeneration(h),
        "pcie_width": lambda h: lib.nvmlDeviceGetCurrPcieLinkWidth(h),
        "pcie_width_max": lambda h: lib.nvmlDeviceGetMaxPcieLinkWidth(h),
        "mig_mode": lambda h: on(lib.nvmlDeviceGetMigMode(h)[0]),
        "persistence_mode": lambda h: on(lib.nvmlDeviceGetPersistenceMode(h)),
    }


def _library():
    try:
        import pynvml
    except ImportError as e:
        raise LookupError(f"nvidia-ml-py is not importable ({e}); {INSTALL}") from None
    return pynvml


def read(uuid: str = "", pci_bus_id: str = "", index: int | None = None, lib=None) -> dict:
    """The board state of one GPU now (see the module's docstring); {"skipped": why} when NVML
    cannot say. `lib`: pynvml (default) or a stand-in."""
    when = now()
    try:
        lib = lib if lib is not None else _library()
        lib.nvmlInit()
    except LookupError as e:
        return {"skipped": f"NVML: {e}", "time": when}
    except Exception as e:  # noqa: BLE001 - pynvml.NVMLError (library not found, no driver)
        missing = isinstance(e, getattr(lib, "NVMLError_LibraryNotFound", ()))
        return {"skipped": f"NVML: {e}" + (" (libnvidia-ml.so, part of the NVIDIA driver, is "
                                           "not installed here)" if missing else ""),
                "time": when}
    try:
        try:
            handle, how = _handle(lib, uuid, pci_bus_id, index)
        except (LookupError, lib.NVMLError) as e:
            return {"skipped": f"NVML: {e}", "time": when}
        out: dict = {"time": when, "matched_by": how, "unsupported": [], "errors": {}}
        try:
            out["driver"] = _text(lib.nvmlSystemGetDriverVersion())
        except lib.NVMLError as e:
            out["errors"]["driver"] = str(e)
        for name, get in _fields(lib).items():
            try:
                out[name] = get(handle)
            except lib.NVMLError_NotSupported:
                out[name] = None
                out["unsupported"].append(name)
            except (lib.NVMLError, AttributeError) as e:   # AttributeError: an older pynvml
                out[name] = None
                out["errors"][name] = str(e)
        if out.get("clock_event_mask") is not None:
            out["clock_event_reasons"] = reason_names(out["clock_event_mask"], lib)
        return out
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:  # noqa: BLE001 - nothing to undo
            pass


def _n(v) -> int:
    return int(v) if isinstance(v, (int, float)) else 0


def flags(start: dict, end: dict) -> list[str]:
    """What makes a run's figures suspect on this board: a clock-event reason other than GPU
    idle at the start or the end, uncorrected ECC errors, corrected ones counted during the
    run, a PCIe link narrower than the board's, MIG mode on. Empty: nothing NVML saw."""
    out = []
    for when, s in (("start", start), ("end", end)):
        held = [r for r in s.get("clock_event_reasons") or [] if r != IDLE]
        if held:
            out.append(f"clocks held at the {when}: {', '.join(held)} "
                       f"(clock-event reasons {_n(s.get('clock_event_mask')):#x})")
    unc = _n(end.get("ecc_volatile_uncorrected"))
    if unc:
        out.append(f"ECC: {unc} uncorrected memory errors since the driver loaded "
                   f"({_n(start.get('ecc_volatile_uncorrected'))} at the start)")
    grew = _n(end.get("ecc_volatile_corrected")) - _n(start.get("ecc_volatile_corrected"))
    if grew > 0:
        out.append(f"ECC: {grew} corrected memory errors during the run")
    width, top = _n(end.get("pcie_width")), _n(end.get("pcie_width_max"))
    if width and top and width < top:
        out.append(f"PCIe link x{width}, narrower than the board's x{top}")
    if end.get("mig_mode") == "enabled" or start.get("mig_mode") == "enabled":
        out.append("MIG mode is on: the figures are of a GPU instance, not the whole board")
    return out


def summary(s: dict) -> str:
    """One line of a board state: what a reader checks first."""
    if "skipped" in s:
        return s["skipped"]

    def v(key, fmt="{}"):
        x = s.get(key)
        return "-" if x is None else fmt.format(x)
    reasons = ", ".join(s.get("clock_event_reasons") or []) or "none"
    return (f"{v('name')} {v('uuid')} serial {v('serial')}: SM {v('sm_mhz')}/{v('sm_max_mhz')} "
            f"MHz (app {v('sm_app_mhz')}), mem {v('mem_mhz')} MHz, {v('temperature_c')} C, "
            f"{v('power_w', '{:.0f}')}/{v('power_limit_w', '{:.0f}')} W, clock events: "
            f"{reasons}; ECC {v('ecc_mode')} ({v('ecc_volatile_corrected')} corrected, "
            f"{v('ecc_volatile_uncorrected')} uncorrected volatile), PCIe gen {v('pcie_gen')} "
            f"x{v('pcie_width')} (max gen {v('pcie_gen_max')} x{v('pcie_width_max')}), MIG "
            f"{v('mig_mode')}, persistence {v('persistence_mode')}")


# --- other processes on the measured GPU ----------------------------------------------------

def _descendants(root: int) -> set[int]:
    """`root` and every process below it (Linux /proc; {root} elsewhere)."""
    import os
    children: dict[int, list[int]] = {}
    try:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                children.setdefault(ppid, []).append(int(d))
    except OSError:
        return {root}
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out


def compute_processes(uuid: str = "", index: int | None = None, lib=None) -> list[dict] | str:
    """The compute processes NVML lists on one GPU now ({pid, memory_mib, name}), or why it
    cannot say."""
    try:
        lib = lib if lib is not None else _library()
        lib.nvmlInit()
    except Exception as e:  # noqa: BLE001 - LookupError or pynvml.NVMLError
        return f"NVML: {e}"
    try:
        handle, _ = _handle(lib, uuid, "", index)
        out = []
        for p in lib.nvmlDeviceGetComputeRunningProcesses(handle):
            try:
                name = _text(lib.nvmlSystemGetProcessName(p.pid))
            except Exception:  # noqa: BLE001 - another namespace's pid
                name = "?"
            mem = getattr(p, "usedGpuMemory", None)
            out.append({"pid": int(p.pid), "name": name,
                        "memory_mib": round(mem / 2**20) if isinstance(mem, int) else None})
        return out
    except Exception as e:  # noqa: BLE001 - NVMLError, LookupError
        return f"NVML: {e}"
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


class ProcessWatch:
    """Samples the compute processes on one GPU every `period` seconds while a run measures
    (a thread of the nightly), and keeps those that are not the run's own processes (the
    `own` pid and its descendants): another program's kernels on the GPU disturb every
    figure timed meanwhile."""

    def __init__(self, uuid: str, own: int, period: float = 1.0, lib=None) -> None:
        import threading
        self.uuid, self.own, self.period, self.lib = uuid, own, period, lib
        self.seen: dict[int, dict] = {}
        self.why_not = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpuchar-nvml-watch",
                                        daemon=True)

    def start(self) -> "ProcessWatch":
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            procs = compute_processes(self.uuid, lib=self.lib)
            if isinstance(procs, str):
                self.why_not = procs
                return
            mine = _descendants(self.own)
            seen_at = now()
            for p in procs:
                if p["pid"] not in mine:
                    first = self.seen.setdefault(p["pid"], {**p, "first_seen": seen_at})
                    first["last_seen"] = seen_at
            self._stop.wait(self.period)

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join(timeout=10)
        return sorted(self.seen.values(), key=lambda p: p["pid"])
