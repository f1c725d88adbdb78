"""The words technicians use for parts, symptoms and actions, in English and Chinese.

Reads nothing, writes nothing. Plain data for tickets.py; the phrases are combined with
sentence frames, slot references, model names, abbreviations, typos and full-width forms,
so a ticket is rarely a phrase from this list verbatim. Keep every entry GBK-encodable
(the ``sha-sp1`` export is GBK).
"""

from __future__ import annotations

PART = {
    "GPU": ("GPU", "gpu card", "GPU module", "SXM module", "GPU board", "accelerator", "the card", "OAM module",
            "graphics card", "compute card", "GPU卡", "显卡", "GPU模块", "加速卡", "计算卡", "GPU板卡", "模组"),
    "GPU_BASEBOARD": ("HGX baseboard", "GPU baseboard", "GPU tray", "HGX board", "UBB", "baseboard", "基板",
                      "GPU底板", "HGX基板", "GPU托盘"),
    "NVSWITCH": ("NVSwitch", "nvswitch chip", "NVSwitch tray", "NVSwitch芯片", "NVS chip", "switch tray"),
    "PCIE_RISER": ("riser", "riser card", "PCIe riser", "PCIe switch board", "retimer card", "转接卡", "Riser卡",
                   "PCIe转接板", "PEX board"),
    "FAN": ("fan", "fan module", "system fan", "chassis fan", "fan assy", "风扇", "风扇模块", "系统风扇", "FAN"),
    "PSU": ("PSU", "power supply", "power module", "PSU unit", "电源", "电源模块", "PSU电源", "power brick"),
    "COOLING": ("heatsink", "thermal paste", "cold plate", "air filter", "airflow baffle", "散热器", "导热硅脂",
                "冷板", "散热模组", "heat sink"),
    "MOTHERBOARD": ("motherboard", "mainboard", "system board", "MB", "主板", "mobo"),
    "CPU": ("CPU", "processor", "CPU socket", "处理器"),
    "DIMM": ("DIMM", "memory stick", "RAM", "system memory", "内存条", "内存", "DDR5 DIMM", "mem module"),
    "STORAGE": ("NVMe", "SSD", "boot disk", "OS drive", "硬盘", "系统盘", "NVMe盘", "M.2 drive"),
    "NIC": ("NIC", "HCA", "CX7 card", "ConnectX-7", "IB card", "optical module", "transceiver", "网卡", "光模块",
            "IB卡", "QSFP module"),
    "CABLE": ("cable", "IB cable", "AOC cable", "DAC cable", "power cord", "线缆", "光纤", "网线", "fiber"),
    "BMC": ("BMC", "iDRAC", "IPMI", "XCC", "BMC firmware", "带外管理"),
    "SOFTWARE": ("driver", "firmware", "VBIOS", "OS", "nvidia driver", "GPU firmware", "驱动", "固件", "系统",
                 "CUDA driver"),
    "NONE": ("n/a", "none", "-", "无", "NFF", "no part", "N/A"),
}

SYMPTOM = {
    "FELL_OFF_BUS": ("fell off the bus", "GPU fallen off bus", "xid 79", "Xid79", "GPU lost", "GPU not detected",
                     "gpu missing in nvidia-smi", "nvidia-smi shows GPU is lost", "card disappeared", "GPU dropped",
                     "掉卡", "GPU掉卡", "识别不到GPU", "GPU丢失", "lspci看不到卡", "卡不识别"),
    "MEMORY_UNCORRECTABLE": ("DBE", "double bit ECC", "uncorrectable ECC error", "ECC uncorrectable", "Xid 48",
                             "HBM error", "HBM uncorrectable error", "volatile DBE count", "UCE", "ECC DBE",
                             "不可纠正ECC错误", "ECC报错", "双比特错误", "显存错误", "显存ECC", "UCE错误"),
    "MEMORY_CORRECTABLE": ("high SBE count", "correctable ECC errors", "SBE storm", "CE count high",
                           "ECC corrected errors rising", "lots of CEs", "可纠正错误过多", "单比特错误", "CE告警",
                           "CE错误增多"),
    "ROW_REMAP": ("row remap failure", "remapped rows pending", "row remapping failed", "retired pages",
                  "page retirement", "Xid 64", "remap pending", "行重映射失败", "页退役", "row remapper error"),
    "OVERHEAT": ("overheat", "high temp", "temperature 92C", "thermal throttling", "HW thermal slowdown",
                 "hot GPU", "temp alarm", "过热", "温度过高", "高温告警", "降频", "温度告警"),
    "FAN_FAULT": ("fan failure", "fan speed 0", "fan not spinning", "fan alarm", "fan noisy", "fan RPM low",
                  "风扇故障", "风扇不转", "风扇告警", "转速异常"),
    "POWER_FAULT": ("power failure", "PSU fault", "no power", "power redundancy lost", "PSU amber LED",
                    "lost power", "断电", "电源故障", "电源告警", "掉电", "冗余丢失"),
    "NVLINK_ERROR": ("NVLink error", "nvlink down", "SXid", "Xid 74", "NVLink training failure",
                     "fabric manager error", "nvlink inactive", "NVLink报错", "nvlink链路断开", "NVLink异常"),
    "PCIE_ERROR": ("PCIe error", "AER errors", "link width x8", "PCIe link degraded", "pcie replay errors",
                   "link downtrained", "PCIe降速", "链路降级", "PCIe报错", "带宽降为x8"),
    "GSP_ERROR": ("GSP timeout", "Xid 119", "GSP error", "GSP RPC timeout", "GSP报错", "xid 120"),
    "HANG": ("GPU hang", "nvidia-smi hang", "job stuck", "timeout", "GPU unresponsive", "nvidia-smi卡住",
             "GPU卡死", "任务卡住", "无响应", "hung"),
    "PERFORMANCE": ("slow", "low performance", "low bandwidth", "P2P bandwidth low", "training slow",
                    "性能低", "带宽低", "跑分低", "perf drop"),
    "APP_FAULT": ("Xid 13", "Xid 31", "app crash", "CUDA error", "illegal memory access", "用户程序问题",
                  "应用报错", "user code fault"),
    "DRIVER_ISSUE": ("driver mismatch", "driver crash", "NVML init failed", "驱动异常", "驱动版本不匹配",
                     "nvidia-smi failed to communicate with driver", "driver not loaded"),
    "BOOT_FAILURE": ("won't boot", "no POST", "boot failure", "stuck in BIOS", "无法开机", "开机失败", "不开机",
                     "boot loop"),
    "OTHER": ("unknown error", "misc issue", "alert from monitoring", "link flapping", "NIC down", "其他",
              "未知错误", "网络不通", "odd behaviour"),
}

ACTION = {
    "REPLACE": ("replaced", "swap", "swapped", "RMA", "replaced with new", "changed", "更换", "换新", "已更换",
                "更换备件", "RMA返厂", "replaced part"),
    "RESEAT": ("reseat", "reseated", "re-seated", "unplug/replug", "重新插拔", "重插", "reinstalled", "re-seat"),
    "REBOOT": ("reboot", "rebooted", "power cycle", "GPU reset", "nvidia-smi -r", "cold reboot", "AC cycle",
               "重启", "断电重启", "复位"),
    "REFLASH": ("firmware update", "upgraded driver", "VBIOS flash", "reflash", "FW upgrade", "升级固件", "刷固件",
                "升级驱动", "updated fw"),
    "CLEAN": ("cleaned dust", "blew out dust", "cleaned filter", "除尘", "清灰", "清理灰尘", "dust removal"),
    "MONITOR": ("monitor", "keep watching", "observe", "no action, monitoring", "观察", "继续观察", "持续监控",
                "watch list"),
    "NONE": ("no action", "NFF", "no fault found", "cannot reproduce", "closed", "无需处理", "未发现问题",
             "复测正常", "CNR"),
}

#: Abbreviations technicians write instead of the full word.
ABBREV = {
    "replaced": ("repl.", "rplcd", "repl"), "temperature": ("temp",), "power": ("pwr",), "error": ("err",),
    "errors": ("errs",), "memory": ("mem",), "reboot": ("rbt",), "firmware": ("fw", "FW"), "with": ("w/",),
    "customer": ("cust",), "performance": ("perf",), "failure": ("fail",), "module": ("mod",),
}

SLOT_EN = ("GPU{n}", "gpu {n}", "slot {n}", "#{n}", "GPU idx {n}", "card{n}", "GPU #{n}", "slot{n}", "idx{n}")
SLOT_ZH = ("{n}号卡", "槽位{n}", "第{n}张卡", "GPU{n}", "{n}号GPU", "卡{n}")

FRAMES_EN = (
    "{sym} on {slot}", "{host}: {slot} {sym}", "{model} {slot} {sym}, customer reported",
    "monitoring alert - {sym} ({slot})", "{sym}", "user reports {sym} on {host} {slot}",
    "{sym} seen in dmesg, {slot}", "{host} {slot} - {sym} again", "DCGM diag: {sym} ({model}, {slot})",
    "{slot} {sym} after job restart", "node {host} drained: {sym}", "{host} {sym}", "{sym} on {host}",
    "{model} node {host}: {sym}", "{sym} - please check {host}",
)
FRAMES_ZH = (
    "{host} {slot}{sym}", "{slot}{sym}，需处理", "客户反馈{sym}", "巡检发现{sym}，{slot}", "{model} {slot} {sym}",
    "{host}上{slot}出现{sym}", "{sym}（{slot}）", "告警：{sym}",
)
FRAMES_MIXED = (
    "{host} GPU{n} {sym}", "{slot} {sym} 需要处理", "客户反馈 {sym} on {slot}", "{model} {sym}，host {host}",
)

#: Details with numbers, appended to or standing in for the symptom phrase.
SYMPTOM_DETAIL = {
    "MEMORY_CORRECTABLE": ("SBE count {big}", "{big} CEs in 24h", "corrected ECC {big}", "单比特错误{big}次",
                           "ecc.errors.corrected = {big}", "CE {big}/day"),
    "MEMORY_UNCORRECTABLE": ("DBE x{small}", "{small} uncorrectable ECC", "volatile DBE={small}", "ECC DBE {small}次",
                             "Xid 48 x{small}", "uncorr ECC {small}, xid 48/63"),
    "OVERHEAT": ("temp {temp}C", "GPU temp {temp}°C", "{temp}度高温", "hitting {temp}C", "T={temp}C under load",
                 "温度{temp}℃"),
    "FELL_OFF_BUS": ("Xid 79 x{small}", "xid79 {small} times", "掉卡{small}次", "Xid79 then lost",
                     "nvidia-smi: Unable to determine the device handle"),
    "ROW_REMAP": ("{small} rows pending remap", "remapped_rows.pending=Yes", "retired pages {small}",
                  "remap failure=Yes", "{small}行待重映射"),
    "PCIE_ERROR": ("link x{w} (should be x16)", "{big} AER correctable", "Gen{g} x{w}", "LnkSta x{w}",
                   "降为x{w}"),
    "FAN_FAULT": ("fan{small} 0 RPM", "FAN{small} RPM {rpm}", "风扇{small}转速{rpm}", "fan {small} failed"),
    "POWER_FAULT": ("PSU{small} AC lost", "PSU{small} input lost", "PSU{small}告警", "PS{small} status fault"),
    "NVLINK_ERROR": ("SXid {sxid}", "link {small} down", "nvlink {small} inactive", "NVLink {small} CRC errors",
                     "SXid {sxid} fatal"),
    "GSP_ERROR": ("Xid 119 x{small}", "GSP RPC timeout {small}x", "xid119/120"),
    "HANG": ("hung {small}h", "nvidia-smi no response {small} min", "job stuck {small}h", "卡死{small}小时"),
    "PERFORMANCE": ("{pct}% slower", "busBW {big} MB/s", "性能下降{pct}%", "step time +{pct}%"),
    "APP_FAULT": ("Xid 13 x{small}", "Xid 31 MMU fault", "cudaErrorIllegalAddress"),
    "DRIVER_ISSUE": ("driver {drv}", "NVML: Driver/library version mismatch", "驱动{drv}"),
    "BOOT_FAILURE": ("POST code {post}", "stuck at POST {post}", "开机卡在{post}"),
    "OTHER": ("see attached log", "待查", "TBD", "ref case {big}"),
}

#: Context clauses technicians add around the symptom.
CONTEXT_EN = ("during NCCL test", "after maintenance", "job {big} failed", "found by DCGM", "customer escalated",
              "2nd time this week", "after power event", "during burn-in", "reported by on-call")
CONTEXT_ZH = ("客户训练任务中断", "维护后出现", "压测时发现", "第二次出现", "巡检发现", "夜班发现", "DCGM诊断失败")

#: Part modifiers; {p} is the part phrase, {k} an index.
PART_MOD_EN = ("faulty {p}", "bad {p}", "defective {p}", "dead {p}", "{p} #{k}", "{p}{k}", "{p} assy", "{p} (suspect)")
PART_MOD_ZH = ("故障{p}", "{p}损坏", "{p}{k}", "坏{p}", "疑似{p}")
