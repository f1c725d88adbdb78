"""Which column of a ticket export fills which ticket field, and how sure that is.

Reads a header row and a sample of the rows under it; returns a :class:`Layout`: for each
role (ticket id, dates, status, host, slot, serial, the texts, a part swap) the column
that fills it with a score from 0 to 100. A score weighs the header's words
(:data:`~pipeline.ingest.tickets.columns.FIELD_ALIASES`, English and Chinese) against the
values (:mod:`pipeline.ingest.tickets.values`): a ``Serial`` column of free text, or an
``Action`` column of workflow words, loses its role; a column of the inventory's host names
is the host whatever its header.

Each column fills at most one role. The layout is *unsure* when a required role (the
ticket id; some text) has no column, or when two columns are close for a role that changes
what a ticket says and their values differ. An unsure layout is not guessed: the ingest
stage quarantines the file as ``unrecognised_layout`` with :meth:`Layout.describe`, and
``fleetfault tickets inspect`` prints the same with a config block to paste.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pipeline.ingest.tickets.columns import (
    _TEXT_LIKE, FIELD_ALIASES, HEADER_MIN_SCORE, SWAP_ROLES, _score, _split_camel, canonical_header, cell_text,
)
from pipeline.ingest.tickets.values import Known, Profile, agree, profile, values_of

#: Every role a column can fill, in the order a config block lists them.
ROLES = ("ticket_id", "opened_at", "closed_at", "updated_at", "status", "host", "slot", "serial",
         "part_text", "title", "symptom_text", "description", "action_text", *SWAP_ROLES)
#: The kind of value each role holds (:data:`pipeline.ingest.tickets.values.KINDS`).
ROLE_KIND = {"ticket_id": "id", "opened_at": "date", "closed_at": "date", "updated_at": "date", "status": "status",
             "host": "host", "slot": "slot", "serial": "serial", "removed_serial": "serial",
             "installed_serial": "serial", **{r: "text" for r in ("part_text", "title", "symptom_text", "description",
                                                                 "action_text", "swap_part_text")}}
#: Roles whose column changes what a ticket says: two close candidates that disagree are
#: a reason to stop. A wrong closed/updated date or status column costs little.
DECISIVE = ("ticket_id", "opened_at", "host", "slot", "serial", "part_text", "title", "symptom_text", "description",
            "action_text", *SWAP_ROLES)
#: Points a header's score loses when none of the column's values fit the role: a typed
#: role (date, serial, host, slot, id, status) loses it whole, so an exact header drops
#: below :data:`~pipeline.ingest.tickets.columns.HEADER_MIN_SCORE`; a text role loses less
#: for values that are not words, and more for a column of workflow words.
PENALTY = 40.0
#: Values it takes for the penalties to apply in full (fewer: in proportion).
TRUSTED_VALUES = 3
#: A typed column whose values fit this share or more loses nothing.
FITS = 0.8
TEXT_PENALTY = 15.0
WORKFLOW_PENALTY = 30.0
#: Points a host column of IP addresses scores below one of names (more than :data:`CLOSE`).
IP_BELOW = 10.0
#: Two candidates this close (in score) for one role are rivals.
CLOSE = 6.0
#: Rivals whose values agree on this share of rows are one field exported twice.
AGREE = 0.9
#: A column found only by its values scores at most this (never enough to be used unasked),
#: except host and serial values found in the inventory, which score 60 + 39 x the share
#: found: a column whose header names its role still wins a tie (``Old SN`` holds the
#: inventory's serials too, but it is the removed serial).
VALUE_GUESS = 60.0
INVENTORY = 39.0
#: A guess below this is not offered in a message.
GUESS_SHOWN = 50.0


@dataclass(frozen=True)
class Candidate:
    role: str
    column: int
    header: str
    score: float
    by: str  # "header", "values", "inventory" or "config"


@dataclass
class Layout:
    """The roles of an export's columns; see the module docstring."""

    headers: list[str]
    columns: dict[str, int] = field(default_factory=dict)
    #: Further columns of the same name as a text role's column (Jira repeats ``Comment``).
    more: dict[str, list[int]] = field(default_factory=dict)
    chosen: dict[str, Candidate] = field(default_factory=dict)
    #: The best candidates of each role, chosen or not, best first (for messages).
    guesses: dict[str, list[Candidate]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    profiles: list[Profile] = field(default_factory=list)
    #: Roles that a column left unused names by its header, though its values did not fit.
    named: set[str] = field(default_factory=set)
    #: Columns of free text that fill no role (``Notes``, ``Root cause``): what was done may be there.
    loose_text: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def ticket_like(self) -> bool:
        """A ticket id and some text: the row is a header (sure or not)."""
        return "ticket_id" in self.columns and any(f in self.columns for f in _TEXT_LIKE)

    def samples(self, column: int) -> list[str]:
        return self.profiles[column].samples if column < len(self.profiles) else []

    def describe(self) -> str:
        """One paragraph for the quarantine: the problems, the columns seen, the best guesses."""
        seen = [h for h in self.headers if h]
        guesses = [f"{role}={c.header!r} ({c.score:.0f})" for role, c in self.best_guesses().items()]
        return f"{'; '.join(self.problems)}. Columns seen: {seen}. Best guesses: {', '.join(guesses) or 'none'}"

    def best_guesses(self) -> dict[str, Candidate]:
        """Each role's column: the chosen one, else the best guess among the columns left
        (each column offered once, for the role it fits best, and only if it fits a little)."""
        out = dict(self.chosen)
        used = {c.column for c in out.values()}
        left = sorted((c for r in ROLES if r not in out for c in self.guesses.get(r, [])
                       if c.column not in used and c.score >= GUESS_SHOWN), key=lambda c: -c.score)
        for c in left:
            if c.role not in out and c.column not in used:
                out[c.role] = c
                used.add(c.column)
        return {r: out[r] for r in ROLES if r in out}

    def config_block(self, point: str, *, dayfirst: bool | None = None) -> str:
        """A ``[tickets.points.<point>]`` block that reads this export as recognised, with the
        best guess for each role that had none (checked by whoever pastes it)."""
        lines = [f"[tickets.points.{_toml_key(point)}]"]
        if dayfirst:
            lines.append("dayfirst = true")
        lines.append(f"[tickets.points.{_toml_key(point)}.columns]")
        best = self.best_guesses()
        for role, cand in best.items():
            if role in self.chosen:
                rivals = [g for g in self.guesses.get(role, []) if g.column != cand.column]
                why = f"  # or {rivals[0].header!r} ({rivals[0].score:.0f})?" if self._unsure(role) and rivals else ""
                lines.append(f"{role} = {_toml_str(cand.header)}{why}")
            elif role in ("ticket_id", "opened_at") or role == "symptom_text" and not any(
                    f in self.columns for f in _TEXT_LIKE):
                lines.append(f"{role} = {_toml_str(cand.header)}  # a guess from its values: check it")
        return "\n".join(lines)

    def _unsure(self, role: str) -> bool:
        return any(p.startswith(f"{role}:") for p in self.problems)


def recognise(headers: list[object], rows: list[list] = (), configured: dict[str, str] | None = None,
              known: Known | None = None) -> Layout:
    """The layout of an export with header cells ``headers`` and data rows ``rows``.

    ``configured`` (role -> header, from ``tickets.points.<point>.columns``) is taken as
    given; the other roles are recognised. Without rows only the headers speak.
    """
    names = ["" if cell_text(h) is None else str(cell_text(h)) for h in headers]
    lay = Layout(names)
    width = len(names)
    cols = [[r[i] if i < len(r) else None for r in rows] for i in range(width)]
    lay.profiles = [profile(c, known) for c in cols]
    canon = [canonical_header(_split_camel(_leafless(h))) for h in names]
    used: set[int] = set()
    for role, name in (configured or {}).items():
        want = canonical_header(_split_camel(name))
        hit = next((i for i in range(width) if i not in used and (canon[i] == want or names[i] == name)), None)
        if hit is None:
            lay.notes.append(f"configured {role} column {name!r} is not in this export")
            continue
        lay.columns[role] = hit
        lay.chosen[role] = Candidate(role, hit, names[hit], 100.0, "config")
        used.add(hit)
    named: set[tuple[str, int]] = set()
    scores = _scores(names, canon, lay.profiles, named)
    # An IP address names the host too, but a column of names beside it is the better key.
    if any(c.score >= HEADER_MIN_SCORE and (lay.profiles[c.column].fit("ip") or 0) < 0.5 for c in scores["host"]):
        scores["host"] = [c if (lay.profiles[c.column].fit("ip") or 0) < 0.5 else
                          Candidate(c.role, c.column, c.header, c.score - IP_BELOW, c.by) for c in scores["host"]]
    for cands in scores.values():
        cands.sort(key=lambda c: (-c.score, c.column))
    lay.guesses = {r: [c for c in scores[r] if c.score > 0][:3] for r in ROLES}
    # Best pairs first; a column named in ``_ignore`` (Part Number, Server SN) fills nothing.
    # Ties go to the column whose values are the inventory's (two host columns: the name, not the rack).
    pairs = sorted((c for r in (*ROLES, "_ignore") for c in scores[r] if c.score >= HEADER_MIN_SCORE),
                   key=lambda c: (c.score, _known_share(lay, c), -c.column, c.role), reverse=True)
    for c in pairs:
        if c.column in used or (c.role in lay.columns and c.role != "_ignore"):
            continue
        used.add(c.column)
        if c.role != "_ignore":
            lay.columns[c.role] = c.column
            lay.chosen[c.role] = c
    _same_name(lay, canon)
    used |= {j for js in lay.more.values() for j in js}
    lay.named = {role for role, i in named if i not in used}
    lay.loose_text = [i for i in range(width) if i not in used and canon[i] and _long(lay.profiles[i])
                      and (lay.profiles[i].fit("text") or 0) >= 0.8]
    _check(lay, scores, cols, used)
    return lay


def _leafless(name: str) -> str:
    """A flattened JSON path without its list marker: ``parts[].oldSn`` -> ``parts.oldSn``."""
    return name.replace("[].", ".")


#: A path step: ``device.sn``, ``parts[].oldSn`` (not the dot of ``No.`` or ``S.N.``).
_STEP = re.compile(r"(?<=\w)(?:\[\])?\.(?=[^\W\d])")


def _scores(names: list[str], canon: list[str], profiles: list[Profile],
            named: set[tuple[str, int]]) -> dict[str, list[Candidate]]:
    """Every role's candidates: each column's score for it (``named``: the (role, column)
    pairs whose header words name the role, whatever the values say)."""
    out: dict[str, list[Candidate]] = {r: [] for r in (*ROLES, "_ignore")}
    for i, name in enumerate(names):
        if not canon[i]:
            continue
        swap = "[]." in name
        parts = _STEP.split(name)
        leaf = canonical_header(_split_camel(parts[-1])) if len(parts) > 1 else None
        prof = profiles[i]
        # A list of part swaps' columns fill only the swap roles; the kind of part only from there.
        roles = [r for r in ROLES if swap == (r in SWAP_ROLES) or (not swap and r in SWAP_ROLES[1:])]
        header = {}
        for role in (*roles, "_ignore"):
            h = _score(canon[i], role)
            header[role] = max(h, _score(leaf, role) - 1) if leaf else h
        # A column named as something to drop (Part #, Server SN) is dropped only when no
        # role's words fit it as well: ``Part`` is a part, not a part number.
        if header["_ignore"] <= max((header[r] for r in roles), default=0.0):
            header["_ignore"] = 0.0
        for role, h in header.items():
            out[role].append(Candidate(role, i, name, _weigh(role, h, prof), "header"))
            if h >= HEADER_MIN_SCORE and role != "_ignore" and header["_ignore"] < h:
                named.add((role, i))
            if role == "_ignore":
                continue
            if role in ("host", "serial") and not swap:
                found = prof.known_host if role == "host" else prof.known_serial
                if found:
                    out[role].append(Candidate(role, i, name, round(VALUE_GUESS + INVENTORY * found, 1), "inventory"))
            if h < HEADER_MIN_SCORE and prof.n:
                fit = prof.fit(ROLE_KIND[role]) or 0.0
                # Free text found by its values is offered as the symptom, the one text every ticket has.
                if fit >= 0.8 and (ROLE_KIND[role] != "text" or role == "symptom_text" and _long(prof)):
                    out[role].append(Candidate(role, i, name, round(VALUE_GUESS * fit, 1), "values"))
    for role in out:  # keep each column's best candidate per role
        best: dict[int, Candidate] = {}
        for c in out[role]:
            if c.column not in best or c.score > best[c.column].score:
                best[c.column] = c
        out[role] = list(best.values())
    return out


def _weigh(role: str, h: float, prof: Profile) -> float:
    """A header's score less what the values take away: nothing when every value fits."""
    if h < HEADER_MIN_SCORE or role == "_ignore":
        return round(h, 1) if h >= HEADER_MIN_SCORE else 0.0
    kind = ROLE_KIND[role]
    fit = prof.fit(kind)
    if fit is None:
        return round(h, 1)
    # One or two values say little: an export of one ticket is not judged by its one cell.
    trust = min(1.0, prof.n / TRUSTED_VALUES)
    if kind == "text":
        # Words a header promises may be short or odd (a part written "0"); workflow words
        # (Jira's Resolution: Done, Fixed) are never what was seen or done.
        return round(h - trust * (TEXT_PENALTY * (1 - fit) + WORKFLOW_PENALTY * (prof.fit("workflow") or 0.0)), 1)
    # A few cells that do not fit (a date written "yesterday") are the rows' problem, not the column's.
    return round(h - trust * PENALTY * max(0.0, (FITS - fit) / FITS), 1)


def _long(prof: Profile) -> bool:
    return sum(len(s) for s in prof.samples) / max(len(prof.samples), 1) >= 15


def _same_name(lay: Layout, canon: list[str]) -> None:
    """Columns that repeat a text role's header (Jira's several ``Comment`` columns) join it."""
    taken = set(lay.columns.values())
    for role, i in lay.columns.items():
        if ROLE_KIND[role] != "text":
            continue
        twins = [j for j, h in enumerate(canon) if h == canon[i] and j not in taken]
        if twins:
            lay.more[role] = twins
            taken.update(twins)


def _check(lay: Layout, scores: dict[str, list[Candidate]], cols: list[list], used: set[int]) -> None:
    """Fill ``lay.problems``: required roles missing, close rivals that disagree."""
    if "ticket_id" not in lay.columns:
        lay.problems.append("no ticket_id column")
    if not any(f in lay.columns for f in _TEXT_LIKE):
        lay.problems.append("no text column (part, title, symptom, description or action)")
    taken = set(lay.columns.values()) | {j for js in lay.more.values() for j in js}
    for role, c in lay.chosen.items():
        if c.by == "config" or role not in DECISIVE:
            continue
        for r in scores[role]:
            if r.column in used or r.column in taken or r.score < HEADER_MIN_SCORE or c.score - r.score > CLOSE:
                continue
            same = agree(cols[c.column], cols[r.column])
            if same is not None and same >= AGREE:
                lay.notes.append(f"{role}: {r.header!r} repeats {c.header!r}; {c.header!r} used")
                continue
            if role == "ticket_id" and _one_to_one(cols[c.column], cols[r.column]):
                # Two keys of one ticket (Jira's id and key): either names it, rows keep theirs.
                lay.notes.append(f"ticket_id: {r.header!r} is another key of the same tickets; {c.header!r} used")
                continue
            if same is None and not any(values_of(v) for col in (cols[c.column], cols[r.column]) for v in col):
                continue  # no rows: nothing to misread
            if _known_share(lay, c) >= _known_share(lay, r) + 0.5:
                lay.notes.append(f"{role}: {c.header!r} used, not {r.header!r}: its values are the inventory's")
                continue
            lay.problems.append(f"{role}: {c.header!r} ({c.score:.0f}) and {r.header!r} ({r.score:.0f}) are "
                                f"equally likely and their values differ")
            break


def _known_share(lay: Layout, c: Candidate) -> float:
    """Share of a host or serial candidate's values found in the inventory (0 without one)."""
    prof = lay.profiles[c.column]
    share = prof.known_host if c.role == "host" else prof.known_serial if c.role == "serial" else None
    return share or 0.0


def _one_to_one(a: list, b: list) -> bool:
    """Each value of one column goes with one value of the other, both ways, on every row."""
    pairs = {(cell_text(x), cell_text(y)) for x, y in zip(a, b)}
    return (None, None) not in pairs and len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs})


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def headers_only(headers: list[object], configured: dict[str, str] | None = None) -> dict[str, int]:
    """Role -> column from the headers alone, or {} when they do not look like a ticket header."""
    lay = recognise(headers, [], configured)
    return dict(lay.columns) if lay.ticket_like else {}


__all__ = ["ROLES", "Candidate", "Known", "Layout", "headers_only", "recognise", "FIELD_ALIASES"]
