"""Blackwell datacenter tensor cores, static: what each `tcgen05.mma` kind becomes on sm_100a /
sm_103a (issue 18, item 2). A probe per kind: Tensor Memory allocated, the two shared-memory
descriptors, the instruction descriptor and (block-scaled kinds) the scale columns' addresses
loaded before the clock; timed: one `tcgen05.mma.cta_group::1` and its `tcgen05.commit` to an
mbarrier, unguarded (ptxas turns a guard into uniform predicates around the single-thread
elect loops it puts around each). The region must hold exactly that mma's UTC*MMA opcode and
one UTCBAR, no other tensor-memory instruction (the allocation stays outside). Static only: no B200 was lent, and a
timed tcgen05 row needs valid descriptors and a completion wait, which this probe does not
have."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ....core import archs, sass
from ....core.probe import NotApplicable, Probe
from ....core.ptx import Kernel
from ....core.verify import ProbeInvalid, Verdict

TMEM_COLUMNS = 64          # allocated: accumulator at +0, block scales at +32 / +48


@dataclass(frozen=True)
class Tcgen05Row:
    name: str
    kind: str                 # the .kind qualifier (with block_scale / scale_vec)
    sass: str                 # the mma opcode it must become
    scaled: bool = False      # block-scaled: scale-A / scale-B columns in Tensor Memory
    sass_103: str = ""        # the opcode on sm_103a where it differs
    not_on_103: str = ""      # why sm_103a has no such kind

    def sass_at(self, arch: str) -> str:
        return self.sass_103 if archs.number(arch) == 103 and self.sass_103 else self.sass


ROWS = (
    Tcgen05Row("f16", "kind::f16", "UTCHMMA"),
    Tcgen05Row("tf32", "kind::tf32", "UTCHMMA"),
    Tcgen05Row("f8f6f4", "kind::f8f6f4", "UTCQMMA"),
    Tcgen05Row("i8", "kind::i8", "UTCIMMA",
               not_on_103="ptxas 13.5: Feature '.kind::i8' not supported on .target 'sm_103a' "
               "(B300 has no INT8 tcgen05.mma)"),
    Tcgen05Row("mxf8f6f4", "kind::mxf8f6f4.block_scale", "UTCQMMA", scaled=True),
    Tcgen05Row("mxf4nvf4.4x", "kind::mxf4nvf4.block_scale.scale_vec::4X", "UTCOMMA.4X",
               scaled=True, sass_103="UTCOMMA.BLOCK16"),
)
# tensor-memory instructions (allocation, mma, commit, copies): only the mma and the commit
# may be timed
TMEM_OPS = ("UTC",)


def target(arch: str) -> str:
    """The arch-specific target tcgen05 needs (sm_100a, sm_103a); NotApplicable elsewhere."""
    if archs.number(arch) not in (100, 103):
        raise NotApplicable(f"static: tcgen05 is sm_100a/sm_103a only ({arch} has none)")
    return arch if arch.endswith("a") else arch + "a"


def entry(row: Tcgen05Row) -> str:
    return "tc05_" + row.name.replace(".", "_")


def kernel(row: Tcgen05Row) -> str:
    e = entry(row)
    scales = ", [%ts_a], [%ts_b]" if row.scaled else ""
    return Kernel(
        entry=e, params=[".param .u64 out_param", ".param .u64 in_param"], guard=False,
        preamble=[f".shared .align 16 .b32 {e}_slot;", f".shared .align 8 .b64 {e}_bar;"],
        decls=[".reg .b64 %out, %in, %t0, %t1, %dt, %adesc, %bdesc;",
               ".reg .b32 %tm, %ts_a, %ts_b, %idesc, %slot, %bar;",
               ".reg .pred %never, %acc;"],
        setup=["ld.param.u64 %out, [out_param];", "ld.param.u64 %in, [in_param];",
               "ld.global.u64 %adesc, [%in];", "ld.global.u64 %bdesc, [%in+8];",
               "ld.global.u32 %idesc, [%in+16];", f"mov.u32 %slot, {e}_slot;",
               f"mov.u32 %bar, {e}_bar;",
               f"tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%slot], "
               f"{TMEM_COLUMNS};",
               f"ld.shared.u32 %tm, [{e}_slot];", "add.u32 %ts_a, %tm, 32;",
               "add.u32 %ts_b, %tm, 48;", "setp.ne.u32 %acc, %idesc, 0;"],
        body=[f"tcgen05.mma.cta_group::1.{row.kind} [%tm], %adesc, %bdesc, %idesc{scales}, "
              f"%acc;",
              "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%bar];"],
        after=["sub.s64 %dt, %t1, %t0;", "st.global.u64 [%out], %dt;",
               f"tcgen05.dealloc.cta_group::1.sync.aligned.b32 %tm, {TMEM_COLUMNS};",
               "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;"]).render()


@dataclass
class Tcgen05Probe(Probe):
    """One tcgen05.mma and its commit between the clock reads."""
    row: Tcgen05Row | None = None

    def verify_regions(self, regions: dict[int, list[sass.Instr]],
                       functions: dict[str, sass.Function]) -> Verdict:
        region = regions[1]
        utc = Counter(i.opcode for i in region if i.opcode.startswith(TMEM_OPS))
        want = Counter({self.row.sass_at(self.arch): 1, "UTCBAR": 1})
        if utc != want:
            raise ProbeInvalid(
                f"probe invalid: {self.name} ({self.arch}): tensor-memory instructions in the "
                f"timed region {dict(utc)}, wanted {dict(want)} (one "
                f"tcgen05.mma.{self.row.kind} and its commit)\n{sass.format_listing(region)}")
        return Verdict(True, dict(utc), Counter(), "tcgen05")


def probe(row: Tcgen05Row, arch: str) -> Tcgen05Probe:
    if row.not_on_103 and archs.number(arch) == 103:
        raise NotApplicable(f"static: tcgen05 {row.name} on {arch}: {row.not_on_103}")
    return Tcgen05Probe(f"tcgen05/{row.name}", target(arch), "\n" + kernel(row),
                        {1: entry(row)}, {1: 1}, guarded=False, row=row)


def probes(arch: str) -> list[Tcgen05Probe]:
    """Every row's probe for `arch` (none where tcgen05 does not exist)."""
    out = []
    for r in ROWS:
        try:
            out.append(probe(r, arch))
        except NotApplicable:
            pass
    return out
