"""Each declared table is written by the one stage its declaration names (``stage:`` in
``pipeline/declared/tables/*.yaml``), and by no other.

The nightly job runs on a small simulated fleet (8 GPUs, 20 days, some tickets) while every write is recorded with the stage
that made it: rows appended or cleared through the warehouse (``insert``, ``replace``,
``clear``) and every INSERT, DELETE, UPDATE or CREATE TABLE statement sent to the engine or the
warehouse's own connection. The registry's own writes (``files``, ``quarantine``, ``runs``, and
deleting a changed file's rows everywhere) belong to the warehouse.
"""

from __future__ import annotations

import re

import pytest

from pipeline.engine.base import Engine
from pipeline.schemas import all_schemas
from pipeline.warehouse import Warehouse

#: ``fleetfault run`` stage -> the ``stage:`` its tables declare.
DECLARED = {"inventory": "ingest.inventory", "smi": "ingest.smi", "xid": "ingest.xid", "tickets": "ingest.tickets"}
REGISTRY = "warehouse"
_WRITE = re.compile(r"^\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|DELETE\s+FROM|UPDATE|CREATE\s+(?:OR\s+REPLACE\s+)?TABLE"
                    r"(?:\s+IF\s+NOT\s+EXISTS)?|DROP\s+TABLE(?:\s+IF\s+EXISTS)?|ALTER\s+TABLE)\s+\"?(\w+)\"?",
                    re.IGNORECASE)


def written_table(sql: str) -> str | None:
    """The table a statement writes, or None for a query."""
    m = _WRITE.match(sql)
    return m[1] if m else None


def problems(writes: set[tuple[str, str, str]]) -> list[str]:
    """Each (writer, table, how) that breaks the declarations: a stage writing a table another
    stage owns or none declares, a registry table written by stage code, two writers of one table."""
    schemas = all_schemas()
    out, writers = [], {}
    for writer, table, how in sorted(writes):
        if table not in schemas:
            continue  # a temporary table of the step
        owner = schemas[table].stage
        if writer == REGISTRY:
            continue  # the registry keeps its promises for every stage (a changed file's rows go)
        if owner == REGISTRY:
            if how == "engine":
                out.append(f"stage {writer} writes the registry's table {table} through the engine")
            continue
        writers.setdefault(table, set()).add(writer)
        if DECLARED.get(writer, writer) != owner:
            out.append(f"stage {writer} writes {table} ({how}), which declares stage: {owner}")
    out += [f"{table} has {len(w)} writers: {', '.join(sorted(w))}" for table, w in writers.items() if len(w) > 1]
    return out


def test_the_check_can_fail():
    assert written_table('INSERT INTO "failures" (a) SELECT 1') == "failures"
    assert written_table("DELETE FROM predictions WHERE as_of = DATE '2025-01-01'") == "predictions"
    assert written_table("SELECT * FROM failures") is None
    assert problems({("stats", "failures", "insert")}) == []
    assert problems({("link", "failures", "insert")}) == ["stage link writes failures (insert), which declares stage: stats"]
    assert problems({("predict", "files", "engine")}) == ["stage predict writes the registry's table files through the engine"]
    assert problems({("stats", "stats_afr", "insert"), ("report", "stats_afr", "engine")})[-1] == \
        "stats_afr has 2 writers: report, stats"


@pytest.fixture
def recorder(monkeypatch):
    """Record (writer, table, how) for every write; the writer is the running stage, or the
    registry while one of its own methods runs."""
    import pipeline.run as run

    who = ["(no stage)"]
    writes: set[tuple[str, str, str]] = set()

    def as_writer(name, fn):
        def wrapped(*args, **kwargs):
            who.append(name)
            try:
                return fn(*args, **kwargs)
            finally:
                who.pop()
        return wrapped

    for method in ("_forget_file", "_forget_files", "_insert_rows", "quarantine", "start_run", "end_run", "migrate"):
        monkeypatch.setattr(Warehouse, method, as_writer(REGISTRY, getattr(Warehouse, method)))
    resolve = run.resolve_stage
    stage_of = {target: name for name, target in run.STAGES}
    stage_of.update({target: name for name, target in run.DERIVE_AFTER.items()})  # a derivation writes for its stage
    monkeypatch.setattr(run, "resolve_stage", lambda target: as_writer(stage_of[target], resolve(target)))

    def spy(how, fn, table_of):
        def wrapped(self, *args, **kwargs):
            table = table_of(*args)
            if table:
                writes.add((who[-1], table, how))
            return fn(self, *args, **kwargs)
        return wrapped

    monkeypatch.setattr(Warehouse, "insert", spy("insert", Warehouse.insert, lambda table, *a: table))
    monkeypatch.setattr(Warehouse, "clear", spy("insert", Warehouse.clear, lambda table, *a: table))
    monkeypatch.setattr(Warehouse, "_sql", spy("sql", Warehouse._sql, lambda sql, *a: written_table(sql)))
    monkeypatch.setattr(Engine, "execute", spy("engine", Engine.execute, lambda sql, *a: written_table(sql)))
    return who, writes


def test_every_stage_writes_only_the_tables_it_declares(tmp_path, recorder, cli):
    from pipeline.config import load_config
    from pipeline.run import run_pipeline
    from tests.conftest import ROOT

    who, writes = recorder
    data = tmp_path / "data"
    assert cli("simulate", "--gpus", 8, "--days", 20, "--seed", 5, "--accel", 60, "--out", data) == 0
    cfg = load_config(ROOT / "fleetfault.toml")
    _, code = run_pipeline(cfg, data, tmp_path / "wh.duckdb", tmp_path / "out")
    assert code in (0, 1)
    stages = {w for w, _, _ in writes}
    assert {"inventory", "smi", "xid", "tickets", "normalize", "link", "stats", "predict"} <= stages, stages
    tables = {t for _, t, _ in writes}
    assert {"tickets_coded", "tickets", "failures", "features", "predictions"} <= tables, tables
    assert problems(writes) == []


def test_review_import_writes_only_the_answers(tmp_path, recorder):
    from pipeline.config import Config
    from pipeline.normalize.review import import_review

    who, writes = recorder
    answers = tmp_path / "review.csv"
    answers.write_text("dimension,text,code\naction,返厂,REPLACE\n", encoding="utf-8")
    with Warehouse(tmp_path / "wh.duckdb") as wh:
        writes.clear()
        who.append("normalize.review")
        assert import_review(wh, Config(), answers) == 1
        who.pop()
    assert {(w, t) for w, t, _ in writes} == {("normalize.review", "review_answers")}
