"""One config for every stage: ``fleetfault.toml``, parsed once into frozen dataclasses.

Every key is checked against the dataclasses below; unknown keys and wrong types are
errors, and so is every value a stage would reject later (zones, window dates, groupings,
boot times, field lists, ranges): all problems are reported together in one
:class:`~pipeline.errors.ConfigError` when the config is loaded, before any stage runs.
Each stage owns one section. ``dvc.yaml`` names the keys each stage reads as its params.

The config is immutable all the way down: lists are tuples and tables read-only mappings,
however a section is built (loaded, ``Config()``, ``dataclasses.replace``), so no stage can
change what another stage reads.

Add a key by adding a typed field with a default to its section: the loader, the
validation and the documentation (``fleetfault.toml``) follow from the field.
"""

from __future__ import annotations

import codecs
import dataclasses
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pipeline.errors import ConfigError

DEFAULT_CONFIG_NAME = "fleetfault.toml"


def _freeze(value):
    """``value`` with every list a tuple and every table a read-only mapping, recursively
    (into dataclasses too, so a section declared without :class:`_Frozen` is frozen inside
    :class:`Config` all the same)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            object.__setattr__(value, f.name, _freeze(getattr(value, f.name)))
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return types.MappingProxyType({k: _freeze(v) for k, v in value.items()})
    return value


class _Frozen:
    """Base of the config sections: freezes what a frozen dataclass leaves mutable."""

    def __post_init__(self) -> None:
        _freeze(self)


@dataclass(frozen=True)
class Paths(_Frozen):
    data: str = "data/sample"
    warehouse: str = "fleetfault.duckdb"
    out: str = "out"
    # Trained models and their cards; relative paths are relative to the warehouse's folder.
    models: str = "models"


@dataclass(frozen=True)
class Site(_Frozen):
    tz: str = "UTC"
    service_points: tuple[str, ...] = ()


@dataclass(frozen=True)
class Time(_Frozen):
    # Zone for timestamps that carry none and whose host has no site zone.
    default_tz: str = "UTC"


@dataclass(frozen=True)
class Telemetry(_Frozen):
    # Keep every clean sample as Parquet partitioned by day (off: only hourly and daily facts).
    keep_samples: bool = False
    samples_dir: str = "samples"
    # Field list for headerless (noheader) files when no header was seen for the host.
    fields: tuple[str, ...] = ()
    # Per host glob pattern (fnmatch) -> field list, checked before `fields`.
    host_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Kernel(_Frozen):
    # host -> boot time (ISO 8601, with zone or in the host's zone) for uptime-only dmesg;
    # it dates the dump (one per boot) whose last line it puts near the dump's own date.
    boot_times: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ServicePoint(_Frozen):
    # Role -> the point's own column name (ticket_id, opened_at, closed_at, updated_at, status,
    # host, slot, serial, part_text, title, symptom_text, description, action_text,
    # swap_part_text, removed_serial, installed_serial); unnamed ones are recognised.
    # `fleetfault tickets inspect FILE` prints this table for an export.
    columns: Mapping[str, str] = field(default_factory=dict)
    date_format: str = ""  # strftime format; empty: recognised
    dayfirst: bool = False
    encoding: str = ""  # empty: detected
    tz: str = ""  # empty: the zone of the point's site, else time.default_tz


@dataclass(frozen=True)
class Tickets(_Frozen):
    points: Mapping[str, ServicePoint] = field(default_factory=dict)


@dataclass(frozen=True)
class Normalize(_Frozen):
    # Scores (0-100, calibrated: the chance in percent that the code is right) at or above
    # this are coded automatically; below go to review. Unset: each dimension's own threshold
    # from the calibration file, the lowest score whose codes were right 99% of the time out of
    # fold on hand-written tickets (bench/RESULTS.md, issue 16); a number applies to all three.
    auto_threshold: float | None = None
    # Replace the bundled taxonomy (pipeline/declared/taxonomy.yaml) or add aliases to it.
    taxonomy: str = ""
    extra_aliases: str = ""
    # Raw score -> probability table (default pipeline/declared/calibration.yaml; bench/bench_coding_corpus.py
    # --fit-calibration fits one on your own labelled tickets).
    calibration: str = ""
    # A second opinion on every rule code (pipeline/normalize/prior.py): a classifier fitted
    # on labelled tickets; a code it disagrees with loses points and mostly goes to review.
    prior: bool = True
    # The learned layer (pipeline/normalize/learned.py): codes what the rules left to review,
    # only at a probability whose held-out codes were right at least `learned_precision`.
    learned: bool = True
    learned_precision: float = 0.99


@dataclass(frozen=True)
class Link(_Frozen):
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
    slot_base: Mapping[str, int] = field(default_factory=dict)
    # An inventory row still open for a serial not reported this many days is listed as stale.
    stale_after_days: int = 30


@dataclass(frozen=True)
class Stats(_Frozen):
    failure_parts: tuple[str, ...] = ("GPU",)
    failure_actions: tuple[str, ...] = ("REPLACE",)
    # Observation window (ISO dates); empty: first to last day of data.
    window_start: str = ""
    window_end: str = ""
    min_gpu_days: float = 3650.0
    confidence: float = 0.95
    repeat_window_days: int = 30
    # A failure ticket opened this long after the inventory's removal still ends that life.
    removal_grace_days: float = 7.0
    # Groupings the stats stage writes to stats_afr ("model,batch" = both); month/quarter split time.
    afr_by: tuple[str, ...] = ("model", "vendor", "site", "batch", "slot", "model,batch", "quarter")
    survival_by: tuple[str, ...] = ("model", "batch")
    # Dimensions whose every group is compared with the rest of the fleet.
    compare_by: tuple[str, ...] = ("batch", "vendor", "model")


@dataclass(frozen=True)
class Predict(_Frozen):
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
    # The promotion bar: folds scored and failed GPUs in them before a model may be judged
    # better than the evidence score (docs/predict.md, "The learned model, and when it ranks").
    promotion_min_folds: int = 3
    promotion_min_failures: int = 15
    # GPUs per day the on-call team looks at: the track record counts these as flagged.
    alert_top: int = 20


@dataclass(frozen=True)
class Report(_Frozen):
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
class Collect(_Frozen):
    interval_s: float = 60.0


@dataclass(frozen=True)
class SparkSettings(_Frozen):
    # Where the job runs: "local[*]" (this machine, every core), "local[2]", or a cluster URL
    # ("spark://host:7077", "yarn", "k8s://..."). Inside a notebook or spark-submit, the
    # session already running is used and these three are ignored.
    master: str = "local[*]"
    app_name: str = "fleetfault"
    # Spark settings passed to the session builder, e.g. {"spark.executor.memory" = "8g"}.
    conf: Mapping[str, str] = field(default_factory=dict)
    # Where the Spark ingest keeps its Parquet tables and registry: a folder or any URL Spark
    # and pyarrow write (hdfs://, s3://, gs://). Empty: beside the warehouse file,
    # "fleetfault.duckdb" -> "fleetfault.tables/". Used only when the warehouse is a .duckdb
    # file; a folder or URL warehouse names the tables itself (pipeline/location.py).
    tables: str = ""
    # The local DuckDB catalog (registry, quarantine, runs, derived tables) of a warehouse whose
    # tables are at a remote URL (paths.warehouse or --warehouse "s3://...", "hdfs://..."):
    # DuckDB writes local files only. Required then; a local folder holds its own catalog.
    catalog: str = ""


@dataclass(frozen=True)
class EngineSettings(_Frozen):
    # What runs the SQL steps: "duckdb" (one machine, no setup) or "spark" (the [spark] extra
    # and a Java runtime). `fleetfault run --engine` overrides it.
    name: str = "duckdb"
    spark: SparkSettings = field(default_factory=SparkSettings)


@dataclass(frozen=True)
class Config(_Frozen):
    paths: Paths = field(default_factory=Paths)
    engine: EngineSettings = field(default_factory=EngineSettings)
    time: Time = field(default_factory=Time)
    sites: Mapping[str, Site] = field(default_factory=dict)
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


def with_engine(cfg: Config, name: str) -> Config:
    """The config with ``[engine] name`` set to ``name`` (``fleetfault run --engine``)."""
    changed = dataclasses.replace(cfg, engine=dataclasses.replace(cfg.engine, name=name))
    problems: list[str] = []
    _check_engine(changed.engine, problems)
    _check_spark_catalog(changed, problems)
    _check_spark_support(changed, problems)
    if problems:
        raise ConfigError(problems, "--engine")
    return changed


def config_from_dict(raw: dict, source: str | None = None) -> Config:
    """The config from a parsed TOML table; raises :class:`ConfigError` listing every problem."""
    problems: list[str] = []
    values = _build(Config, raw, "", problems)
    # Sections that did not convert keep their defaults here, so the checks below still
    # see every other section (their problems are already listed).
    cfg = Config(**(values or {}), source=source)
    _check_values(cfg, problems)
    if problems:
        raise ConfigError(problems, source or "config")
    return cfg


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
    if origin in (tuple, list):  # either way a tuple once built (see _freeze)
        item = typing.get_args(tp)[0]
        if not isinstance(value, list):
            problems.append(f"{name}: expected a list, got {type(value).__name__} {value!r}")
            return _BAD
        items = [_convert(item, v, f"{name}[{i}]", problems) for i, v in enumerate(value)]
        return _BAD if any(i is _BAD for i in items) else items
    if origin in (Mapping, dict):  # either way a read-only mapping once built
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


#: Allowed ranges: (key, test, what is allowed).
_RANGES: tuple[tuple[str, typing.Callable[[typing.Any], bool], str], ...] = (
    ("normalize.auto_threshold", lambda v: v is None or 0 <= v <= 100, "within 0-100"),
    ("normalize.learned_precision", lambda v: 0.5 <= v < 1, "at least 0.5 and below 1"),
    ("link.serial_max_edits", lambda v: v in (0, 1), "0 or 1"),
    ("link.replace_window_days", lambda v: v >= 0, "0 or more"),
    ("link.swap_ambiguity_days", lambda v: v >= 0, "0 or more"),
    ("link.stale_after_days", lambda v: v >= 1, "at least 1"),
    ("stats.min_gpu_days", lambda v: v >= 0, "0 or more"),
    ("stats.confidence", lambda v: 0 < v < 1, "between 0 and 1"),
    ("stats.repeat_window_days", lambda v: v >= 0, "0 or more"),
    ("stats.removal_grace_days", lambda v: v >= 0, "0 or more"),
    ("predict.horizon_days", lambda v: v >= 1, "at least 1"),
    ("predict.train_days", lambda v: v >= 1, "at least 1"),
    ("predict.calibration_days", lambda v: v >= 1, "at least 1"),
    ("predict.test_days", lambda v: v >= 1, "at least 1"),
    ("predict.cost_missed_failure", lambda v: v > 0, "positive"),
    ("predict.cost_needless_drain", lambda v: v > 0, "positive"),
    ("predict.top_k", lambda v: v >= 1, "at least 1"),
    ("predict.threads", lambda v: v >= 1, "at least 1"),
    ("predict.min_failures", lambda v: v >= 1, "at least 1"),
    ("predict.cv_folds", lambda v: v >= 1, "at least 1"),
    ("predict.promotion_min_folds", lambda v: v >= 1, "at least 1"),
    ("predict.promotion_min_failures", lambda v: v >= 1, "at least 1"),
    ("predict.alert_top", lambda v: v >= 1, "at least 1"),
    ("report.data_origin", lambda v: v in ("auto", "real", "simulated"), "auto, real or simulated"),
    ("report.rate_multiplier", lambda v: v >= 0, "0 (auto) or positive"),
    ("report.detect_rate_ratio", lambda v: v > 1, "above 1"),
    ("report.power", lambda v: 0 < v < 1, "between 0 and 1"),
    ("collect.interval_s", lambda v: v > 0, "positive"),
)


def _check_values(cfg: Config, problems: list[str]) -> None:
    """Checks beyond types, so a stage never meets a value it cannot use: zones exist,
    numbers in range, window dates, groupings, boot times and field lists readable."""
    for key, test, allowed in _RANGES:
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        if not test(value):
            problems.append(f"{key}: must be {allowed}, got {value!r}")
    _check_tz(cfg.time.default_tz, "time.default_tz", problems)
    for site, s in cfg.sites.items():
        _check_tz(s.tz, f"sites.{site}.tz", problems)
    for point, p in cfg.tickets.points.items():
        where = f"tickets.points.{point}"
        _check_tz(p.tz, f"{where}.tz", problems)
        _check_columns(p.columns, f"{where}.columns", problems)
        if p.encoding:
            try:
                codecs.lookup(p.encoding)
            except LookupError:
                problems.append(f"{where}.encoding: unknown encoding {p.encoding!r} (e.g. 'gbk', 'utf-8')")
        if p.date_format and "%" not in p.date_format:
            problems.append(f"{where}.date_format: {p.date_format!r} has no strftime directive (e.g. '%Y/%m/%d %H:%M')")
    for point, base in cfg.link.slot_base.items():
        if base not in (0, 1):
            problems.append(f"link.slot_base.{point}: must be 0 or 1 (the number of the first GPU), got {base}")
    _check_stats(cfg.stats, problems)
    _check_engine(cfg.engine, problems)
    _check_spark_catalog(cfg, problems)
    _check_spark_support(cfg, problems)
    _check_boot_times(cfg.kernel.boot_times, problems)
    if cfg.telemetry.fields:
        _check_fields(cfg.telemetry.fields, "telemetry.fields", problems)
    for pattern, fields in cfg.telemetry.host_fields.items():
        _check_fields(fields, f"telemetry.host_fields.{pattern}", problems)


def _check_engine(engine: EngineSettings, problems: list[str]) -> None:
    """The engine's name, and Spark settings a session builder would only reject at run time."""
    from pipeline.engine import ENGINES  # the engine package imports no Spark module

    if engine.name not in ENGINES:
        problems.append(f"engine.name: must be one of {', '.join(ENGINES)}, got {engine.name!r}")
    spark = engine.spark
    if not spark.master.strip():
        problems.append('engine.spark.master: empty (use "local[*]" or a cluster URL such as "spark://host:7077")')
    for key in spark.conf:
        if not key.startswith("spark."):
            problems.append(f"engine.spark.conf.{key}: not a Spark setting (they start with 'spark.')")
    # fleetfault stores naive UTC timestamps; a session in another zone would shift them.
    zone = spark.conf.get("spark.sql.session.timeZone", "UTC")
    if zone != "UTC":
        problems.append(f"engine.spark.conf.spark.sql.session.timeZone: must be UTC (fleetfault's timestamps "
                        f"are UTC), got {zone!r}")


def _check_spark_catalog(cfg: Config, problems: list[str]) -> None:
    """A remote Spark warehouse has a local catalog to hold its DuckDB tables (pipeline/location.py)."""
    from pipeline.location import is_remote  # (it imports this module)

    catalog = cfg.engine.spark.catalog
    if catalog and is_remote(catalog):
        problems.append(f"engine.spark.catalog: must be a local DuckDB file (DuckDB writes no URL), got {catalog!r}")
    if cfg.engine.name == "spark" and is_remote(cfg.paths.warehouse) and not catalog:
        problems.append(f"engine.spark.catalog: required when paths.warehouse is a remote URL "
                        f"({cfg.paths.warehouse}); set it to a local file such as \"fleetfault.duckdb\"")


def _check_spark_support(cfg: Config, problems: list[str]) -> None:
    """Settings the Spark ingest does not honour: refused, rather than silently skipped."""
    if cfg.engine.name == "spark" and cfg.telemetry.keep_samples:
        problems.append("telemetry.keep_samples: not supported with engine spark (its ingest keeps no clean "
                        "samples); set it to false or run with --engine duckdb")


def _check_tz(tz: str, name: str, problems: list[str]) -> None:
    if not tz:
        return
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(f"{name}: unknown time zone {tz!r} (use an IANA name like 'Asia/Shanghai')")


def _check_stats(stats: Stats, problems: list[str]) -> None:
    """The window's dates, the failure definition and the groupings."""
    from pipeline.vocab.groupings import grouping_problem

    days = {}
    for key in ("window_start", "window_end"):
        text = getattr(stats, key)
        if text:
            try:
                days[key] = date.fromisoformat(text)
            except ValueError:
                problems.append(f"stats.{key}: {text!r} is not an ISO date (YYYY-MM-DD)")
    if len(days) == 2 and days["window_end"] < days["window_start"]:
        problems.append(f"stats.window_end ({stats.window_end}) is before stats.window_start ({stats.window_start})")
    for key in ("failure_parts", "failure_actions"):
        codes = getattr(stats, key)
        if not codes or any(not c.strip() for c in codes):
            problems.append(f"stats.{key}: must list at least one code, none blank (a failure needs a part "
                            f"and an action), got {list(codes)!r}")
    for key, periods in (("afr_by", True), ("survival_by", False), ("compare_by", False)):
        for by in getattr(stats, key):
            if (why := grouping_problem(by, periods=periods)) is not None:
                problems.append(f"stats.{key}: {by!r}: {why}")


def _check_boot_times(boot_times: Mapping[str, str], problems: list[str]) -> None:
    """Each host's boot time reads as a date and time (its zone is the host's, known later)."""
    from pipeline.timeutil import parse_datetime

    for host, text in boot_times.items():
        try:
            ok = parse_datetime(text) is not None
        except ValueError:
            ok = False
        if not ok:
            problems.append(f"kernel.boot_times.{host}: {text!r} is not a date and time "
                            "(ISO 8601, e.g. '2025-03-04T06:00:00+08:00')")


def _check_fields(names: tuple[str, ...], where: str, problems: list[str]) -> None:
    """A headerless file's field list: one nvidia-smi field per item, each once, with the timestamp."""
    from pipeline.ingest.telemetry.fields import field_from_name  # the telemetry reader's names and aliases

    if any(not n.strip() or "," in n for n in names):
        problems.append(f"{where}: one field name per item, none blank, got {list(names)!r}")
        return
    canonical = [field_from_name(n).name for n in names]
    twice = sorted({n for n in canonical if canonical.count(n) > 1})
    if twice:
        problems.append(f"{where}: {', '.join(twice)} named more than once (aliases count as the same field)")
    if "timestamp" not in canonical:
        problems.append(f"{where}: no 'timestamp' field, so no line of such a file could be dated")


def _check_columns(columns: Mapping[str, str], name: str, problems: list[str]) -> None:
    """A point's column names: known roles, each naming a column no other role names."""
    if not columns:
        return
    from pipeline.ingest.tickets.layout import ROLES  # only when a point names its columns

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
