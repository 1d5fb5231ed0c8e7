"""The whole Accel-Sim config (models/accelsim_config.py): the shipped SM90_H100 base with the
run's options substituted where they stand, each marked with its source figure and the base's
value; nothing of the base lost; the L2 and the DRAM timings as the run gives them. (Its parse
by gpgpu-sim's own parser: test_accelsim_gpgpusim.py.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuchar.cli.model_params import model_parameters
from pytest_gpuchar.models import accelsim, accelsim_config
from pytest_gpuchar.models import accelsim_rules as rules
from pytest_gpuchar.results.files import read_report

ROOT = Path(__file__).resolve().parents[3]
RUNS = {"h100": ROOT / "results/sm_90/nvidia-h100-80gb-hbm3/gpuchar-results.json.gz",
        "h200": ROOT / "results/sm_90/nvidia-h200/gpuchar-results.json.gz"}


def test_the_shipped_base_is_accel_sims_with_its_licence_and_source():
    text = accelsim_config.base_text()
    assert "Redistribution and use in source and binary forms" in text
    assert accelsim_config.BASE_COMMIT[:8] in text.split("\n", 5)[0] + text.split("\n", 5)[1]
    base = rules.options(text)
    # the writer's table of the base's values is the shipped file's
    assert {k: v for k, v in rules.BASE.items() if not k.startswith("-trace_")} == {
        k: " ".join(base[k].split()).replace(": ", ":") for k in rules.BASE
        if not k.startswith("-trace_")}


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(request):
    report = read_report(RUNS[request.param])
    params = model_parameters(report, "sm_90")
    frag = rules.options(accelsim.fragment(params, report["results"], report["meta"]))
    whole = accelsim_config.whole(params, report["results"], report["meta"])
    return request.param, report, frag, whole


def test_every_option_of_the_run_is_substituted_in_place_and_nothing_else_changes(run):
    _, _, frag, whole = run
    base = rules.options(accelsim_config.base_text())
    got = rules.options(whole)
    assert set(got) == set(base)                       # whole: nothing lost, nothing new
    assert {k: got[k] for k in frag} == frag
    assert {k: v for k, v in got.items() if k not in frag} == {
        k: v for k, v in base.items() if k not in frag}
    marked = [line for line in whole.splitlines() if "  # gpuchar: " in line]
    assert len(marked) == len(frag)
    for line in marked:
        name = line.split()[0]
        assert line.endswith(f"{rules.BASE_NAME} had {' '.join(base[name].split())}"), name


def test_the_l2_is_the_measured_one(run):
    """Banks x sets x line x ways of the written dl2 lies within half a way of the run's
    memory.capacity.l2 (the ways are the one free factor)."""
    _, report, frag, _ = run
    cap = next(r["value"] for r in report["results"] if r["key"] == "memory.capacity.l2")
    sets, line, ways = (int(x) for x in frag["-gpgpu_cache:dl2"].split(",")[0].split(":")[1:])
    per_way = int(rules.BASE["-gpgpu_n_mem"]) * 2 * sets * line
    assert abs(ways * per_way - cap) <= per_way / 2
    assert (sets, line) == (64, 128) and ways != 40


def test_the_dram_timings_keep_their_nanoseconds(run):
    """The DRAM clock is raised to the documented peak; every time of the timing string is
    scaled with it (within half a clock of the base's nanoseconds), the burst spacing not."""
    _, _, frag, _ = run
    clk = rules.read_clock(frag["-gpgpu_clock_domains"])[3]
    base_clk = rules.read_clock(rules.BASE["-gpgpu_clock_domains"])[3]
    old = dict(f.split("=") for f in rules.BASE["-gpgpu_dram_timing_opt"].split(":"))
    new = dict(f.split("=") for f in frag["-gpgpu_dram_timing_opt"].split(":"))
    assert clk > base_clk and set(old) == set(new)
    for k in old:
        if k in rules.DRAM_TIMES:
            assert abs(int(new[k]) / clk - int(old[k]) / base_clk) <= 0.5 / clk, k
        else:
            assert new[k] == old[k], k
