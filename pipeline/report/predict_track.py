"""The report's "How the list has done" section: a small HTML fragment, placed by the report layout.

Reads ``predict_track`` (written by the predict stage) and the last ``model_runs`` row;
writes nothing. Kept apart from the layout so the report's owner decides where it goes.
"""

from __future__ import annotations

from pipeline.report import html as h
from pipeline.warehouse import Warehouse


def section(wh: Warehouse) -> str:
    """Which ranker published the list and why, then caught / missed / false alarms / lead per month
    (empty before the predict stage has judged a labelled day)."""
    if not wh.table_exists("predict_track"):
        return ""
    df = wh.engine.pl("SELECT month, source, failures, caught, missed, false_alarms, median_lead_days FROM predict_track "
                      "ORDER BY month", step="report: predict track")
    if not df.height:
        return ""
    run = wh.engine.rows("SELECT promoted, reason FROM model_runs ORDER BY trained_at DESC LIMIT 1", step="report: last training")
    if run:
        who = ("a learned model ranks the list: " if run[0][0] else "the evidence score ranks the list: ") + run[0][1]
    else:
        who = "the evidence score ranks the list: no model has been trained yet (too little history or too few failures)"
    out = ["<h3>How the list has done</h3>", h.para(who[0].upper() + who[1:] + ".")]
    caught, fails, false = int(df["caught"].sum()), int(df["failures"].sum()), int(df["false_alarms"].sum())
    out.append(h.para(f"So far {caught} of {fails} GPU replacements were in the day's top list on one of the "
                      f"horizon's days before them; {false} flags fell on GPUs that were not replaced. Months marked "
                      "'replayed' score the evidence on the days before the nightly list existed."))
    out.append(h.table(df, formats={"median_lead_days": ".1f"},
                       labels={"median_lead_days": "median lead, days", "false_alarms": "false alarms"}))
    return "".join(out)
