"""The report's charts: matplotlib figures rendered to base64 PNG data URIs.

Figures are built with :class:`matplotlib.figure.Figure`, never pyplot, so drawing a chart
neither needs a display nor changes the backend of a notebook that imports this module.

Embedding PNGs keeps the report one self-contained file that opens offline and prints the
same way everywhere. Every chart has labelled axes with units and a muted, consistent palette.
Each function takes a polars frame and returns a ``data:image/png;base64,...`` string.
"""

from __future__ import annotations

import base64
import functools
import io
import math

import matplotlib as mpl
import polars as pl
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, PercentFormatter

ACCENT = "#2563eb"
WARN = "#dc2626"
MUTED = "#94a3b8"
PALETTE = ["#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#0ea5e9", "#84cc16", "#ec4899"]

_STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#475569",
    "axes.labelcolor": "#1e293b",
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.grid": True,
    "grid.color": "#e2e8f0",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
    "xtick.color": "#475569",
    "ytick.color": "#475569",
    "legend.frameon": False,
    "figure.dpi": 110,
    "savefig.bbox": "tight",
    "savefig.facecolor": "white",
}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _styled(func):
    """Draw and save inside the house style without touching the caller's global rcParams."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with mpl.rc_context(_STYLE):
            return func(*args, **kwargs)

    return wrapper


def _fig(width: float = 7.0, height: float = 3.2):
    fig = Figure(figsize=(width, height))  # not pyplot: no backend, no global state to leak
    return fig, fig.subplots()


def _short(text, n: int = 28) -> str:
    s = str(text)
    return s if len(s) <= n else s[: n - 1] + "…"


@_styled
def afr_bars(df: pl.DataFrame, by: str, fleet_pct: float | None = None) -> str:
    """Horizontal AFR bars per group with exact-interval whiskers and the fleet rate.

    Groups below the minimum exposure (``low_exposure``) are drawn muted. Whiskers of groups
    with almost no exposure would stretch the axis to thousands of percent and flatten every
    bar, so the axis stops at a readable limit and longer whiskers end in an arrow.
    """
    df = df.sort("afr_pct", descending=False, nulls_last=False).tail(20)
    labels = [_short(v) for v in df[by]]
    rate = df["afr_pct"].fill_null(0).to_list()
    low = df["afr_ci_low_pct"].fill_null(0).to_list()
    high = [h if h is not None and h == h else r for h, r in zip(df["afr_ci_high_pct"].to_list(), rate)]
    muted = df["low_exposure"].fill_null(False).to_list() if "low_exposure" in df.columns else [False] * df.height
    # Room for the largest rates and half the whiskers, never past the longest whisker.
    readable = max(2.2 * max([*rate, fleet_pct or 0]), sorted(high)[len(high) // 2])
    limit = min(readable, 1.05 * max(high)) if max(high) > 0 else 1.0
    fig, ax = _fig(7.0, max(1.6, 0.38 * len(labels) + 0.9))
    y = list(range(len(labels)))
    colors = [MUTED if m else ACCENT for m in muted]
    ax.barh(y, rate, color=colors, alpha=0.85, height=0.55)
    for yi, r, lo, hi in zip(y, rate, low, high):
        ax.plot([lo, min(hi, limit)], [yi, yi], color="#1e293b", linewidth=1.1)
        ax.plot([lo], [yi], marker="|", color="#1e293b", markersize=7)
        ax.plot([min(hi, limit)], [yi], marker=">" if hi > limit else "|", color="#1e293b",
                markersize=5 if hi > limit else 7)
    if fleet_pct is not None and fleet_pct == fleet_pct:
        ax.axvline(fleet_pct, color=WARN, linestyle="--", linewidth=1)
    ax.set_yticks(y, labels)
    ax.set_xlabel("Annualized failure rate (% per GPU-year)")
    ax.set_title(f"AFR by {by}")
    ax.grid(axis="y", visible=False)
    ax.set_xlim(0, limit * 1.02)
    handles = [Patch(color=ACCENT, alpha=0.85, label="AFR")] if not all(muted) else []
    handles.append(Line2D([], [], color="#1e293b", marker="|", label="95% interval (▸ continues)"))
    if any(muted):
        handles.append(Patch(color=MUTED, alpha=0.85, label="too little exposure to judge (see Findings)"))
    if fleet_pct is not None and fleet_pct == fleet_pct:
        handles.append(Line2D([], [], color=WARN, linestyle="--", label=f"fleet {fleet_pct:.1f}%"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16 - 0.6 / max(len(labels), 1)),
              ncol=2, fontsize=7.5)
    return _png(fig)


@_styled
def survival_curves(df: pl.DataFrame, by: str) -> str:
    """Kaplan-Meier step curves per group with shaded intervals (see :func:`survival_figure`)."""
    return _png(survival_figure(df, by))


def survival_figure(df: pl.DataFrame, by: str) -> Figure:
    """The survival chart as a figure.

    A group without a single failure is a flat line at 100% that hides under every other such
    line, so those groups get no curve and are named together in one legend entry instead:
    the legend lists exactly the curves that can be seen.
    """
    fig, ax = _fig(7.0, 3.6)
    groups = sorted(df.group_by([by]), key=lambda g: str(g[0][0]))
    flat = []
    drawn = 0
    for (group,), part in groups:
        if not (part["events"].fill_null(0) > 0).any():
            flat.append(str(group))
            continue
        part = part.sort("t_days")
        c = PALETTE[drawn % len(PALETTE)]
        drawn += 1
        t = part["t_days"].to_list()
        ax.step(t, part["survival"].to_list(), where="post", color=c, linewidth=1.6, label=_short(group, 24))
        ax.fill_between(t, part["ci_low"].fill_null(float("nan")).to_list(),
                        part["ci_high"].fill_null(float("nan")).to_list(), step="post", color=c, alpha=0.12)
    ax.set_xlabel("Age (days since installation)")
    ax.set_ylabel("Share still in service")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    lo = min(0.9, float(df["ci_low"].drop_nulls().min() or 0.9)) if df.height else 0.9
    ax.set_ylim(max(0.0, lo - 0.02), 1.005)
    if not drawn:
        ax.set_xlim(0, max(1.0, float(df["t_days"].max() or 1.0)))
        ax.text(0.5, 0.5, "No GPU replaced yet: every group is at 100%", transform=ax.transAxes,
                ha="center", va="center", color="#475569")
    band = df["ci_low"].drop_nulls().len() > 0
    ax.set_title(f"Survival by {by} (Kaplan–Meier{', 95% band' if band else ''})")
    handles, labels = ax.get_legend_handles_labels()
    if flat:
        names = "\n".join(f"  {_short(g, 24)}" for g in flat[:8]) + (f"\n  and {len(flat) - 8} more" if len(flat) > 8 else "")
        handles.append(Line2D([], [], linestyle="none"))
        labels.append(f"no replacement yet\n(flat at 100%, not drawn):\n{names}")
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5, handlelength=1.5)
    return fig


@_styled
def pareto_chart(df: pl.DataFrame, top: int = 12) -> str:
    """Failure-mode Pareto: horizontal bars of tickets per part / symptom, most frequent on
    top, each labelled with the cumulative share reached."""
    df = df.head(top).reverse()
    labels = [_short(f"{p} · {s}", 36) for p, s in zip(df["part_code"], df["symptom_code"])]
    fig, ax = _fig(7.0, max(1.6, 0.3 * len(labels) + 0.9))
    y = list(range(len(labels)))
    counts = df["tickets"].to_list()
    ax.barh(y, counts, color=ACCENT, alpha=0.85, height=0.6)
    for yi, n, cum in zip(y, counts, df["cumulative_pct"].to_list()):
        ax.text(n, yi, f"  {n}  (cum. {cum:.0f}%)", va="center", fontsize=7.5, color="#334155")
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlabel("Tickets")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0, max(counts) * 1.35)
    ax.grid(axis="y", visible=False)
    ax.set_title("Failure modes (part · symptom), most frequent first")
    return _png(fig)


@_styled
def xid_chart(df: pl.DataFrame) -> str:
    """Top Xid codes per model as grouped horizontal bars (events)."""
    models = sorted({str(m) for m in df["model"]})
    cols = min(len(models), 3)
    rows = math.ceil(len(models) / cols)
    fig = Figure(figsize=(3.3 * cols, 2.2 * rows + 0.4))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models):
        part = df.filter(pl.col("model") == model).sort("events")
        labels = [f"{k} {x}" for k, x in zip(part["kind"], part["xid"])]
        colors = [WARN if s == "critical" else ACCENT for s in part["severity"].fill_null("")]
        ax.barh(range(part.height), part["events"].to_list(), color=colors, alpha=0.85)
        ax.set_yticks(range(part.height), labels, fontsize=8)
        ax.set_title(_short(model, 26), fontsize=9)
        ax.set_xlabel("Events", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
        ax.grid(axis="y", visible=False)
    fig.suptitle("Most frequent Xid/SXid codes per model (red: critical)", fontsize=10, fontweight="bold")
    fig.tight_layout()
    return _png(fig)


@_styled
def trend_chart(df: pl.DataFrame) -> str:
    """Monthly failures, tickets and Xid events (see :func:`trend_figure`)."""
    return _png(trend_figure(df))


def trend_figure(df: pl.DataFrame) -> Figure:
    """Monthly failures and tickets (top, one count axis) over Xid events (bottom, their own
    axis): Xid events run in the hundreds where tickets run in the tens, so sharing an axis
    would flatten the tickets to a line along zero."""
    fig = Figure(figsize=(7.0, 4.2))
    ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    months = [m.strftime("%Y-%m") if m is not None else "?" for m in df["month"]]
    x = list(range(len(months)))
    ax.bar(x, df["failures"].to_list(), color=WARN, alpha=0.8, width=0.6, label="GPU failures")
    ax.plot(x, df["tickets"].to_list(), color=ACCENT, marker="o", markersize=4, label="tickets (all parts)")
    ax.set_ylabel("per month")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max(1, max(df["tickets"].max() or 0, df["failures"].max() or 0)) * 1.15)
    ax.grid(axis="x", visible=False)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8)
    ax.set_title("Monthly trend (UTC months)", pad=22)
    ax2.bar(x, df["xid_events"].to_list(), color=MUTED, width=0.6)
    ax2.set_ylabel("Xid events")
    ax2.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
    ax2.grid(axis="x", visible=False)
    step = max(1, len(months) // 12)
    ax2.set_xticks(x[::step], months[::step], rotation=30, ha="right", fontsize=8)
    fig.align_ylabels([ax, ax2])
    return fig


@_styled
def repair_chart(hours: pl.DataFrame) -> str:
    """Histogram of repair times (hours, log scale)."""
    import numpy as np

    fig, ax = _fig(7.0, 2.8)
    h = hours["hours"].drop_nulls().to_numpy()
    h = h[h > 0]
    if len(h):
        bins = np.logspace(math.log10(max(h.min(), 0.1)), math.log10(max(h.max(), 1.0)) + 0.01, 25)
        ax.hist(h, bins=bins, color=ACCENT, alpha=0.85, edgecolor="white")
        ax.set_xscale("log")
        ticks = [t for t in (0.5, 1, 2, 4, 8, 24, 48, 168, 336, 720, 2160) if bins[0] <= t <= bins[-1]]
        ax.set_xticks(ticks, [f"{t:g} h" if t < 24 else f"{t / 24:g} d" for t in ticks])
        ax.minorticks_off()
        ax.axvline(float(np.median(h)), color=WARN, linestyle="--", linewidth=1,
                   label=f"median {np.median(h):.1f} h")
        ax.legend(fontsize=8)
    ax.set_xlabel("Time from ticket opened to closed (log scale; h = hours, d = days)")
    ax.set_ylabel("Tickets")
    ax.set_title("Repair times")
    return _png(fig)


@_styled
def risk_chart(df: pl.DataFrame, top: int = 15) -> str:
    """The highest-risk GPUs as horizontal bars of calibrated probability."""
    part = df.sort("risk", descending=True).head(top).reverse()
    labels = [_short(f"{s} ({h})", 34) for s, h in zip(part["serial"], part["host"].fill_null("?"))]
    fig, ax = _fig(7.0, max(1.6, 0.3 * part.height + 0.9))
    risk = part["risk"].to_list()
    ax.barh(range(part.height), risk, color=[WARN if r >= 0.5 else ACCENT for r in risk], alpha=0.85)
    ax.set_yticks(range(part.height), labels, fontsize=8)
    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlim(0, max(0.05, min(1.0, max(risk) * 1.15)))
    horizon = part["horizon_days"][0] if "horizon_days" in part.columns and part.height else "?"
    ax.set_xlabel(f"Probability of replacement within {horizon} days")
    ax.grid(axis="y", visible=False)
    ax.set_title("Highest predicted failure risk")
    return _png(fig)
