"""One host-day of GPU state (numpy arrays) to nvidia-smi CSV lines, vectorized with polars.

Reads nothing, writes nothing. Values are printed the way nvidia-smi prints them: units
after the number unless ``nounits`` (``557.16 W``, ``81559 MiB``, ``93 %``), 16-digit hex
event masks, ``Yes``/``No``, ``[N/A]`` (``[Not Supported]`` on old drivers) where a GPU has no
such sensor, bare ``N/A`` for an L40S memory temperature, and ``[GPU is lost]`` /
``[GPU requires reset]`` in every metric of a GPU in that state (``[Unknown Error]`` for its power).
"""

from __future__ import annotations

import numpy as np
import polars as pl

LOST, RESET, UNKNOWN = "[GPU is lost]", "[GPU requires reset]", "[Unknown Error]"
IDENTITY = ("timestamp", "name", "pci.bus_id", "serial", "uuid", "index")


def _flat(a: np.ndarray, present: np.ndarray) -> np.ndarray:
    """(G, S) -> rows in sample-major order (all GPUs of sample 0, then sample 1 ...)."""
    return a.T[present.T]


def format_rows(spec, h, style, stamps: list[str], serial: np.ndarray, uuid: np.ndarray, present: np.ndarray,
                v: dict[str, np.ndarray]) -> list[str]:
    """CSV lines (no header) for the present (GPU, sample) cells, sample-major."""
    G, S = present.shape
    units = style.telemetry not in ("csv_nounits", "noheader_nounits")
    na = "[Not Supported]" if style.old_driver else "[N/A]"
    retire = spec.ecc == "retire"
    cols = {
        "timestamp": np.repeat(np.array(stamps, dtype=object)[None, :], G, axis=0),
        "serial": serial, "uuid": uuid,
        "index": np.repeat(np.arange(G)[:, None], S, axis=1),
        "bus": np.repeat(np.array([f"00000000:{b.upper()}:00.0" for b in h.buses], dtype=object)[:, None], S, axis=1),
    }
    data = {k: _flat(a, present) for k, a in cols.items()}
    for k, a in v.items():
        data[k] = _flat(a, present)
    data["power_cw"] = np.round(data.pop("power") * 100).astype(np.int64)
    data["temp"] = np.round(data["temp"]).astype(np.int64)
    df = pl.DataFrame({k: (pl.Series(k, a.tolist(), dtype=pl.Utf8) if a.dtype == object else a) for k, a in data.items()})
    c = pl.col

    def num(name: str, unit: str | None = None) -> pl.Expr:
        e = c(name).cast(pl.Int64).cast(pl.Utf8)
        return pl.concat_str([e, pl.lit(f" {unit}")]) if unit and units else e

    def yes(name: str) -> pl.Expr:
        return pl.when(c(name)).then(pl.lit("Yes")).otherwise(pl.lit("No"))

    def const(text: str) -> pl.Expr:
        return pl.lit(text)

    watts = pl.concat_str([(c("power_cw") // 100).cast(pl.Utf8), pl.lit("."),
                           (c("power_cw") % 100).cast(pl.Utf8).str.zfill(2)])
    limit = f"{spec.power_limit_w:.2f}"
    uniq = np.unique(data["reasons"]) if len(data["reasons"]) else np.array([], dtype=np.int64)
    hexmap = {int(x): f"0x{int(x):016X}" for x in uniq}
    reasons = c("reasons").replace_strict(hexmap, return_dtype=pl.Utf8) if hexmap else pl.lit("")
    metric = {
        "driver_version": const(style.driver), "pstate": const("P0"),
        "temperature.gpu": num("temp"),
        "temperature.memory": const("N/A") if h.model in ("L40S", "RTX6000") else (c("temp") + 4).cast(pl.Utf8),
        "utilization.gpu": num("util", "%"), "utilization.memory": num("util_mem", "%"),
        "memory.total": const(f"{spec.mem_mib} MiB" if units else f"{spec.mem_mib}"),
        "memory.used": num("mem_used", "MiB"),
        "power.draw": pl.concat_str([watts, pl.lit(" W")]) if units else watts,
        "power.limit": const(f"{limit} W" if units else limit),
        "clocks.current.sm": num("sm", "MHz"),
        "clocks.current.memory": const(f"{spec.mem_clock_mhz} MHz" if units else f"{spec.mem_clock_mhz}"),
        "clocks_event_reasons.active": reasons, "clocks_throttle_reasons.active": reasons,
        "fan.speed": num("fan", "%") if spec.has_fan else const(na),
        "pcie.link.gen.current": num("gen"), "pcie.link.width.current": num("width"),
        "ecc.errors.corrected.volatile.total": num("sbe_vol"),
        "ecc.errors.uncorrected.volatile.total": num("dbe_vol"),
        "ecc.errors.corrected.aggregate.total": num("sbe_agg"),
        "ecc.errors.uncorrected.aggregate.total": num("dbe_agg"),
        "retired_pages.single_bit_ecc.count": num("ret_sbe") if retire else const(na),
        "retired_pages.double_bit.count": (c("dbe_agg") > 0).cast(pl.Int64).cast(pl.Utf8) if retire else const(na),
        "retired_pages.pending": yes("retire_pending") if retire else const(na),
        "remapped_rows.correctable": const(na) if retire else num("remap_corr"),
        "remapped_rows.uncorrectable": const(na) if retire else num("remap_unc"),
        "remapped_rows.pending": const(na) if retire else yes("remap_pending"),
        "remapped_rows.failure": const(na) if retire else yes("remap_failure"),
    }
    ident = {"timestamp": c("timestamp"), "name": const(spec.smi_name), "pci.bus_id": c("bus"),
             "serial": c("serial"), "uuid": c("uuid"), "index": c("index").cast(pl.Utf8)}
    exprs = []
    for f in style.fields:
        q = f.split(" [")[0]
        if q in ident:
            exprs.append(ident[q])
        else:
            # A GPU that needs a reset cannot read its power sensor: nvidia-smi says so differently.
            reset = UNKNOWN if q.startswith("power.") else RESET
            exprs.append(pl.when(c("lost")).then(pl.lit(LOST)).when(c("reset")).then(pl.lit(reset)).otherwise(metric[q]))
    if df.height == 0:
        return []
    return df.select(pl.concat_str(exprs, separator=", ").alias("line"))["line"].to_list()
