"""pytest --snapshot-update on a GPU accepts the measured figures as the new expectations
(results/accept.py): a faked measured run (pytester, the device faked), no GPU needed. The
runs are in-process: the fake's conftest gives back the real device.detect and the fake
board's claim (core/gpuclaim.py) when its run ends."""
from __future__ import annotations

import json
import secrets
import textwrap

import pytest

from pytest_gpuchar.results import expectations as E
from pytest_gpuchar.results import yamledit

FAKE_GPU = """
import pytest
from pytest_gpuchar.core import device, gpuclaim

FAKE = device.DeviceInfo(0, "FAKE H200", "sm_90", 132, 60 * 2**20, 228 * 1024, 141 * 2**30,
                         1980.0, 1980.0, 2619.0, "580.159.04", "13.0", "13.0")


@pytest.fixture(autouse=True, scope="session")
def _fake_gpu():
    pass


def pytest_configure(config):
    real = device.detect
    device.detect = lambda index=None: FAKE
    config.add_cleanup(lambda: setattr(device, "detect", real))
    config.add_cleanup(lambda: gpuclaim.release(FAKE.uuid))
"""

EXPECTED = """\
# the arch's file: comments and order must survive an acceptance
schema: 2
arch: sm_90
characteristics:
  # a measured entry
  latency.a:
    value: 4
    unit: cycles/op
    tolerance: {abs: 1, rel: 0.1}   # kept on acceptance
    source: measured 2026-11-01 on FAKE H200
  latency.b:
    value: 4
    unit: cycles/op
    tolerance: {abs: 1}
    source: measured 2026-11-01 on FAKE H200
  latency.untouched:
    value: 7
    unit: cycles/op
    tolerance: {abs: 1}
    source: measured 2026-11-01 on FAKE H200
"""

TESTS = """
import pytest
from pytest_gpuchar.results.judge import Measured, Measurement

pytestmark = pytest.mark.hardware

def test_ok(arch, gpu, hardware_row):
    hardware_row(Measurement("latency.a", 4.5, "cycles/op", 0.1))

def test_out_of_tolerance(arch, gpu, hardware_row):
    hardware_row(Measurement("latency.b", 9.0, "cycles/op", 0.1))

def test_unstable(arch, gpu, hardware_row):
    hardware_row(Measurement("latency.c", 3.0, "cycles/op", 2.0, unstable="spread 2.0"))

def test_broken_invariant(arch, gpu, hardware_row):
    hardware_row(Measured(Measurement("latency.d", 5.0, "cycles/op"),
                          checks=["dependent chain cheaper than independent"]))

def test_spec_bar(arch, gpu, hardware_row):
    hardware_row(Measurement("throughput.peak_fraction.dfma", 0.92, "ratio"))
"""


def with_uuid(conftest: str) -> str:
    """The fake GPU with a board UUID of this test's own (a measuring process claims its GPU's,
    core/gpuclaim.py; a fleet sample counts boards by UUID)."""
    return conftest.replace('"580.159.04", "13.0", "13.0")',
                            f'"580.159.04", "13.0", "13.0", uuid="GPU-064f5149-0000-0000-0000-'
                            f'{secrets.token_hex(6)}")')


@pytest.fixture
def run(pytester):
    (pytester.path / "expectations").mkdir()
    (pytester.path / "expectations" / "sm_90.yaml").write_text(EXPECTED)
    pytester.makeconftest(with_uuid(FAKE_GPU))
    pytester.makepyfile(test_hw=TESTS)

    def _run(*args):
        out = pytester.path / "out"
        result = pytester.runpytest("--gpu-arch=sm_90", "--gpuchar-report",
                                    str(out), "-p", "no:cacheprovider", *args)
        doc = json.loads((out / "gpuchar-results.json").read_text())
        return result, doc, (pytester.path / "expectations" / "sm_90.yaml").read_text()
    return _run


def test_accepted_values_are_written_per_device_and_everything_else_kept(run, pytester):
    """A board's first acceptance: it starts its model's fleet sample (results/sm_90/fleet/
    sample.jsonl.gz beside expectations/), and the device entries come from it: one board is
    judged as its own later nights."""
    from pytest_gpuchar.results import sample as S
    result, doc, text = run("--snapshot-update")
    acc = doc["meta"]["acceptance"]
    assert sorted(a["key"] for a in acc["accepted"]) == ["latency.a", "latency.b"]
    why = {r["key"]: r["why"] for r in acc["refused"]}
    assert why["latency.c"] == "status unstable"
    assert why["latency.d"].startswith("the test failed: ")
    assert "SPEC's bar" in why["throughput.peak_fraction.dfma"]
    assert text.startswith(EXPECTED.split("characteristics:")[0])   # the head kept
    assert EXPECTED.split("characteristics:")[1] in text             # the arch values too
    e = E.parse(text, E.Path("sm_90.yaml"))
    dev = e.devices["FAKE H200"]
    assert (dev["latency.a"].value, dev["latency.b"].value) == (4.5, 9.0)
    assert dev["latency.a"].source == "fleet" and dev["latency.a"].unit == "cycles/op"
    assert "latency.c" not in dev and "latency.d" not in dev
    assert "throughput.peak_fraction.dfma" not in text
    [sample] = S.read(pytester.path / "results" / "sm_90" / "fleet" / "sample.jsonl.gz")
    assert sample["meta"]["uuid"].startswith("GPU-064f5149")
    assert {r["key"] for r in sample["results"]} >= {"latency.a", "latency.b"}
    result.stdout.fnmatch_lines(["*expectations accepted (device level): 2; refused: 3*",
                                 "*FAKE H200: fleet sample (extend) of 1 boards, 1 runs*",
                                 "*latency.a: 4 cycles/op*-> 4.5 cycles/op*",
                                 "*refused 1: status unstable*"])


def test_a_k_subset_touches_only_its_characteristics(run):
    _, doc, text = run("--snapshot-update", "-k", "test_ok")
    assert [a["key"] for a in doc["meta"]["acceptance"]["accepted"]] == ["latency.a"]
    assert "latency.b" not in text.split("devices:")[1]


def test_arch_level_keeps_comments_and_order(run):
    _, doc, text = run("--snapshot-update", "--gpuchar-accept-level=arch", "-k", "test_ok")
    assert [a["key"] for a in doc["meta"]["acceptance"]["accepted"]] == ["latency.a"]
    lines = text.splitlines()
    assert lines[0] == "# the arch's file: comments and order must survive an acceptance"
    assert "  # a measured entry" in lines
    [a] = [ln for ln in lines if ln.startswith("  latency.a:")]    # one line: it fits
    assert E.parse(text, E.Path("sm_90.yaml")).get("latency.a").value == 4.5
    assert "value: 4.5" in a
    assert text[text.index("  latency.b:"):] == EXPECTED[EXPECTED.index("  latency.b:"):]


def test_without_snapshot_update_nothing_is_written(run):
    _, doc, text = run()
    assert text == EXPECTED and "acceptance" not in doc["meta"]


def test_a_paper_record_is_never_overwritten_at_the_arch_level(run, pytester):
    path = pytester.path / "expectations" / "sm_90.yaml"
    path.write_text(EXPECTED.replace("source: measured 2026-11-01 on FAKE H200\n  latency.b",
                                     "source: ampere22 Table V\n  latency.b"))
    _, doc, text = run("--snapshot-update", "--gpuchar-accept-level=arch", "-k", "test_ok")
    [r] = doc["meta"]["acceptance"]["refused"]
    assert r["key"] == "latency.a" and "paper's record" in r["why"]
    assert "value: 4.5" not in text


def test_no_gpu_touches_no_expectation(pytester):
    pytester.makepyfile(test_hw=TESTS)
    (pytester.path / "expectations").mkdir()
    (pytester.path / "expectations" / "sm_90.yaml").write_text(EXPECTED)
    result = pytester.runpytest("--gpu-arch=sm_90", "--snapshot-update",
                                "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*expectations: no hardware figure in this run*no "
                                 "expectation was touched*"])
    assert (pytester.path / "expectations" / "sm_90.yaml").read_text() == EXPECTED


def test_a_crash_mid_write_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "sm_90.yaml"
    path.write_text(EXPECTED)

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(E.os, "replace", boom)
    with pytest.raises(OSError):
        E.write_entries(path, {"latency.a": {"value": 5, "unit": "cycles/op",
                                             "tolerance": {"abs": 1}, "source": "x"}})
    assert path.read_text() == EXPECTED and [p.name for p in tmp_path.iterdir()] == ["sm_90.yaml"]


def test_an_entry_that_would_break_the_file_is_never_written(tmp_path):
    path = tmp_path / "sm_90.yaml"
    path.write_text(EXPECTED)
    with pytest.raises(E.ExpectationError):
        E.write_entries(path, {"latency.a": {"value": 5, "unit": "furlongs",
                                             "tolerance": {"abs": 1}, "source": "x"}})
    assert path.read_text() == EXPECTED


def test_yaml_edit_replaces_in_place_and_appends_new_keys():
    text = textwrap.dedent("""\
        schema: 2
        arch: sm_90
        characteristics:
          a.x:   # first
            value: 1
          b.y:
            value: 2
        """)
    out = yamledit.set_entries(text, ["characteristics"], {"a.x": {"value": 3},
                                                           "c.z": {"value": 4}})
    # an entry that fits in a line is written on one (yamledit.ONE_LINE)
    assert out == text.replace("  a.x:   # first\n    value: 1\n", "  a.x: {value: 3}\n") \
        + "  c.z: {value: 4}\n"


FLEET = """\
schema: 2
arch: sm_90
characteristics:
  latency.a:
    value: 4
    unit: cycles/op
    tolerance: {abs: 1, rel: 0.1}
    source: measured 2026-11-01 on FAKE H200
"""


def _sample_of_three(path):
    """A committed sample: three boards of FAKE H200, two runs each, latency.a 4.1-4.3."""
    from pytest_gpuchar.results import sample as S
    from pytest_gpuchar.results.noise import Run
    docs = []
    for i, (board, v) in enumerate((("GPU-aaaaaaaa-1", 4.1), ("GPU-bbbbbbbb-2", 4.2),
                                    ("GPU-cccccccc-3", 4.3))):
        for night, dv in enumerate((0.0, 0.01)):
            res = {"latency.a": {"key": "latency.a", "status": "pass", "value": v + dv,
                                 "unit": "cycles/op", "spread": 0.02, "method": ""}}
            docs.append(S.run_doc(Run(board, "FAKE H200", "sm_90", 132,
                                      f"2026-11-2{i}T0{night}:00:00+00:00", res)))
    path.parent.mkdir(parents=True)
    S.write(path, docs)
    return docs


@pytest.fixture
def fleet_run(pytester):
    """A board not in the model's fleet sample (GPU-064f5149) accepting its figure."""
    (pytester.path / "expectations").mkdir()
    (pytester.path / "expectations" / "sm_90.yaml").write_text(FLEET)
    sample = pytester.path / "results" / "sm_90" / "fleet" / "sample.jsonl.gz"
    _sample_of_three(sample)
    pytester.makeconftest(with_uuid(FAKE_GPU))
    pytester.makepyfile(test_hw=TESTS)

    def _run(*args):
        from pytest_gpuchar.results import sample as S
        pytester.runpytest("--gpu-arch=sm_90", "-p", "no:cacheprovider",
                           "--snapshot-update", "-k", "test_ok", *args)
        text = (pytester.path / "expectations" / "sm_90.yaml").read_text()
        return E.parse(text, E.Path("sm_90.yaml")), S.read(sample)
    return _run


def test_accepting_a_board_adds_it_to_the_fleet_and_keeps_the_others(fleet_run):
    """Issue 29: --snapshot-update on one board replaced a two-board range by that board's
    figure and dropped the others. It now adds the board to the model's sample (every other
    board's runs kept) and derives the entry from all four."""
    e, docs = fleet_run()
    a = e.devices["FAKE H200"]["latency.a"]
    assert a.range[0] == 4.1 and a.range[1] == 4.5 and a.source == "fleet"
    assert len(docs) == 7 and len({d["meta"]["uuid"] for d in docs}) == 4
    assert "over 4 boards" in a.describe()


def test_replacing_the_models_range_is_an_explicit_choice(fleet_run):
    e, docs = fleet_run("--gpuchar-accept-fleet=replace")
    a = e.devices["FAKE H200"]["latency.a"]
    assert a.value == 4.5 and a.range is None and a.boards == 1
    assert [d["meta"]["uuid"][:12] for d in docs] == ["GPU-064f5149"]


NOTED = """
import pytest
from pytest_gpuchar.results.judge import Measured, Measurement, Result, Status

pytestmark = pytest.mark.hardware

def test_noted(arch, gpu, hardware_row):
    hardware_row(Measured(Measurement("latency.a", 4.5, "cycles/op", 0.1), notes=[
        Result("latency.a_driver", arch, Status.INFO, 2.0, "bytes", detail="the driver's")]))
"""


def test_a_rows_notes_are_recorded_beside_its_figures(pytester):
    """A row's notes (an info record: the driver's figure beside the measured one) go into
    the report as they are, with the row's test and the run's provenance."""
    (pytester.path / "expectations").mkdir()
    (pytester.path / "expectations" / "sm_90.yaml").write_text(EXPECTED)
    pytester.makeconftest(FAKE_GPU)
    pytester.makepyfile(test_hw=NOTED)
    out = pytester.path / "out"
    result = pytester.runpytest("--gpu-arch=sm_90", "--gpuchar-report", str(out),
                                "-p", "no:cacheprovider")
    assert result.ret == 0
    got = {r["key"]: r for r in json.loads((out / "gpuchar-results.json").read_text())[
        "results"]}
    note = got["latency.a_driver"]
    assert (note["status"], note["value"], note["detail"]) == ("info", 2.0, "the driver's")
    assert note["test"].endswith("test_noted[sm_90]") and note["provenance"]["device"] == \
        "FAKE H200"
    assert got["latency.a"]["status"] == "pass"
