"""The numerics rows as data: one mma.sync kernel per shape and type (``MmaRow``), and the
rows of seed 004's Tables 12-15 and Figs 19-20 and of Fasi et al.'s questions, each naming
the kernel it runs on, its characteristic key and its test id."""
from __future__ import annotations

from dataclasses import dataclass

from ...core import archs


@dataclass(frozen=True)
class MmaRow:
    """One mma.sync kernel: D = A*B + C for one shape and type, one warp per tile."""
    name: str            # "bf16.m16n8k16.f32"
    in_type: str         # A/B type (reference.TYPES)
    c_type: str          # C/D type: "f32" or "f16"
    m: int
    n: int
    k: int
    min_arch: int
    isa: str             # lowest PTX ISA version with this mma

    @property
    def shape(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"

    @property
    def entry(self) -> str:
        return "tc_" + self.name.replace(".", "_")

    @property
    def ptx_types(self) -> str:
        t = self.in_type
        return f"{self.c_type}.{t}.{t}.{self.c_type}"

    @property
    def instruction(self) -> str:
        return f"mma.sync.aligned.{self.shape}.row.col.{self.ptx_types}"

    def unsupported(self, arch: str) -> str | None:
        """Why `arch` cannot run this mma (a skip reason), or None."""
        n = archs.number(arch)
        if n < 70:
            return f"{arch} has no tensor cores"
        if n < self.min_arch:
            what = {75: "mma.m16n8k8 with f16 needs sm_75+",
                    80: f"mma.{self.shape} {self.in_type} needs sm_80+",
                    89: f"FP8 ({self.in_type}) mma.sync needs sm_89+"}[self.min_arch]
            return f"{arch}: {what}" + (" (sm_70 has only mma.m8n8k4)" if n == 70 else "")
        return None


def _row(t, c, m, n, k, arch, isa) -> MmaRow:
    return MmaRow(f"{t}.m{m}n{n}k{k}.{c}", t, c, m, n, k, arch, isa)


MMA = {r.name: r for r in [
    _row("f16", "f32", 16, 8, 16, 80, "7.0"),
    _row("f16", "f16", 16, 8, 16, 80, "7.0"),
    _row("bf16", "f32", 16, 8, 16, 80, "7.0"),
    _row("tf32", "f32", 16, 8, 8, 80, "7.0"),
    _row("f16", "f32", 16, 8, 8, 75, "6.5"),      # chain matmul (m16n8k8 as in the paper)
    _row("bf16", "f32", 16, 8, 8, 80, "7.0"),
    _row("e4m3", "f32", 16, 8, 32, 89, "8.4"),
    _row("e5m2", "f32", 16, 8, 32, 89, "8.4"),
]}


def mma(name: str) -> MmaRow:
    try:
        return MMA[name]
    except KeyError:
        raise ValueError(f"unknown tensor-core kernel {name!r}; one of {', '.join(MMA)}") \
            from None


# The kernel each question uses per "type row" of the tables.
ELEMENTWISE = {"bf16-f32": "bf16.m16n8k16.f32", "f16-f32": "f16.m16n8k16.f32",
               "f16-f16": "f16.m16n8k16.f16", "tf32-f32": "tf32.m16n8k8.f32",
               "e4m3-f32": "e4m3.m16n8k32.f32", "e5m2-f32": "e5m2.m16n8k32.f32"}
# The chain matmul multiplies 16x8 by 8x8 as the paper's m16n8k8 does. FP16/BF16 run it on
# m16n8k16 with the upper half of k zero (zero products change no sum); TF32 uses its own
# m16n8k8. (The f16/bf16 chains moved to m16n8k16 while the m16n8k8 f16/bf16 results seemed
# not to follow the PTX ISA layout on sm_90; that was the harness: docs/numerics.md.)
CHAIN = {"tf32": "tf32.m16n8k8.f32", "bf16": "bf16.m16n8k16.f32", "f16": "f16.m16n8k16.f32"}
CHAIN_K = 8

# (arch, row) -> a layout anomaly that must keep reproducing: an expected failure while it
# does, a failure once it stops (the entry must go). None known: the m16n8k8 f16/bf16 entries
# once here were the harness's, one-register B fragments uploaded in Fortran order
# (docs/numerics.md, finding 2).
KNOWN_LAYOUT_ANOMALIES: dict[tuple[str, str], str] = {}


# --- seed 004 section 8.1, Tables 12-15: element-wise profiling -----------------------------

ELEMENT_SAMPLES = 16384
ELEMENT_SEED = 2023
FIG16 = {"mul": "16a", "inner": "16b", "acc": "16c"}    # op -> the panel of Fig 16 it isolates
INITS = ("low", "fp32")


@dataclass(frozen=True)
class ElementRow:
    """One cell of Tables 12-15: an operation of D = A*B + C (op), the inputs initialised in
    the low-precision type or in FP32 (init), and the reference the error is taken against
    (col: the CPU FP32 computation, or for FP16 C/D fp16 of it)."""
    combo: str           # "bf16-f32": input type - C/D type
    init: str            # "low" or "fp32"
    op: str              # "mul", "inner", "acc"
    col: str             # "vs_fp32" or "vs_fp32cvt16"
    low: str             # how the id names low-precision init ("bf16", ..., "fp8")
    several: bool = False  # the table has several combos: the id names the combo

    @property
    def mma(self) -> MmaRow:
        return mma(ELEMENTWISE[self.combo])

    @property
    def id(self) -> str:
        text = f"{self.op}-init_{self.init if self.init == 'fp32' else self.low}-{self.col}"
        return text + (f"-{self.combo}" if self.several else "")

    @property
    def key(self) -> str:
        t = self.combo.split("-")[0]
        key = (f"numerics.elementwise.{self.combo.replace('-', '_')}."
               f"init_{t if self.init == 'low' else 'fp32'}.{self.op}")
        return key + ("" if self.combo != "f16-f16" else f".{self.col}")

    @property
    def fig(self) -> str:
        return FIG16[self.op]


def element_rows(combos: tuple[str, ...], low: str,
                 columns: tuple[str, ...] = ("vs_fp32",)) -> list[ElementRow]:
    return [ElementRow(c, init, op, col, low, len(combos) > 1)
            for col in columns for init in INITS for op in FIG16 for c in combos]


TABLE_12 = element_rows(("bf16-f32",), "bf16")
TABLE_13 = element_rows(("f16-f32",), "f16")
TABLE_14 = element_rows(("f16-f16",), "f16", ("vs_fp32", "vs_fp32cvt16"))
TABLE_15 = element_rows(("tf32-f32",), "tf32")
FP8_ELEMENTWISE = element_rows(("e4m3-f32", "e5m2-f32"), "fp8")


# --- the questions of Fasi et al. (2021) ----------------------------------------------------

FASI_COMBOS = ("f16-f32", "f16-f16", "bf16-f32", "tf32-f32", "e4m3-f32", "e5m2-f32")
FASI_QUESTIONS = ("native_tensor_core", "products_exact", "subnormal_inputs",
                  "subnormal_outputs", "rounding_c_rn", "rounding_c_rz", "rounding_products_rn",
                  "rounding_products_rz", "extra_bits", "block_size", "order_invariant",
                  "nan_propagates", "inf_propagates", "inf_times_zero_nan", "inf_minus_inf_nan",
                  "overflow_to_inf", "max_product_exact")


@dataclass(frozen=True)
class FasiRow:
    """One answer of one kernel: a question of Fasi et al. asked of a type combination."""
    combo: str
    question: str

    @property
    def mma(self) -> MmaRow:
        return mma(ELEMENTWISE[self.combo])

    @property
    def id(self) -> str:
        return f"{self.combo}-{self.question}"

    @property
    def key(self) -> str:
        return f"numerics.fasi.{self.combo.replace('-', '_')}.{self.question}"

    @property
    def asked(self) -> tuple[str, str]:
        """(the answer it reads, the rounding mode it tests or ''): 'rounding_c_rn' reads
        the answer 'rounding_c' and asks whether 'rn' is among its consistent modes."""
        if self.question.startswith("rounding"):
            base, _, mode = self.question.rpartition("_")
            return base, mode
        return self.question, ""


FASI = [FasiRow(c, q) for c in FASI_COMBOS for q in FASI_QUESTIONS]


# --- seed 004 section 8.2, Figs 19-20: chain matrix multiplication --------------------------

CHAIN_LINKS = 24
CHAIN_TRIALS = 1000
CHAIN_SEED = 2023
CHAIN_REPORTED = (1, 4, 8)        # chain lengths recorded as characteristics
CHAIN_TYPES = ("tf32", "bf16", "f16")


@dataclass(frozen=True)
class ChainRow:
    """One curve of Fig 20: a type, initialised in itself ('low') or in FP32."""
    in_type: str
    init: str

    @property
    def mma(self) -> MmaRow:
        return mma(CHAIN[self.in_type])

    @property
    def id(self) -> str:
        return f"{self.in_type}-init_{self.in_type if self.init == 'low' else 'fp32'}"

    @property
    def label(self) -> str:
        return f"numerics.chain.{self.in_type}.init_" + \
            (self.in_type if self.init == "low" else "fp32")


FIG_20 = [ChainRow(t, i) for t in CHAIN_TYPES for i in INITS]
