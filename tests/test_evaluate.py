"""Scoring coded tickets against truth, the `evaluate tickets` command, and the acceptance
target on simulator tickets read through the real ticket readers."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.errors import UsageError
from pipeline.normalize.evaluate import score

TRUTH = pl.DataFrame({
    "service_point": ["a", "a", "a", "b", "b"],
    "ticket_id": ["1", "2", "3", "1", "9"],
    "part_code": ["GPU", "FAN", "PSU", "GPU", "DIMM"],
    "symptom_code": ["FELL_OFF_BUS", "FAN_FAULT", "POWER_FAULT", "HANG", "MEMORY_CORRECTABLE"],
    "action_code": ["RESEAT", "REPLACE", "REPLACE", "REBOOT", "REPLACE"],
})
CODED = pl.DataFrame({
    "service_point": ["a", "a", "a", "b", "c"],
    "ticket_id": ["1", "2", "3", "1", "1"],
    "part_code": ["GPU", "GPU", None, "GPU", "GPU"],  # one wrong, one left to review
    "symptom_code": ["FELL_OFF_BUS", "FAN_FAULT", "POWER_FAULT", "HANG", None],
    "action_code": ["RESEAT", "REPLACE", "REPLACE", "", "REPLACE"],  # "" is not coded
})


def test_precision_coverage_and_errors():
    r = score(CODED, TRUTH)
    s = {row["dimension"]: row for row in r.summary.iter_rows(named=True)}
    assert s["part"]["tickets"] == 4 and s["part"]["auto"] == 3 and s["part"]["correct"] == 2
    assert s["part"]["precision"] == pytest.approx(2 / 3) and s["part"]["coverage"] == pytest.approx(3 / 4)
    assert s["symptom"]["precision"] == 1.0 and s["symptom"]["coverage"] == 1.0
    assert s["action"]["coverage"] == pytest.approx(3 / 4)
    assert r.confusion.rows() == [("part", "FAN", "GPU", 1)]
    assert ("part", "PSU", 1) in r.missed.rows()
    assert (r.unmatched_coded, r.unmatched_truth) == (1, 1)
    assert not r.passed()


def test_a_perfect_coding_passes():
    assert score(TRUTH, TRUTH).passed()


def test_dimensions_missing_from_one_table_are_left_out():
    r = score(CODED.drop("action_code"), TRUTH)
    assert r.summary["dimension"].to_list() == ["part", "symptom"]


def test_tables_without_keys_are_a_usage_error():
    with pytest.raises(UsageError, match="ticket_id"):
        score(CODED.drop("ticket_id"), TRUTH)
    with pytest.raises(UsageError, match="code column"):
        score(CODED.select("service_point", "ticket_id"), TRUTH)


def test_evaluate_command(cli, tmp_path, capsys):
    CODED.write_csv(tmp_path / "coded.csv")
    TRUTH.write_parquet(tmp_path / "truth.parquet")
    code = cli("evaluate", "tickets", tmp_path / "coded.csv", "--truth", tmp_path / "truth.parquet",
               "-o", tmp_path / "eval.csv")
    out = capsys.readouterr().out
    assert code == 0
    assert "66.67%" in out and "misses the targets" in out
    tidy = pl.read_csv(tmp_path / "eval.csv")
    assert set(tidy["section"]) == {"score", "error", "review"}


def test_evaluate_command_names_a_missing_file(cli, tmp_path, capsys):
    assert cli("evaluate", "tickets", tmp_path / "nope.csv", "--truth", tmp_path / "t.csv") == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("seed", [11, 12])
def test_simulator_tickets_meet_the_acceptance_target(tmp_path, seed):
    """Simulator exports (GBK CSV, XLSX, JSON ...) read by the ticket readers, coded, scored."""
    from pipeline.config import Config
    from pipeline.ingest.tickets import load_tickets
    from pipeline.normalize.matcher import Matcher
    from pipeline.simulate.process import simulate_fleet
    from pipeline.simulate.tickets import write_tickets

    sim = simulate_fleet(1000, 365, seed)
    truth = pl.DataFrame(write_tickets(sim, tmp_path, {})).select(
        "service_point", "ticket_id", "part_code", "symptom_code", "action_code")
    cfg = Config()
    frames = [load_tickets(f, i, f.parent.name, cfg).tables["tickets_raw"]
              for i, f in enumerate(sorted(p for p in tmp_path.rglob("*") if p.is_file()))]
    tickets = pl.concat(frames, how="diagonal_relaxed")
    coded = Matcher.load().code_frame(tickets)
    r = score(coded, truth)
    print(r.summary)
    assert r.unmatched_truth == 0
    assert r.passed(precision=0.99, coverage=0.95), (r.summary, r.confusion)
