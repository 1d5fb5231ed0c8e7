"""Committed baselines against today's expectation files (results/baselines.py): every
committed ``results/<arch>/<device>/gpuchar-results.json.gz`` agrees with the files on every
figure both hold, or is declared (superseded.yaml beside it) as a run that cannot be repeated,
and then the export reads the files' figure, never the stale one."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from pytest_gpuchar.cli import model_params
from pytest_gpuchar.results import baselines
from pytest_gpuchar.results.expectations import load, parse
from pytest_gpuchar.results.files import read_report

ROOT = Path(__file__).resolve().parents[3]
EXPECTATIONS = ROOT / "expectations"
BASELINES = sorted(ROOT.glob("results/sm_*/*/gpuchar-results.json.gz"))
H100 = ROOT / "results/sm_90/nvidia-h100-80gb-hbm3"


def _id(path: Path) -> str:
    return str(path.parent.relative_to(ROOT / "results"))


def test_the_committed_baselines_are_found():
    names = {_id(p) for p in BASELINES}
    assert {"sm_90/nvidia-h200", "sm_90/nvidia-h100-80gb-hbm3"} <= names


@pytest.mark.parametrize("path", BASELINES, ids=_id)
def test_a_committed_baseline_agrees_with_its_expectation_file(path):
    """Every figure the baseline passed that the arch's files (the device's section first)
    also hold lies within the entry's tolerance or range; where it does not, the baseline is
    declared as one that cannot be re-measured, naming exactly those figures with the values
    the baseline holds (and the rows of probes since declared unmeasurable)."""
    arch = path.parts[-3]
    exp = load(arch, EXPECTATIONS)
    report = read_report(path)
    compared = [r for r in report["results"] if r.get("arch") == arch
                and r.get("status") in baselines.USABLE and isinstance(r.get("value"), (int, float))
                and (e := exp.get(r["key"], report["meta"]["device"])) is not None and e.numeric]
    assert len(compared) > 500       # the test judges a whole night, not a handful of rows
    declared = baselines.read_sidecar(path.parent / baselines.SIDECAR)
    assert baselines.sidecar_problems(report, exp, declared) == []


def test_the_h200_baseline_is_current():
    """The H200 night was regenerated with the current suite: nothing in it is superseded."""
    assert not (ROOT / "results/sm_90/nvidia-h200" / baselines.SIDECAR).exists()


def test_the_export_of_a_declared_baseline_agrees_with_the_files():
    """What gpuchar-model-params reads of the stale H100 night (refreshed) is judged again:
    nothing in it disagrees with the files, the L1 capacity is the file's, and the rows of the
    FP8 probes declared unmeasurable are gone."""
    exp = load("sm_90", EXPECTATIONS)
    report = read_report(H100 / "gpuchar-results.json.gz")
    declared = baselines.read_sidecar(H100 / baselines.SIDECAR)
    fresh = baselines.refreshed(report, exp, declared)
    assert [s.key for s in fresh.stale] == ["memory.capacity.l1"]
    assert baselines.stale(fresh.report, exp) == []
    assert baselines.since_unmeasurable(fresh.report, exp) == []
    l1 = next(r for r in fresh.report["results"] if r["key"] == "memory.capacity.l1")
    assert l1["value"] == exp.get("memory.capacity.l1").value == 220416
    assert l1["superseded"]["measured"] == 208000
    # the baseline itself is untouched
    assert next(r for r in report["results"] if r["key"] == "memory.capacity.l1")["value"] \
        == 208000


@pytest.mark.parametrize("fmt", ["yaml", "accel-sim"])
def test_model_params_says_what_it_took_from_the_files(tmp_path, capsys, fmt):
    out = tmp_path / "export.txt"
    assert model_params.main(["--results", str(H100 / "gpuchar-results.json.gz"), "--arch",
                              "sm_90", "--format", fmt, "-o", str(out),
                              "--expectations", str(EXPECTATIONS)]) == 0
    err = capsys.readouterr().err
    assert "memory.capacity.l1: baseline 208000 (stored pass) disagrees with 220416 bytes" in err
    assert "export uses 220416 from the expectation file" in err
    assert "cannot be re-measured (no H100 is lent" in err
    assert "8 rows of probes since declared unmeasurable left out" in err
    text = out.read_text()
    if fmt == "yaml":
        notes = yaml.safe_load(text)["superseded"]
        assert any(n.startswith("memory.capacity.l1: baseline 208000") for n in notes)
    else:
        assert re.search(r"^#   memory\.capacity\.l1: baseline 208000 .* memory/sm_90\.yaml:\d+",
                         text, re.M)


# --- the rules on made-up files (real expectation parsing, no stand-ins) -------------------

EXP = """\
schema: 2
arch: sm_90
characteristics:
  latency.a.u32: {value: 1000, unit: cycles, tolerance: {rel: 0.05}, source: s}
  latency.b.u32: {value: 32, unit: cycles, tolerance: {abs: 1}, source: s}
devices:
  Board B:
    characteristics:
      latency.b.u32: {range: [40, 44], unit: cycles, tolerance: {abs: 1}, source: s}
unmeasurable:
  latency.x.u32: {reason: r, sass: FADD}
"""


def _report(device="Board A", **values):
    rows = [{"key": k.replace("__", "."), "arch": "sm_90", "value": v, "status": "pass"}
            for k, v in values.items()]
    rows.append({"key": "latency.x.u32", "arch": "sm_90", "value": None, "status": "invalid"})
    return {"meta": {"device": device}, "results": rows}


@pytest.fixture
def exp(tmp_path):
    return parse(EXP, tmp_path / "sm_90.yaml")


def test_stale_is_judged_with_the_devices_section(exp):
    rep = _report(latency__a__u32=900, latency__b__u32=32.5)
    assert [s.key for s in baselines.stale(rep, exp)] == ["latency.a.u32"]
    rep_b = _report("Board B", latency__a__u32=1000, latency__b__u32=32.5)
    (s,) = baselines.stale(rep_b, exp)
    assert (s.key, s.replacement) == ("latency.b.u32", 42.0)


def test_an_undeclared_stale_baseline_is_a_problem_and_is_not_patched(exp):
    rep = _report(latency__a__u32=900)
    problems = baselines.sidecar_problems(rep, exp, None)
    assert len(problems) == 2 and "regenerate the baseline" in problems[0]
    assert "latency.x.u32" in problems[1]
    assert baselines.refreshed(rep, exp, None).report is rep


def test_a_declaration_must_match_the_baseline(exp, tmp_path):
    rep = _report(latency__a__u32=900, latency__b__u32=32)
    side = tmp_path / baselines.SIDECAR
    side.write_text("why: gone\nsuperseded:\n  latency.a.u32: {measured: 901, reason: r}\n"
                    "  latency.b.u32: {measured: 32, reason: r}\n")
    problems = baselines.sidecar_problems(rep, exp, baselines.read_sidecar(side))
    assert problems == [
        "latency.a.u32: declared as measured 901, the baseline holds 900",
        "latency.b.u32: declared superseded but the baseline agrees with its "
        "expectation (or holds no such figure)",
        "unmeasurable: declared [], the baseline's rows of probes declared unmeasurable are "
        "['latency.x.u32']"]
    side.write_text("why: gone\nsuperseded:\n  latency.a.u32: {measured: 900, reason: r}\n"
                    "unmeasurable: [latency.x.u32]\n")
    declared = baselines.read_sidecar(side)
    assert baselines.sidecar_problems(rep, exp, declared) == []
    fresh = baselines.refreshed(rep, exp, declared)
    assert [r["key"] for r in fresh.report["results"]] == ["latency.a.u32",
                                                           "latency.b.u32"]
    assert fresh.report["results"][0]["value"] == 1000
    assert fresh.notes()[0] == "the baseline cannot be re-measured (gone)"


def test_a_malformed_declaration_is_one_clear_error(tmp_path):
    side = tmp_path / baselines.SIDECAR
    side.write_text("superseded: {}\n")
    with pytest.raises(baselines.SidecarError, match=r"superseded.yaml: expected a mapping "
                                                     r"with 'why'"):
        baselines.read_sidecar(side)
    side.write_text("why: w\nsuperseded:\n  k: {measured: big, reason: r}\n")
    with pytest.raises(baselines.SidecarError, match=r"superseded\.k: expected"):
        baselines.read_sidecar(side)
