"""Stage ``normalize``: the latest version of each ticket, its texts coded to the taxonomy.

Reads: ``tickets_raw`` (every row of every export), ``review_answers`` (codes people chose
for texts the matcher was unsure of). Writes: ``tickets_coded`` (one row per service point
and ticket id, with part/symptom/action codes and scores; ``review`` true when any code is
not confident), ``learned_codes`` (the codes the learned layer filled in where the rules left
review; see :mod:`pipeline.normalize.learned`, on unless ``normalize.learned = false``).
The ``link`` stage then writes ``tickets``: these rows with ``serial`` and ``link_method``.

The whole table is recoded on each run: the matcher works on distinct texts, so this costs
little, and an answer imported from review reaches every ticket that has its text.
"""

from __future__ import annotations

import logging

import polars as pl

from pipeline.config import Config
from pipeline.engine import DuckDBEngine
from pipeline.ingest.tickets import latest_sql
from pipeline.output import to_polars
from pipeline.schemas import schema

log = logging.getLogger(__name__)

DIMENSIONS = ("part", "symptom", "action")
CODE_COLUMNS = [c for d in DIMENSIONS for c in (f"{d}_code", f"{d}_score")] + ["review"]


def learned_answers(wh) -> list[tuple[str, str, str]]:
    """Reviewed answers as (dimension, text, code), oldest first, for ``Matcher.load``."""
    rows = wh.engine.rows("SELECT dimension, text, code FROM review_answers ORDER BY imported_at, dimension, text",
                          step="read review answers")
    return [(d, t, c) for d, t, c in rows]


def load_matcher(cfg: Config, learned: list[tuple[str, str, str]] | None = None):
    """The matcher of ``pipeline.normalize.matcher`` with the learned answers."""
    from pipeline.normalize.matcher import Matcher

    return Matcher.load(cfg, learned=list(learned or []))


def canonical_key(text: str) -> str:
    """The matcher's canonical form of a text: the key under which an answer is stored."""
    from pipeline.normalize.canonical import canonical

    return canonical(text)


def code(frame: pl.DataFrame, matcher) -> pl.DataFrame:
    """Add the code, score and review columns to a frame with part/symptom/action text.

    A ticket whose part or action text is its symptom text (an export with one description
    column, fed to every dimension at ingest) is coded twice: as written, and with those
    copies left empty so the matcher may reason from the symptom (掉卡 implies the GPU).
    Per dimension the confident code of the first wins, else that of the second.
    """
    texts = frame.select("part_text", "symptom_text", "action_text")
    coded = to_polars(matcher.code_frame(texts))
    shared = [pl.col(f"{d}_text") == pl.col("symptom_text") for d in ("part", "action")]
    copies = texts.with_row_index("_i").filter(pl.any_horizontal(shared).fill_null(False))
    if copies.height:
        alone = copies.with_columns([pl.when(c).then(None).otherwise(pl.col(f"{d}_text")).alias(f"{d}_text")
                                     for c, d in zip(shared, ("part", "action"))])
        coded = _prefer_confident(coded, to_polars(matcher.code_frame(alone.drop("_i"))), alone["_i"])
    out = frame.drop([c for c in CODE_COLUMNS if c in frame.columns])
    cols = [pl.Series(c, coded[c]) for c in CODE_COLUMNS]
    out = out.with_columns(cols)
    return out.with_columns(
        [pl.col(f"{d}_score").cast(pl.Float64) for d in DIMENSIONS] + [pl.col("review").fill_null(True).cast(pl.Boolean)]
    )


def _prefer_confident(coded: pl.DataFrame, again: pl.DataFrame, rows: pl.Series) -> pl.DataFrame:
    """``coded`` with, at ``rows``, each dimension that has no code taken from ``again``."""
    names = [c for c in CODE_COLUMNS if c != "review"]
    other = again.select(names).rename({c: f"_{c}" for c in names}).with_columns(rows.alias("_i"))
    both = coded.with_row_index("_i").join(other, on="_i", how="left", maintain_order="left")
    take = {d: pl.col(f"{d}_code").is_null() & pl.col(f"_{d}_code").is_not_null() for d in DIMENSIONS}
    both = both.with_columns([pl.when(take[d]).then(pl.col(f"_{c}")).otherwise(pl.col(c)).alias(c)
                              for d in DIMENSIONS for c in (f"{d}_code", f"{d}_score")])
    review = pl.any_horizontal([pl.col(f"{d}_code").is_null() for d in DIMENSIONS])
    return both.with_columns(review.alias("review")).select(coded.columns)


def latest(raw: pl.DataFrame) -> pl.DataFrame:
    """The latest version of each ticket among ``tickets_raw``-shaped rows (no warehouse)."""
    engine = DuckDBEngine()  # in memory: a frame, no warehouse
    try:
        engine.register("tickets_raw", raw)
        return engine.pl(latest_sql("tickets_raw"), step="latest ticket versions")
    finally:
        engine.con.close()


def to_tickets(latest_rows: pl.DataFrame) -> pl.DataFrame:
    """``tickets`` columns from latest raw rows (codes added later; serial unlinked)."""
    swaps = [pl.col(c) if c in latest_rows.columns else pl.lit(None, pl.Utf8).alias(c)
             for c in ("removed_serial", "installed_serial")]  # part-swap lists, where the export has them
    return latest_rows.select(
        "ticket_id", "service_point", "opened_at", "closed_at", "status", "host", "slot",
        pl.lit(None, pl.Utf8).alias("serial"), "serial_text", pl.lit(None, pl.Utf8).alias("link_method"),
        "part_text", "symptom_text", "action_text", *swaps, "file_id", "line_no",
    )


def swapped_gpu(tickets: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Coding guide rule 1, what was replaced is the part: where the text left the part
    open and the ticket's part-swap list names a GPU (``swap_part_text``, read by
    :func:`pipeline.ingest.tickets.swaps.is_gpu_part`), the part is GPU. ``rows`` are the
    latest raw rows ``tickets`` was made from, in the same order."""
    if "swap_part_text" not in rows.columns or not tickets.height:
        return tickets
    from pipeline.ingest.tickets.swaps import is_gpu_part

    gpu = pl.Series([bool(k) and is_gpu_part(k) for k in rows["swap_part_text"].to_list()], dtype=pl.Boolean)
    take = pl.col("part_code").is_null() & gpu
    still_open = pl.any_horizontal([pl.col(f"{d}_code").is_null() for d in ("symptom", "action")])
    return tickets.with_columns(
        pl.when(take).then(pl.lit("GPU")).otherwise(pl.col("part_code")).alias("part_code"),
        pl.when(take).then(pl.lit(100.0)).otherwise(pl.col("part_score")).alias("part_score"),
        pl.when(take).then(still_open).otherwise(pl.col("review")).alias("review"),
    )


def recode(wh, cfg: Config, notes: list[str] | None = None, engine=None) -> tuple[int, int]:
    """Rebuild ``tickets_coded`` from ``tickets_raw`` and the review answers; returns (tickets, to review).

    The latest versions are picked on ``engine`` (default: the warehouse's; the stage passes
    the configured one). What the learned layer did is appended to ``notes`` when given.
    """
    engine = engine or wh.engine
    # in a fixed order, whichever engine picked them (the coding reads them in this order)
    rows = engine.pl(latest_sql(dialect=engine.dialect) + " ORDER BY service_point, ticket_id",
                     step="latest ticket versions")
    tickets = to_tickets(rows)
    filled = None
    if tickets.height:
        answers = learned_answers(wh)
        tickets = swapped_gpu(code(tickets, load_matcher(cfg, answers)), rows)
        if cfg.normalize.learned:
            tickets, filled = _learned_layer(wh, cfg, tickets, answers, notes)
    else:
        tickets = tickets.with_columns(
            [pl.lit(None, pl.Utf8).alias(f"{d}_code") for d in DIMENSIONS]
            + [pl.lit(None, pl.Float64).alias(f"{d}_score") for d in DIMENSIONS]
            + [pl.lit(False).alias("review")]
        )
    tickets = tickets.select([c for c in schema("tickets_coded").names if c in tickets.columns])
    with wh.transaction():
        wh.replace("tickets_coded", tickets)
        wh.clear("learned_codes")
        if filled is not None:
            wh.insert("learned_codes", filled)
    return tickets.height, int(tickets["review"].sum()) if tickets.height else 0


# -- hook: the learned layer (pipeline.normalize.learned) ----------------------------------

def _learned_layer(wh, cfg: Config, tickets: pl.DataFrame, answers, notes: list[str] | None):
    """The tickets with the learned layer's codes, and its ``learned_codes`` rows."""
    from pipeline.normalize import learned
    from pipeline.predict.stage import models_dir

    folder = None if wh.path == ":memory:" else models_dir(cfg, wh.path) / learned.MODEL_DIR
    out, filled, layer = learned.apply(tickets, answers, cfg.normalize.learned_precision, folder, canonical_key)
    if notes is not None:
        notes.append(layer.summary())
    return out, filled


def stored_learned_layer(cfg: Config, wh_path, tickets: pl.DataFrame) -> pl.DataFrame:
    """``tickets`` with the codes of the learned layer the last run stored beside the
    warehouse (``fleetfault normalize``, which trains nothing); unchanged without one."""
    from pipeline.normalize import learned
    from pipeline.predict.stage import models_dir

    n = cfg.normalize
    layer = learned.load(models_dir(cfg, wh_path) / learned.MODEL_DIR, target=n.learned_precision) if n.learned else None
    if layer is None or not tickets.height:
        return tickets
    out, _ = learned.fill(tickets, layer, canonical_key)
    log.info("%s (stored model)", layer.summary())
    return out


def run(ctx) -> None:
    """Stage ``normalize``: recode every ticket's latest version into ``tickets_coded``."""
    notes: list[str] = []
    n, pending = recode(ctx.wh, ctx.cfg, notes, ctx.engine_for(("tickets_raw",)))
    ctx.report("normalize").rows_out = n
    if pending:
        ctx.note("normalize", f"{pending} of {n} tickets await review (`fleetfault review export -o review.xlsx`)")
    for note in notes:
        ctx.note("normalize", note)
