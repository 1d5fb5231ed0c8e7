"""A model's board-dependent ranges from a fleet sample (results/fleetsample.py) and the
`gpuchar-expectations fleet` command: which figures are board-dependent, the rule's range and
tolerance, provenance, the writer keeping every other entry, and a board outside the sample
(a hold-out) judged by the result."""
from __future__ import annotations

import json

import pytest
import yaml

from pytest_gpuchar.cli import expectations as cli
from pytest_gpuchar.results import expectations as E
from pytest_gpuchar.results import fleetsample as F

MODEL = "NVIDIA H100 80GB HBM3"
FILE = """\
schema: 1
arch: sm_90
characteristics:
  latency.add:
    value: 4
    unit: cycles
    tolerance: {abs: 0.5}
    source: paper
  l2.gpu:
    value: 4060
    unit: B/clk
    tolerance: {rel: 0.02}
    source: measured 2026-11-23 on NVIDIA H100 80GB HBM3
    note: the whole-GPU L2 stream
"""


def board(i: int) -> str:
    return f"GPU-{i:08x}-0000-0000-0000-000000000000"


def run(b: str, date: str, **figures) -> list[dict]:
    return [{"key": k.replace("_", "."), "arch": "sm_90", "status": "pass", "value": v,
             "unit": "B/clk" if k.startswith("l2") else "cycles", "spread": 0.0,
             "method": "m", "provenance": {"uuid": b, "device": MODEL, "date": date}}
            for k, v in figures.items()]


# ten boards 3% apart on the L2 stream, each measured twice (0.2-0.5% between its nights);
# every board reads 4 cycles for the add
L2 = [3940, 3962, 3980, 4001, 4015, 4030, 4044, 4050, 4061, 4058]
SAMPLE = [run(board(i), f"2026-11-2{n}T00:00:00", l2_gpu=v * (1 + 0.002 * n * (-1) ** i),
              latency_add=4.0)
          for i, v in enumerate(L2) for n in (1, 2)]


@pytest.fixture
def root(tmp_path):
    (tmp_path / "sm_90.yaml").write_text(FILE)
    return tmp_path


def test_a_figure_boards_disagree_on_is_board_dependent_and_one_they_agree_on_is_not(root):
    plan = F.plan_fleet("sm_90", SAMPLE, MODEL, root=root)
    assert list(plan.written) == ["l2.gpu"] and list(plan.agreeing) == ["latency.add"]
    d = plan.written["l2.gpu"]
    medians = [v * (1 + 0.003 * (-1) ** i) for i, v in enumerate(L2)]   # of its two nights
    assert d.n_boards == 10 and d.n_runs == 20
    assert (d.low, d.high) == pytest.approx((min(medians), max(medians)))
    # sigma from 10 two-night moves (0.2% each): their RMS / sqrt 2
    assert d.sigma_rel == pytest.approx(0.002 / 2 ** 0.5, rel=0.01)
    assert "10 two-run moves" in d.sigma_basis
    assert d.tolerance == {"rel": 0.02}        # 3 sigma < the entry's own 2%: kept
    assert d.dates == ("2026-11-21", "2026-11-22")


def test_the_writer_makes_a_device_entry_with_boards_dates_and_rule(root):
    plan = F.plan_fleet("sm_90", SAMPLE, MODEL, root=root)
    written = F.write_fleet("sm_90", plan, MODEL, root=root)
    assert written == {root / "sm_90.yaml": ["l2.gpu"]}
    text = (root / "sm_90.yaml").read_text()
    assert text.startswith(FILE)                  # every other entry, byte for byte
    raw = yaml.safe_load(text)["devices"][MODEL]["characteristics"]["l2.gpu"]
    assert raw["note"] == "the whole-GPU L2 stream"
    assert len(raw["provenance"]["boards"]) == 10
    assert raw["provenance"]["fleet"]["rule"] == F.RULE
    assert raw["provenance"]["fleet"]["dates"] == ["2026-11-21", "2026-11-22"]
    assert raw["source"].startswith(f"fleet sample of 10 {MODEL} boards, runs of 2026-11-21")
    e = E.parse(text, root / "sm_90.yaml").get("l2.gpu", MODEL)
    assert e.boards == 10 and e.fleet_rule == F.RULE and "over 10 boards" in e.describe()
    # a hold-out board 1% below the lowest sampled board conforms; 5% below does not
    assert e.check(min(L2) * 0.99) and not e.check(min(L2) * 0.95)


def test_a_board_measured_with_an_older_method_does_not_count(root):
    old = run(board(99), "2026-11-01T00:00:00", l2_gpu=3000.0)
    for r in old:
        r["method"] = "the older method"
    plan = F.plan_fleet("sm_90", [old, *SAMPLE], MODEL, root=root)
    assert plan.written["l2.gpu"].n_boards == 10


def test_noise_declared_by_the_entry_counts_towards_sigma(root):
    fig = F.collect(SAMPLE[:6], "sm_90", MODEL)["l2.gpu"]   # 3 boards, 3 moves
    quiet, _ = F.sigma(fig, [])
    loud, basis = F.sigma(fig, [0.03, 0.03, 0.03])
    assert loud > quiet and "6 two-run moves" in basis
    single = F.collect([SAMPLE[0], SAMPLE[2]], "sm_90", MODEL)["l2.gpu"]   # no pair
    s, basis = F.sigma(single, [])
    assert s == 0.0 and basis == "median relative spread over launches of 2 results"
    single.spreads.clear()
    assert F.sigma(single, []) == (0.0, "no noise measured")


def test_too_few_boards_and_other_models_are_left_alone(root):
    plan = F.plan_fleet("sm_90", SAMPLE[:4], MODEL, root=root)     # 2 boards
    assert plan.too_few == {"l2.gpu": 2, "latency.add": 2} and not plan.written
    assert not F.collect(SAMPLE, "sm_90", "NVIDIA H200")


def test_the_fleet_command(root, tmp_path, capsys):
    files = []
    for i, results in enumerate(SAMPLE):
        p = tmp_path / f"run{i}.json"
        p.write_text(json.dumps({"meta": {}, "results": results}))
        files.append(str(p))
    args = ["fleet", "--root", str(root), "--arch", "sm_90", "--model", MODEL, "--runs", *files]
    assert cli.main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "sample: 10 boards of NVIDIA H100 80GB HBM3 in 20 run(s)" in out
    assert ("1 figures from the sample (1 board-dependent, 0 whose entry failed a sampled "
            "board); 1 agree across boards") in out
    assert "l2.gpu: 4060-4060 ->" in out and "over 10 boards" in out
    assert "dry run: nothing written" in out and (root / "sm_90.yaml").read_text() == FILE
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert f"wrote 1 fleet ranges to {root / 'sm_90.yaml'}" in out
    # the command judges its sample against what it wrote: 20 L2 and 20 add figures
    assert "the sample against the entries now written: 40 figures judged, 0 out of" in out
    # no board of the model in the runs: one clear error, nothing written
    assert cli.main([*args[:-len(files)], files[0], "--model", "NVIDIA H200"]) == 2
    assert "no sm_90 figure of 'NVIDIA H200'" in capsys.readouterr().err
    assert cli.main([*args, "--min-boards", "1"]) == 2


def test_the_fleet_command_takes_its_sample_from_a_history_store(root, tmp_path, capsys):
    from pytest_gpuchar.results.history import open_history
    db = tmp_path / "fleet.sqlite"
    hist = open_history(str(db))
    for results in SAMPLE:
        hist.record({"meta": {"date": results[0]["provenance"]["date"]}, "results": results},
                    source="import")
    hist.close()
    args = ["fleet", "--root", str(root), "--arch", "sm_90", "--model", MODEL]
    assert cli.main([*args, "--history", str(db), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"sample: 10 boards of {MODEL} in 20 run(s) of {db}" in out
    assert "(1 board-dependent" in out
    assert cli.main([*args, "--history", str(tmp_path / "nope.sqlite")]) == 2
    assert "nope.sqlite: no such file" in capsys.readouterr().err


def test_boards_the_entry_spans_stay_when_measured_the_same_way(root):
    """A model's range never forgets a board: the entry's boards that the sample has no run
    of are kept when the entry's method is the sample's, left out when it is another."""
    fig = F.collect(SAMPLE, "sm_90", MODEL)["l2.gpu"]
    old = {"method": "m", "tolerance": {"rel": 0.02},
           "provenance": {"boards": {"GPU-c0d1af1c": 4100.0, board(0)[:12]: 1.0}}}
    d = F.derive(fig, old)
    assert d.kept == ["GPU-c0d1af1c"] and d.n_boards == 11 and d.high == 4100.0
    assert d.boards[board(0)[:12]] != 1.0          # the sample's own run wins for its board
    assert F.fleet_provenance(d, MODEL)["fleet"]["kept_from_entry"] == ["GPU-c0d1af1c"]
    other = F.derive(fig, dict(old, method="an older method"))
    assert other.kept == [] and other.n_boards == 10


def test_an_entry_that_fails_a_sampled_board_is_written_from_the_sample(root):
    """Boards agreeing within their noise keep their entry only while it passes every run of
    them: nine boards at 4040-4080 B/clk and one at 3970, each night 1% off its median (the
    boards 'agree': 3 sigma is 4%), and that board's low night 3930 is outside 4060 +- 2%."""
    values = [4040 + 5 * i for i in range(9)] + [3970]
    sample = [run(board(i), f"2026-11-2{n}T00:00:00", l2_gpu=v * (1 + 0.01 * (-1) ** n))
              for i, v in enumerate(values) for n in (1, 2)]
    plan = F.plan_fleet("sm_90", sample, MODEL, root=root)
    d = plan.written["l2.gpu"]
    assert not d.dependent and d.rejected == [board(9)]
    assert (d.low, d.high) == pytest.approx((3970, 4080))
    assert d.tolerance == {"rel": 0.043}               # 3 x 1.41%, rounded up
    new = E.Expected("l2.gpu", "B/clk", range=(d.low, d.high), rel_tol=d.tolerance["rel"])
    assert all(new.check(r[0]["value"]) for r in sample)
    text = "\n".join(F.lines(plan, MODEL))
    assert "1 whose entry failed a sampled board" in text and "failed GPU-00000009" in text


def test_the_numbers_a_run_chose_do_not_make_another_method(root):
    """Two boards of one code: the loop finder chose another trip count, the clock read
    another MHz. They are one method; new words in the method are another."""
    a = run(board(1), "2026-11-21T00:00:00", l2_gpu=4000.0)
    b = run(board(2), "2026-11-22T00:00:00", l2_gpu=4100.0)
    c = run(board(3), "2026-11-23T00:00:00", l2_gpu=4050.0)
    a[0]["method"] = "6 launches of 238820 trips at 1980 MHz"
    b[0]["method"] = "6 launches of 238747 trips at 1978 MHz"
    c[0]["method"] = "6 launches of 238747 trips at 1978 MHz, each from its own buffer place"
    assert F.method_shape(a[0]["method"]) == F.method_shape(b[0]["method"])
    assert list(F.collect([a, b], "sm_90", MODEL)["l2.gpu"].boards) == [board(1), board(2)]
    assert list(F.collect([a, b, c], "sm_90", MODEL)["l2.gpu"].boards) == [board(3)]
    # the sizes a procedure sweeps are the method's, not a run's choice (bar.warp.sync read
    # 1.625 cycles/op over [4, 8, 12] ops and 1.0 over [8, 12, 16] on every board)
    assert F.method_shape("slope over [4, 8, 12] ops, median of 7") != \
        F.method_shape("slope over [8, 12, 16] ops, median of 7")
    assert F.method_shape("depth 16/32/64") != F.method_shape("depth 32/64/128")
    assert F.method_shape("median of 7 launches") == F.method_shape("median of 25 launches")


def test_runs_older_than_the_entry_that_fail_it_are_left_out(root):
    """The entry was measured on 2026-11-25 (4000 B/clk +- 2%); two boards' runs of 11-21 read
    a quarter of that (a probe's kernel changed since, its method's words did not): they are
    not the model's boards as measured now. Their later runs, and boards that pass, stay."""
    path = root / "sm_90.yaml"
    path.write_text(FILE.replace("    note: the whole-GPU L2 stream\n",
                                 "    note: the whole-GPU L2 stream\n"
                                 "    provenance: {date: '2026-11-25T10:00:00+00:00'}\n"))
    sample = [run(board(i), f"2026-11-2{n}T00:00:00",
                  l2_gpu=(1000.0 if n == 1 and i < 2 else 4050.0 + 2 * i)) for i in range(5)
              for n in (1, 6)]
    plan = F.plan_fleet("sm_90", sample, MODEL, root=root)
    d = (plan.written | plan.agreeing)["l2.gpu"]
    assert d.n_boards == 5 and d.n_runs == 8 and d.low == pytest.approx(4050)
    assert not d.rejected and not d.superseded
    only_old = [rs for rs in sample if rs[0]["provenance"]["date"] < "2026-11-25"
                or rs[0]["provenance"]["uuid"] not in (board(0), board(1))]
    plan = F.plan_fleet("sm_90", only_old, MODEL, root=root)
    d = (plan.written | plan.agreeing)["l2.gpu"]
    assert d.superseded == [board(0), board(1)] and d.n_boards == 3
    assert (d.low, d.high) == pytest.approx((4054, 4058))


def test_a_new_device_entry_keeps_the_noise_the_arch_entry_declares(root):
    path = root / "sm_90.yaml"
    path.write_text(FILE.replace("    note: the whole-GPU L2 stream\n",
                                 "    note: the whole-GPU L2 stream\n"
                                 "    noise: {rel: 0.03, source: 3 x RMS, boards: "
                                 "{GPU-a: [0.01, 0.012]}}\n"))
    F.write_fleet("sm_90", F.plan_fleet("sm_90", SAMPLE, MODEL, root=root), MODEL, root=root)
    new = yaml.safe_load(path.read_text())["devices"][MODEL]["characteristics"]["l2.gpu"]
    assert new["noise"]["rel"] == 0.03 and "GPU-a" not in new["provenance"]["boards"]


def test_the_noise_command_pairs_each_boards_runs_in_a_history_store(root, tmp_path, capsys):
    """`noise --history`: each board's consecutive runs are a pair; without --key every figure
    that moved by more than 1% in a pair gets its noise (here the L2 stream, its nights 0.4%
    apart on every board, gets none; the add, 4 -> 4.2 cycles on three boards, does: 3 x the RMS of three 5% moves and seven of 0)."""
    from pytest_gpuchar.results.history import open_history
    db = tmp_path / "h.sqlite"
    hist = open_history(str(db))
    for i, results in enumerate(SAMPLE):
        if i // 2 < 3 and i % 2:
            results = [dict(r, value=4.2) if r["key"] == "latency.add" else r for r in results]
        hist.record({"meta": {"date": results[0]["provenance"]["date"]}, "results": results},
                    source="import")
    hist.close()
    args = ["noise", "--root", str(root), "--arch", "sm_90", "--history", str(db)]
    assert cli.main(args) == 2 and "needs --device" in capsys.readouterr().err
    assert cli.main([*args, "--device", MODEL]) == 0
    out = capsys.readouterr().out
    assert "10 pair(s) of runs of one board" in out and "1 figure(s) moved by more" in out
    assert "latency.add: ±8.5% (10 moves over 10 boards, largest 5.00%)" in out
    noise = yaml.safe_load((root / "sm_90.yaml").read_text())["characteristics"][
        "latency.add"]["noise"]
    assert noise["rel"] == 0.085 and len(noise["boards"]) == 10
    # the store holds every run of its boards: a second call replaces their moves by the same
    before = (root / "sm_90.yaml").read_text()
    assert cli.main([*args, "--device", MODEL]) == 0
    assert (root / "sm_90.yaml").read_text() == before


def test_misfits_names_a_sampled_run_the_entries_fail(root):
    """What the fleet command checks after writing: with the entries as they are (the L2
    stream's 4060 +- 2%), the sample's lowest boards fail; after write_fleet none does."""
    judged, bad = F.misfits("sm_90", SAMPLE, MODEL, root=root)
    assert judged == 40 and {b for _, b, _, _ in bad} == {board(0), board(1)}
    assert all(k == "l2.gpu" and "4060" in e for k, _, _, e in bad)
    F.write_fleet("sm_90", F.plan_fleet("sm_90", SAMPLE, MODEL, root=root), MODEL, root=root)
    assert F.misfits("sm_90", SAMPLE, MODEL, root=root) == (40, [])

