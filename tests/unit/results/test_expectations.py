"""expectations: schema errors name file:line:key; comparisons; atomic regeneration; CLI."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_gpuchar.cli import expectations as cli
from pytest_gpuchar.results import expectations as E
from pytest_gpuchar.results.expectations import ExpectationError, Expected

HEAD = "schema: 2\narch: sm_80\n"

GOOD = HEAD + """\
provenance: {transcribed: "by hand, 2024"}
sources:
  ampere22: "Ampere paper"
characteristics:
  latency.add.u32:
    value: 4
    unit: cycles/op
    tolerance: {abs: 1, rel: 0.1}
    source: ampere22 Table II
  cache.l2:
    range: [190, 235]
    unit: cycles
    source: ampere22 Table IV
  cpi.mov.clock:
    one_of: [0, 6]
    unit: cycles/op
    tolerance: {abs: 0.5}
    source: ampere22 Table V
  latency.bar.sync:
    value: null
    unit: cycles
    source: ampere22
    note: not printed
mappings:
  add.u32: {paper: IADD3}
devices:
  "NVIDIA A100-SXM4-40GB":
    characteristics:
      cache.l2:
        value: 210
        unit: cycles
        tolerance: {abs: 10}
        source: measured
"""


def write(tmp_path: Path, text: str, name: str = "sm_80.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def line_of(text: str, needle: str) -> int:
    for k, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return k
    raise AssertionError(f"{needle!r} not in text")


def load_error(path: Path) -> str:
    with pytest.raises(ExpectationError) as ei:
        E.load_file(path)
    return str(ei.value)


# --- valid files ------------------------------------------------------------------------

def test_good_file_loads(tmp_path):
    e = E.load_file(write(tmp_path, GOOD))
    assert e.arch == "sm_80"
    assert set(e.characteristics) == {"latency.add.u32", "cache.l2", "cpi.mov.clock",
                                      "latency.bar.sync"}
    add = e.get("latency.add.u32")
    assert (add.value, add.unit, add.abs_tol, add.rel_tol) == (4.0, "cycles/op", 1.0, 0.1)
    assert add.origin == f"{tmp_path / 'sm_80.yaml'}:{line_of(GOOD, 'value: 4')}"
    assert e.get("cache.l2").range == (190.0, 235.0)
    assert e.get("cpi.mov.clock").one_of == (0.0, 6.0)
    assert not e.get("latency.bar.sync").numeric
    assert e.mappings["add.u32"]["paper"] == "IADD3"
    assert e.sources == {"ampere22": "Ampere paper"}


def test_device_override(tmp_path):
    e = E.load_file(write(tmp_path, GOOD))
    assert e.get("cache.l2", "NVIDIA A100-SXM4-40GB").value == 210.0
    assert e.get("cache.l2", "NVIDIA A100-PCIE-40GB").range == (190.0, 235.0)
    assert e.get("cache.l2").range == (190.0, 235.0)
    assert e.get("latency.add.u32", "NVIDIA A100-SXM4-40GB").value == 4.0
    assert e.get("no.such.key") is None


def test_real_expectation_files_load():
    files = E.available(E.default_root())
    assert "sm_80" in files
    for arch, path in files.items():
        assert E.load_file(path).arch == arch


# --- malformed files: file:line: key --------------------------------------------------

def entry(**fields) -> str:
    body = {"value": "4", "unit": "cycles", "tolerance": "{abs: 1}", "source": "s"}
    body.update(fields)
    return "".join(f"    {k}: {v}\n" for k, v in body.items() if v is not None)


def test_syntax_error(tmp_path):
    text = HEAD + "characteristics:\n  latency.x: [1, 2\n  latency.y: 3\n"
    p = write(tmp_path, text)
    msg = load_error(p)
    assert msg.startswith(f"{p}:{line_of(text, 'latency.y')}:")
    assert "(syntax)" in msg


def test_tab_indentation_is_a_syntax_error_not_a_traceback(tmp_path):
    text = HEAD + "characteristics:\n\tlatency.x: 1\n"
    msg = load_error(write(tmp_path, text))
    assert f"sm_80.yaml:{line_of(text, 'latency.x')}:" in msg


def _assert_entry_error(msg: str, p: Path, text: str, key: str, lines: set[int]):
    head, _, rest = msg.partition(": ")
    path, _, line = head.rpartition(":")
    assert path == str(p)
    assert int(line) in lines, msg
    assert rest.startswith(key + ":"), msg


@pytest.mark.parametrize("field, says", [("value", "missing 'value'"),
                                          ("tolerance", "missing 'tolerance'")])
def test_missing_field_points_at_the_key(tmp_path, field, says):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry(**{field: None})
    p = write(tmp_path, text)
    msg = load_error(p)
    _assert_entry_error(msg, p, text, "latency.x", {line_of(text, "latency.x")})
    assert says in msg


def test_wrong_type(tmp_path):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry(value='"fast"')
    p = write(tmp_path, text)
    msg = load_error(p)
    _assert_entry_error(msg, p, text, "latency.x.value", {line_of(text, "fast")})
    assert "expected a number" in msg and "fast" in msg


def test_boolean_is_not_a_number(tmp_path):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry(value="true")
    msg = load_error(write(tmp_path, text))
    assert "latency.x.value" in msg


def test_unknown_arch(tmp_path):
    text = "schema: 2\narch: sm_99\ncharacteristics: {}\n"
    p = write(tmp_path, text)
    msg = load_error(p)
    assert msg.startswith(f"{p}:2: arch:")
    assert "sm_99" in msg and "sm_80" in msg      # lists the valid values


def test_arch_must_match_file_name(tmp_path):
    text = "schema: 2\narch: sm_86\n"
    msg = load_error(write(tmp_path, text))
    assert ":2: arch:" in msg and "sm_80.yaml" in msg


def test_unknown_field(tmp_path):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry(speed="3")
    p = write(tmp_path, text)
    msg = load_error(p)
    _assert_entry_error(msg, p, text, "latency.x.speed", {line_of(text, "speed")})
    assert "unknown field" in msg


def test_unknown_top_level_key(tmp_path):
    text = HEAD + "charactristics: {}\n"
    p = write(tmp_path, text)
    msg = load_error(p)
    assert msg.startswith(f"{p}:3: charactristics:")


def test_unknown_unit(tmp_path):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry(unit="furlongs")
    p = write(tmp_path, text)
    _assert_entry_error(load_error(p), p, text, "latency.x.unit", {line_of(text, "furlongs")})


def test_duplicate_key(tmp_path):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry() + "  latency.x:\n" + entry(value="5")
    p = write(tmp_path, text)
    msg = load_error(p)
    second = [k for k, line in enumerate(text.splitlines(), 1) if "latency.x:" in line][1]
    assert msg.startswith(f"{p}:{second}:")
    assert "latency.x" in msg and "duplicate key" in msg


def test_duplicate_field_in_entry(tmp_path):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry() + "    value: 5\n"
    p = write(tmp_path, text)
    msg = load_error(p)
    assert msg.startswith(f"{p}:{len(text.splitlines())}: latency.x.value:")


def test_bad_range(tmp_path):
    text = HEAD + "characteristics:\n  cache.x:\n" + entry(value=None, range="[235, 190]")
    msg = load_error(write(tmp_path, text))
    assert "cache.x.range" in msg and "low" in msg


def test_null_value_needs_note(tmp_path):
    text = HEAD + "characteristics:\n  latency.x:\n" + entry(value="null", tolerance=None)
    assert "note" in load_error(write(tmp_path, text))


def test_empty_file(tmp_path):
    assert ":1:" in load_error(write(tmp_path, ""))


def test_no_unsafe_yaml(tmp_path):
    """Only safe loading: a python tag is refused, never executed."""
    marker = tmp_path / "executed"
    text = HEAD + f"description: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises((ExpectationError, yaml.YAMLError)):
        E.load_file(write(tmp_path, text))
    assert not marker.exists()


def test_unknown_tag_is_reported_with_file_and_line(tmp_path):
    text = HEAD + "description: !!python/object/apply:os.system ['true']\n"
    p = write(tmp_path, text)
    assert load_error(p).startswith(f"{p}:3:")


# --- Expected.check -------------------------------------------------------------------

def test_check_value():
    e = Expected("k", "cycles", value=4.0, abs_tol=1.0)
    assert e.check(4.0) and e.check(5.0) and e.check(3.0)
    assert not e.check(5.01)
    assert e.deviation(5.5) == pytest.approx(1.5)


def test_check_value_relative():
    e = Expected("k", "cycles", value=200.0, rel_tol=0.1)
    assert e.check(219.0) and not e.check(221.0)


def test_check_range():
    e = Expected("k", "cycles", range=(190.0, 235.0))
    assert e.check(190) and e.check(210) and e.check(235)
    assert not e.check(189.5) and not e.check(236)
    assert e.deviation(210) == 0 and e.deviation(240) == pytest.approx(5)
    e2 = Expected("k", "cycles", range=(190.0, 235.0), abs_tol=5)
    assert e2.check(186) and e2.check(239)


def test_check_one_of():
    e = Expected("k", "cycles/op", one_of=(0.0, 6.0), abs_tol=0.5)
    assert e.check(0.4) and e.check(5.6)
    assert not e.check(3.0)
    assert e.deviation(5.0) == pytest.approx(-1.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, None])
@pytest.mark.parametrize("exp", [
    Expected("k", "cycles", value=4.0, abs_tol=1e9),
    Expected("k", "cycles", range=(0.0, 1e9), abs_tol=1e9),
    Expected("k", "cycles", one_of=(0.0, 4.0), abs_tol=1e9),
    Expected("k", "cycles"),
], ids=["value", "range", "one_of", "none"])
def test_nan_and_inf_never_pass(exp, bad):
    assert exp.check(bad) is False


def test_describe():
    assert Expected("k", "cycles", value=4.0, abs_tol=1).describe() == "4 cycles (±1)"
    assert "190-235" in Expected("k", "cycles", range=(190.0, 235.0)).describe()
    assert "one of 0, 6" in Expected("k", "cycles", one_of=(0.0, 6.0)).describe()


# --- update_from_results ----------------------------------------------------------------

PROV = {"device": "NVIDIA A100-SXM4-40GB", "arch": "sm_80", "driver": "580.95.05",
        "ptxas": "13.5.37", "sm_clock_max_mhz": 1410.0, "date": "2025-01-02T03:04:05+00:00"}


def result(key: str, value, **kw) -> dict:
    r = {"key": key, "arch": "sm_80", "value": value, "unit": "cycles/op", "status": "pass",
         "method": "slope", "provenance": PROV}
    r.update(kw)
    return r


def test_update_keeps_other_entries_archs_and_provenance(tmp_path):
    path = write(tmp_path, GOOD)
    other_text = GOOD.replace("arch: sm_80", "arch: sm_90")
    other = write(tmp_path, other_text, "sm_90.yaml")
    written = E.update_from_results(path, [
        result("latency.add.u32", 4.51),
        result("latency.new.op", 7.0),
        result("latency.skip.unstable", 3.0, status="unstable"),
        result("latency.skip.invalid", 3.0, status="invalid"),
        result("latency.skip.none", None),
        result("latency.other.arch", 3.0, arch="sm_90"),
    ])
    assert written == ["latency.add.u32", "latency.new.op"]
    # atomic: no temp files left beside the files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sm_80.yaml", "sm_90.yaml"]
    # the other arch's file is untouched
    assert other.read_text() == other_text
    e = E.load_file(path)   # validates
    add = e.get("latency.add.u32")
    assert add.value == 4.51
    assert (add.abs_tol, add.rel_tol) == (1.0, 0.1)     # the entry's tolerance is kept
    assert e.get("latency.new.op").value == 7.0
    assert e.get("cache.l2").range == (190.0, 235.0)   # unrelated entries kept
    assert e.get("latency.bar.sync").note == "not printed"
    assert e.get("cache.l2", "NVIDIA A100-SXM4-40GB").value == 210.0
    assert e.mappings == {"add.u32": {"paper": "IADD3"}}
    for k in ("latency.skip.unstable", "latency.skip.invalid", "latency.skip.none",
              "latency.other.arch"):
        assert e.get(k) is None
    raw = yaml.safe_load(path.read_text())
    assert raw["provenance"] == {"transcribed": "by hand, 2024"}   # the file's own
    # the run's provenance is the history store's and the file's, never a block per entry
    assert "provenance" not in raw["characteristics"]["latency.add.u32"]
    assert "2025-01-02" in add.source and PROV["device"] in add.source


def test_update_only_selected_keys(tmp_path):
    path = write(tmp_path, GOOD)
    written = E.update_from_results(path, [result("latency.add.u32", 9.0),
                                           result("latency.new.op", 7.0)],
                                    keys={"latency.new.op"})
    assert written == ["latency.new.op"]
    assert E.load_file(path).get("latency.add.u32").value == 4.0


def test_update_creates_a_new_file(tmp_path):
    path = tmp_path / "sm_80.yaml"
    E.update_from_results(path, [result("latency.add.u32", 4.0)])
    assert E.load_file(path).get("latency.add.u32").value == 4.0


def test_update_that_would_be_invalid_never_lands(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(ExpectationError):
        E.update_from_results(path, [result("latency.add.u32", 5.0, unit="furlongs")])
    assert path.read_text() == GOOD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sm_80.yaml"]


def test_atomic_write_failure_leaves_original(tmp_path, monkeypatch):
    path = write(tmp_path, GOOD)

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(E.os, "replace", boom)
    with pytest.raises(OSError):
        E.atomic_write(path, "garbage")
    assert path.read_text() == GOOD
    assert [p.name for p in tmp_path.iterdir()] == ["sm_80.yaml"]


# --- CLI ------------------------------------------------------------------------------

def test_cli_check_real_files():
    proc = subprocess.run([sys.executable, "-m", "pytest_gpuchar.cli.expectations", "check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok " in proc.stdout and "sm_80.yaml" in proc.stdout


def test_cli_check_bad_file(tmp_path, capsys):
    p = write(tmp_path, HEAD + "characteristics:\n  latency.x:\n" + entry(value='"fast"'))
    assert cli.main(["check", str(p)]) == 1
    out = capsys.readouterr().out
    assert "BAD" in out and "latency.x.value" in out and f"{p}:" in out


def test_cli_update(tmp_path, capsys):
    import json
    path = write(tmp_path, GOOD)
    report = tmp_path / "gpuchar-results.json"
    report.write_text(json.dumps({"meta": {}, "results": [result("latency.add.u32", 4.25)]}))
    assert cli.main(["update", "--results", str(report), "--arch", "80",
                   "--root", str(tmp_path)]) == 0
    assert "wrote 1 values" in capsys.readouterr().out
    assert E.load_file(path).get("latency.add.u32").value == 4.25


# --- topic files: expectations/<topic>/<arch>.yaml -----------------------------------------

def topic_entry(key: str, value: float = 30) -> str:
    return f"characteristics:\n  {key}:\n" + entry(value=str(value))


def test_topic_files_merge_into_the_arch(tmp_path):
    write(tmp_path, GOOD)
    (tmp_path / "memory").mkdir()
    write(tmp_path / "memory", HEAD + topic_entry("memory.latency.l1", 33))
    e = E.load("sm_80", tmp_path)
    assert e.get("memory.latency.l1").value == 33.0
    assert e.get("latency.add.u32").value == 4.0
    assert e.get("memory.latency.l1").origin.startswith(str(tmp_path / "memory" / "sm_80.yaml"))
    assert E.arch_files("sm_80", tmp_path) == [tmp_path / "sm_80.yaml",
                                               tmp_path / "memory" / "sm_80.yaml"]


def test_topic_file_alone_is_enough(tmp_path):
    (tmp_path / "tensor").mkdir()
    write(tmp_path / "tensor", "schema: 2\narch: sm_75\n" + topic_entry("tensor.x"), "sm_75.yaml")
    assert E.load("sm_75", tmp_path).get("tensor.x").value == 30.0
    assert E.load("sm_61", tmp_path) is None


def test_topic_key_must_carry_the_topic_prefix(tmp_path):
    (tmp_path / "memory").mkdir()
    p = write(tmp_path / "memory", HEAD + topic_entry("latency.l1"))
    with pytest.raises(ExpectationError, match=r"memory/sm_80.yaml:4: latency.l1: .*'memory\.'"):
        E.load_file(p)


def test_topic_key_in_the_root_file_is_rejected(tmp_path):
    p = write(tmp_path, HEAD + topic_entry("throughput.ffma"))
    with pytest.raises(ExpectationError, match=r"sm_80.yaml:4: throughput.ffma: belongs in "
                                               r"throughput/sm_80.yaml"):
        E.load_file(p)


def test_same_key_in_two_files_names_both(tmp_path):
    (tmp_path / "memory").mkdir()
    write(tmp_path / "memory", HEAD + topic_entry("memory.x"))
    write(tmp_path, HEAD + topic_entry("cache.y"))
    a = E.load_file(tmp_path / "memory" / "sm_80.yaml")
    b = E.load_file(tmp_path / "sm_80.yaml")
    assert set(E.merge([b, a]).characteristics) == {"cache.y", "memory.x"}
    with pytest.raises(ExpectationError, match=r"sm_80.yaml:\d+: memory.x: also defined at "
                                               r".*memory/sm_80.yaml:\d+"):
        E.merge([b, a, a])


def test_update_arch_routes_each_key_to_its_topic_file(tmp_path):
    path = write(tmp_path, GOOD)
    before = path.read_text()
    res = [result("memory.latency.l2", 260.0, unit="cycles"),
           result("tensor.mma.f16", 32.0), result("latency.add.u32", 4.0),
           result("memory.latency.l1", 33.0, arch="sm_90")]
    written = E.update_arch("sm_80", res, root=tmp_path)
    assert written == {tmp_path / "memory" / "sm_80.yaml": ["memory.latency.l2"],
                       tmp_path / "sm_80.yaml": ["latency.add.u32"],
                       tmp_path / "tensor" / "sm_80.yaml": ["tensor.mma.f16"]}
    e = E.load("sm_80", tmp_path)
    assert e.get("memory.latency.l2").value == 260.0
    assert e.get("cache.l2").range == (190.0, 235.0)         # untouched
    assert not (tmp_path / "memory" / "sm_90.yaml").exists()  # other arch untouched
    assert path.read_text() != before


def test_cli_check_finds_topic_files(tmp_path, monkeypatch, capsys):
    write(tmp_path, GOOD)
    (tmp_path / "memory").mkdir()
    write(tmp_path / "memory", HEAD + topic_entry("memory.latency.l1"))
    monkeypatch.setenv("GPUCHAR_EXPECTATIONS", str(tmp_path))
    assert cli.main(["check"]) == 0
    assert "memory/sm_80.yaml" in capsys.readouterr().out


def test_update_takes_the_tolerance_a_test_proposed_and_keeps_small_values(tmp_path):
    path = write(tmp_path, GOOD)
    E.update_from_results(path, [
        result("numeric.err", 1.894e-08, unit="error",
               data={"tolerance": {"rel": 0.5, "abs": 1e-9}}),
        result("latency.add.u32", 4.0, data={"tolerance": {"abs": 9}})])
    e = E.load_file(path)
    assert e.get("numeric.err").value == 1.894e-08
    assert (e.get("numeric.err").abs_tol, e.get("numeric.err").rel_tol) == (1e-9, 0.5)
    assert e.get("latency.add.u32").abs_tol == 1.0   # an existing entry keeps its own


def test_default_root_is_the_current_project(tmp_path, monkeypatch):
    """A second clone sharing a venv checks its own files: the current directory's
    expectations/ wins over the package's, $GPUCHAR_EXPECTATIONS over both."""
    (tmp_path / "expectations").mkdir()
    monkeypatch.delenv("GPUCHAR_EXPECTATIONS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert E.default_root() == tmp_path / "expectations"
    monkeypatch.setenv("GPUCHAR_EXPECTATIONS", "/elsewhere")
    assert E.default_root() == Path("/elsewhere")
    monkeypatch.delenv("GPUCHAR_EXPECTATIONS")
    monkeypatch.chdir(tmp_path / "expectations")
    assert E.default_root() == E.PACKAGE_ROOT


@pytest.mark.parametrize("content, says", [
    (None, "cannot read"), ("", "empty file"), ('{"results": [{"key": "x"', "not valid JSON"),
    ('{"results": 3}', "not a gpuchar results report"), ('[1, 2]', "not a gpuchar results"),
])
def test_cli_update_with_a_bad_results_file_names_it(tmp_path, capsys, content, says):
    path = write(tmp_path, GOOD)
    report = tmp_path / "run.json"
    if content is not None:
        report.write_text(content)
    assert cli.main(["update", "--results", str(report), "--arch", "sm_80",
                     "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{report}" in err and says in err and "Traceback" not in err
    assert path.read_text() == GOOD


def test_cli_update_counts_each_key_once(tmp_path, capsys):
    import json
    write(tmp_path, GOOD)
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"results": [result("latency.add.u32", 4.1),
                                              result("latency.add.u32", 4.1)]}))
    assert cli.main(["update", "--results", str(report), "--arch", "sm_80",
                     "--root", str(tmp_path)]) == 0
    assert "wrote 1 values" in capsys.readouterr().out


@pytest.mark.parametrize("results, args, says", [
    ([result("sass.add.u32", None, status="info"), result("sass.div.u32", None,
                                                           status="invalid")], [],
     "holds no hardware figure of sm_80, only 1 PTX->SASS mapping notes, 1 probes invalid "
     "(a run without an sm_80 GPU measures nothing): accept the report of a run on an sm_80 "
     "GPU"),
    ([result("latency.add.u32", 4.1, arch="sm_90")], [],
     "holds no sm_80 result (its archs: sm_90; give --arch)"),
    ([], [], "holds no result at all"),
    ([result("latency.add.u32", 4.1)], ["--key", "latency.mul.u32"],
     "holds no sm_80 result of --key latency.mul.u32"),
    ([result("latency.add.u32", 4.1, status="unstable"), result("latency.mul.u32", 9.0,
                                                                 status="invalid")], [],
     "none of the 2 sm_80 figures of {report} can be written: 1 unstable, 1 probes invalid"),
])
def test_cli_update_that_writes_nothing_says_why(tmp_path, capsys, results, args, says):
    """An offline run's report said "wrote 0 values", exit 0: now exit 1 and the reason."""
    import json
    path = write(tmp_path, GOOD)
    report = tmp_path / "run.json"
    report.write_text(json.dumps({"results": results}))
    assert cli.main(["update", "--results", str(report), "--arch", "sm_80",
                     "--root", str(tmp_path), *args]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("gpuchar-expectations: nothing written: ")
    assert says.format(report=report) in out.err
    assert path.read_text() == GOOD


def test_an_oversized_file_is_refused_before_parsing(tmp_path, monkeypatch):
    path = write(tmp_path, GOOD)
    from pytest_gpuchar.results import schema
    monkeypatch.setattr(schema, "MAX_FILE_BYTES", 10)
    with pytest.raises(ExpectationError, match=r"sm_80.yaml:0: \(file\): .* MiB limit"):
        E.load_file(path)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_update_never_writes_a_non_finite_value(tmp_path, bad):
    path = tmp_path / "sm_80.yaml"
    E.update_from_results(path, [result("latency.add.u32", 4.0)])
    before = path.read_text()
    written = E.update_from_results(path, [result("latency.add.u32", bad),
                                           result("latency.mul.u32", bad)])
    assert written == [] and path.read_text() == before


def test_a_nan_value_in_a_file_is_one_clear_error(tmp_path):
    path = tmp_path / "sm_90.yaml"
    path.write_text("schema: 2\narch: sm_90\ncharacteristics:\n"
                    "  latency.add.u32: {value: .nan, unit: cycles}\n")
    with pytest.raises(E.ExpectationError, match=r"sm_90.yaml.*latency.add.u32.value.*finite"):
        E.load_file(path)


# --- the noise model in an entry ----------------------------------------------------------

NOISY = GOOD.replace("""  cache.l2:
    range: [190, 235]
    unit: cycles
    source: ampere22 Table IV
""", """  cache.l2:
    range: [190, 235]
    unit: cycles
    source: ampere22 Table IV
    noise: {run: 0.6, board: 9.5}
    modes: [190, 235]
""")


def test_an_entrys_noise_model_loads_and_reaches_the_result(tmp_path):
    from pytest_gpuchar.results.judge import Measurement, judge
    e = E.load_file(write(tmp_path, NOISY)).get("cache.l2")
    assert (e.sigma_run, e.sigma_board, e.grid, e.modes) == (0.6, 9.5, False, (190.0, 235.0))
    assert e.noise_rel == pytest.approx(0.6 / 212.5)
    assert E.load_file(write(tmp_path, GOOD)).get("cache.l2").noise() == {}
    r = judge(Measurement("cache.l2", 200.0, "cycles", 1.0), "sm_80", e)
    assert r.status.value == "pass"
    assert r.as_dict()["noise"] == {"run": 0.6, "board": 9.5, "exact": False, "grid": False}


@pytest.mark.parametrize("noise, key, says", [
    ("{rel: 0.03, source: s}", "cache.l2.noise.rel", "unknown field"),
    ("{run: -1}", "cache.l2.noise.run", "must be >= 0"),
    ("{run: 1, board: fast}", "cache.l2.noise.board", "expected a number"),
    ("0.03", "cache.l2.noise", "expected a mapping")])
def test_a_bad_noise_is_one_error_naming_file_line_and_key(tmp_path, noise, key, says):
    text = GOOD.replace("    source: ampere22 Table IV\n",
                        f"    source: ampere22 Table IV\n    noise: {noise}\n")
    p = write(tmp_path, text)
    msg = load_error(p)
    _assert_entry_error(msg, p, text, key, {line_of(text, "noise:")})
    assert says in msg


def test_a_device_entry_takes_unit_method_and_note_from_the_arch_entry(tmp_path):
    text = GOOD.replace('provenance: {transcribed: "by hand, 2024"}',
                        "provenance:\n  samples:\n    NVIDIA H200: {boards: 21, runs: 35}") + """\
  "NVIDIA H200":
    characteristics:
      latency.add.u32: {value: 4.0, tolerance: {abs: 0.004}, noise: {run: 0}, source: fleet}
      latency.bar.sync: {value: 19, tolerance: {abs: 1}, source: measured}
"""
    e = E.load_file(write(tmp_path, text))
    d, a = e.get("latency.add.u32", "NVIDIA H200"), e.get("latency.add.u32")
    assert (d.unit, d.method, d.key) == (a.unit, a.method, "latency.add.u32")
    assert d.noise() == {"run": 0.0, "board": 0.0, "exact": True, "grid": False}
    assert d.boards == 21 and d.describe() == "4 cycles/op (±0.004) over 21 boards"
    bar = e.get("latency.bar.sync", "NVIDIA H200")
    assert (bar.note, bar.boards, bar.noise()) == ("not printed", 0, {})


def test_a_device_entry_without_an_arch_entry_needs_its_unit(tmp_path):
    text = GOOD + """\
  "NVIDIA H200":
    characteristics:
      latency.only.here: {value: 4.0, tolerance: {abs: 1}, source: fleet}
"""
    p = write(tmp_path, text)
    msg = load_error(p)
    assert "latency.only.here: missing 'unit' (no arch entry of this key to take it from)" in msg
