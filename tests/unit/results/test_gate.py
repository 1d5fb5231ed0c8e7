"""results/noise.py, results/gate.py, results/crossval.py, results/contract.py and
results/sample.py: the noise model, the bounds and change limits it gives, the
leave-one-board-out judgement, and the contract written from a fleet sample."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_gpuchar.results import contract, crossval, gate, noise
from pytest_gpuchar.results import expectations as E
from pytest_gpuchar.results import sample as S
from pytest_gpuchar.results.noise import Run


def run(board, model, values: dict, date, unit="cycles", method="slope", sm=132, spread=0.0):
    res = {k: {"key": k, "arch": "sm_90", "status": "pass", "value": v, "unit": unit,
               "spread": spread, "method": method} for k, v in values.items()}
    return Run(board, model, "sm_90", sm, date, res)


def fleet(values_by_board: dict, key="x", unit="cycles", model="M", **kw) -> list[Run]:
    out = []
    for b, vs in values_by_board.items():
        for i, v in enumerate(vs):
            out.append(run(b, model, {key: v}, f"2026-11-2{i}T00:00:00", unit=unit, **kw))
    return out


# --- the noise model -------------------------------------------------------------------------

def test_within_board_noise_comes_from_moves_apart_from_the_boards_spread():
    runs = fleet({"a": [100.0, 100.2], "b": [110.0, 109.8], "c": [105.0, 105.0]})
    f = noise.figures(runs, "sm_90", "M")["x"]
    assert f.moves() == pytest.approx([0.2, 0.2, 0.0])
    # RMS of moves / sqrt 2 at its 90% upper bound (3 moves), never below the largest move
    # of its family over 2 sqrt 2
    s = math.sqrt((0.04 + 0.04) / 2 / noise.chi2_quantile(0.1, 3))
    assert f.sigma_run == pytest.approx(max(s, 0.2 / (2 * math.sqrt(2))))
    assert f.sigma_board == pytest.approx(4.9)
    assert not f.exact and f.modes() == [100.1, 105.0, 109.9]


def test_an_exact_figure_has_no_noise_and_flags_a_one_cycle_move():
    runs = fleet({"a": [300.0, 300.0], "b": [300.0, 300.0], "c": [300.0]})
    b = gate.derive(noise.figures(runs, "sm_90", "M")["x"])
    assert b.exact and b.sigma_run == 0 and b.margin == 0.3        # 0.1% of 300
    assert gate.change(301.0, [300.0], sigma_run=0.0, unit="cycles", exact=True).moved
    assert not gate.change(300.0, [300.0], sigma_run=0.0, unit="cycles", exact=True).moved
    assert not b.conforms(301.0) and b.conforms(300.2)


def test_a_ratio_is_never_quieter_than_its_denominator():
    """The sustained clock under a load over the idle clock: where the sample's boards moved
    both clocks together, the ratio barely moved; its within-board sigma is still at least
    the idle clock's, relative to their values (on one H200 the idle clock alone read
    1980 -> 1971 MHz, within its noise, and moved the ratio seven of its own sigmas)."""
    idle, ratio = "tensor.clock_load.idle.sm_clock_mhz", "tensor.clock_load.ffma.sm_clock_vs_idle"
    clocks = {"a": [1980.0, 1972.0], "b": [1975.0, 1983.0], "c": [1990.0, 1990.0]}
    ratios = fleet({b: [1.0, 1.00001] for b in clocks}, key=ratio, unit="ratio")
    both = ratios + fleet(clocks, key=idle, unit="MHz")
    figs = noise.figures(both, "sm_90", "M")
    rel = figs[idle].sigma_run / figs[idle].center
    assert rel > 0.002 and figs[ratio].denominator_rel == pytest.approx(rel)
    assert figs[ratio].sigma_run == pytest.approx(rel * figs[ratio].center)
    b = gate.derive(figs[ratio])
    assert not gate.change(1.0042, [1.0], sigma_run=b.sigma_run, unit="ratio",
                           exact=False).moved
    # without its denominator in the sample, a ratio keeps the noise of its own moves
    alone = noise.figures(ratios, "sm_90", "M")[ratio]
    assert alone.denominator_rel == 0.0 and alone.sigma_run < 1e-3
    assert gate.change(1.0042, [1.0], sigma_run=gate.derive(alone).sigma_run, unit="ratio",
                       exact=False).moved


def test_chi2_and_tolerance_factors():
    assert noise.chi2_quantile(0.5, 10) == pytest.approx(9.342, rel=0.01)
    assert noise.chi2_quantile(0.1, 20) == pytest.approx(12.443, rel=0.01)
    assert gate.Z == pytest.approx(5.06, abs=0.01)
    assert noise.tolerance_factor(21, gate.ALPHA) == pytest.approx(
        gate.Z * math.sqrt(20 * (1 + 1 / 21) / noise.chi2_quantile(0.1, 20)))
    assert noise.tolerance_factor(1, gate.ALPHA) == math.inf


def test_placement_figures_are_sampled_over_the_die():
    """A cluster's barrier depends on where its CTAs land: the H100 and H200 share the GH100
    die, so a mode one model's boards have not shown (46) is known from the other's."""
    key = "movement.cluster.barrier_relaxed.c2"
    runs = fleet({"h1": [59.0, 59.0], "h2": [59.0, 59.0], "h3": [55.0, 55.0]}, key=key,
                  model="H100") + \
        fleet({"g1": [46.0, 46.0], "g2": [59.0], "g3": [55.0]}, key=key, model="H200")
    f = noise.figures(runs, "sm_90", "H100")[key]
    assert f.pooled and set(f.boards) == {"h1", "h2", "h3", "g1", "g2", "g3"}
    assert f.modes() == [46.0, 55.0, 59.0]
    other_die = noise.figures(runs + [run("x", "H100 PCIe", {key: 1.0}, "2026-11-29", sm=114)],
                              "sm_90", "H100")[key]
    assert "x" not in other_die.boards       # 114 SMs: another die's floorsweeping


def test_a_multimodal_figure_with_a_new_board_in_a_known_mode_conforms():
    """Relaxed cluster barrier c2: boards settle on 46, 55 or 59 cycles. A new board in a
    known mode conforms; a value far outside every mode does not."""
    key = "movement.cluster.barrier_relaxed.c2"
    runs = fleet({f"b{i}": [v, v] for i, v in enumerate([46.0, 55.0, 59.0, 59.0, 55.0, 59.0,
                                                         46.0, 59.0])}, key=key)
    b = gate.derive(noise.figures(runs, "sm_90", "M")[key])
    assert b.modes == (46.0, 55.0, 59.0)
    new_board = run("new", "M", {key: 46.0}, "2026-12-01")
    figs = noise.figures(runs, "sm_90", "M")
    night = crossval.judge_night(new_board, [], figs, {key: b}, 1)
    assert night.alarms == [] and night.judged == 1
    assert not b.conforms(500.0)


def test_models_that_disagree_are_sampled_apart():
    runs = fleet({"h1": [680.0, 681.0], "h2": [690.0, 690.5], "h3": [700.0, 700.0]},
                 key="memory.latency.dram", model="H100") + \
        fleet({"g1": [800.0], "g2": [810.0], "g3": [820.0]}, key="memory.latency.dram",
              model="H200")
    f = noise.figures(runs, "sm_90", "H100")["memory.latency.dram"]
    assert not f.pooled and set(f.boards) == {"h1", "h2", "h3"}


def test_a_power_of_two_knee_resolves_one_step():
    runs = fleet({"a": [512.0, 512.0], "b": [512.0, 1024.0], "c": [512.0]}, key="k.knee_bytes",
                 unit="bytes")
    b = gate.derive(noise.figures(runs, "sm_90", "M")["k.knee_bytes"])
    assert b.grid and b.conforms(1024.0) and b.conforms(2048.0) and not b.conforms(8192.0)
    mv = gate.change(1024.0, [512.0], sigma_run=0.0, unit="bytes", exact=False, grid=True)
    assert not mv.moved
    assert gate.change(4096.0, [512.0], sigma_run=0.0, unit="bytes", exact=False,
                       grid=True).moved


def test_a_models_error_is_bounded_above_only_and_asked_no_change():
    runs = fleet({"a": [0.05, 0.051], "b": [0.06, 0.06], "c": [0.07]}, key="bsp.mm.error",
                 unit="ratio")
    b = gate.derive(noise.figures(runs, "sm_90", "M")["bsp.mm.error"])
    assert b.low == 0.0 and b.conforms(0.001)
    assert gate.change(0.2, [0.05], sigma_run=0.001, unit="ratio", exact=False,
                       key="bsp.mm.error") is None


def test_info_identity_ignores_prose():
    a = {"value": 1.0, "unit": "bytes", "detail": "kept 57 MiB", "data": {"ratio": 0.95}}
    b = {"value": 1.0, "unit": "bytes", "detail": "kept 55 MiB", "data": {"ratio": 0.92}}
    assert gate.info_identity(a) == gate.info_identity(b)
    assert gate.info_identity(a) != gate.info_identity({**b, "value": 2.0})


# --- leave one board out -----------------------------------------------------------------------

def test_leave_one_board_out_judges_each_board_with_the_others_bounds():
    boards = {f"b{i}": [100.0 + i, 100.0 + i + 0.1] for i in range(6)}
    boards["odd"] = [140.0, 140.0]                  # far from every other board
    rep = crossval.cross_validate(fleet(boards), "sm_90", "M")
    counts = crossval.false_alarm_counts(rep)
    assert counts["board_runs"] == 14 and counts["first_nights"] == 7
    flagged = {r.board for r in rep.runs if r.alarms}
    assert flagged == {"odd"}                       # judged without itself: outside
    sizes = {i.move for i in rep.injections}
    assert {"+2%", "-5%", "+10%"} <= sizes
    assert crossval.smallest_caught(rep.injections)["x"] in ("2%", "5%", "10%", "> 10%")


# --- the contract --------------------------------------------------------------------------------

HEAD = """schema: 2
arch: sm_90
characteristics:
  x:
    value: 100
    unit: cycles
    tolerance: {abs: 5}
    source: measured
    method: slope
"""


def _runs():
    return fleet({f"b{i}": [100.0 + i, 100.0 + i + 0.1] for i in range(5)})


def test_the_contract_is_one_line_per_figure_and_the_sample_once(tmp_path):
    (tmp_path / "sm_90.yaml").write_text(HEAD)
    w = contract.write_model("sm_90", "M", _runs(), root=tmp_path, sample="abcd1234",
                             export="results/sm_90/fleet/sample.jsonl.gz")
    text = (tmp_path / "sm_90.yaml").read_text()
    assert w.changed == 1 and "    M: {boards: 5, runs: 10" in text
    [line] = [ln for ln in text.splitlines() if ln.startswith("      x:")]
    assert "source: fleet" in line and "method" not in line and "unit" not in line
    e = E.load_file(tmp_path / "sm_90.yaml").get("x", "M")
    assert e.range == (100.0, 104.1) and e.boards == 5 and e.sigma_run > 0


def test_accepting_a_conforming_board_changes_no_entry(tmp_path):
    (tmp_path / "sm_90.yaml").write_text(HEAD)
    contract.write_model("sm_90", "M", _runs(), root=tmp_path, sample="s1", export="e")
    before = (tmp_path / "sm_90.yaml").read_text()
    again = contract.write_model("sm_90", "M", _runs() + fleet({"new": [102.0, 102.1]}),
                                 root=tmp_path, sample="s2", export="e")
    after = (tmp_path / "sm_90.yaml").read_text()
    assert again.changed == 0 and again.unchanged == 1
    diff = [a for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(diff) == 1 and "M: {boards: 5" in diff[0]     # the sample's line only
    moved = contract.write_model("sm_90", "M", _runs() + fleet({"far": [130.0, 130.1]}),
                                 root=tmp_path, sample="s3", export="e")
    assert moved.changed == 1


def test_accept_extends_by_default_and_replaces_only_when_asked(tmp_path):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "sm_90.yaml").write_text(HEAD)
    sample = tmp_path / "results" / "sm_90" / "fleet" / "sample.jsonl.gz"
    S.write(sample, [S.run_doc(r) for r in _runs()])
    new = S.run_doc(run("new", "M", {"x": 101.0}, "2026-12-01T00:00:00"))
    contract.accept("sm_90", "M", [new], root=tmp_path / "exp", sample_path=sample)
    docs = S.read(sample)
    assert len(docs) == 11 and len({d["meta"]["uuid"] for d in docs}) == 6   # none dropped
    contract.accept("sm_90", "M", [new], root=tmp_path / "exp", sample_path=sample,
                    fleet="replace")
    assert [d["meta"]["uuid"] for d in S.read(sample)] == ["new"]
    e = E.load_file(tmp_path / "exp" / "sm_90.yaml").get("x", "M")
    assert e.value == 101.0 and e.boards == 1
    with pytest.raises(E.ExpectationError, match="no M run of sm_90 with a board UUID"):
        contract.accept("sm_90", "M", [{"results": []}], root=tmp_path / "exp",
                        sample_path=sample)


def test_the_sample_round_trips_and_names_itself(tmp_path):
    docs = [S.run_doc(r) for r in _runs()]
    p = tmp_path / "s.jsonl.gz"
    S.write(p, docs)
    assert S.read(p) == sorted(docs, key=lambda d: (d["meta"]["date"], d["meta"]["uuid"]))
    assert S.sample_id(docs) == S.sample_id(list(reversed(docs)))
    assert p.read_bytes() == (S.write(p, list(reversed(docs))) or p.read_bytes())
    back = noise.fleet_runs(S.read(p))
    assert {r.board for r in back} == {f"b{i}" for i in range(5)}
