"""Many-BSP, an analytical model of a CUDA kernel's execution cycles (Riahi, Savadi and
Naghibzadeh; seed 002 is its supplementary report). A kernel is described by its BLOCK data
structure: per PTX instruction its issue, functional-unit, communication, overhead and sync
costs (the report's Tables 1-9 and 1-10), grouped into level-2 supersteps (costed by eq. 9) and
level-1 supersteps with iteration counts. ``predict`` applies eqs. (4)-(6) and (10)-(25) to the
level-1 supersteps and the device and launch parameters of Table 1-8. Pure Python, no GPU.
Equation numbers are the report's; docs/models.md states them and the reproduction of its
nine worked examples.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

#: FU_1..FU_4 of the BLOCK data structure (Table 1-10), in column order
FU_UNITS = ("SPs", "DPU", "SFU", "LDST")


# --- parameters (Table 1-8) ---------------------------------------------------------------

def G(g: tuple[float, ...] | list[float], i: int) -> float:
    """Eq. (26): latency of memory level i, G_i = g_0 + ... + g_i (g_i: the extra latency of
    level i over level i-1)."""
    if not 0 <= i < len(g):
        raise ValueError(f"level {i} outside g_0..g_{len(g) - 1}")
    return float(sum(g[:i + 1]))


def gaps_from_latencies(*latencies: float) -> tuple[float, ...]:
    """The g_i of eq. (26) from measured per-level latencies (L1, L2, DRAM, ...): g_0 = G_0,
    g_i = G_i - G_{i-1}."""
    return tuple(float(b - a) for a, b in zip((0.0,) + latencies[:-1], latencies))


@dataclass(frozen=True)
class Device:
    """Device half of Table 1-8. ``g``: g_0..g_{d-1}, mem_lat = G_{d-1} (eq. 26; G_2 with the
    report's d = 3). ``mu``: the per-device factor of eqs. (24)/(25); the report gives 3.36
    (GTX 760), 1.93 (940MX) and 3.49 (GTX 1070) and does not derive it in the supplement."""
    name: str
    n_sm: int
    n_ws: int
    g: tuple[float, ...]
    warp_lnch_ovh: float
    block_lnch_ovh: float
    mu: float
    issue_cycle: float = 1.0
    warp_size: int = 32
    max_thread_per_sm: int = 2048
    shmem_size: int = 48 * 1024
    n_reg: int = 65536
    n_c: int = 0      # scalar cores per SM (informational)
    n_du: int = 0     # dispatch units per SM (informational)
    n_fu: int = 4     # functional-unit kinds: SPs, DPU, SFU, LDST

    @property
    def d(self) -> int:
        return len(self.g)

    @property
    def mem_lat(self) -> float:
        return G(self.g, len(self.g) - 1)

    @classmethod
    def from_model_params(cls, params: dict, *, mu: float, **others) -> "Device":
        """A Device from the dict ``gpuchar-model-params`` exports (launch.model_parameters):
        launch overheads, issue cycle, L1/L2/DRAM latencies (-> g), SM and scheduler counts.
        What the suite does not measure (mu, occupancy limits, ...) comes in ``others``."""
        p = params.get("parameters", {})

        def value(name: str) -> float:
            v = (p.get(name) or {}).get("value")
            if v is None:
                raise ValueError(f"model parameter {name!r} not measured in this run: "
                                 f"{(p.get(name) or {}).get('reason', 'absent')}")
            return float(v)

        if not params.get("n_SM"):
            raise ValueError("the exported parameters carry no SM count (n_SM)")
        g = gaps_from_latencies(value("l1_lat"), value("l2_lat"), value("mem_lat"))
        kw = dict(name=params.get("device") or "", n_sm=int(params["n_SM"]),
                  n_ws=int(params["n_ws"]), g=g, warp_lnch_ovh=value("warp_lnch_ovh"),
                  block_lnch_ovh=value("block_lnch_ovh"), issue_cycle=value("issue_cycle"),
                  warp_size=int(params.get("warp_size", 32)), mu=mu)
        kw.update(others)
        return cls(**kw)


@dataclass(frozen=True)
class Launch:
    """Launch half of Table 1-8 for one kernel: n_b blocks of n_t threads, registers per thread
    and shared memory per block (0: no limit from it); per thread on the executed path, l
    instructions of which l_c computational, l_m global-memory accesses and l_b barriers; h:
    PTX instructions in the kernel."""
    n_b: int
    n_t: int
    l_c: int
    l_m: int
    reg_per_thread: int = 0
    shmem_per_block: int = 0
    h: int = 0
    l: int = 0
    l_b: int = 0


# --- the BLOCK description (Tables 1-9, 1-10) ---------------------------------------------

@dataclass(frozen=True)
class Instruction:
    """One row of the PTX analysis (Table 1-9): the unit that runs it, n_fu^i (its lanes
    available to one warp scheduler), T_i (results per clock per scheduler), n_ma^i (memory
    transactions per warp access), computational and communication latency, and the report's
    dependence vectors u (instruction that first uses the result), d and p, carried as given."""
    index: int
    ptx: str
    unit: str
    n_fu: int
    t: int
    lat_comp: float = 0.0
    lat_comm: float = 0.0
    n_ma: int = 0
    u: int = 0
    d: int | None = 0
    p: int | None = 0


@dataclass(frozen=True)
class BlockRow:
    """One row of the BLOCK data structure (Table 1-10): issue cycles, busy cycles on FU_1..FU_4
    (SPs, DPU, SFU, LDST), warp_size/T_i, communication, barrier overhead and sync cycles."""
    index: int
    op: str
    issue: float
    fu: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    per_warp: float = 1.0
    comm: float = 0.0
    ovh: float = 0.0
    sync: float = 0.0


@dataclass(frozen=True)
class Superstep:
    """<start ~ end, comp, comm, ovh> of a superstep (instruction numbers inclusive) and, for a
    level-1 superstep, its iteration count t_i."""
    start: int
    end: int
    comp: float
    comm: float = 0.0
    ovh: float = 0.0
    iterations: int = 1


@dataclass(frozen=True)
class Block:
    """A kernel's BLOCK description as ``predict`` reads it: the level-1 supersteps and
    tail_comm, the communication of the block's final write-back, which no later computation
    waits for and which block_comm_delta leaves out (the supplement does not define the delta;
    in all nine worked examples it is block_comm minus the last level-2 superstep's
    communication, the final st.global)."""
    supersteps: tuple[Superstep, ...]
    tail_comm: float = 0.0
    level2: tuple[Superstep, ...] = field(default=(), compare=False)


_STEP = re.compile(r"<\s*(\d+)\s*~\s*(\d+)\s*,\s*([\d.]+)\s*,\s*([\d.]+)\s*,\s*([\d.]+)\s*>"
                   r"(?:\s*x\s*(\d+))?")


def parse_supersteps(text: str) -> tuple[Superstep, ...]:
    """Supersteps in the report's notation, ``<start~end,comp,comm,ovh>`` each, an iteration
    count appended as ``x<t>`` (default 1)."""
    return tuple(Superstep(int(a), int(b), float(c), float(m), float(o), int(t or 1))
                 for a, b, c, m, o, t in _STEP.findall(text))


def warps_per_scheduler(n_t: int, warp_size: int, n_ws: int) -> int:
    """Eq. (6): w, the warps of one block per warp scheduler."""
    return math.ceil(n_t / (warp_size * n_ws))


def issue_cost(ins: Instruction, w: int, issue_cycle: float = 1.0, warp_size: int = 32) -> float:
    """Issue column of Table 1-10 as the worked examples fill it: w warps, each issued over
    warp_size / n_fu^i cycles of issue_cycle."""
    return w * issue_cycle * warp_size / ins.n_fu


def comm_cost(ins: Instruction, w: int) -> float:
    """comm column of Table 1-10 as the worked examples fill it: w x n_ma^i x latency."""
    return w * ins.n_ma * ins.lat_comm


def dependent_fu_cost(ins: Instruction, w: int, warp_size: int = 32) -> float:
    """An FU entry of the form 'latency + k' (the result is waited for): the computational
    latency plus (w x n_ma - 1) further warp passes of warp_size / T_i cycles each. Whether an
    entry takes this form or only the unit occupancy is the report's hand analysis (step 3)."""
    return ins.lat_comp + (w * max(ins.n_ma, 1) - 1) * warp_size / ins.t


def sync_excess(rows: dict[int, BlockRow], l: int, i: int, j: int, x: int) -> float:
    """Eq. (8): block[i].sync for instruction i on FU x (0-based column) whose result
    instruction j uses, in a superstep starting at l; eq. (7) holds (no sync) when <= 0."""
    busy = sum(rows[k].fu[x] for k in range(l, i + 1))
    issued = sum(rows[k].issue for k in range(l + 1, j))
    others = max((sum(rows[k].fu[y] for k in range(l, j - 1))
                  for y in range(len(FU_UNITS)) if y != x), default=0.0)
    return busy - (issued + others)


def superstep_comp(rows: dict[int, BlockRow], i: int, j: int) -> float:
    """Eq. (9): cost of the level-2 superstep i..j: the first instruction's issue, then the
    longer of the remaining issues and each unit's busy cycles."""
    tail_issue = sum(rows[k].issue for k in range(i + 1, j + 1))
    busy = max(sum(rows[k].fu[q] for k in range(i, j + 1)) for q in range(len(FU_UNITS)))
    return rows[i].issue + max(tail_issue, busy)


def level2_superstep(rows: dict[int, BlockRow], start: int, end: int) -> Superstep:
    """A level-2 superstep of BLOCK rows start..end: comp by eq. (9), comm and ovh summed."""
    span = [rows[k] for k in range(start, end + 1)]
    return Superstep(start, end, superstep_comp(rows, start, end),
                     sum(r.comm for r in span), sum(r.ovh for r in span))


def level1_from_level2(bounds: list[tuple[int, int, int]],
                       level2: list[Superstep]) -> tuple[Superstep, ...]:
    """Level-1 supersteps (start, end, iterations) as sums of the level-2 supersteps inside."""
    out = []
    for start, end, t in bounds:
        inner = [s for s in level2 if start <= s.start and s.end <= end]
        out.append(Superstep(start, end, sum(s.comp for s in inner), sum(s.comm for s in inner),
                             sum(s.ovh for s in inner), t))
    return tuple(out)


# --- the earlier warps_need forms the report lists (eqs. 1-3) -----------------------------

def warps_need_eq1(mem_lat: float, inst_time: float, alpha: float) -> float:
    """Eq. (1): mem_lat / (inst_time x alpha)."""
    return mem_lat / (inst_time * alpha)


def warps_need_eq2(mem_lat: float, inst_time: float, alpha: float) -> float:
    """Eq. (2): mem_lat / (inst_time x (alpha + 1)) + 1."""
    return mem_lat / (inst_time * (alpha + 1)) + 1


def warps_need_eq3(mem_lat: float, alu_thru: float, alpha: float, alu_lat: float) -> float:
    """Eq. (3): mem_lat x alu_thru / alpha + alu_lat x alu_thru."""
    return mem_lat * alu_thru / alpha + alu_lat * alu_thru


# --- the prediction (eqs. 4-6, 10-25, 27) -------------------------------------------------

@dataclass(frozen=True)
class Prediction:
    """Every intermediate of the report's step 5, named as in the report, and the cycles."""
    w: int
    parallel_comp: float
    block_bar_ovh: float
    block_comm: float
    block_comm_delta: float
    COMP: float
    warp_comp: float
    warp_comm_delta: float
    warps_need: int
    max_sum_overlapped: float
    min_nonoverlapped: int
    overlapped: float
    nonoverlapped: float
    block_exec_cycle: float
    comp: float
    novlp: float
    rho: int
    K: float
    tau: int
    branch: str
    cycles: float


def occupancy(device: Device, launch: Launch) -> int:
    """Eq. (21): rho, blocks resident per SM; a zero register or shared-memory demand sets no
    limit."""
    limits = [device.max_thread_per_sm // launch.n_t]
    if launch.reg_per_thread:
        limits.append(device.n_reg // (launch.n_t * launch.reg_per_thread))
    if launch.shmem_per_block:
        limits.append(device.shmem_size // launch.shmem_per_block)
    return max(1, min(limits))


def warps_needed(n_ws: int, warp_comm_delta: float, warp_comp: float,
                 l_c: int, l_m: int) -> int:
    """Eq. (15): warps per SM that hide the communication between two global accesses."""
    if l_m <= 1 or warp_comp <= 0:
        raise ValueError(f"eq. 15 needs l_m > 1 and warp_comp > 0 (l_m={l_m}, "
                         f"warp_comp={warp_comp})")
    return n_ws * (math.ceil(warp_comm_delta * l_c / (warp_comp * (l_m - 1))) + 1)


def _block_sums(block: Block) -> tuple[float, float, float]:
    """Eqs. (10)-(12): parallel_comp, block_bar_ovh, block_comm over the level-1 supersteps."""
    ss = block.supersteps
    return (sum(s.iterations * s.comp for s in ss), sum(s.iterations * s.ovh for s in ss),
            sum(s.iterations * s.comm for s in ss))


def predict(device: Device, launch: Launch, block: Block) -> Prediction:
    """Kernel execution cycles by eqs. (4)-(6), (10)-(25), all blocks alike (eqs. 18-20 then
    average identical profiles); the returned Prediction carries every intermediate."""
    w = warps_per_scheduler(launch.n_t, device.warp_size, device.n_ws)
    parallel_comp, bar_ovh, block_comm = _block_sums(block)
    comm_delta = block_comm - block.tail_comm
    COMP = w * device.warp_lnch_ovh + parallel_comp                          # eq. 5
    warp_comp, warp_comm_delta = COMP / w, comm_delta / w
    need = warps_needed(device.n_ws, warp_comm_delta, warp_comp, launch.l_c, launch.l_m)
    max_ovl = min(block_comm, w * (w - 1) / 2 + (COMP - w) * (w - 1))       # eq. 13
    min_novl = math.floor((block_comm - max_ovl) / w)                        # eq. 14
    share = min(1.0, w * device.n_ws / need)
    overlapped = share * comm_delta / w                                      # eq. 16
    novl = min(block_comm / w, device.mem_lat + comm_delta / w - overlapped)  # eq. 17
    block_exec = device.block_lnch_ovh + bar_ovh + novl + COMP               # eq. 4
    comp, novlp = COMP + bar_ovh, novl                                       # eqs. 19, 20
    rho = occupancy(device, launch)                                          # eq. 21
    K = launch.n_b / (device.n_sm * rho)                                     # eq. 22
    tau = math.floor(novlp / comp) + 1                                       # eq. 23
    cycles = (device.block_lnch_ovh
              + launch.n_b / device.n_sm * comp / min(device.mu, (1 + rho) / 2) + novlp / 2)
    branch = "24"
    if rho < tau:                                                            # eq. 25
        cycles += (K - 1) * (tau - rho) / (tau - 1) * novlp
        branch = "25"
    return Prediction(w, parallel_comp, bar_ovh, block_comm, comm_delta, COMP, warp_comp,
                      warp_comm_delta, need, max_ovl, min_novl, overlapped, novl, block_exec,
                      comp, novlp, rho, K, tau, branch, cycles)


def average_profile(profiles: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Eqs. (18)-(20): from per-block <COMP_i, nonoverlapped_i, block_bar_ovh_i>, the mean
    comp (COMP + barrier overhead) and the mean novlp."""
    n = len(profiles)
    return (sum(c + b for c, _, b in profiles) / n, sum(v for _, v, _ in profiles) / n)


def error_percent(measured: float, predicted: float) -> float:
    """Eq. (27): |measured - predicted| / measured x 100."""
    return abs(measured - predicted) / measured * 100.0


# --- what each term of eqs. (24)/(25) contributes ----------------------------------------

@dataclass(frozen=True)
class Terms:
    """The summands of eq. (24) (and eq. 25's per-wave one) for a prediction: the first
    block's launch, the blocks' computation over the SMs, the non-overlapped communication
    charged once (novlp / 2) and, where rho < tau, per further wave; ``per_block`` is the
    computation term's cost of one more block on an SM, comp / min(mu, (1 + rho) / 2)."""
    launch: float
    computation: float
    communication: float
    waves: float
    per_block: float
    divisor: float

    @property
    def total(self) -> float:
        return self.launch + self.computation + self.communication + self.waves

    def shares(self) -> dict[str, float]:
        t = self.total
        return {k: getattr(self, k) / t for k in ("launch", "computation", "communication",
                                                  "waves")}


def terms(device: Device, launch: Launch, p: Prediction) -> Terms:
    """Eq. (24)/(25) split into its terms (their sum is p.cycles)."""
    div = min(device.mu, (1 + p.rho) / 2)
    waves = ((p.K - 1) * (p.tau - p.rho) / (p.tau - 1) * p.novlp) if p.branch == "25" else 0.0
    return Terms(device.block_lnch_ovh, launch.n_b / device.n_sm * p.comp / div, p.novlp / 2,
                 waves, p.comp / div, div)
