"""A fake ``pynvml`` at the module boundary: several GPUs, unsupported fields, a lost GPU,
queued Xid events. Only what the collector calls is implemented."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 0, 1


class NVMLError(Exception):
    def __init__(self, value):
        self.value = value
        super().__init__({3: "Not Supported", 15: "GPU is lost", 10: "Timeout"}.get(value, f"NVML error {value}"))


class FakeGPU:
    def __init__(self, index, *, bus, serial, uuid, name="NVIDIA H100 80GB HBM3", temp=41,
                 unsupported=(), ecc=(0, 0)):
        self.index, self.bus, self.serial, self.uuid, self.name = index, bus, serial, uuid, name
        self.temp, self.unsupported, self.ecc = temp, set(unsupported), ecc
        self.lost = False


class FakeNVML:
    """Instances behave like the pynvml module."""

    NVMLError = NVMLError

    def __init__(self, gpus, events=()):
        self.gpus = list(gpus)
        self.events = deque(events)  # (gpu index, xid)
        self.initialised = False
        self.shut = False
        for k, v in globals().items():
            if k.startswith("NVML_"):
                setattr(self, k, v)

    # lifecycle
    def nvmlInit(self):
        self.initialised = True

    def nvmlShutdown(self):
        self.shut = True

    # devices
    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def _check(self, g, what):
        if g.lost:
            raise NVMLError(15)
        if what in g.unsupported:
            raise NVMLError(3)

    def nvmlDeviceGetIndex(self, g):
        return g.index

    def nvmlDeviceGetName(self, g):
        self._check(g, "name")
        return g.name

    def nvmlDeviceGetSerial(self, g):
        self._check(g, "serial")
        return g.serial

    def nvmlDeviceGetUUID(self, g):
        self._check(g, "uuid")
        return g.uuid

    def nvmlDeviceGetPciInfo(self, g):
        self._check(g, "pci")
        return SimpleNamespace(busId=g.bus.encode())

    def nvmlDeviceGetTemperature(self, g, sensor):
        self._check(g, "temperature")
        return g.temp

    def nvmlDeviceGetUtilizationRates(self, g):
        self._check(g, "utilization")
        return SimpleNamespace(gpu=87, memory=35)

    def nvmlDeviceGetMemoryInfo(self, g):
        self._check(g, "memory")
        return SimpleNamespace(total=81559 << 20, used=40000 << 20, free=41559 << 20)

    def nvmlDeviceGetPowerUsage(self, g):
        self._check(g, "power")
        return 627400

    def nvmlDeviceGetEnforcedPowerLimit(self, g):
        self._check(g, "power_limit")
        return 700000

    def nvmlDeviceGetClockInfo(self, g, clock):
        self._check(g, "clocks")
        return 1980 if clock == NVML_CLOCK_SM else 2619

    def nvmlDeviceGetCurrentClocksEventReasons(self, g):
        self._check(g, "throttle")
        return 0x20 if g.temp > 85 else 0x0

    def nvmlDeviceGetTotalEccErrors(self, g, kind, counter):
        self._check(g, "ecc")
        return g.ecc[kind]

    def nvmlDeviceGetRetiredPages(self, g, cause):
        self._check(g, "retired")
        return [0x1000] if cause == 1 and g.ecc[1] else []

    def nvmlDeviceGetRemappedRows(self, g):
        self._check(g, "remapped")
        return (2, 0, False, False)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, g):
        self._check(g, "pcie")
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, g):
        self._check(g, "pcie")
        return 16

    def nvmlDeviceGetMaxPcieLinkWidth(self, g):
        self._check(g, "pcie")
        return 16

    def nvmlDeviceGetPcieReplayCounter(self, g):
        self._check(g, "replay")
        return 0

    def nvmlDeviceGetFanSpeed(self, g):
        self._check(g, "fan")
        return 0

    # events
    def nvmlEventSetCreate(self):
        return "eventset"

    def nvmlDeviceRegisterEvents(self, g, types, es):
        return None

    def nvmlEventSetWait_v2(self, es, timeout_ms):
        if not self.events:
            raise NVMLError(10)
        idx, xid = self.events.popleft()
        return SimpleNamespace(device=self.gpus[idx], eventData=xid, eventType=8)

    def nvmlEventSetFree(self, es):
        return None
