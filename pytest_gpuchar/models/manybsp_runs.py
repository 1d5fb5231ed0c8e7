"""Many-BSP predictions of a gpuchar run, read back: each ``bsp.<kernel>.<size>`` row's
measured cycles and the model's inputs (its ``data``: device, launch, level-1 supersteps,
parameters with their sources), the prediction made again from those inputs, its terms, where
each parameter came from (this run or the expectation files), and the same prediction under
other inputs (``variant``) to locate the term that fails. docs/models.md's Hopper tables are
``results_table`` and ``knn_table`` of the committed runs (a unit test fails when they drift).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from . import manybsp as mb

RUN = "this run"


@dataclass(frozen=True)
class Row:
    """One kernel and size of a run."""
    kernel: str
    size: str
    measured: float
    stored: float                  # the predicted cycles the run recorded
    device: mb.Device
    launch: mb.Launch
    block: mb.Block
    parameters: dict               # name -> {value, from, source}
    l2_resident: float | None      # the run's prediction with mem_lat = the L2 latency
    footprint: int | None
    measured_data: dict

    def predict(self) -> mb.Prediction:
        return mb.predict(self.device, self.launch, self.block)

    @property
    def error(self) -> float:
        """Signed eq. (27): (predicted - measured) / measured, of the recorded prediction."""
        return (self.stored - self.measured) / self.measured

    def sources(self) -> tuple[list[str], dict[str, str]]:
        """The parameters taken from this run, and those from the expectation files (each with
        its file:line)."""
        return parameter_sources(self.parameters)


def parameter_sources(parameters: dict) -> tuple[list[str], dict[str, str]]:
    """Split a prediction's Table 1-8 parameters (``data.parameters``: name -> {value, from,
    source}) into those this run measured ("this session") and those the expectation files
    gave (name -> file:line and how)."""
    run, files = [], {}
    for name, p in parameters.items():
        src = p.get("source")
        if not src or p.get("value") is None:
            continue
        if src == "this session":
            run.append(name)
        else:
            files[name] = src
    return run, files


def provenance_line(parameters: dict) -> str:
    """One line for a prediction's method or report: which parameters came from where."""
    run, files = parameter_sources(parameters)
    parts = [f"from this run: {', '.join(run) or 'none'}"]
    if files:
        parts.append("from the expectation files: " + ", ".join(
            f"{k} ({v})" for k, v in files.items()))
    return "; ".join(parts)


def _device(d: dict) -> mb.Device:
    return mb.Device("", n_sm=int(d["n_sm"]), n_ws=int(d["n_ws"]), g=tuple(d["g"]),
                     warp_lnch_ovh=d["warp_lnch_ovh"], block_lnch_ovh=d["block_lnch_ovh"],
                     mu=d["mu"], issue_cycle=d["issue_cycle"],
                     max_thread_per_sm=int(d["max_thread_per_sm"]),
                     shmem_size=int(d["shmem_size"]), n_reg=int(d["n_reg"]))


def rows(report: dict, arch: str = "sm_90") -> list[Row]:
    """The bsp rows of a results report (as read_report gives it), in the report's order."""
    by_key = {r["key"]: r for r in report.get("results", []) if r.get("arch") == arch}
    out = []
    for key, r in by_key.items():
        if not (key.startswith("bsp.") and key.endswith(".predicted_cycles")):
            continue
        _, kernel, size, _ = key.split(".")
        got = by_key.get(f"bsp.{kernel}.{size}.measured_cycles")
        if got is None or got.get("value") is None or r.get("value") is None:
            continue
        d = r["data"]
        block = mb.Block(tuple(mb.Superstep(int(a), int(b), c, m, o, int(t))
                               for a, b, c, m, o, t in d["level1"]), tail_comm=d["tail_comm"])
        out.append(Row(kernel, size, float(got["value"]), float(r["value"]),
                       _device(d["device"]), mb.Launch(**d["launch"]), block,
                       d.get("parameters", {}), d.get("predicted_cycles_l2_resident"),
                       (got.get("data") or {}).get("footprint_bytes"), got.get("data") or {}))
    return out


def variant(row: Row, *, mem_lat: float | None = None, launch_term: bool = True,
            mu: float | None = None) -> float:
    """The row's prediction under other inputs: ``mem_lat`` (every global access at this
    latency: the communication of the level-1 supersteps, all DRAM accesses at the run's
    mem_lat, scaled; g_2 shrunk so that G_2 = mem_lat), without the first block's launch
    (eq. 24's block_lnch_ovh, which the stamps' span does not contain), or another ``mu``."""
    dev, block = row.device, row.block
    if mem_lat is not None:
        f = mem_lat / dev.mem_lat
        block = mb.Block(tuple(dataclasses.replace(s, comm=s.comm * f) for s in block.supersteps),
                         tail_comm=block.tail_comm * f)
        g = list(dev.g)
        g[-1] = mem_lat - sum(g[:-1])
        dev = dataclasses.replace(dev, g=tuple(g))
    if not launch_term:
        dev = dataclasses.replace(dev, block_lnch_ovh=0.0)
    if mu is not None:
        dev = dataclasses.replace(dev, mu=mu)
    return mb.predict(dev, row.launch, block).cycles


def pct(pred: float, got: float) -> str:
    return f"{100 * (pred - got) / got:+.1f}%"


def marginal(a: Row, b: Row) -> float:
    """Measured cycles one more block costs an SM between two sizes of a kernel."""
    return (b.measured - a.measured) / ((b.launch.n_b - a.launch.n_b) / b.device.n_sm)


def _size_label(kernel: str, size: str) -> str:
    if kernel == "knn":
        n = int(size)
        return f"2^{int(math.log2(n))}" if n & (n - 1) == 0 else f"{n:,}"
    dims = size.split("x")
    if kernel == "mm" and len(set(dims)) == 1:
        return f"{dims[0]}^3"
    return " x ".join(dims)


KERNELS = {"hotspot": "Hotspot", "knn": "KNN", "mm": "MM"}


def results_table(boards: dict[str, list[Row]]) -> str:
    """docs/models.md's results table: per kernel and size, per board: measured, predicted,
    error (the run's), the L2-resident variant's error, and the parameters the prediction took
    from the expectation files instead of the run."""
    names = list(boards)
    head = "| Kernel | Size | " + " | ".join(
        f"{b} measured | {b} predicted | {b} error | (L2-resident) | {b} from files"
        for b in names) + " |"
    out = [head, "|---|---|" + "---:|---:|---:|---:|---|" * len(names)]
    for i, row in enumerate(boards[names[0]]):
        cells = [KERNELS[row.kernel], _size_label(row.kernel, row.size)]
        for b in names:
            r = boards[b][i]
            files = sorted(r.sources()[1])
            l2 = pct(r.l2_resident, r.measured) if r.l2_resident else "-"
            cells += [f"{r.measured:,.0f}", f"{r.stored:,.0f}", pct(r.stored, r.measured), l2,
                      ", ".join(files) or "none"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def knn_table(boards: dict[str, list[Row]]) -> str:
    """docs/models.md's KNN table: per board and size, the terms of eq. (24), the measured
    cycles per block per SM between sizes against the model's, and the prediction under each
    candidate input (before: the run's; the L2 latency, the run's own L2-resident prediction;
    without the first block's launch; the mu that the size would need)."""
    out = ["| Board | Records | Measured | Predicted (error) | launch + computation + "
           "communication | cycles per extra block per SM: measured / model | mem_lat = L2 "
           "| without launch term | mu needed |",
           "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for b, rs in boards.items():
        knn = [r for r in rs if r.kernel == "knn"]
        for i, r in enumerate(knn):
            p = r.predict()
            t = mb.terms(r.device, r.launch, p)
            need = _mu_needed(r, p, t)
            step = f"{marginal(knn[i - 1], r):.0f} / {t.per_block:.0f}" if i else "-"
            out.append(
                f"| {b} | {_size_label('knn', r.size)} | {r.measured:,.0f} | "
                f"{r.stored:,.0f} ({pct(r.stored, r.measured)}) | {t.launch:.0f} + "
                f"{t.computation:,.0f} + {t.communication:.0f} | {step} | "
                f"{pct(r.l2_resident, r.measured) if r.l2_resident else '-'} | "
                f"{pct(variant(r, launch_term=False), r.measured)} | {need} |")
    return "\n".join(out) + "\n"


def _mu_needed(r: Row, p: mb.Prediction, t: mb.Terms) -> str:
    """The eq. (24) divisor that would make the prediction exact (none below 1: an overlap
    factor under 1 would make blocks slower than one after another)."""
    rest = r.measured - t.launch - t.communication - t.waves
    if rest <= 0:
        return "none (launch + communication alone exceed it)"
    need = r.launch.n_b / r.device.n_sm * p.comp / rest
    return f"{need:.2f}" if need >= 1 else f"{need:.2f} (< 1: none)"
