"""``fleetfault collect``: sample this host's GPUs through NVML into the telemetry layout.

Reads: the NVIDIA driver through NVML (``pynvml`` from the ``nvidia-ml-py`` package, extra
``[nvml]``). Writes: ``DIR/telemetry/<host>/<YYYY-MM-DD>.csv`` (nvidia-smi ``--format=csv``
lines, rotated at local midnight) and ``DIR/kernel/<host>/<YYYY-MM-DD>.log`` (Xid events as
RFC 3339 syslog kernel lines), which the smi and xid ingest stages read like any other log.

Why: fleets without an nvidia-smi logging habit need a collector, and Xid events caught from
NVML survive kernel-log rotation. Everything NVML-specific goes through the ``nvml`` object
handed in, so tests run it against a fake module (no GPU in CI).
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.collect.fields import FIELDS, GPU_LOST, NOT_AVAILABLE, NOT_SUPPORTED, UNKNOWN_ERROR, Field, header_line
from pipeline.errors import DependencyMissing, FleetfaultError
from pipeline.vocab.hosts import host_key
from pipeline.vocab.pci import pci_id

log = logging.getLogger(__name__)

# NVML return codes (nvml.h), used when the bindings' exception classes are not at hand.
_NOT_SUPPORTED, _GPU_IS_LOST, _TIMEOUT, _NO_PERMISSION = 3, 15, 10, 4
_XID_EVENT = 0x0000000000000008  # nvmlEventTypeXidCriticalError


class CollectorError(FleetfaultError):
    """The collector cannot go on (disk full, unwritable folder); exit 1 after flushing."""

    exit_code = 1


def load_nvml():
    """Import and initialise pynvml, or fail with one clear line (exit 2)."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        raise DependencyMissing(
            "collect needs the NVML bindings: pip install 'fleetfault[nvml]' (package nvidia-ml-py)"
        ) from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise DependencyMissing(
            f"collect: no usable NVIDIA driver on this host ({exc}); NVML could not start. "
            "Is the NVIDIA driver installed and loaded (nvidia-smi works)?"
        ) from None
    return pynvml


def _code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


class Collector:
    """Sample every GPU each ``interval`` seconds; write Xid events as they arrive.

    Parameters
    ----------
    nvml : module-like
        ``pynvml`` or a fake with the same functions and ``NVMLError``.
    out_dir : Path
        Root of the input layout (``telemetry/`` and ``kernel/`` go below it).
    clock : callable
        Returns the current time as an aware ``datetime`` (local zone); injectable for tests.
    """

    def __init__(self, nvml: Any, out_dir: Path, *, host: str | None = None, interval: float = 60.0,
                 clock: Callable[[], datetime] | None = None, sleep: Callable[[float], None] | None = None,
                 fields: tuple[Field, ...] = FIELDS):
        self.nv = nvml
        # The folder is the host's matching key: a host named by its address keeps it whole.
        self.host = host or host_key(socket.gethostname())
        self.interval = float(interval)
        self.clock = clock or (lambda: datetime.now().astimezone())
        self.sleep = sleep or time.sleep
        self.fields = fields
        self.tele_dir = Path(out_dir) / "telemetry" / self.host
        self.kern_dir = Path(out_dir) / "kernel" / self.host
        self.stopping = False
        self.samples_written = 0
        self.events_written = 0
        self._lost: set[int] = set()
        self._handles: list[Any] = []
        self._bus: dict[int, str] = {}
        self._events = None

    # -- setup -----------------------------------------------------------------------
    def open(self) -> None:
        self.tele_dir.mkdir(parents=True, exist_ok=True)
        self.kern_dir.mkdir(parents=True, exist_ok=True)
        n = self.nv.nvmlDeviceGetCount()
        self._handles = [self.nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        identity = []
        for i, h in enumerate(self._handles):
            pci = next(f for f in FIELDS if f.name == "pci.bus_id")
            try:
                bus = self._read(h, pci, i)
            except _Lost:
                bus = NOT_AVAILABLE
            self._bus[i] = bus
            uuid = self._safe(lambda: self.nv.nvmlDeviceGetUUID(h))
            serial = self._safe(lambda: self.nv.nvmlDeviceGetSerial(h))
            kb = _kernel_bus(bus)
            if uuid:
                identity.append(f"NVRM: GPU at PCI:{kb}: {_s(uuid)}")
            if serial:
                identity.append(f"NVRM: GPU Board Serial Number: {_s(serial)}")
        # The identity lines let the xid stage map PCI ids to uuid and serial, as a boot log would.
        self._write_kernel(identity)
        self._events = self._register_events()
        log.info("collecting %d GPUs on %s every %.0f s", n, self.host, self.interval)

    def _register_events(self):
        try:
            es = self.nv.nvmlEventSetCreate()
        except Exception as exc:  # noqa: BLE001 - any NVML failure: sample without events
            log.warning("collect: NVML events unavailable (%s); Xids come only from kernel logs", exc)
            return None
        for i, h in enumerate(self._handles):
            try:
                self.nv.nvmlDeviceRegisterEvents(h, _XID_EVENT, es)
            except Exception as exc:  # noqa: BLE001
                log.warning("collect: GPU %d does not report Xid events through NVML (%s)", i, exc)
        return es

    @staticmethod
    def _safe(fn):
        try:
            return fn()
        except Exception:  # noqa: BLE001
            return None

    # -- sampling --------------------------------------------------------------------
    def _read(self, handle: Any, f: Field, index: int) -> str:
        try:
            value = f.read(self.nv, handle)
        except self.nv.NVMLError as exc:
            code = _code(exc)
            if code == _NOT_SUPPORTED:
                return NOT_SUPPORTED
            if code == _GPU_IS_LOST:
                raise _Lost from None
            if code == _NO_PERMISSION:
                return NOT_AVAILABLE
            return UNKNOWN_ERROR
        if value is None:
            return NOT_AVAILABLE
        return f.fmt(value)

    def sample(self, now: datetime) -> list[str]:
        """One CSV line per GPU, as nvidia-smi prints them."""
        stamp = now.strftime("%Y/%m/%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}"
        lines = []
        for i, h in enumerate(self._handles):
            values = []
            try:
                for f in self.fields:
                    if f.name == "timestamp":
                        values.append(stamp)
                    elif f.name == "index":
                        values.append(str(i))
                    else:
                        values.append(self._read(h, f, i))
            except _Lost:
                values = [stamp if f.name == "timestamp" else str(i) if f.name == "index"
                          else self._bus[i] if f.name == "pci.bus_id" else GPU_LOST for f in self.fields]
                if i not in self._lost:
                    self._lost.add(i)
                    log.error("collect: GPU %d (%s) is lost; recording Xid 79 and sampling the others", i, self._bus[i])
                    self._write_kernel([_xid_line(self._bus[i], 79, "GPU has fallen off the bus.")], now)
            lines.append(", ".join(values))
        return lines

    def poll_events(self, timeout_s: float, now: datetime | None = None) -> int:
        """Wait up to ``timeout_s`` for Xid events and write them; returns how many."""
        if self._events is None:
            self.sleep(timeout_s)
            return 0
        n = 0
        deadline = time.monotonic() + timeout_s
        # Always look once (a zero timeout drains what is queued), then wait out the interval.
        first = True
        while not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0 and not first:
                break
            first = False
            try:
                data = self.nv.nvmlEventSetWait_v2(self._events, max(int(left * 1000), 0))
            except self.nv.NVMLError as exc:
                if _code(exc) == _TIMEOUT:
                    break
                log.warning("collect: event wait failed (%s)", exc)
                self.sleep(max(left, 0))
                break
            idx = self._index_of(data.device)
            bus = self._bus.get(idx, "00000000:00:00.0")
            self._write_kernel([_xid_line(bus, int(data.eventData), "reported through NVML")], now)
            n += 1
        return n

    def _index_of(self, handle: Any) -> int:
        for i, h in enumerate(self._handles):
            if h == handle:
                return i
        return -1

    # -- writing ---------------------------------------------------------------------
    def _append(self, path: Path, lines: list[str], header: str | None = None) -> None:
        if not lines:
            return
        new = not path.exists() or path.stat().st_size == 0
        try:
            with open(path, "a", encoding="utf-8") as fh:
                if new and header:
                    fh.write(header + "\n")
                fh.write("\n".join(lines) + "\n")
                fh.flush()
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise CollectorError(
                    f"collect: disk full writing {path}: {len(lines)} lines not written; "
                    f"{self.samples_written} samples written before; free space and restart"
                ) from None
            raise CollectorError(f"collect: cannot write {path}: {exc}") from None

    def write_samples(self, now: datetime, lines: list[str]) -> None:
        # Rotate by local day: the file name is the day nvidia-smi's timestamps show.
        self._append(self.tele_dir / f"{now:%Y-%m-%d}.csv", lines, header_line(self.fields))
        self.samples_written += len(lines)

    def _write_kernel(self, messages: list[str], now: datetime | None = None) -> None:
        now = now or self.clock()
        stamp = now.isoformat(timespec="microseconds")
        lines = [f"{stamp} {self.host} kernel: {m}" for m in messages]
        self._append(self.kern_dir / f"{now:%Y-%m-%d}.log", lines)
        self.events_written += sum("Xid" in m for m in messages)

    # -- the loop --------------------------------------------------------------------
    def stop(self, *_args) -> None:
        self.stopping = True

    def run(self, max_samples: int | None = None, *, install_signals: bool = True) -> int:
        """Sample until SIGTERM/SIGINT (or ``max_samples`` rounds); returns rounds done."""
        if install_signals:
            signal.signal(signal.SIGTERM, self.stop)
            signal.signal(signal.SIGINT, self.stop)
        self.open()
        rounds = 0
        try:
            while not self.stopping and (max_samples is None or rounds < max_samples):
                t0 = time.monotonic()
                now = self.clock()
                self.write_samples(now, self.sample(now))
                rounds += 1
                if max_samples is not None and rounds >= max_samples:
                    break
                self.poll_events(max(self.interval - (time.monotonic() - t0), 0.0))
        finally:
            self._shutdown()
        return rounds

    def _shutdown(self) -> None:
        try:
            if self._events is not None:
                self.nv.nvmlEventSetFree(self._events)
            self.nv.nvmlShutdown()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass


class _Lost(Exception):
    pass


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _kernel_bus(bus: str) -> str:
    """nvidia-smi's ``00000000:3B:00.0`` in the kernel's ``0000:3b:00`` form."""
    canonical = pci_id(bus)
    return canonical.rpartition(".")[0] if canonical else bus.lower()


def _xid_line(bus: str, xid: int, text: str) -> str:
    return f"NVRM: Xid (PCI:{_kernel_bus(bus)}): {xid}, pid='<unknown>', name=<unknown>, {text}"
