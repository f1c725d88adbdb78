"""The review loop through the CLI: export the unsure texts, a person fills in codes,
import them, and from then on those texts and near variants are coded automatically."""

from __future__ import annotations

import openpyxl
import pytest

import fake_matcher
from test_tickets_stage import DUMP_2, run_stages


@pytest.fixture
def warehouse(tmp_path, data, monkeypatch):
    from pipeline.warehouse import Warehouse

    fake_matcher.install(monkeypatch)
    path = tmp_path / "wh.duckdb"
    with Warehouse(path) as wh:
        run_stages(wh, data)
    return path


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    (d / "tickets" / "sha-sp1").mkdir(parents=True)
    (d / "tickets" / "sha-sp1" / "2025-03-28.csv").write_bytes(DUMP_2.encode("gbk"))
    return d


def fill(path, answers: dict[tuple[str, str], str]) -> None:
    book = openpyxl.load_workbook(path)
    ws = book["review"]
    header = [c.value for c in ws[1]]
    for row in ws.iter_rows(min_row=2):
        rec = dict(zip(header, row))
        key = (rec["dimension"].value, rec["text"].value)
        if key in answers:
            rec["code"].value = answers[key]
    book.save(path)


def test_export_lists_unsure_texts_with_three_suggestions(cli, warehouse, tmp_path):
    out = tmp_path / "review.xlsx"
    assert cli("review", "export", "-o", out, "--warehouse", warehouse) == 0
    book = openpyxl.load_workbook(out)
    ws = book["review"]
    rows = [dict(zip([c.value for c in ws[1]], [c.value for c in r])) for r in ws.iter_rows(min_row=2)]
    keys = {(r["dimension"], r["text"]) for r in rows}
    assert keys == {("part", "板子冒烟"), ("symptom", "看起来烧了"), ("symptom", "风扇异响"), ("action", "返厂")}
    r = next(r for r in rows if r["text"] == "返厂")
    assert (r["tickets"], r["example_ticket"], r["code"]) == (1, "sha-sp1 SH-3", None)
    assert [r["suggestion_1"], r["suggestion_2"], r["suggestion_3"]] == ["REPLACE", "RESEAT", "REBOOT"]
    assert r["score_1"] == 50.0 and "板子冒烟" in r["context"]
    assert ("part", "GPU") in {(c.value, d.value) for c, d, _ in book["codes"].iter_rows(min_row=2)}


def test_import_stores_answers_and_the_next_run_codes_them(cli, warehouse, data, tmp_path):
    from pipeline.config import config_from_dict
    from pipeline.warehouse import Warehouse

    out = tmp_path / "review.xlsx"
    cli("review", "export", "-o", out, "--warehouse", warehouse)
    fill(out, {("action", "返厂"): "replace", ("symptom", "风扇异响"): "FAN_FAULT"})
    assert cli("review", "import", out, "--warehouse", warehouse) == 0
    with Warehouse(warehouse) as wh:
        assert sorted(wh.engine.rows("SELECT dimension, text, code FROM review_answers", step="test")) == [
            ("action", "返厂", "REPLACE"), ("symptom", "风扇异响", "FAN_FAULT")]
        # Recoded at once...
        assert wh.engine.scalar("SELECT action_code FROM tickets WHERE ticket_id = 'SH-3'", step="test") == "REPLACE"
        # ...and a new export with a near variant of the text is coded on the next run.
        (data / "tickets" / "sha-sp1" / "2025-04-04.csv").write_bytes(
            DUMP_2.replace("SH-3,", "SH-4,").replace("返厂", " 返 厂 ").replace("风扇异响", "风扇异响!").encode("gbk"))
        from pipeline.run import RunContext, resolve_stage

        ctx = RunContext(config_from_dict({}), wh, data, tmp_path / "out")
        for target in ("pipeline.ingest.tickets:run", "pipeline.normalize.stage:run", "pipeline.link.tickets:run"):
            resolve_stage(target)(ctx)
        sh4 = wh.engine.pl("SELECT * FROM tickets WHERE ticket_id = 'SH-4'", step="test").row(0, named=True)
        assert sh4["action_code"] == "REPLACE" and sh4["action_score"] == 100.0
        assert wh.engine.scalar("SELECT symptom_code FROM tickets WHERE ticket_id = 'SH-2'", step="test") == "FAN_FAULT"


def test_import_rejects_bad_codes_and_stores_nothing(cli, warehouse, tmp_path, capsys):
    from pipeline.warehouse import Warehouse

    out = tmp_path / "review.xlsx"
    cli("review", "export", "-o", out, "--warehouse", warehouse)
    fill(out, {("action", "返厂"): "REPLACE", ("part", "板子冒烟"): "MAINBOARD", ("symptom", "风扇异响"): "REPLACE"})
    assert cli("review", "import", out, "--warehouse", warehouse) == 2
    err = capsys.readouterr().err
    assert "'MAINBOARD' is not a part code" in err and "'REPLACE' is not a symptom code" in err
    assert "Allowed codes: part: GPU" in err
    with Warehouse(warehouse) as wh:
        assert wh.engine.scalar("SELECT count(*) FROM review_answers", step="test") == 0


def test_later_answer_replaces_earlier_and_csv_round_trips(cli, warehouse, tmp_path):
    from pipeline.warehouse import Warehouse

    out = tmp_path / "review.csv"
    cli("review", "export", "-o", out, "--warehouse", warehouse)
    text = out.read_text(encoding="utf-8-sig")
    assert text.splitlines()[0].endswith(",code")
    lines = text.splitlines()
    lines = [ln + ("RESEAT" if ln.startswith("action,返厂,") else "") for ln in lines]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8-sig")
    assert cli("review", "import", out, "--warehouse", warehouse) == 0
    lines = [ln.replace("RESEAT", "REPLACE") for ln in lines]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8-sig")
    assert cli("review", "import", out, "--warehouse", warehouse) == 0
    with Warehouse(warehouse) as wh:
        assert wh.engine.rows("SELECT code FROM review_answers", step="test") == [("REPLACE",)]


def test_review_without_a_warehouse_is_a_usage_error(cli, tmp_path, capsys):
    assert cli("review", "export", "-o", tmp_path / "r.xlsx", "--warehouse", tmp_path / "none.duckdb") == 2
    assert "run `fleetfault run` first" in capsys.readouterr().err


def test_with_the_real_matcher_a_reviewed_text_and_its_variants_code_automatically(cli, tmp_path):
    """No fake here: the bundled taxonomy and matcher, end to end through the CLI."""
    from pipeline.config import config_from_dict
    from pipeline.run import RunContext, resolve_stage
    from pipeline.warehouse import Warehouse

    data = tmp_path / "real"
    point = data / "tickets" / "sjc-depot"
    point.mkdir(parents=True)
    head = "Ticket ID,Opened,Part,Problem Description,Resolution\n"
    (point / "a.csv").write_text(head + "S-1,2025-03-01 10:00,GPU,the thingy is borked,RMA\n"
                                        "S-2,2025-03-01 11:00,显卡,掉卡 Xid 79,重新插拔后恢复\n")
    wh_path = tmp_path / "real.duckdb"
    stages = ("pipeline.ingest.tickets:run", "pipeline.normalize.stage:run", "pipeline.link.tickets:run")

    def run_all():
        with Warehouse(wh_path) as wh:
            # the review loop alone: the second opinion (normalize.prior) may send "GPU ... RMA"
            # beside a text nobody could read to review whatever the answer to that text
            ctx = RunContext(config_from_dict({"normalize": {"prior": False}}), wh, data, tmp_path / "out")
            for s in stages:
                resolve_stage(s)(ctx)
            return {r[0]: r[1:] for r in wh.engine.rows("SELECT ticket_id, symptom_code, review FROM tickets", step="test")}

    got = run_all()
    assert got["S-2"] == ("FELL_OFF_BUS", False) and got["S-1"] == (None, True)
    out = tmp_path / "review.xlsx"
    assert cli("review", "export", "-o", out, "--warehouse", wh_path) == 0
    fill(out, {("symptom", "the thingy is borked"): "HANG"})
    assert cli("review", "import", out, "--warehouse", wh_path) == 0
    (point / "b.csv").write_text(head + "S-3,2025-03-02 10:00,GPU,The thingy is BORKED!!,RMA\n"
                                        "S-4,2025-03-02 11:00,GPU,the thingy is borkd,RMA\n")
    got = run_all()
    assert got["S-1"] == got["S-3"] == got["S-4"] == ("HANG", False)
