"""The ground truth of a simulated fleet, for tests and for judging every stage.

Reads a :class:`~pipeline.simulate.process.FleetSim` and the ticket truth rows; writes
``DATA/truth/``: ``failures.csv``, ``tickets.csv``, ``groups.csv``, ``hosts.csv``,
``boots.csv``, ``params.json`` and ``fleetfault.toml`` (a config with the sites' zones, the
headerless hosts' fields and the dmesg boot times, so ``fleetfault run`` works on the fleet).
Never read by ``fleetfault run``.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from pathlib import Path

from pipeline.simulate import hazard, precursors
from pipeline.simulate.fleet import BATCHES, MODELS, SITES
from pipeline.simulate.styles import HostStyle

TS = "%Y-%m-%d %H:%M:%S"


def fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, datetime):
        return v.strftime(TS)
    if isinstance(v, bool):
        return str(int(v))
    return str(v)


def write_csv(path: Path, header: list[str], rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([fmt(r.get(c)) for c in header])
    path.write_text(buf.getvalue(), encoding="utf-8")


INVENTORY_COLUMNS = ["serial", "model", "vendor", "host", "slot", "site", "batch", "installed_at", "removed_at"]
FAILURE_COLUMNS = ["serial", "failed_at", "part_code", "symptom_code", "precursor", "lead_days", "host", "slot",
                   "model", "vendor", "batch", "replaced_at", "new_serial", "ticket_id", "service_point"]
TICKET_COLUMNS = ["service_point", "ticket_id", "serial", "part_code", "symptom_code", "action_code", "is_replacement",
                  "host", "slot", "opened_at", "event_at", "kind", "serial_written"]
HOST_COLUMNS = ["host", "site", "tz", "service_point", "model", "vendor", "batch", "gpus", "rack", "unit",
                "installed_at", "telemetry_format", "kernel_format", "driver", "gzip", "fields"]


def write_truth(sim, out: Path, styles: dict[str, HostStyle], ticket_rows: list[dict], params: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tz = {s.name: s.tz for s in SITES}
    by_serial_ticket = {(t["serial"], t["kind"]): t for t in ticket_rows if t["kind"] == "failure"}
    failures = []
    for f in sim.failure_rows:
        t = by_serial_ticket.get((f["serial"], "failure"), {})
        failures.append({**f, "ticket_id": t.get("ticket_id", ""), "service_point": t.get("service_point", "")})
    write_csv(out / "failures.csv", FAILURE_COLUMNS, failures)
    write_csv(out / "tickets.csv", TICKET_COLUMNS, ticket_rows)
    groups = sim.groups
    write_csv(out / "groups.csv", groups.columns, groups.to_dicts())
    hosts = []
    for h in sim.hosts:
        st = styles[h.name]
        hosts.append({"host": h.name, "site": h.site, "tz": tz[h.site], "service_point": h.service_point,
                      "model": h.model, "vendor": h.vendor, "batch": h.batch, "gpus": h.gpus, "rack": h.rack,
                      "unit": h.unit, "installed_at": h.installed_at, "telemetry_format": st.telemetry,
                      "kernel_format": st.kernel, "driver": st.driver, "gzip": st.gzip,
                      "fields": ",".join(st.query_fields)})
    write_csv(out / "hosts.csv", HOST_COLUMNS, hosts)
    (out / "params.json").write_text(json.dumps(params_doc(sim, params), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "fleetfault.toml").write_text(config_toml(sim, styles), encoding="utf-8")


def params_doc(sim, params: dict) -> dict:
    from pipeline.simulate.process import FALSE_ALARMS, MAINTENANCE_REBOOTS_PER_YEAR, SERVICE_EVENTS

    return {
        **params,
        "start": sim.start.strftime(TS), "end": sim.end.strftime(TS), "accel": sim.accel,
        "batches": [{"batch": b.batch, "model": b.model, "vendor": b.vendor, "shape": b.shape,
                     "scale_years": b.scale_years, "effective_scale_years": hazard.effective_scale(b.shape, b.scale_years, sim.accel),
                     "install_days": [b.install_from_day, b.install_to_day], "note": b.note} for b in BATCHES],
        "models": [{"key": m.key, "smi_name": m.smi_name, "inventory_name": m.inventory_name,
                    "gpus_per_host": m.gpus_per_host, "ecc": m.ecc, "has_fan": m.has_fan} for m in MODELS],
        "symptoms": {k: {"share": v[0], "precursor_probability": v[1], "precursors": list(v[2])}
                     for k, v in precursors.SYMPTOMS.items()},
        "lead_days": {k: list(v) for k, v in precursors.LEAD_DAYS.items()},
        "service_events_per_host_year": {k: {"rate": v[0], "part": v[1], "symptoms": list(v[2]), "action": v[3]}
                                         for k, v in SERVICE_EVENTS.items()},
        "false_alarms_per_gpu_year": FALSE_ALARMS,
        "maintenance_reboots_per_host_year": MAINTENANCE_REBOOTS_PER_YEAR,
    }


def config_toml(sim, styles: dict[str, HostStyle]) -> str:
    """A fleetfault.toml for this fleet: site zones, headerless hosts' fields, dmesg boot times."""
    from pipeline.simulate.kernel import boot_times

    lines = ["# fleetfault config for a simulated fleet (written by `fleetfault simulate`).", "",
             "[paths]", f'data = "{"."}"  # run from the data folder, or pass --data', ""]
    for s in SITES:
        lines += [f"[sites.{s.name}]", f'tz = "{s.tz}"', ""]
    host_fields = {h: st.query_fields for h, st in styles.items() if st.telemetry == "noheader_nounits"}
    lines.append("[telemetry]")
    if host_fields:
        lines.append("host_fields = { " + ", ".join(
            f'"{h}" = [' + ", ".join(f'"{f}"' for f in fs) + "]" for h, fs in sorted(host_fields.items())) + " }")
    lines.append("")
    reboots: dict[int, list] = {}
    for hi, t, c in sim.reboots:
        reboots.setdefault(hi, []).append((t, c))
    boots = {}
    for h in sim.hosts:
        if styles[h.name].kernel == "dmesg_raw":
            boots[h.name] = boot_times(sim, h, reboots.get(h.index, []))[0]
    lines.append("[kernel]")
    lines.append("# first boot of each uptime-only dmesg host (UTC); later boots are in truth/boots.csv")
    if boots:
        lines.append("boot_times = { " + ", ".join(f'"{h}" = "{t:%Y-%m-%dT%H:%M:%S}+00:00"' for h, t in sorted(boots.items())) + " }")
    return "\n".join(lines) + "\n"


def write_boots(sim, out: Path, boots: dict[str, list[datetime]]) -> None:
    rows = [{"host": h, "boot": i, "booted_at": t} for h, ts in sorted(boots.items()) for i, t in enumerate(ts)]
    write_csv(out / "boots.csv", ["host", "boot", "booted_at"], rows)
