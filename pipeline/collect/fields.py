"""What the collector samples: nvidia-smi ``--query-gpu`` fields read through NVML.

Each field is written exactly as ``nvidia-smi --query-gpu=... --format=csv`` prints it (units in
the header and the value, ``[Not Supported]``, ``[N/A]``, ``[GPU is lost]``), so the telemetry
ingest reads collector files and nvidia-smi logs through one parser into identical columns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NOT_SUPPORTED = "[Not Supported]"
NOT_AVAILABLE = "[N/A]"
GPU_LOST = "[GPU is lost]"
UNKNOWN_ERROR = "[Unknown Error]"


@dataclass(frozen=True)
class Field:
    name: str  # the nvidia-smi query field
    header: str  # how nvidia-smi prints it in the CSV header
    read: Callable[[Any, Any], Any]  # (nvml module, device handle) -> raw value
    fmt: Callable[[Any], str] = str


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _unit(unit: str, digits: int | None = None) -> Callable[[Any], str]:
    def fmt(v: Any) -> str:
        return f"{v:.{digits}f} {unit}" if digits is not None else f"{int(v)} {unit}"
    return fmt


def _yes_no(v: Any) -> str:
    return "Yes" if v else "No"


def _bus_id(nv, h) -> str:
    bus = _text(nv.nvmlDeviceGetPciInfo(h).busId)
    return bus.upper().replace("0X", "0x") if bus else bus


def _throttle(nv, h) -> int:
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return fn(h)


def _ecc(kind: str, counter: str):
    def read(nv, h):
        err = nv.NVML_MEMORY_ERROR_TYPE_CORRECTED if kind == "corrected" else nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        cnt = nv.NVML_VOLATILE_ECC if counter == "volatile" else nv.NVML_AGGREGATE_ECC
        return nv.nvmlDeviceGetTotalEccErrors(h, err, cnt)
    return read


def _retired(cause: str):
    def read(nv, h):
        c = (nv.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS if cause == "sbe"
             else nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        return len(nv.nvmlDeviceGetRetiredPages(h, c))
    return read


def _remapped(i: int):
    # nvmlDeviceGetRemappedRows -> (correctable, uncorrectable, pending, failure)
    return lambda nv, h: nv.nvmlDeviceGetRemappedRows(h)[i]


FIELDS: tuple[Field, ...] = (
    Field("timestamp", "timestamp", lambda nv, h: None),  # filled by the sampler
    Field("index", "index", lambda nv, h: nv.nvmlDeviceGetIndex(h)),
    Field("name", "name", lambda nv, h: _text(nv.nvmlDeviceGetName(h))),
    Field("serial", "serial", lambda nv, h: _text(nv.nvmlDeviceGetSerial(h))),
    Field("uuid", "uuid", lambda nv, h: _text(nv.nvmlDeviceGetUUID(h))),
    Field("pci.bus_id", "pci.bus_id", _bus_id),
    Field("temperature.gpu", "temperature.gpu", lambda nv, h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
    Field("utilization.gpu", "utilization.gpu [%]", lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).gpu, _unit("%")),
    Field("utilization.memory", "utilization.memory [%]", lambda nv, h: nv.nvmlDeviceGetUtilizationRates(h).memory, _unit("%")),
    Field("memory.total", "memory.total [MiB]", lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).total // (1 << 20), _unit("MiB")),
    Field("memory.used", "memory.used [MiB]", lambda nv, h: nv.nvmlDeviceGetMemoryInfo(h).used // (1 << 20), _unit("MiB")),
    Field("power.draw", "power.draw [W]", lambda nv, h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0, _unit("W", 2)),
    Field("power.limit", "power.limit [W]", lambda nv, h: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0, _unit("W", 2)),
    Field("clocks.sm", "clocks.current.sm [MHz]", lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM), _unit("MHz")),
    Field("clocks.mem", "clocks.current.memory [MHz]", lambda nv, h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM), _unit("MHz")),
    Field("clocks_event_reasons.active", "clocks_event_reasons.active", _throttle, lambda v: f"0x{int(v):016X}"),
    Field("ecc.errors.corrected.volatile.total", "ecc.errors.corrected.volatile.total", _ecc("corrected", "volatile")),
    Field("ecc.errors.uncorrected.volatile.total", "ecc.errors.uncorrected.volatile.total", _ecc("uncorrected", "volatile")),
    Field("ecc.errors.corrected.aggregate.total", "ecc.errors.corrected.aggregate.total", _ecc("corrected", "aggregate")),
    Field("ecc.errors.uncorrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total", _ecc("uncorrected", "aggregate")),
    Field("retired_pages.sbe", "retired_pages.single_bit_ecc.count", _retired("sbe")),
    Field("retired_pages.dbe", "retired_pages.double_bit.count", _retired("dbe")),
    Field("remapped_rows.correctable", "remapped_rows.correctable", _remapped(0)),
    Field("remapped_rows.uncorrectable", "remapped_rows.uncorrectable", _remapped(1)),
    Field("remapped_rows.pending", "remapped_rows.pending", _remapped(2), _yes_no),
    Field("remapped_rows.failure", "remapped_rows.failure", _remapped(3), _yes_no),
    Field("pcie.link.gen.current", "pcie.link.gen.current", lambda nv, h: nv.nvmlDeviceGetCurrPcieLinkGeneration(h)),
    Field("pcie.link.width.current", "pcie.link.width.current", lambda nv, h: nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
    Field("pcie.link.width.max", "pcie.link.width.max", lambda nv, h: nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
    # Not a --query-gpu field (nvidia-smi shows it only in -q); named in the same style.
    Field("pcie.replay_counter", "pcie.replay_counter", lambda nv, h: nv.nvmlDeviceGetPcieReplayCounter(h)),
    Field("fan.speed", "fan.speed [%]", lambda nv, h: nv.nvmlDeviceGetFanSpeed(h), _unit("%")),
)


def header_line(fields: tuple[Field, ...] = FIELDS) -> str:
    """The CSV header nvidia-smi would print for these fields."""
    return ", ".join(f.header for f in fields)


def query_fields(fields: tuple[Field, ...] = FIELDS) -> list[str]:
    """The ``--query-gpu`` names (for ``fleetfault parse smi --fields``)."""
    return [f.name for f in fields]
