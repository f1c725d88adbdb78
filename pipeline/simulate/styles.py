"""How each simulated host logs: its nvidia-smi query and format, its kernel log format, its driver.

Reads nothing, writes nothing. The choice is a deterministic function of the host's position
so that even a small fleet shows every format; ``truth/hosts.csv`` records it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.simulate.fleet import Host

#: nvidia-smi ``--format`` styles.
#: csv: header in every file (and again when nvidia-smi -l restarts after a reboot);
#: csv_copytruncate: header only when the logger starts (rotated files continue without);
#: csv_nounits: ``--format=csv,nounits`` (units stay in the header, values are bare);
#: noheader_nounits: ``--format=csv,noheader,nounits`` (fields only known from the config).
TELEMETRY_FORMATS = ("csv", "csv_copytruncate", "csv_nounits", "noheader_nounits")
#: Only with ``simulate --copytruncate-share``: copytruncate rotation of a collector that was
#: already running before the data's first day, so the header is written only where it
#: restarted (after a reboot, and once for a configuration change).
RESTART_HEADER = "csv_restart_header"
#: Only with ``simulate --daily-dmesg-share``: raw ``dmesg`` appended to a file per local day
#: (uptime stamps only; the boot marker is in the boot day's file alone).
DAILY_DMESG = "dmesg_raw_daily"

#: Kernel log formats (see kernel.py for one line of each).
KERNEL_FORMATS = ("dmesg_raw", "dmesg_T", "syslog", "journal_short_iso", "rsyslog_rfc3339", "kern_log")

DRIVERS_OLD = ("470.256.02", "525.147.05")
DRIVERS_NEW = ("535.183.01", "550.127.05", "570.133.20")

#: Query fields as nvidia-smi prints them in the header (canonical names, units in brackets).
FULL_FIELDS = (
    "timestamp", "name", "pci.bus_id", "serial", "uuid", "index", "driver_version", "pstate",
    "temperature.gpu", "temperature.memory", "utilization.gpu [%]", "utilization.memory [%]",
    "memory.total [MiB]", "memory.used [MiB]", "power.draw [W]", "power.limit [W]",
    "clocks.current.sm [MHz]", "clocks.current.memory [MHz]", "clocks_event_reasons.active",
    "fan.speed [%]", "pcie.link.gen.current", "pcie.link.width.current",
    "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
    "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
    "remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending", "remapped_rows.failure",
)
BASIC_FIELDS = (
    "timestamp", "index", "pci.bus_id", "serial", "temperature.gpu", "utilization.gpu [%]",
    "memory.used [MiB]", "power.draw [W]", "clocks_event_reasons.active", "fan.speed [%]",
    "pcie.link.width.current", "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
    "retired_pages.single_bit_ecc.count", "remapped_rows.pending",
)


@dataclass(frozen=True)
class HostStyle:
    telemetry: str
    kernel: str
    fields: tuple[str, ...]  # header spellings, in order
    driver: str
    gzip: bool
    #: ``simulate --kernel-rotation daily``: every kernel log rotated per local day
    kernel_daily: bool = False

    @property
    def old_driver(self) -> bool:
        return int(self.driver.split(".")[0]) < 535

    @property
    def query_fields(self) -> list[str]:
        """The field names without units: what ``--query-gpu=`` / ``--fields`` takes."""
        return [f.split(" [")[0] for f in self.fields]


def _chosen(i: int, share: float, salt: int) -> bool:
    """Whether host ``i`` is among the ``share`` of hosts (a fixed spread, no randomness)."""
    return share > 0 and ((i * 37 + salt) % 100) < share * 100


#: ``simulate --kernel-rotation``: ``default`` (syslog-like logs per week, dmesg dumps per
#: boot) or ``daily`` (every kernel log a file per local day).
KERNEL_ROTATIONS = ("default", "daily")


def host_style(h: Host, *, copytruncate_share: float = 0.0, daily_dmesg_share: float = 0.0,
               kernel_rotation: str = "default") -> HostStyle:
    """How host ``h`` logs. The shares switch that part of the hosts to the styles of fleets
    fleetfault was not built against (:data:`RESTART_HEADER`, :data:`DAILY_DMESG`); at 0
    (the default) every host keeps its usual style. ``kernel_rotation='daily'`` writes every
    host's kernel log in its usual format, one file per local day."""
    i = h.index
    old = h.model == "V100" or (h.model == "A100" and i % 3 == 0)
    driver = DRIVERS_OLD[i % 2] if old else DRIVERS_NEW[i % 3]
    fields = FULL_FIELDS if i % 2 == 0 else BASIC_FIELDS
    if old:
        fields = tuple(f.replace("clocks_event_reasons", "clocks_throttle_reasons") for f in fields)
    return HostStyle(
        telemetry=RESTART_HEADER if _chosen(i, copytruncate_share, 11) else TELEMETRY_FORMATS[i % 4],
        kernel=DAILY_DMESG if _chosen(i, daily_dmesg_share, 53) else KERNEL_FORMATS[(5 * i) % 6],
        fields=fields,
        driver=driver,
        gzip=i % 10 != 3,
        kernel_daily=kernel_rotation == "daily",
    )
