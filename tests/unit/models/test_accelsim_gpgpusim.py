"""The Accel-Sim fragments of the committed H100 run, merged after Accel-Sim's real SM90_H100
configuration, as gpgpu-sim's own option parser reads them (tools/accel-sim/check_config.py:
src/option_parser.cc compiled from the simulator's source with every option gpgpu-sim
registers). Needs a C++ compiler and the source (tools/accel-sim/README.md); without either
it skips with the reason (CI has no network access to GitHub)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_gpuchar.models import accelsim_rules as rules

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools/accel-sim/check_config.py"
H100 = ROOT / "results/sm_90/nvidia-h100-80gb-hbm3/gpuchar-results.json.gz"


def _harness():
    spec = importlib.util.spec_from_file_location("accelsim_check_config", TOOL)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _check(results: Path, build: Path) -> dict:
    """tools/accel-sim/check_config.py on one committed run's config (skips with the reason
    without a compiler or the simulator's source)."""
    cc = _harness()
    if cc.compiler() is None:
        pytest.skip("no C++ compiler (g++ / c++ or $CXX) to build gpgpu-sim's option parser")
    if cc.find_source(None, "GPGPUSIM_SRC", "gpgpu-sim_distribution") is None:
        pytest.skip("no gpgpu-sim source: set GPGPUSIM_SRC to a clone (or git directory) of "
                    "accel-sim/gpgpu-sim_distribution, or run tools/accel-sim/fetch_source.sh "
                    "(needs github.com)")
    args = SimpleNamespace(results=results, arch="sm_90", gpgpusim=None, accelsim=None,
                           ref=cc.REF, fragment=None, build=build, json=None)
    return cc.check(args)


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    return _check(H100, tmp_path_factory.mktemp("accel-sim-build"))


def test_gpgpusim_parser_reads_every_value_of_the_fragments(parsed):
    """Every option the fragments write is read back as written, with every value gpgpu-sim's
    readers take; the parse of SM90_H100 alone succeeded too."""
    assert parsed["status"] == 0, parsed["stderr"]
    assert parsed["problems"] == []
    got = parsed["after"]["options"]
    for name, value in parsed["written"].items():
        assert str(got[name]) == value or float(got[name]) == float(value), name
        if name in rules.ARITY:
            assert len(rules.read_values(name, str(got[name]))) == rules.ARITY[name], name
    scan = parsed["after"]["scan"]
    assert None not in scan["latency_int"] + scan["initiation_int"]
    assert None not in scan["clock_domains"]


def test_every_class_enters_its_pipeline_inside_it(parsed):
    """As gpgpu-sim sizes the pipelines from what it read: latency - interval in [0, stages)
    for every PTX class and trace unit; the driver's reading agrees with accelsim_rules'."""
    after = parsed["after"]
    assert all(st["inside"] for st in after["stages"]), after["stages"]
    opts = {**rules.BASE, **parsed["written"]}
    ours = {(s.mode, s.op): (s.latency, s.interval, s.stages)
            for s in rules.stages(opts) + rules.trace_stages(opts)}
    theirs = {(s["mode"], s["op"]): (s["latency"], s["interval"], s["stages"])
              for s in after["stages"]}
    assert {k: ours[k] for k in theirs} == theirs
    assert {m for m, _ in theirs} <= {"ptx", "trace"} and ("ptx", "int SHFL") in theirs
    assert after["pipelines"] == rules.pipelines(opts)


H200 = ROOT / "results/sm_90/nvidia-h200/gpuchar-results.json.gz"


@pytest.fixture(scope="module")
def parsed_h200(tmp_path_factory):
    return _check(H200, tmp_path_factory.mktemp("accel-sim-h200"))


def test_the_whole_h200_config_parses_alone_with_the_measured_l2(parsed_h200):
    """gpgpu-sim's parser reads the H200 config as the only -config file: every option as
    written, every class inside its pipeline, and the L2 it reads (memory sub-partitions x
    sets x line x ways) lies in the run's bisection bracket of memory.capacity.l2."""
    assert parsed_h200["alone_status"] == 0
    assert parsed_h200["problems"] == []
    got = parsed_h200["alone"]["options"]
    assert all(st["inside"] for st in parsed_h200["alone"]["stages"])
    sets, line, ways = (int(x) for x in got["-gpgpu_cache:dl2"].split(",")[0].split(":")[1:])
    l2 = int(got["-gpgpu_n_mem"]) * int(got["-gpgpu_n_sub_partition_per_mchannel"]) \
        * sets * line * ways
    assert 57.0 * 2**20 <= l2 < 58.7 * 2**20            # the run: [57 MiB, 58.7 MiB)
    assert got["-gpgpu_clock_domains"].endswith(":3750.0")
    assert "RCD=53" in got["-gpgpu_dram_timing_opt"]      # 12 x 3750 / 850, rounded
