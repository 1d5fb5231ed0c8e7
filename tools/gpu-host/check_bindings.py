#!/usr/bin/env python3
"""GPU-host check of issue 32 (not the product): the driver calls through NVIDIA's cuda-bindings
and the board state through NVML, side by side with the hand-written ctypes / nvidia-smi code
they replaced (a copy of which lives only here, below), on the GPU of this machine:

  jit        every module of every topic for the GPU's arch linked by the driver both ways:
             the cubins byte-identical, the JIT info logs equal; wall time of both ways with
             the links in 16 threads (the suite's JIT pool)
  params     one launch through cuLaunchKernelEx both ways of a kernel that stores its
             parameters (u32, u64, a 128-byte tensor map): what the kernel saw is equal
  cluster    cluster launches (2, 4, 8 CTAs; 16 when the device allows) both ways: each CTA's
             %cluster_ctarank / %clusterid / %cluster_nctarank equal and as expected
  occupancy  cuOccupancyMaxActiveClusters both ways for 1..16 CTAs per cluster, with and
             without 100 KiB of dynamic shared memory
  tensormap  cuTensorMapEncodeTiled both ways (1D, 2D and a refused box): the 128-byte
             descriptors equal, the refusals both refused, the messages
  errors     a refused launch's message both ways
  nvml       what NVML read (every field) beside nvidia-smi's CSV of the same fields, and
             how long each takes

Usage (after the harness installed the package and its wheels into /tmp/site):
  PYTHONPATH=/tmp/site python3 tools/gpu-host/check_bindings.py [--modules N]
Writes $OUT/check_bindings.txt (the table) and $OUT/check_bindings.json (everything).
"""
from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("CUDA_CACHE_DISABLE", "1")     # both ways JIT afresh, nothing cached

import numpy as np  # noqa: E402

ROWS: list[dict] = []
DETAILS: dict = {}


def row(check: str, old, new, same: bool | None, note: str = "") -> None:
    ROWS.append({"check": check, "old": str(old), "new": str(new),
                 "same": same, "note": note})
    verdict = {True: "same", False: "DIFFERS", None: "-"}[same]
    print(f"{check:34s} {str(old)[:38]:38s} {str(new)[:38]:38s} {verdict}"
          + (f"  {note}" if note else ""), flush=True)


# ============ the old implementation: pytest_gpuchar/core/jit.py and driver.py by ctypes ====
class OldJIT:
    CU_JIT_INFO_LOG_BUFFER = 3
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4
    CU_JIT_ERROR_LOG_BUFFER = 5
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6
    CU_JIT_LOG_VERBOSE = 12
    CU_JIT_INPUT_PTX = 1
    LOG_BYTES = 1 << 16
    _lib = None

    @classmethod
    def libcuda(cls):
        if cls._lib is None:
            cls._lib = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
        return cls._lib

    @staticmethod
    def check(lib, res, what, log=""):
        if res != 0:
            s = ctypes.c_char_p()
            lib.cuGetErrorString(res, ctypes.byref(s))
            msg = s.value.decode() if s.value else f"CUresult {res}"
            raise RuntimeError(f"{what} failed: {msg}" + (f"\nJIT log:\n{log}" if log else ""))

    @classmethod
    def link(cls, ptx: str, name: str = "probe.ptx") -> tuple[bytes, str]:
        from cupy.cuda import runtime
        runtime.getDevice()
        runtime.free(0)
        lib = cls.libcuda()
        info = ctypes.create_string_buffer(cls.LOG_BYTES)
        err = ctypes.create_string_buffer(cls.LOG_BYTES)
        opts = (ctypes.c_int * 5)(cls.CU_JIT_INFO_LOG_BUFFER, cls.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                                  cls.CU_JIT_ERROR_LOG_BUFFER,
                                  cls.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, cls.CU_JIT_LOG_VERBOSE)
        vals = (ctypes.c_void_p * 5)(ctypes.cast(info, ctypes.c_void_p).value, cls.LOG_BYTES,
                                     ctypes.cast(err, ctypes.c_void_p).value, cls.LOG_BYTES, 1)
        state = ctypes.c_void_p()
        create = getattr(lib, "cuLinkCreate_v2", None) or lib.cuLinkCreate
        cls.check(lib, create(5, opts, vals, ctypes.byref(state)), "cuLinkCreate")
        try:
            data = ptx.encode() + b"\0"
            add = getattr(lib, "cuLinkAddData_v2", None) or lib.cuLinkAddData
            add.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                            ctypes.c_char_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
            res = add(state, cls.CU_JIT_INPUT_PTX, data, len(data), name.encode(), 0, None, None)
            cls.check(lib, res, f"cuLinkAddData({name})", err.value.decode(errors="replace"))
            cubin_ptr = ctypes.c_void_p()
            size = ctypes.c_size_t()
            res = lib.cuLinkComplete(state, ctypes.byref(cubin_ptr), ctypes.byref(size))
            cls.check(lib, res, f"cuLinkComplete({name})", err.value.decode(errors="replace"))
            cubin = ctypes.string_at(cubin_ptr, size.value)
        finally:
            lib.cuLinkDestroy(state)
        return cubin, info.value.decode(errors="replace")


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class AttrValue(ctypes.Union):
    _fields_ = [("pad", ctypes.c_char * 64), ("cluster", Dim3), ("align", ctypes.c_uint64)]


class LaunchAttr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", AttrValue)]


class LaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint),
                ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttr)), ("numAttrs", ctypes.c_uint)]


class OldTensorMap:
    def __init__(self, buffer, address):
        self.buffer, self.address = buffer, address

    def bytes(self) -> bytes:
        return ctypes.string_at(self.address, 128)


class OldDriver:
    """The ctypes Driver of core/driver.py before issue 32 (check, set_attribute,
    max_active_clusters, launch, encode_tiled), verbatim but for its names."""

    def __init__(self) -> None:
        self.lib = L = OldJIT.libcuda()
        L.cuLaunchKernelEx.argtypes = [ctypes.c_void_p] * 4
        L.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        L.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(ctypes.c_int),
                                                   ctypes.c_void_p, ctypes.c_void_p]
        L.cuTensorMapEncodeTiled.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32), ctypes.c_int,
            ctypes.c_int, ctypes.c_int, ctypes.c_int]

    def check(self, call, code):
        if code == 0:
            return
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.lib.cuGetErrorName(code, ctypes.byref(name))
        self.lib.cuGetErrorString(code, ctypes.byref(text))
        raise RuntimeError(f"{call} failed: {(name.value or b'CUDA_ERROR_?').decode()} "
                           f"({code}): {(text.value or b'no description').decode()}")

    @staticmethod
    def config(grid, block, shared_mem, stream, cluster):
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        attrs = (LaunchAttr * 1)()
        n = 0
        if cluster is not None:
            attrs[0].id = 4
            attrs[0].value.cluster = Dim3(cluster, 1, 1)
            n = 1
        cfg = LaunchConfig(g[0], g[1], g[2], b[0], b[1], b[2], shared_mem,
                           ctypes.c_void_p(stream), ctypes.cast(attrs, ctypes.POINTER(LaunchAttr)),
                           n)
        return cfg, attrs

    @staticmethod
    def pack(args):
        keep = []
        for a in args:
            if isinstance(a, OldTensorMap):
                keep.append(a)
                continue
            if hasattr(a, "data") and hasattr(a.data, "ptr"):
                keep.append(ctypes.c_uint64(int(a.data.ptr)))
            elif isinstance(a, (np.uint32, np.int32)):
                t = ctypes.c_uint32 if isinstance(a, np.uint32) else ctypes.c_int32
                keep.append(t(int(a)))
            elif isinstance(a, (np.uint64, np.int64)):
                t = ctypes.c_uint64 if isinstance(a, np.uint64) else ctypes.c_int64
                keep.append(t(int(a)))
            else:
                raise TypeError(a)
        ptrs = (ctypes.c_void_p * max(1, len(keep)))()
        for k, v in enumerate(keep):
            ptrs[k] = v.address if isinstance(v, OldTensorMap) else ctypes.addressof(v)
        return ptrs, keep

    def set_attribute(self, fn, attr, value):
        self.check(f"cuFuncSetAttribute({attr}, {value})",
                   self.lib.cuFuncSetAttribute(ctypes.c_void_p(fn), attr, value))

    def max_active_clusters(self, fn, cluster, block, shared_mem):
        cfg, _a = self.config((cluster,), block, shared_mem, 0, cluster)
        n = ctypes.c_int(0)
        self.check("cuOccupancyMaxActiveClusters", self.lib.cuOccupancyMaxActiveClusters(
            ctypes.byref(n), ctypes.c_void_p(fn), ctypes.byref(cfg)))
        return int(n.value)

    def launch(self, fn, grid, block, args, *, cluster, shared_mem, stream):
        cfg, _a = self.config(grid, block, shared_mem, stream, cluster)
        params, _k = self.pack(args)
        self.check("cuLaunchKernelEx", self.lib.cuLaunchKernelEx(
            ctypes.byref(cfg), ctypes.c_void_p(fn), params, None))

    def encode_tiled(self, address, dims, strides, box, dtype=2):
        rank = len(dims)
        buf = (ctypes.c_uint8 * 256)()
        at = (ctypes.addressof(buf) + 127) // 128 * 128
        g = (ctypes.c_uint64 * rank)(*dims)
        s = (ctypes.c_uint64 * max(1, rank - 1))(*(strides or (0,)))
        b = (ctypes.c_uint32 * rank)(*box)
        e = (ctypes.c_uint32 * rank)(*([1] * rank))
        self.check(f"cuTensorMapEncodeTiled(rank {rank}, dims {dims}, strides {strides}, "
                   f"box {box})", self.lib.cuTensorMapEncodeTiled(
                       ctypes.c_void_p(at), dtype, rank, ctypes.c_void_p(address), g, s, b, e,
                       0, 0, 0, 0))
        return OldTensorMap(buf, at)


def old_smi(index: int) -> dict:
    """nvidia-smi's CSV of the fields NVML now reads (the old device.py / nightly.py way)."""
    q = ("driver_version,uuid,serial,clocks.sm,clocks.max.sm,clocks.mem,clocks.applications."
         "graphics,clocks_event_reasons.active,power.draw,power.limit,temperature.gpu,ecc.mode."
         "current,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,"
         "pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,"
         "mig.mode.current,persistence_mode")
    out = subprocess.run(["nvidia-smi", f"--id={index}", f"--query-gpu={q}",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True,
                         timeout=30)
    vals = [v.strip() for v in out.stdout.strip().split(",")]
    return dict(zip(q.split(","), vals)) if len(vals) == len(q.split(",")) else {
        "error": (out.stdout + out.stderr).strip()[:300]}


# ================================ the checks ===============================================
def ptx_version(arch: str) -> str:
    n = int(arch.split("_")[1].rstrip("a"))
    return "8.0" if n <= 90 else "8.7"


def kernels(arch: str) -> str:
    target = arch + ("a" if arch == "sm_90" else "")
    text = f""".version {ptx_version(arch)}
.target {target}
.address_size 64

.visible .entry params(.param .u64 out, .param .u32 a, .param .u64 b,
                       .param .align 64 .b8 tmap[128])
{{
  .reg .b32 %r<2>; .reg .b64 %rd<24>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  ld.param.u32 %r1, [a];
  ld.param.u64 %rd2, [b];
  st.global.u32 [%rd1], %r1;
  st.global.u64 [%rd1+8], %rd2;
"""
    for k in range(16):
        text += (f"  ld.param.u64 %rd3, [tmap+{8 * k}];\n"
                 f"  st.global.u64 [%rd1+{16 + 8 * k}], %rd3;\n")
    text += "  ret;\n}\n"
    if int(arch.split("_")[1].rstrip("a")) >= 90:
        text += """
.visible .entry cluster(.param .u64 out)
{
  .reg .b32 %r<6>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, %clusterid.x;
  mov.u32 %r4, %cluster_nctarank;
  mul.wide.u32 %rd2, %r1, 16;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v4.u32 [%rd3], {%r1, %r2, %r3, %r4};
  ret;
}
"""
    return text


def check_jit(dev, limit: int | None, threads: int) -> None:
    from pytest_gpuchar.core import jit
    from pytest_gpuchar.core.build import Stage
    from pytest_gpuchar.topics import registry
    from cupy.cuda import runtime
    modules = []     # every module a hardware run links, of every topic
    for g in registry.groups(set(registry.TOPICS), dev.arch):
        if g.needed(Stage.HARDWARE):
            modules += [(text, name) for _p, text, name in g.parts()]
    modules = modules[:limit] if limit else modules
    DETAILS["jit_modules"] = len(modules)

    def run(link):
        def one(m):
            runtime.setDevice(dev.index)
            try:
                return link(*m)
            except Exception as e:          # noqa: BLE001 - recorded per module
                return e
        t = time.time()
        with ThreadPoolExecutor(threads) as pool:
            out = list(pool.map(one, modules))
        return out, time.time() - t
    old, t_old = run(OldJIT.link)
    new, t_new = run(jit.link)
    same = logs = failed = 0
    differ = []
    for (text, name), o, n in zip(modules, old, new):
        if isinstance(o, Exception) or isinstance(n, Exception):
            failed += 1
            both = isinstance(o, Exception) and isinstance(n, Exception)
            differ.append(f"{name}: old {str(o)[:120]!r} / new {str(n)[:120]!r}"
                          + (" (both refused)" if both else ""))
            continue
        same += o[0] == n[0]
        lo, ln = _log_lines(o[1]), _log_lines(n[1])
        logs += lo == ln
        if lo != ln:
            first = next((a, b) for a, b in zip(lo + [""] * len(ln), ln + [""] * len(lo))
                         if a != b)
            DETAILS.setdefault("jit_log_differ", []).append(
                {"module": name, "old": first[0][:200], "new": first[1][:200]})
        if o[0] != n[0]:
            differ.append(f"{name}: cubin {len(o[0])} vs {len(n[0])} bytes")
    DETAILS["jit_differ"] = differ
    row("jit: cubins byte-identical", f"{len(modules)} modules", f"{same} identical",
        same == len(modules) - failed and not [d for d in differ if "both refused" not in d],
        f"{failed} refused" if failed else "")
    row("jit: info logs equal", "", f"{logs} of {len(modules) - failed}",
        logs == len(modules) - failed, "compile times left out")
    row(f"jit: wall time, {threads} threads", f"{t_old:.2f} s", f"{t_new:.2f} s", None,
        f"new/old {t_new / t_old:.2f}" if t_old else "")


def _log_lines(log: str) -> list[str]:
    """A JIT info log without its compile-time lines (ptxas -v prints the wall time of the
    compile, which no two links share)."""
    import re
    return [re.sub(r"[Cc]ompile time = [0-9.]+ ?ms", "compile time = T", ln)
            for ln in log.splitlines()]


class Launch:
    """What the launch checks share: the check kernels loaded, both drivers, a buffer."""

    def __init__(self, dev) -> None:
        import cupy as cp
        from pytest_gpuchar.core import driver, jit
        cubin, _ = jit.link(kernels(dev.arch), "check.ptx")
        self.cp, self.dev = cp, dev
        self.mod = cp.cuda.function.Module()
        self.mod.load(cubin)
        self.new, self.old = driver.Driver(), OldDriver()
        self.stream = int(cp.cuda.get_current_stream().ptr)
        self.data = cp.zeros(1 << 20, dtype=cp.uint32)
        self.addr = int(self.data.data.ptr)

    def sync(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()


def check_tensormaps(L: Launch) -> None:
    for what, args in (("1D", ((1 << 20,), (), (256,))),
                       ("2D", ((1024, 64), (4096,), (64, 4)))):
        tn, to = L.new.encode_tiled(L.addr, *args), L.old.encode_tiled(L.addr, *args)
        row(f"tensormap {what}: 128-byte descriptor", to.bytes()[:8].hex() + "...",
            tn.bytes()[:8].hex() + "...", tn.bytes() == to.bytes(),
            f"new took {tn.tries} encode call(s)")
        DETAILS[f"tensormap_{what}"] = {"old": to.bytes().hex(), "new": tn.bytes().hex()}
    for label, drv in (("old", L.old), ("new", L.new)):
        try:
            drv.encode_tiled(L.addr, (1 << 20,), (), (300,))
            DETAILS[f"refused_box_{label}"] = "accepted"
        except Exception as e:      # noqa: BLE001
            DETAILS[f"refused_box_{label}"] = str(e)
    o, n = DETAILS["refused_box_old"], DETAILS["refused_box_new"]
    row("tensormap box 300: refused", o[-60:], n[-60:], (o == "accepted") == (n == "accepted"))


def check_params(L: Launch) -> None:
    """A kernel that stores its u32, u64 and tensor-map parameters: what it saw, both ways."""
    fn = L.mod.get_function("params")
    tm_new = L.new.encode_tiled(L.addr, (1024, 64), (4096,), (64, 4))
    tm_old = L.old.encode_tiled(L.addr, (1024, 64), (4096,), (64, 4))
    seen = {}
    for label, drv, tm in (("old", L.old, tm_old), ("new", L.new, tm_new)):
        out = L.cp.zeros(18, dtype=L.cp.uint64)
        drv.launch(int(fn.ptr), (1,), (1,), (out, np.uint32(0xC0FFEE), np.uint64(2**40 + 7), tm),
                   cluster=None, shared_mem=0, stream=L.stream)
        L.sync()
        seen[label] = out.get()
    ok = [int(seen["new"][0]) & 0xFFFFFFFF == 0xC0FFEE, int(seen["new"][1]) == 2**40 + 7,
          np.array_equal(seen["new"][2:], np.frombuffer(tm_new.bytes(), "<u8"))]
    same = np.array_equal(seen["old"], seen["new"])
    row("params: u32, u64, tensor map", "as passed" if same else "differs",
        "as passed" if all(ok) else f"wrong {ok}", same and all(ok))


def check_occupancy(L: Launch, fn, size: int) -> int:
    """Clusters of `size` resident at once, both ways, with and without 100 KiB of shared
    memory; the new way's answer without (0: none)."""
    f = int(fn.ptr)
    if size > 8:
        L.old.set_attribute(f, 14, 1)
        L.new.set_attribute(f, 14, 1)
    o, n = (d.max_active_clusters(f, size, (128,), 0) for d in (L.old, L.new))
    for d in (L.old, L.new):
        d.set_attribute(f, 8, 100 << 10)
    o2, n2 = (d.max_active_clusters(f, size, (128,), 100 << 10) for d in (L.old, L.new))
    row(f"occupancy: clusters of {size}", f"{o} / {o2} (100 KiB)", f"{n} / {n2} (100 KiB)",
        (o, o2) == (n, n2))
    return n


def check_clusters(L: Launch) -> None:
    if int(L.dev.arch.split("_")[1]) < 90:
        row("cluster launches", "-", "-", None, f"{L.dev.arch}: no clusters")
        return
    cfn = L.mod.get_function("cluster")
    for size in (1, 2, 4, 8, 16):
        try:
            n = check_occupancy(L, cfn, size)
        except Exception as e:    # noqa: BLE001
            row(f"occupancy: clusters of {size}", "", "", None, f"error: {str(e)[:100]}")
            continue
        if not n:
            continue
        got = {}
        for label, drv in (("old", L.old), ("new", L.new)):
            out = L.cp.zeros(4 * 32, dtype=L.cp.uint32)
            drv.launch(int(cfn.ptr), (32,), (128,), (out,), cluster=size, shared_mem=0,
                       stream=L.stream)
            L.sync()
            got[label] = out.get().reshape(32, 4)
        c = np.arange(32)
        want = np.stack([c, c % size, c // size, np.full(32, size)], axis=1)
        row(f"cluster launch of {size}", "as expected" if np.array_equal(got["old"], want) else
            "WRONG", "as expected" if np.array_equal(got["new"], want) else "WRONG",
            np.array_equal(got["old"], got["new"]) and np.array_equal(got["new"], want))
    msgs = {}
    for label, drv in (("old", L.old), ("new", L.new)):     # last: a refusal
        try:
            drv.launch(int(cfn.ptr), (64,), (1024,), (L.data,), cluster=64, shared_mem=0,
                       stream=L.stream)
            L.sync()
            msgs[label] = "accepted"
        except Exception as e:    # noqa: BLE001
            msgs[label] = str(e)
    DETAILS["refused_launch"] = msgs
    row("errors: cluster of 64 refused", msgs["old"][-60:], msgs["new"][-60:],
        ("accepted" == msgs["old"]) == ("accepted" == msgs["new"]))


def check_launches(dev) -> None:
    L = Launch(dev)
    for check in (check_tensormaps, check_params, check_clusters):
        try:
            check(L)
        except Exception as e:    # noqa: BLE001 - one check's failure is a row
            row(f"{check.__name__}: ERROR", "", f"{type(e).__name__}: {e}"[:80], False)
            DETAILS[f"{check.__name__}_traceback"] = traceback.format_exc()
            print(DETAILS[f"{check.__name__}_traceback"], file=sys.stderr)


def check_nvml(dev) -> None:
    from pytest_gpuchar.core import nvml
    t = time.time()
    board = nvml.read(uuid=dev.uuid, pci_bus_id=dev.pci_bus_id)
    t_nvml = time.time() - t
    t = time.time()
    smi = old_smi(dev.index)
    t_smi = time.time() - t
    DETAILS["nvml"], DETAILS["nvidia_smi"] = board, smi
    print("NVML:", nvml.summary(board))
    print("NVML fields:", json.dumps(board, indent=1, default=str))
    print("nvidia-smi:", json.dumps(smi, indent=1))
    pairs = [("driver", "driver_version"), ("uuid", "uuid"), ("serial", "serial"),
             ("sm_max_mhz", "clocks.max.sm"), ("sm_mhz", "clocks.sm"), ("mem_mhz", "clocks.mem"),
             ("sm_app_mhz", "clocks.applications.graphics"),
             ("clock_event_mask", "clocks_event_reasons.active"),
             ("power_w", "power.draw"), ("power_limit_w", "power.limit"),
             ("temperature_c", "temperature.gpu"), ("ecc_mode", "ecc.mode.current"),
             ("ecc_volatile_corrected", "ecc.errors.corrected.volatile.total"),
             ("ecc_volatile_uncorrected", "ecc.errors.uncorrected.volatile.total"),
             ("pcie_gen", "pcie.link.gen.current"), ("pcie_gen_max", "pcie.link.gen.max"),
             ("pcie_width", "pcie.link.width.current"),
             ("pcie_width_max", "pcie.link.width.max"), ("mig_mode", "mig.mode.current"),
             ("persistence_mode", "persistence_mode")]
    for mine, theirs in pairs:
        a, b = board.get(mine), smi.get(theirs)
        row(f"nvml: {mine}", b, a, _agrees(a, b), "live value" if mine in (
            "sm_mhz", "mem_mhz", "power_w", "temperature_c", "clock_event_mask") else "")
    row("nvml: read time", f"{t_smi * 1000:.0f} ms (nvidia-smi)", f"{t_nvml * 1000:.0f} ms",
        None)
    row("nvml: flags (this board, now)", "", "; ".join(nvml.flags(board, board)) or "none",
        None)


def _agrees(mine, theirs) -> bool | None:
    if theirs is None or mine is None:
        return None
    t = str(theirs).strip().lower()
    if isinstance(mine, str):
        return mine.lower() == t or (mine == "enabled" and t == "enabled") or \
            (mine == "disabled" and t == "disabled")
    try:
        v = float(int(t, 16)) if t.startswith("0x") else float(t)
    except ValueError:
        return None
    return abs(float(mine) - v) <= max(1.0, 0.05 * abs(v))


def write_out() -> None:
    out = os.environ.get("OUT", ".")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "check_bindings.txt"), "w") as f:
        f.write(f"{'check':34s} {'old (ctypes / nvidia-smi)':38s} {'new (bindings / NVML)':38s}\n")
        for r in ROWS:
            verdict = {True: "same", False: "DIFFERS", None: "-"}[r["same"]]
            f.write(f"{r['check']:34s} {r['old'][:38]:38s} {r['new'][:38]:38s} {verdict}"
                    + (f"  {r['note']}" if r["note"] else "") + "\n")
    with open(os.path.join(out, "check_bindings.json"), "w") as f:
        json.dump({"rows": ROWS, "details": DETAILS}, f, indent=1, default=str)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", type=int, default=None, help="JIT only the first N modules")
    ap.add_argument("--threads", type=int, default=16, help="JIT threads (the suite's pool: 16)")
    args = ap.parse_args()
    from pytest_gpuchar.core import bindings, device
    dev = device.detect()
    print("device:", dev.header_lines() if dev else dev.reason)
    DETAILS["device"] = dev.header_lines() if dev else dev.reason
    row("cuda-bindings", "ctypes on libcuda", bindings.version() or "missing", None)
    if not dev:
        row("device", "", dev.reason[:80], False)
        write_out()
        return 1
    for name, check in (("jit", lambda: check_jit(dev, args.modules, args.threads)),
                        ("launches", lambda: check_launches(dev)),
                        ("nvml", lambda: check_nvml(dev))):
        try:
            check()
        except Exception as e:    # noqa: BLE001 - one check's failure is a row, not the end
            row(f"{name}: ERROR", "", f"{type(e).__name__}: {e}"[:80], False)
            DETAILS[f"{name}_traceback"] = traceback.format_exc()
            print(DETAILS[f"{name}_traceback"], file=sys.stderr)
    write_out()
    bad = [r for r in ROWS if r["same"] is False]
    print(f"{len(bad)} of {len(ROWS)} rows differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
