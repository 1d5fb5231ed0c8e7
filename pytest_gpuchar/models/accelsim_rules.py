"""What gpgpu-sim reads of the options the Accel-Sim fragment writes, and the execution
pipelines it builds from them; and the values Accel-Sim's tested SM90_H100 configuration gives
those options (the base a fragment is merged after).

Read from the simulator's source (accel-sim/gpgpu-sim_distribution, branch dev at 667834cf;
branch h100-test at fa235ebc differs from it only by the SM90_H100 configuration files):

- ``src/cuda-sim/cuda-sim.cc``, ``ptx_instruction::set_opcode_and_latency``: sscanf reads
  ``-ptx_opcode_{latency,initiation}_int`` as six values <ADD,MAX,MUL,MAD,DIV,SHFL>, ``_fp``
  and ``_dp`` as five, ``_sfu`` and ``_tensor`` (the latency spelt ``-ptx_opcode_latency_tesnor``)
  as one; a value the string lacks leaves a stack variable uninitialised. Integer and float
  ADD/MAX/MUL/MAD run on the INT, SP and DP units; every DIV (int, fp, dp) and the SFU ops on
  the SFU; SHFL keeps ALU_OP, which runs on the INT unit when there is one; mma on the tensor
  unit.
- ``src/gpgpu-sim/shader.cc``, ``shader_core_config::set_pipeline_latency``: the pipeline of a
  unit has as many stages as its "max" latency: INT max(int MAX, int SHFL), SP fp MAX, DP dp
  MAX, SFU max(dp DIV, sfu), tensor the tensor latency.
- ``pipelined_simd_unit::cycle``: an instruction enters its unit at stage latency - initiation
  interval, an index into that pipeline: it must lie in [0, stages - 1].
- accel-sim-framework ``gpu-simulator/trace-driven/trace_driven.cc``,
  ``trace_config::parse_config``: each ``-trace_opcode_latency_initiation_*`` is read as two
  values <latency,initiation>; in trace mode the units' pipelines are still sized by the PTX
  options above.
- ``src/gpgpu-sim/gpu-sim.cc``: ``-gpgpu_clock_domains`` is read as four numbers
  <core:interconnect:L2:DRAM> (MHz); a DRAM channel moves ``-gpgpu_dram_buswidth`` x
  ``-dram_data_command_freq_ratio`` bytes per DRAM clock (``dram.cc``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# the tested configuration the base values are read from
BASE_NAME = "SM90_H100"
BASE_SOURCE = ("accel-sim/gpgpu-sim_distribution configs/tested-cfgs/SM90_H100/gpgpusim.config "
               "at fa235ebc (branch h100-test) and accel-sim/accel-sim-framework "
               "gpu-simulator/configs/tested-cfgs/SM90_H100/trace.config at c4d00b5 "
               "(branch h100-test)")

#: slot names of the multi-value PTX options, in the order gpgpu-sim reads them
SLOTS = {"int": ("ADD", "MAX", "MUL", "MAD", "DIV", "SHFL"),
         "fp": ("ADD", "MAX", "MUL", "MAD", "DIV"),
         "dp": ("ADD", "MAX", "MUL", "MAD", "DIV"),
         "sfu": ("SFU",), "tensor": ("MMA",)}
TRACE_UNITS = ("int", "sp", "dp", "sfu", "tensor")


def latency_option(cls: str) -> str:
    """The PTX latency option of a class (gpgpu-sim registers the tensor one misspelt)."""
    return "-ptx_opcode_latency_tesnor" if cls == "tensor" else f"-ptx_opcode_latency_{cls}"


def initiation_option(cls: str) -> str:
    return f"-ptx_opcode_initiation_{cls}"


def trace_option(unit: str) -> str:
    return f"-trace_opcode_latency_initiation_{unit}"


#: how many values gpgpu-sim (and Accel-Sim's trace front end) reads from each option the
#: fragments write; single-number options read one
ARITY = {**{latency_option(c): len(s) for c, s in SLOTS.items()},
         **{initiation_option(c): len(s) for c, s in SLOTS.items()},
         **{trace_option(u): 2 for u in TRACE_UNITS},
         "-gpgpu_clock_domains": 4}

#: options whose value is one string gpgpu-sim takes apart itself (cache geometry, DRAM
#: timing), not a list of numbers: checked as read back whole (tools/accel-sim/check_config.py)
STRINGS = ("-gpgpu_cache:dl2", "-gpgpu_dram_timing_opt")

#: SM90_H100's values of the options the fragments write (BASE_SOURCE)
BASE = {
    "-gpgpu_n_clusters": "132", "-gpgpu_num_sched_per_core": "4",
    "-gpgpu_num_sp_units": "4", "-gpgpu_num_int_units": "4", "-gpgpu_num_dp_units": "4",
    "-gpgpu_num_sfu_units": "4", "-gpgpu_num_tensor_core_units": "4",
    "-gpgpu_clock_domains": "1132.0:1132.0:1132.0:850.0",
    "-gpgpu_n_mem": "80", "-gpgpu_n_mem_per_ctrlr": "1", "-gpgpu_dram_buswidth": "8",
    "-dram_data_command_freq_ratio": "2",
    "-gpgpu_l1_latency": "20", "-gpgpu_smem_latency": "20", "-gpgpu_l2_rop_latency": "160",
    "-dram_latency": "100", "-gpgpu_kernel_launch_latency": "5000",
    "-gpgpu_unified_l1d_size": "128",
    "-gpgpu_cache:dl1": "S:4:128:64,L:T:m:L:L,A:512:8,16:0,32",
    "-gpgpu_cache:dl2": "S:64:128:40,L:B:m:L:P,A:192:4,32:0,32",
    "-gpgpu_n_sub_partition_per_mchannel": "2",
    "-gpgpu_dram_timing_opt": "nbk=16:CCD=1:RRD=3:RCD=12:RAS=28:RP=12:RC=40:CL=12:WL=2:CDLR=3:"
                              "WR=10:nbkgrp=4:CCDL=2:RTPL=3",
    "-ptx_opcode_latency_int": "4,13,4,5,145,21", "-ptx_opcode_initiation_int": "2,2,2,2,8,4",
    "-ptx_opcode_latency_fp": "4,13,4,5,39", "-ptx_opcode_initiation_fp": "2,2,2,2,4",
    "-ptx_opcode_latency_dp": "8,19,8,8,330", "-ptx_opcode_initiation_dp": "4,4,4,4,130",
    "-ptx_opcode_latency_sfu": "100", "-ptx_opcode_initiation_sfu": "8",
    "-ptx_opcode_latency_tesnor": "64", "-ptx_opcode_initiation_tensor": "64",
    "-trace_opcode_latency_initiation_int": "2,2", "-trace_opcode_latency_initiation_sp": "2,1",
    "-trace_opcode_latency_initiation_dp": "64,64",
    "-trace_opcode_latency_initiation_sfu": "21,8",
    "-trace_opcode_latency_initiation_tensor": "32,32",
}

_NUMBER = re.compile(r"\s*(\d+)")


def read_uints(text: str, count: int) -> list[int]:
    """The values sscanf("%u,%u,...") takes from ``text`` (``count`` conversions): it stops at
    the first that fails, leaving the rest unread."""
    out, pos = [], 0
    for i in range(count):
        if i:
            if pos >= len(text) or text[pos] != ",":
                break
            pos += 1
        m = _NUMBER.match(text, pos)
        if not m:
            break
        out.append(int(m.group(1)))
        pos = m.end()
    return out


_FLOAT = re.compile(r"\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")


def read_clock(text: str) -> list[float]:
    """The numbers sscanf("%lf:%lf:%lf:%lf") takes from a -gpgpu_clock_domains value."""
    out, pos = [], 0
    for i in range(4):
        if i:
            if pos >= len(text) or text[pos] != ":":
                break
            pos += 1
        m = _FLOAT.match(text, pos)
        if not m:
            break
        out.append(float(m.group(1)))
        pos = m.end()
    return out


def read_values(option: str, text: str) -> list[float]:
    """The values gpgpu-sim's sscanf takes from ``option``'s value ``text`` (ARITY of them
    at most)."""
    if option == "-gpgpu_clock_domains":
        return read_clock(text)
    return [float(x) for x in read_uints(text, ARITY.get(option, 1))]


def options(text: str) -> dict[str, str]:
    """Option -> value of a config text as gpgpu-sim's parser takes it (option_parser.cc
    ParseFile): '#' starts a comment, tokens alternate name and value, a value opened by '"'
    runs to the token that closes it, a later occurrence replaces an earlier one."""
    words, out = " ".join(line.split("#", 1)[0] for line in text.splitlines()).split(), []
    it = iter(words)
    for w in it:
        if w.startswith('"'):
            while not w.endswith('"') or len(w) == 1:
                nxt = next(it, None)
                if nxt is None:
                    break
                w += " " + nxt
            w = w.strip('"')
        out.append(w)
    return {out[i]: out[i + 1] for i in range(0, len(out) - 1, 2)}


def merged(*texts: str) -> dict[str, str]:
    """The options in effect after parsing ``texts`` in turn, starting from BASE."""
    out = dict(BASE)
    for t in texts:
        out.update(options(t))
    return out


@dataclass(frozen=True)
class Stage:
    """One instruction class's entry into its unit's pipeline: start = latency - interval,
    valid when 0 <= start < stages (None where a value was never read)."""
    mode: str            # "ptx" or "trace"
    op: str              # e.g. "int ADD", "sfu", "trace int"
    unit: str            # INT, SP, DP, SFU, TENSOR
    latency: int | None
    interval: int | None
    stages: int | None

    @property
    def start(self) -> int | None:
        if self.latency is None or self.interval is None:
            return None
        return self.latency - self.interval

    @property
    def inside(self) -> bool:
        return (self.start is not None and self.stages is not None
                and 0 <= self.start < self.stages)


def _slots(opts: dict[str, str], name: str) -> list[int | None]:
    got = read_uints(opts.get(name, ""), ARITY[name])
    return got + [None] * (ARITY[name] - len(got))


def _max(*xs: int | None) -> int | None:
    return None if any(x is None for x in xs) else max(xs)


def pipelines(opts: dict[str, str]) -> dict[str, int | None]:
    """Stages of each unit's pipeline (set_pipeline_latency), None where a value it reads was
    never given."""
    lat = {c: _slots(opts, latency_option(c)) for c in SLOTS}
    return {"INT": _max(lat["int"][1], lat["int"][5]), "SP": lat["fp"][1], "DP": lat["dp"][1],
            "SFU": _max(lat["dp"][4], lat["sfu"][0]), "TENSOR": lat["tensor"][0]}


# PTX slot -> unit (set_opcode_and_latency and the scheduler's dispatch)
UNIT_OF = {("int", s): "INT" for s in ("ADD", "MAX", "MUL", "MAD", "SHFL")}
UNIT_OF.update({("fp", s): "SP" for s in ("ADD", "MAX", "MUL", "MAD")})
UNIT_OF.update({("dp", s): "DP" for s in ("ADD", "MAX", "MUL", "MAD")})
UNIT_OF.update({(c, "DIV"): "SFU" for c in ("int", "fp", "dp")})
UNIT_OF.update({("sfu", "SFU"): "SFU", ("tensor", "MMA"): "TENSOR"})
TRACE_UNIT_OF = {"int": "INT", "sp": "SP", "dp": "DP", "sfu": "SFU", "tensor": "TENSOR"}


def stages(opts: dict[str, str]) -> list[Stage]:
    """Every PTX instruction class's start stage in its unit under these options."""
    depth = pipelines(opts)
    out = []
    for cls, names in SLOTS.items():
        lat, ii = _slots(opts, latency_option(cls)), _slots(opts, initiation_option(cls))
        for i, slot in enumerate(names):
            unit = UNIT_OF[(cls, slot)]
            op = cls if len(names) == 1 else f"{cls} {slot}"
            out.append(Stage("ptx", op, unit, lat[i], ii[i], depth[unit]))
    return out


def trace_stages(opts: dict[str, str]) -> list[Stage]:
    """Each trace-mode unit class's start stage, in the pipelines the PTX options size."""
    depth = pipelines(opts)
    out = []
    for unit in TRACE_UNITS:
        lat, ii = _slots(opts, trace_option(unit))
        u = TRACE_UNIT_OF[unit]
        out.append(Stage("trace", f"trace {unit}", u, lat, ii, depth[u]))
    return out


#: fields of -gpgpu_dram_timing_opt (dram.cc) that are times in DRAM clocks, scaled with the
#: DRAM clock so that they keep their nanoseconds; the others are counts (nbk, nbkgrp) or the
#: column-to-column spacing of bursts (CCD, CCDL), which sets the bytes per DRAM clock that the
#: clock itself scales
DRAM_TIMES = ("RRD", "RCD", "RAS", "RP", "RC", "CL", "WL", "CDLR", "WR", "RTPL")


def scaled_dram_timing(text: str, factor: float) -> tuple[str, dict[str, tuple[int, int]]]:
    """-gpgpu_dram_timing_opt with its DRAM_TIMES multiplied by `factor` (rounded half up, at
    least 1); returns the string and field -> (old, new) of the changed fields."""
    fields, changed = [], {}
    for item in "".join(text.split()).strip('"').split(":"):
        name, _, val = item.partition("=")
        if name in DRAM_TIMES:
            new = max(1, int(float(val) * factor + 0.5))
            changed[name] = (int(val), new)
            val = str(new)
        fields.append(f"{name}={val}")
    return ":".join(fields), changed


def dram_bytes_per_clock(opts: dict[str, str]) -> float:
    """Bytes all DRAM channels move per DRAM clock: channels x per-controller x bus width x
    data/command ratio."""
    return (float(opts["-gpgpu_n_mem"]) * float(opts["-gpgpu_n_mem_per_ctrlr"])
            * float(opts["-gpgpu_dram_buswidth"]) * float(opts["-dram_data_command_freq_ratio"]))
