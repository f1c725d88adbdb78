"""Ticket exports as the field writes them: ``fleetfault simulate --ticket-layouts field``.

The default simulator writes each service point in one tidy layout that fleetfault was
built against. ``field`` writes the same tickets the way other tools and people do, so
that reading and linking are tested on what they were not tuned to:

============  ======================================================================
sha-sp1       运维平台 CSV dumps every 3 days of the last 21 (UTF-8): 故障单号/上报时间/最后更新时间/节点IP/卡位,
              hosts by IP address, slots 1-based as ``第5卡``, serials with a leading
              apostrophe; overlapping dumps in which a ticket moves from 处理中 (no remedy
              yet) to 已完成 with its remedy
sha-sp2       RMA portal JSON, nested (``rma.number``, ``device.hostname`` as FQDN,
              ``device.position`` ``GPU 6``) with a part-swap list
              (``resolution.parts_swapped: [{type, old_sn, new_sn}]``): the failed serial
              only in the swap list
sjc-depot     English helpdesk CSV: Incident / Reported On / Last Updated / Asset Host
              (upper-case FQDN) / Card (``card #7``, 1-based) / Board S/N (``SN:``,
              spaces, spreadsheet ``1.65052E+12``, a typo); overlapping monthly dumps
fra-rz1       XLSX, no serial column: host FQDN and ``slot3``; a serial
              only inside the description, now and then
iad-noc       the default layout (weekly snapshots, status moving on)
iad-vendor    vendor CSV, hosts by IP, ``GPU{n}`` 0-based, serials one typo off or missing
============  ======================================================================

Every export's truth is the same as the default's (``truth/tickets.csv``); the writers
only change how a ticket is written. ``inventory.csv`` gains an ``ip`` column (the hosts'
addresses), which is how tickets naming a host by address are linked.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

LAYOUTS = ("default", "field")

#: Each field layout's columns as ``[tickets.points.<point>.columns]`` would name them: for
#: measuring linking where the reader does not recognise a layout by itself.
COLUMN_MAP = {
    "sha-sp1": {"ticket_id": "故障单号", "opened_at": "上报时间", "updated_at": "最后更新时间", "host": "节点IP",
                "slot": "卡位", "serial": "板卡序列号", "part_text": "更换备件", "symptom_text": "故障描述",
                "action_text": "维修结果", "status": "工单状态"},
    "sha-sp2": {"ticket_id": "rma.number", "opened_at": "rma.created", "closed_at": "resolution.closed",
                "status": "rma.status", "host": "device.hostname", "slot": "device.position", "serial": "device.sn",
                "part_text": "fault.category", "symptom_text": "fault.summary", "action_text": "resolution.action"},
    "sjc-depot": {"ticket_id": "Incident", "opened_at": "Reported On", "updated_at": "Last Updated",
                  "host": "Asset Host", "slot": "Card", "serial": "Board S/N", "part_text": "Replaced Component",
                  "symptom_text": "Issue Summary", "action_text": "Fix Applied", "status": "State"},
    "fra-rz1": {"ticket_id": "Case", "opened_at": "Created", "host": "Node FQDN", "slot": "Slot", "part_text": "Part",
                "symptom_text": "Problem", "action_text": "Action Taken"},
    "iad-vendor": {"ticket_id": "case_id", "opened_at": "opened_utc", "host": "node_ip", "slot": "gpu",
                   "serial": "gpu_sn", "part_text": "component", "symptom_text": "symptom", "action_text": "remedy"},
}

def host_ip(host_index: int) -> str:
    """The simulated address of host ``host_index``: 10.<site block>.x.y, stable per host."""
    return f"10.{20 + host_index // 250 % 200}.{host_index // 250 // 200}.{host_index % 250 + 2}"


def fqdn(host: str, site: str, rack: str) -> str:
    return f"{host}.{rack.lower()}.{site}.dc.example.net"


def _serial_quirk(rng, serial: str, kinds: tuple[str, ...]) -> str:
    """A serial as a spreadsheet or a hurried person leaves it."""
    if not serial:
        return ""
    k = kinds[int(rng.integers(len(kinds)))]
    if k == "apostrophe":
        return "'" + serial
    if k == "sn":
        return "SN: " + serial
    if k == "spaces":
        return " ".join(serial[i:i + 4] for i in range(0, len(serial), 4))
    if k == "sci" and serial.isdigit():
        return f"{int(serial[0])}.{serial[1:6]}E+{len(serial) - 1}"
    if k == "typo":
        i = int(rng.integers(len(serial)))
        c = serial[i]
        return serial[:i] + (str((int(c) + 1) % 10) if c.isdigit() else "X") + serial[i + 1:]
    return serial


def _local(t: datetime, tz: str) -> datetime:
    from pipeline.simulate.tickets import _local as local

    return local(t, tz)


def _tz(r: dict) -> str:
    from pipeline.simulate.tickets import _tz as tz

    return tz(r)


def _csv(header: list[str], rows: list[list], encoding: str = "utf-8") -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().encode(encoding)


def _dumps(recs: list[dict], start: datetime, end: datetime, every_days: int, span_days: int):
    """Overlapping periodic dumps: (dump time, [(record, still open at that time)])."""
    t = start + timedelta(days=every_days)
    while True:
        last = t >= end
        t = min(t, end)
        rows = [(r, r["closed_at"] > t) for r in recs if t - timedelta(days=span_days) <= r["opened_at"] < t]
        if rows:
            yield t, rows
        if last:
            return
        t += timedelta(days=every_days)


def _by_month(recs: list[dict]) -> list[tuple[str, list[dict]]]:
    """Tickets by the month they were opened, oldest first: one export per month."""
    months: dict[str, list[dict]] = {}
    for r in recs:
        months.setdefault(r["opened_at"].strftime("%Y-%m"), []).append(r)
    return sorted(months.items())


def _zh_slot(n: int) -> str:
    return f"第{n}卡"


def write_zh_ops(folder: Path, recs: list[dict], sim, rng) -> None:
    header = ["故障单号", "上报时间", "最后更新时间", "节点IP", "卡位", "板卡序列号", "更换备件", "故障描述", "维修结果",
              "工单状态"]
    quirks = {r["ticket_id"]: _serial_quirk(rng, r["serial_text"], ("apostrophe", "apostrophe", "plain"))
              for r in recs}
    # The platform closes a ticket only after the repair is verified, days after the work.
    # (The last dump, at the end of the history, shows every repair done by then as done.)
    done = {r["ticket_id"]: min(r["closed_at"] + timedelta(days=float(rng.uniform(0.5, 6))), max(r["closed_at"], sim.end))
            for r in recs}
    for t, rows in _dumps([{**r, "closed_at": done[r["ticket_id"]]} for r in recs], sim.start, sim.end, 3, 21):
        out = []
        for r, is_open in rows:
            tz = _tz(r)
            o = _local(r["opened_at"], tz)
            upd = _local(min(t, r["closed_at"]) if not is_open else r["opened_at"] + (t - r["opened_at"]) / 2, tz)
            out.append([r["ticket_id"], o.strftime("%Y-%m-%d %H:%M"), upd.strftime("%Y-%m-%d %H:%M:%S"),
                        host_ip(r["_host"]), _zh_slot(r["slot"] + SLOT_BASE["sha-sp1"]) if r["slot"] is not None else "",
                        quirks[r["ticket_id"]], r["part_text"], r["symptom_text"],
                        "" if is_open else r["action_text"], "处理中" if is_open else "已完成"])
        (folder / f"gpu工单导出-{t:%Y%m%d}.csv").write_bytes(_csv(header, out))


def write_rma_json(folder: Path, recs: list[dict], sim, rng) -> None:
    for month, rs in _by_month(recs):
        items = []
        for r in rs:
            tz = _tz(r)
            swap = r["is_replacement"] and r["serial"]
            device = {"hostname": fqdn(r["host"], r["site"], r["_rack"]),
                      "position": f"GPU {r['slot']}" if r["slot"] is not None else None}
            if not swap and r["serial_text"]:
                device["sn"] = r["serial_text"]
            resolution = {"action": r["action_text"], "closed": _local(r["closed_at"], tz).isoformat(timespec="seconds")}
            if swap:
                resolution["parts_swapped"] = [{"type": "GPU", "old_sn": r["serial"], "new_sn": r["new_serial"] or ""}]
            items.append({
                "rma": {"number": r["ticket_id"], "created": _local(r["opened_at"], tz).isoformat(timespec="seconds"),
                        "status": "CLOSED"},
                "device": device,
                "fault": {"summary": r["symptom_text"], "category": r["part_text"]},
                "resolution": resolution,
            })
        doc = {"export": {"generated": f"{month}-28T00:00:00"}, "items": items}
        (folder / f"rma-{month}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def write_en_portal(folder: Path, recs: list[dict], sim, rng) -> None:
    header = ["Incident", "Reported On", "Last Updated", "Asset Host", "Card", "Board S/N", "Replaced Component",
              "Issue Summary", "Fix Applied", "State"]
    quirks = {r["ticket_id"]: _serial_quirk(rng, r["serial_text"], ("sn", "spaces", "sci", "plain", "plain"))
              for r in recs}
    upper = {r["ticket_id"]: rng.random() < 0.3 for r in recs}
    for t, rows in _dumps(recs, sim.start, sim.end, 14, 45):
        out = []
        for r, is_open in rows:
            tz = _tz(r)
            o = _local(r["opened_at"], tz)
            upd = _local(r["opened_at"] if is_open else r["closed_at"], tz)
            host = fqdn(r["host"], r["site"], r["_rack"])
            out.append([r["ticket_id"], o.strftime("%m/%d/%Y %H:%M"), upd.strftime("%m/%d/%Y %H:%M"),
                        host.upper() if upper[r["ticket_id"]] else host,
                        f"card #{r['slot'] + SLOT_BASE['sjc-depot']}" if r["slot"] is not None else "", quirks[r["ticket_id"]],
                        r["part_text"], r["symptom_text"], "pending parts" if is_open else r["action_text"],
                        "In Progress" if is_open else "Resolved"])
        (folder / f"incidents_{t:%Y-%m-%d}.csv").write_bytes(_csv(header, out))


def write_slot_only(folder: Path, recs: list[dict], sim, rng) -> None:
    from pipeline.simulate.tickets import _save_xlsx

    header = ["Case", "Created", "Node FQDN", "Slot", "Part", "Problem", "Action Taken"]
    for month, rs in _by_month(recs):
        rows = []
        for r in rs:
            sym = r["symptom_text"]
            if r["serial_text"] and rng.random() < 0.3:
                sym = f"{sym} (board SN {r['serial']})"
            rows.append([r["ticket_id"], _local(r["opened_at"], _tz(r)).strftime("%Y-%m-%d %H:%M"),
                         fqdn(r["host"], r["site"], r["_rack"]),
                         f"slot{r['slot']}" if r["slot"] is not None else "", r["part_text"], sym, r["action_text"]])
        _save_xlsx(folder / f"cases-{month}.xlsx", "Cases", header, rows, date_cols=set())


def write_vendor_ip(folder: Path, recs: list[dict], sim, rng) -> None:
    header = ["case_id", "opened_utc", "node_ip", "gpu", "gpu_sn", "component", "symptom", "remedy"]
    rows = []
    for r in recs:
        sn = _serial_quirk(rng, r["serial_text"], ("typo", "plain", "plain", "plain"))
        rows.append([r["ticket_id"], r["opened_at"].strftime("%Y-%m-%dT%H:%M:%SZ"), host_ip(r["_host"]),
                     f"GPU{r['slot']}" if r["slot"] is not None else "", sn, r["part_text"], r["symptom_text"],
                     r["action_text"]])
    (folder / "cases.csv").write_bytes(_csv(header, rows))


#: Points whose people count GPUs from 1 (the chassis label), in the slot cell and the text.
SLOT_BASE = {"sha-sp1": 1, "sjc-depot": 1}

#: point -> its writer in the field layouts; points not listed keep the default layout.
WRITERS = {"sha-sp1": write_zh_ops, "sha-sp2": write_rma_json, "sjc-depot": write_en_portal,
           "fra-rz1": write_slot_only, "iad-vendor": write_vendor_ip}


def write_point(point: str, folder: Path, recs: list[dict], sim) -> bool:
    """Write ``point``'s tickets in its field layout; False when the point keeps the default."""
    writer = WRITERS.get(point)
    if writer is None:
        return False
    rng = np.random.default_rng([sim.seed, 0xF1E1D, sum(map(ord, point))])
    hosts = {h.index: h for h in sim.hosts}
    for r in recs:
        r["_rack"] = hosts[r["_host"]].rack
    writer(folder, recs, sim, rng)
    return True


def stale_inventory(gpus: list[dict], failure_rows: list[dict], share: float, seed: int) -> tuple[list[dict], list[str]]:
    """The inventory with ``share`` of the failure removals not recorded: the failed GPU's
    ``removed_at`` is blank and, for half of them, its replacement is not listed at all.
    Returns (inventory rows, serials whose removal was deleted)."""
    if share <= 0:
        return gpus, []
    rng = np.random.default_rng([seed, 0x57A1E])
    chosen = {f["serial"]: f["new_serial"] for f in failure_rows if rng.random() < share}
    unlisted = {new for new in chosen.values() if rng.random() < 0.5}
    out = []
    for g in gpus:
        if g["serial"] in unlisted:
            continue
        out.append({**g, "removed_at": None} if g["serial"] in chosen else g)
    return out, sorted(chosen)
