"""nvidia-smi ``--query-gpu`` fields: names, units, kinds, and the SQL that cleans them.

A header cell such as ``memory.used [MiB]`` names the field ``memory.used`` with the unit
``MiB``; its column is ``memory_used`` (``.`` becomes ``_``, the unit is dropped). A field
nvidia-smi documents under two names (``nvidia-smi --help-query-gpu``: ``"clocks.current.sm"
or "clocks.sm"``) takes one canonical name, the short query name (``clocks.sm``; ``name``
for ``gpu_name``), so a header line and a ``noheader`` file whose fields come from
``--fields`` yield the same columns whichever spelling each used.

This module is the one table of what a cell means: field names and aliases, units, kinds
(:attr:`Field.kind`), null markers, failing-GPU markers, Yes/No words, bit masks, timestamp
formats. Every value is cleaned by one SQL expression per field generated from it
(:func:`clean_sql`, :func:`bad_sql`), shared by the fast many-files path, the line-by-line
path and the header plan's fitting of headerless files, so all give the same answer; the two
Python twins (:func:`is_marker`, :func:`is_time`) sit beside their SQL, and a property test
checks that they agree. A new marker or timestamp format is one edit here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime

from pipeline.vocab.sql import literal

#: Documented aliases (``"A" or "B"`` in ``nvidia-smi --help-query-gpu``) -> the canonical
#: name: the short query name. ``clocks_throttle_reasons.*`` and ``clocks_event_reasons.*``
#: (the newer drivers' name for the same mask) are kept apart: the contract names both.
ALIASES = {
    "gpu_name": "name",
    "gpu_serial": "serial",
    "gpu_serial_number": "serial",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "clocks.current.graphics": "clocks.gr",
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "clocks.current.video": "clocks.video",
    "clocks.applications.graphics": "clocks.applications.gr",
    "clocks.applications.memory": "clocks.applications.mem",
    "clocks.default_applications.graphics": "clocks.default_applications.gr",
    "clocks.default_applications.memory": "clocks.default_applications.mem",
    "clocks.max.graphics": "clocks.max.gr",
    "clocks.max.memory": "clocks.max.mem",
    "inforom.image": "inforom.img",
    "inforom.power": "inforom.pwr",
    "gpu_operation_mode.current": "gom.current",
    "gpu_operation_mode.pending": "gom.pending",
    "retired_pages.single_bit_ecc.count": "retired_pages.sbe",
    "retired_pages.double_bit.count": "retired_pages.dbe",
}

#: The seven identity columns of the clean table, in order, with their source field.
IDENTITY = {
    "ts": "timestamp",
    "host": None,
    "gpu_index": "index",
    "name": "name",
    "serial": "serial",
    "uuid": "uuid",
    "pci_bus_id": "pci.bus_id",
}

#: Fields kept as text even when they look like numbers.
TEXT_FIELDS = {
    "name", "serial", "uuid", "driver_version", "kmd_version", "vbios_version", "compute_cap",
    "pstate", "compute_mode", "hostname", "platform.chassis_serial_number",
}
TEXT_PREFIXES = ("inforom.", "pci.", "fabric.", "platform.gpu_fabric_guid", "driver_model.")

#: Hexadecimal bit masks that become integers.
MASK_FIELDS = {
    "clocks_throttle_reasons.active", "clocks_event_reasons.active",
    "clocks_throttle_reasons.supported", "clocks_event_reasons.supported",
}

#: Fields known to be numbers (or Yes/No) whatever the header says.
NUMERIC_FIELDS = {
    "index", "count", "temperature.gpu", "temperature.memory", "temperature.gpu.tlimit",
    "utilization.gpu", "utilization.memory", "memory.used", "memory.total", "memory.free",
    "power.draw", "power.draw.average", "power.draw.instant", "power.limit", "fan.speed",
    "clocks.sm", "clocks.gr", "clocks.mem", "clocks.video", "clocks.max.sm", "clocks.max.gr", "clocks.max.mem",
    "pcie.link.width.current", "pcie.link.width.max", "pcie.link.gen.current", "pcie.link.gen.max",
    "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.sbe", "retired_pages.dbe", "retired_pages.pending",
    "remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending",
    "remapped_rows.failure", "pcie.replay_counter",
}

#: Fixed dtypes of the clean table by field name, so a column has the same type whatever
#: the data (all ``[Not Supported]`` included). Prefixes end with ``.``; first match wins.
INT_FIELDS = {"index", "count", "pcie.replay_counter", "retired_pages.sbe", "retired_pages.dbe",
              "retired_pages.pending"}
INT_PREFIXES = ("pcie.link.width.", "pcie.link.gen.", "ecc.errors.", "retired_pages.", "remapped_rows.",
                "clocks_throttle_reasons.", "clocks_event_reasons.")
FLOAT_PREFIXES = ("temperature.", "power.", "enforced.power.", "clocks.", "utilization.", "memory.", "fan.")


def fixed_dtype(name: str) -> str | None:
    """``'int'`` (counts, indexes, link widths and gens, ECC, retired and remapped counters,
    masks and reason flags), ``'float'`` (temperatures, power, clocks, utilization, memory,
    fan) or None (unknown field: the data decides) for a field name."""
    if name in INT_FIELDS or name in MASK_FIELDS or name.startswith(INT_PREFIXES):
        return "int"
    if name.startswith(FLOAT_PREFIXES) or name in ("fan.speed",):
        return "float"
    return None


#: Markers nvidia-smi prints in a field when the GPU itself is failing (not merely a field
#: it does not support): the value is null, and the sample counts in ``gpu_error_samples``.
FAILING_MARKERS = ("[Unknown Error]", "[GPU requires reset]", "[GPU is lost]")

#: Words nvidia-smi prints for on/off states, as 1/0.
TRUE_WORDS = ("Yes", "Enabled", "Active")
FALSE_WORDS = ("No", "Disabled", "Not Active")

TIMESTAMP_FORMATS = [
    "%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S",
]

#: A whole number (an index).
INT_PATTERN = r"[+-]?[0-9]+"
#: A PCI bus id as nvidia-smi and the kernel print it (lower case, ``PCI:`` prefix removed).
PCI_PATTERN = r"[0-9a-f]{1,8}:[0-9a-f]{1,2}:[0-9a-f]{1,2}(\.[0-7])?"

_CELL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*(?:\[([^\]\r\n]*)\])?\s*$")
_KNOWN_HEADER_WORDS = {"timestamp", "index", "name", "uuid", "serial", "pstate", "count", "driver_version"}


@dataclass(frozen=True)
class Field:
    """One queried field: nvidia-smi's header name, its unit (or ''), its clean column."""

    name: str
    unit: str = ""
    ignored: bool = False  # carried along but neither cleaned nor checked

    @property
    def column(self) -> str:
        for col, src in IDENTITY.items():
            if src is not None and src == self.name:
                return col
        return self.name.replace(".", "_")

    @property
    def kind(self) -> str:
        """ts, int, pci, text, mask, num (strict number or Yes/No) or auto (decided by the data)."""
        n = self.name
        if self.ignored:
            return "text"
        if n == "timestamp":
            return "ts"
        if n == "index":
            return "int"
        if n == "pci.bus_id":
            return "pci"
        if n in MASK_FIELDS:
            return "mask"
        if n in TEXT_FIELDS or n.startswith(TEXT_PREFIXES):
            return "text"
        if n in NUMERIC_FIELDS or self.unit:
            return "num"
        return "auto"


def field_from_name(text: str) -> Field:
    """A field from a header cell (``memory.used [MiB]``) or a query name (``gpu_name``)."""
    m = _CELL.match(text)
    if not m:
        name, unit = text.strip(), ""
    else:
        name, unit = m.group(1), (m.group(2) or "").strip()
    return Field(ALIASES.get(name, name), unit)


def parse_fields(names: list[str] | str) -> list[Field]:
    """Fields from ``--fields`` / config (a list or a comma-separated string)."""
    return list(_parsed(names if isinstance(names, str) else tuple(names)))


@functools.lru_cache(maxsize=1024)
def _parsed(names: str | tuple[str, ...]) -> tuple[Field, ...]:
    """:func:`parse_fields`, remembered: the smi stage parses the same few field lists
    (the configured one, each host's recorded headers) for every file."""
    if isinstance(names, str):
        names = names.split(",")
    return tuple(field_from_name(n) for n in names if n.strip())


def header_fields(line: str) -> list[Field] | None:
    """The fields if ``line`` is a header line, else None.

    A header line has only cells like ``name`` or ``memory.used [MiB]`` and at least one
    cell that only a header has (a dotted name, a unit, or a well-known field name), so a
    data row of words (``Enabled, Disabled``) is not taken for one.
    """
    cells = line.lstrip("\ufeff").rstrip("\r\n").split(",")
    if not cells or not line.strip():
        return None
    matches = []
    for c in cells:  # (a data line fails at its first cell: not every cell matched first)
        m = _CELL.match(c)
        if m is None:
            return None
        matches.append(m)
    telling = any(
        "." in m.group(1) or m.group(2) is not None or m.group(1) in _KNOWN_HEADER_WORDS or
        m.group(1) in ALIASES for m in matches
    )
    return [field_from_name(c) for c in cells] if telling else None


# -- SQL cleaning ---------------------------------------------------------------------

def is_marker(text: str) -> bool:
    """Python twin of :func:`marker_sql` (a trimmed cell): empty, ``N/A`` or a ``[...]`` marker."""
    return text in ("", "N/A") or text.startswith("[")


def is_time(text: str) -> bool:
    """Python twin of the ``ts`` cleaning in :func:`clean_sql`: one of :data:`TIMESTAMP_FORMATS`."""
    if not "0" <= text[:1] <= "9":  # (as the SQL: every format starts with the year's digits;
        return False  # six failing strptime calls on every model name a header fit reads are slow)
    for fmt in TIMESTAMP_FORMATS:
        try:
            datetime.strptime(text, fmt)
            return True
        except ValueError:
            continue
    return False


def first_char_sql(v: str, lo: str, hi: str) -> str:
    """True when the text ``v`` starts with a character from ``lo`` to ``hi`` (ASCII).

    Two bytewise comparisons of ``v`` itself (the first byte decides; UTF-8 lead bytes
    sort above ASCII) rather than ``ascii(v) BETWEEN``, which calls a function on every
    cell: this test runs once or more per cell of every row.
    """
    return f"({v} >= {literal(lo)} AND {v} < {literal(chr(ord(hi) + 1))})"


def marker_sql(v: str, *, null: bool = False) -> str:
    """True when the trimmed value ``v`` is empty, N/A or a marker (``[N/A]``, ``[GPU is lost]``:
    a value starting with ``[``, so that a marker cut short is still one); with ``null``,
    also when it is NULL."""
    return f"({v} IS NULL OR " * null + f"({first_char_sql(v, '[', '[')} OR {v} = 'N/A' OR {v} = '')" + ")" * null


def failing_sql(v: str) -> str:
    """True when the trimmed value ``v`` is one of :data:`FAILING_MARKERS`.

    No first-character test before the ``IN``: DuckDB compares a cell's length and first
    bytes first, so the list alone is cheaper (this runs on every used cell of every row).
    """
    return f"({v} IN ({', '.join(literal(m) for m in FAILING_MARKERS)}))"


def bool_sql(v: str) -> str:
    whens = " ".join(f"WHEN {literal(w)} THEN 1" for w in TRUE_WORDS)
    whens += " " + " ".join(f"WHEN {literal(w)} THEN 0" for w in FALSE_WORDS)
    return f"(CASE {v} {whens} END)"


def _unitless(v: str, unit: str) -> str:
    if not unit:
        return v
    suffix = " " + unit
    # substr() is about twice as fast as a [:-n] slice here, strlen() (bytes) faster than
    # length() (characters): a number is ASCII, and text that is not fails the cast either way.
    return f"(CASE WHEN suffix({v}, {literal(suffix)}) THEN substr({v}, 1, strlen({v}) - {len(suffix)}) ELSE {v} END)"


#: What :func:`clean_sql` with ``flag_bad`` gives an unreadable number or mask: values
#: the aggregates reveal (``max`` of a NaN is NaN; ``min`` of a mask is negative).
BAD_NUMBER, BAD_MASK = "'NaN'::DOUBLE", "-1::BIGINT"


def clean_sql(f: Field, raw: str, *, as_kind: str | None = None, flag_bad: bool = False) -> str:
    """SQL turning the raw text column ``raw`` into the clean value of field ``f``.

    A value that cannot be read becomes NULL here; :func:`bad_sql` tells it apart from a
    marker, so that the row is quarantined rather than silently nulled. ``raw`` holds the
    cell without surrounding spaces.

    ``flag_bad`` (numbers and masks): an unreadable value becomes :data:`BAD_NUMBER` /
    :data:`BAD_MASK` instead, and a NULL cell (DuckDB's reading of an empty cell) counts
    as a marker, so one aggregate per column tells whether any row was unreadable (:func:`pipeline.ingest.telemetry.facts.hourly_sql`) without a per-row check.
    A marker followed by a space is flagged too: only the columns read
    (:func:`~pipeline.ingest.telemetry.read.columns_source`) hands over untrimmed cells, and
    the failing-marker test compares text, so such a file is read line by line (tested only
    on marker cells: one ``ends_with`` where the value is NULL anyway).
    """
    kind = as_kind or f.kind
    v = raw  # cells arrive trimmed: split on ', ' (fast path) or stripped (exact path)
    marker = marker_sql(v, null=flag_bad)
    if kind == "ts":
        fmts = ", ".join(literal(x) for x in TIMESTAMP_FORMATS)
        # Every format starts with the year's digits; DuckDB would also read 'infinity'.
        return f"(CASE WHEN {first_char_sql(v, '0', '9')} THEN try_strptime({v}, [{fmts}]) END)"
    if kind == "int":  # (a bare cast would round '1.5' to 2)
        return f"(CASE WHEN regexp_full_match({v}, {literal(INT_PATTERN)}) THEN TRY_CAST({v} AS INTEGER) END)"
    if kind == "pci":
        return f"(CASE WHEN {marker_sql(v)} THEN NULL ELSE {pci_sql(v)} END)"
    if kind == "mask":
        mask = f"TRY_CAST(TRY_CAST({v} AS UBIGINT) AS BIGINT)"
        mask = f"coalesce({mask}, {BAD_MASK})" if flag_bad else mask
        return f"(CASE WHEN {marker} THEN {_spaced_marker(v, BAD_MASK, flag_bad)} ELSE {mask} END)"
    if kind in ("num", "auto"):
        # A digit, sign or point first (most cells: one test, then the cast); then markers;
        # letters go to the Yes/No words; only number-like text is cast (a failing cast is
        # slow, and markers or words on every row are common).
        word, num = bool_sql(v), f"TRY_CAST({_unitless(v, f.unit)} AS DOUBLE)"
        if flag_bad:
            word, num = f"coalesce({word}, {BAD_NUMBER})", f"coalesce({num}, {BAD_NUMBER})"
        # (``v >= 'A'``: a first character from 'A' on, non-ASCII ones included, as UTF-8
        # lead bytes sort above it.)
        return (f"(CASE WHEN {first_char_sql(v, '+', '9')} THEN {num} WHEN {marker} THEN "
                f"{_spaced_marker(v, BAD_NUMBER, flag_bad)} WHEN {v} >= 'A' THEN {word} ELSE {num} END)")
    return f"(CASE WHEN {marker_sql(v)} THEN NULL ELSE {v} END)"


def _spaced_marker(v: str, bad: str, flag_bad: bool) -> str:
    """A marker's clean value: NULL, or with ``flag_bad`` ``bad`` when a space follows it."""
    return f"(CASE WHEN ends_with({v}, ' ') THEN {bad} END)" if flag_bad else "NULL"


def bad_sql(f: Field, raw: str, clean: str | None = None) -> str | None:
    """SQL true when the field's value is present but unreadable (None: never bad).

    ``clean`` names an already computed clean value (else it is computed here); DuckDB
    evaluates the marker test only where the clean value is null.
    """
    kind = f.kind
    if kind not in ("ts", "int", "num", "mask"):
        return None
    clean = clean or clean_sql(f, raw)
    if kind in ("ts", "int"):
        return f"({clean} IS NULL)"
    return f"({clean} IS NULL AND ({raw} IS NULL OR NOT {marker_sql(raw)}))"


def pci_sql(v: str) -> str:
    """Canonical Linux bus id: ``00000000:3B:00.0`` and ``PCI:0000:3b:00`` -> ``0000:3b:00.0``."""
    s = f"lower(regexp_replace({v}, '^(?i:pci:)', ''))"
    return (
        f"(CASE WHEN regexp_full_match({s}, {literal(PCI_PATTERN)}) THEN "
        f"right(lpad(split_part({s}, ':', 1), 4, '0'), 4) || ':' || lpad(split_part({s}, ':', 2), 2, '0') || ':' || "
        f"lpad(split_part(split_part({s}, ':', 3), '.', 1), 2, '0') || '.' || "
        f"coalesce(nullif(split_part(split_part({s}, ':', 3), '.', 2), ''), '0') "
        f"ELSE {v} END)"
    )
