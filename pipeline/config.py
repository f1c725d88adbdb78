"""One config for every stage: ``fleetfault.toml``, parsed once into frozen dataclasses.

Every key is checked against the dataclasses below; unknown keys and wrong types are
errors, and all problems are reported together in one :class:`~pipeline.errors.ConfigError`.
Each stage owns one section. ``dvc.yaml`` names the keys each stage reads as its params.

Add a key by adding a typed field with a default to its section: the loader, the
validation and the documentation (``fleetfault.toml``) follow from the field.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pipeline.errors import ConfigError

DEFAULT_CONFIG_NAME = "fleetfault.toml"


@dataclass(frozen=True)
class Paths:
    data: str = "data/sample"
    warehouse: str = "fleetfault.duckdb"
    out: str = "out"
    # Trained models and their cards; relative paths are relative to the warehouse's folder.
    models: str = "models"


@dataclass(frozen=True)
class Site:
    tz: str = "UTC"
    service_points: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Time:
    # Zone for timestamps that carry none and whose host has no site zone.
    default_tz: str = "UTC"


@dataclass(frozen=True)
class Telemetry:
    # Keep every clean sample as Parquet partitioned by day (off: only hourly and daily facts).
    keep_samples: bool = False
    samples_dir: str = "samples"
    # Field list for headerless (noheader) files when no header was seen for the host.
    fields: list[str] = field(default_factory=list)
    # Per host glob pattern (fnmatch) -> field list, checked before `fields`.
    host_fields: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Kernel:
    # host -> boot time (ISO 8601, with zone or in the host's zone) for uptime-only dmesg;
    # it dates the dump (one per boot) whose last line it puts near the dump's own date.
    boot_times: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServicePoint:
    # Role -> the point's own column name (ticket_id, opened_at, closed_at, updated_at, status,
    # host, slot, serial, part_text, title, symptom_text, description, action_text,
    # swap_part_text, removed_serial, installed_serial); unnamed ones are recognised.
    # `fleetfault tickets inspect FILE` prints this table for an export.
    columns: dict[str, str] = field(default_factory=dict)
    date_format: str = ""  # strftime format; empty: recognised
    dayfirst: bool = False
    encoding: str = ""  # empty: detected
    tz: str = ""  # empty: the zone of the point's site, else time.default_tz


@dataclass(frozen=True)
class Tickets:
    points: dict[str, ServicePoint] = field(default_factory=dict)


@dataclass(frozen=True)
class Normalize:
    # Scores (0-100, calibrated: the chance in percent that the code is right) at or above
    # this are coded automatically; below go to review. The default is chosen on out-of-fold
    # predictions of hand-written tickets (bench/RESULTS.md, issue 16).
    auto_threshold: float = 80.0
    # Replace the bundled taxonomy (pipeline/declared/taxonomy.yaml) or add aliases to it.
    taxonomy: str = ""
    extra_aliases: str = ""
    # Raw score -> probability table (default pipeline/declared/calibration.yaml; bench/bench_coding_corpus.py
    # --fit-calibration fits one on your own labelled tickets).
    calibration: str = ""
    # The learned layer (pipeline/normalize/learned.py): codes what the rules left to review,
    # only at a probability whose held-out codes were right at least `learned_precision`.
    learned: bool = True
    learned_precision: float = 0.99


@dataclass(frozen=True)
class Link:
    # Ticket serials this many edits (0 or 1) from exactly one inventory serial are linked to it.
    serial_max_edits: int = 1
    # A replacement ticket linked by host+slot takes the GPU removed from that slot within
    # this many days of the ticket (tickets are often written after the swap).
    replace_window_days: float = 7.0
    # Another ticket (not a replacement) opened this soon after its slot's GPU was swapped
    # may be about the old GPU or the new one: it is not linked by host+slot.
    swap_ambiguity_days: float = 3.0
    # Service point -> the number its tickets give the first GPU (0: nvidia-smi's index,
    # 1: the chassis label). Points not listed: detected from their tickets (README).
    slot_base: dict[str, int] = field(default_factory=dict)
    # An inventory row still open for a serial not reported this many days is listed as stale.
    stale_after_days: int = 30


@dataclass(frozen=True)
class Stats:
    failure_parts: list[str] = field(default_factory=lambda: ["GPU"])
    failure_actions: list[str] = field(default_factory=lambda: ["REPLACE"])
    # Observation window (ISO dates); empty: first to last day of data.
    window_start: str = ""
    window_end: str = ""
    min_gpu_days: float = 3650.0
    confidence: float = 0.95
    repeat_window_days: int = 30
    # A failure ticket opened this long after the inventory's removal still ends that life.
    removal_grace_days: float = 7.0
    # Groupings the stats stage writes to stats_afr ("model,batch" = both); month/quarter split time.
    afr_by: list[str] = field(default_factory=lambda: ["model", "vendor", "site", "batch", "slot", "model,batch", "quarter"])
    survival_by: list[str] = field(default_factory=lambda: ["model", "batch"])
    # Dimensions whose every group is compared with the rest of the fleet.
    compare_by: list[str] = field(default_factory=lambda: ["batch", "vendor", "model"])


@dataclass(frozen=True)
class Predict:
    horizon_days: int = 7
    train_days: int = 180
    calibration_days: int = 30
    test_days: int = 30
    cost_missed_failure: float = 10000.0
    cost_needless_drain: float = 500.0
    retrain: bool = True
    top_k: int = 50
    # OpenMP threads for training and scoring; 1 avoids spin-wait collapse on a busy host.
    threads: int = 1
    # Evidence-score weights (YAML); empty: the bundled pipeline/declared/predict_evidence.yaml.
    evidence_file: str = ""
    # Failures in the history before the fleet's own rate calibrates the evidence score
    # (fewer: the published prior AFR); also the fewest out-of-fold failures to promote a model.
    min_failures: int = 5
    # Consecutive out-of-fold periods of the time-ordered cross-validation.
    cv_folds: int = 4
    # GPUs per day the on-call team looks at: the track record counts these as flagged.
    alert_top: int = 20


@dataclass(frozen=True)
class Report:
    title: str = "GPU fleet reliability"
    # "auto": simulated when the data folder holds the simulator's truth/params.json;
    # "real" or "simulated" to say so (fleetfault report has no data folder to look at).
    data_origin: str = "auto"
    # The factor the data's failure rates are multiplied by (simulate --accel); 0: from the
    # simulator's marker, else 1. Above 1 the report carries an "accelerated" banner.
    rate_multiplier: float = 0.0
    # Findings: a group has enough exposure to judge when a difference of this rate ratio
    # would be detected with this power (two-sided, at stats.confidence).
    detect_rate_ratio: float = 2.0
    power: float = 0.8


@dataclass(frozen=True)
class Collect:
    interval_s: float = 60.0


@dataclass(frozen=True)
class Config:
    paths: Paths = field(default_factory=Paths)
    time: Time = field(default_factory=Time)
    sites: dict[str, Site] = field(default_factory=dict)
    telemetry: Telemetry = field(default_factory=Telemetry)
    kernel: Kernel = field(default_factory=Kernel)
    tickets: Tickets = field(default_factory=Tickets)
    normalize: Normalize = field(default_factory=Normalize)
    link: Link = field(default_factory=Link)
    stats: Stats = field(default_factory=Stats)
    predict: Predict = field(default_factory=Predict)
    report: Report = field(default_factory=Report)
    collect: Collect = field(default_factory=Collect)
    # Where the config was read from (None: built-in defaults).
    source: str | None = None

    def site_tz(self, site: str | None) -> str:
        """Zone of a site, falling back to ``time.default_tz``."""
        if site and site in self.sites:
            return self.sites[site].tz
        return self.time.default_tz

    def resolve(self, path: str, base: str | Path | None = None) -> Path:
        """A config path made absolute against ``base`` (default: the config's folder)."""
        p = Path(path)
        if p.is_absolute():
            return p
        root = Path(base) if base is not None else (Path(self.source).parent if self.source else Path.cwd())
        return root / p


def load_config(path: str | Path | None = None) -> Config:
    """Read the config, or the built-in defaults when ``path`` is None and no
    ``fleetfault.toml`` is in the working folder.

    Raises
    ------
    ConfigError
        Listing every unknown key, wrong type and bad value found.
    """
    if path is None:
        default = Path.cwd() / DEFAULT_CONFIG_NAME
        if not default.exists():
            return Config()
        path = default
    path = Path(path)
    if not path.exists():
        raise ConfigError([f"file not found: {path} (pass --config FILE or create {DEFAULT_CONFIG_NAME})"], str(path))
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError([f"not valid TOML: {exc}"], str(path)) from None
    return config_from_dict(raw, source=str(path))


def config_from_dict(raw: dict, source: str | None = None) -> Config:
    problems: list[str] = []
    values = _build(Config, raw, "", problems)
    if values is not None:
        values["source"] = source
    _check_values(values or {}, problems)
    if problems:
        raise ConfigError(problems, source or "config")
    return Config(**values)


def _build(cls, raw, where: str, problems: list[str]):
    """Dict of constructor arguments for dataclass ``cls`` from ``raw``, appending problems."""
    if not isinstance(raw, dict):
        problems.append(f"{where or 'top level'}: expected a table, got {type(raw).__name__}")
        return None
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.name != "source"}
    out = {}
    for key, value in raw.items():
        name = f"{where}.{key}" if where else key
        if key not in known:
            allowed = ", ".join(sorted(known))
            problems.append(f"{name}: unknown key (allowed here: {allowed})")
            continue
        converted = _convert(hints[key], value, name, problems)
        if converted is not _BAD:
            out[key] = converted
    return out


_BAD = object()


def _convert(tp, value, name: str, problems: list[str]):
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        args = _build(tp, value, name, problems)
        return _BAD if args is None else tp(**args)
    if origin in (typing.Union, types.UnionType):
        options = [t for t in typing.get_args(tp) if t is not type(None)]
        return _convert(options[0], value, name, problems)
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            problems.append(f"{name}: expected a list, got {type(value).__name__} {value!r}")
            return _BAD
        items = [_convert(item, v, f"{name}[{i}]", problems) for i, v in enumerate(value)]
        return _BAD if any(i is _BAD for i in items) else items
    if origin is dict:
        _, item = typing.get_args(tp)
        if not isinstance(value, dict):
            problems.append(f"{name}: expected a table, got {type(value).__name__} {value!r}")
            return _BAD
        items = {k: _convert(item, v, f"{name}.{k}", problems) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in items.values()) else items
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float) and isinstance(value, bool) or not isinstance(value, tp):
        problems.append(f"{name}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
        return _BAD
    return value


def _check_values(values: dict, problems: list[str]) -> None:
    """Checks beyond types: zones exist, thresholds in range."""

    def check_tz(tz: str, name: str) -> None:
        if not tz:
            return
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            problems.append(f"{name}: unknown time zone {tz!r} (use an IANA name like 'Asia/Shanghai')")

    time = values.get("time")
    if time is not None:
        check_tz(time.default_tz, "time.default_tz")
    for site, s in (values.get("sites") or {}).items():
        check_tz(s.tz, f"sites.{site}.tz")
    tickets = values.get("tickets")
    if tickets is not None:
        for point, p in tickets.points.items():
            check_tz(p.tz, f"tickets.points.{point}.tz")
            _check_columns(p.columns, f"tickets.points.{point}.columns", problems)
    link = values.get("link")
    if link is not None:
        for point, base in link.slot_base.items():
            if base not in (0, 1):
                problems.append(f"link.slot_base.{point}: must be 0 or 1 (the number of the first GPU), got {base}")
        if link.stale_after_days < 1:
            problems.append(f"link.stale_after_days: must be at least 1, got {link.stale_after_days}")
    norm = values.get("normalize")
    if norm is not None and not 0 <= norm.auto_threshold <= 100:
        problems.append(f"normalize.auto_threshold: must be within 0-100, got {norm.auto_threshold}")
    if norm is not None and not 0.5 <= norm.learned_precision < 1:
        problems.append(f"normalize.learned_precision: must be at least 0.5 and below 1, got {norm.learned_precision}")
    stats = values.get("stats")
    if stats is not None and not 0 < stats.confidence < 1:
        problems.append(f"stats.confidence: must be between 0 and 1, got {stats.confidence}")
    rep = values.get("report")
    if rep is not None:
        if rep.data_origin not in ("auto", "real", "simulated"):
            problems.append(f"report.data_origin: must be auto, real or simulated, got {rep.data_origin!r}")
        if rep.rate_multiplier < 0:
            problems.append(f"report.rate_multiplier: must be 0 (auto) or positive, got {rep.rate_multiplier}")
        if not rep.detect_rate_ratio > 1:
            problems.append(f"report.detect_rate_ratio: must be above 1, got {rep.detect_rate_ratio}")
        if not 0 < rep.power < 1:
            problems.append(f"report.power: must be between 0 and 1, got {rep.power}")
    pred = values.get("predict")
    if pred is not None and pred.horizon_days < 1:
        problems.append(f"predict.horizon_days: must be at least 1, got {pred.horizon_days}")
    if pred is not None and pred.threads < 1:
        problems.append(f"predict.threads: must be at least 1, got {pred.threads}")
    if pred is not None and (pred.min_failures < 1 or pred.cv_folds < 1 or pred.alert_top < 1):
        problems.append(f"predict.min_failures, cv_folds, alert_top: must be at least 1, got "
                        f"{pred.min_failures}, {pred.cv_folds}, {pred.alert_top}")


def _check_columns(columns: dict[str, str], name: str, problems: list[str]) -> None:
    """A point's column names: known roles, each naming a column no other role names."""
    if not columns:
        return
    from pipeline.ingest.ticket_layout import ROLES  # only when a point names its columns

    for role, header in columns.items():
        if role not in ROLES:
            problems.append(f"{name}.{role}: unknown role (allowed: {', '.join(ROLES)})")
        elif not header.strip():
            problems.append(f"{name}.{role}: empty column name")
    seen: dict[str, str] = {}
    for role, header in columns.items():
        if header in seen:
            problems.append(f"{name}: {seen[header]} and {role} both name column {header!r} (a column fills one role)")
        seen.setdefault(header, role)
