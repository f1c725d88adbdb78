"""The coding guide's rules across fields (docs/taxonomy.md), as code over data.

Reads one ticket's per-field matches (:class:`~pipeline.normalize._index.Match`) and the
:class:`Evidence` of each canonical text (every part and action named in it, with where it
stands and what surrounds it); writes the part, symptom and action of the ticket with the
cues that make a careful engineer less sure (:data:`TAGS`), which
:mod:`pipeline.normalize.calibrate` turns into a lower score.

What is data lives in the taxonomy file (``guide:``, ``markers:``, ``outranks:``,
``penalties:``); what is here is the order the rules apply in:

1. something replaced: the part replaced, even when another part is named (rule 1);
2. else a driver / firmware / VBIOS / BIOS fix: ``SOFTWARE`` (rule 2);
3. else a no-fault verdict anywhere (no fault found, false alarm, the user's own job, a tripped
   PDU): ``NONE`` (rule 3);
4. else the part the strongest action was applied to (reseated, reset, cleaned), else the part
   named (rule 4).

The action is the strongest done (rule 11); an action written in the symptom field counts only
when the text says it resolved the fault (rule 12: a reboot told as history is not the action),
and an action announced but not done ("need to replace", "RMA pending") is no action (rule 13).
"""

from __future__ import annotations

import functools
import re
from typing import Callable, NamedTuple

from pipeline.normalize._index import NEG, S_EXACT, VAGUE, AliasIndex, Match, _marker_re, tokens_between
from pipeline.normalize.taxonomy import Taxonomy

__all__ = ["Evidence", "Reader", "TAGS"]

#: Cues that lower a code's score (their points are ``penalties:`` in the taxonomy).
TAGS = ("negation", "parts_conflict", "two_parts", "vague", "several", "failed_action", "context", "unsupported")
_XID = re.compile(r"xid\d")
_PRONOUN = re.compile(r" (?:it|them|both)(?![a-z0-9])")
CABLE = "CABLE"  # the part whose ends, named after it, are not parts acted on
S_ACTED = 95.0  # the part an action named right beside it was applied to
OK_AFTER = 2  # words a part reported well after an action counts as further away
OUTCOME_REACH = 5  # words after an action in which "still" / "恢复" tell how it went


class Evidence(NamedTuple):
    """What one canonical text names, in text order.

    ``parts``: ``(start, end, code, ok)`` of parts named and not negated (``ok``: a word such
    as "stable", 正常 follows) (adjacent names merged
    to the last, the head noun: "GPU fan" is a fan); ``actions``: ``(start, end, code, done,
    outcome)`` with ``done`` False when negated or only announced and ``outcome`` one of
    ``failed``, ``resolved`` or ``""``; ``negated``: something was named only to be denied.
    """

    text: str
    parts: tuple[tuple[int, int, str, bool], ...]
    actions: tuple[tuple[int, int, str, bool, str], ...]
    negated: bool

    def acted_part(self, action: str, reach_after: int, reach_before: int, skip: frozenset[str] = frozenset()) -> tuple[str | None, bool]:
        """The part the first done ``action`` names beside it, and whether it names two.

        The nearest part after it within ``reach_after`` words ("replaced the riser card",
        更换转接卡) or before it within ``reach_before`` ("riser replaced", 转接卡已更换), after
        first at equal distance, no other action in between; parts in ``skip`` (a no-fault
        verdict, software) are not parts an action is applied to. Two different parts joined
        to one action ("swapped GPU5 and riser 3") are reported as such: a person decides.
        """
        done = [x for x in self.actions if x[2] == action and x[3]]
        # "replaced the GPU, still falls off; finally replaced the riser": the one that helped
        found: list[tuple[str, bool]] = []
        for a0, a1, code, _, _ in [x for x in done if x[4] != "failed"] or done:
            others = [(s, e) for s, e, c, _, _ in self.actions if (s, e) != (a0, a1)]
            near = []
            for p in self.parts:
                if p[2] in skip:
                    continue
                if p[0] >= a0 and _PRONOUN.match(self.text, a1):
                    continue  # "found the cable loose and reconnected it. GPU 6 visible": it is the cable
                if p[0] >= a0:
                    # at equal distance the part after the action, unless it is reported well
                    # ("riser exchanged, GPU now stable": the riser)
                    gap, side = tokens_between(self.text, a1, p[0]), 2 if p[3] else 0
                    # a part reported well after the action is its result more than its object:
                    # "cable was unseated; reseated. GPU 6 detected" (the comma is gone)
                    gap += OK_AFTER if p[3] else 0
                    if gap <= reach_after and not any(a1 <= s and e <= p[0] for s, e in others):
                        near.append((gap, side, p))
                elif p[1] <= a0:
                    # "riser assembly replaced, GPU 5 retested": a participle right after a part
                    # is said of that part (the comma between is gone from canonical text)
                    gap = tokens_between(self.text, p[1], a0)
                    side = -1 if gap == 0 and self.text[a0:a1].endswith("ed") else 1
                    if gap <= reach_before and not any(p[1] <= s and e <= a0 for s, e in others):
                        near.append((gap, side, p))
                elif p[0] < a0 < p[1]:
                    # the action composed of the part's own last word and a verb ("GPU3 整张卡换掉":
                    # 整张卡换掉 is the verb phrase, "gpu 整张卡" the part): said of that part
                    near.append((0, -1, p))
            if near:
                near.sort(key=lambda n: (n[0], n[1]))
                best = near[0][2][2]
                same_side = [n[2][2] for n in near if (n[1] in (-1, 1)) == (near[0][1] in (-1, 1))]
                found.append((best, len(set(same_side)) > 1))
        if not found:
            return None, False
        # two replacements that helped, of two parts ("replaced GPU 3, later replaced the riser"
        # with nothing said of the first): which one fixed it is a person's call (CODING-GUIDE 13)
        return found[0][0], found[0][1] or len({p for p, _ in found}) > 1

    def outcome(self, action: str) -> str:
        """How the first done ``action`` went: ``failed`` (only when every time it was done, it
        failed), ``resolved`` or ``""``."""
        seen = [o for _, _, c, done, o in self.actions if c == action and done]
        return next((o for o in seen if o != "failed"), "failed" if seen else "")

    def names_part(self, code: str) -> bool:
        return any(p[2] == code for p in self.parts)


class Reader:
    """Reads :class:`Evidence` from canonical texts with a taxonomy's alias indexes."""

    def __init__(self, taxonomy: Taxonomy, index: dict[str, AliasIndex]):
        self.index = index
        g = taxonomy.guide
        self._reach = g.reach_before if g is not None else 3
        mk = taxonomy.markers
        self._failed = _marker_re(mk.get("failed_after", ()), "any")
        self._resolved = _marker_re(mk.get("resolved_after", ()), "any")
        self._ok = _marker_re(mk.get("part_ok_after", ()), "after", gap=False)
        self._ruled_out = _marker_re(mk.get("part_ruled_out_after", ()), "after", gap=False)
        self._generic = frozenset(mk.get("generic_nouns", ()))
        self._listed = g.xid_part if g is not None else None
        self._cycle = REBOOT
        self._ends = frozenset(mk.get("cable_ends", ()))
        self._no_verdict = frozenset(mk.get("not_a_verdict", ()))
        self._verdict = g.no_fault if g is not None else None
        # a verdict or software is no modifier: "未发现异常 内存测试通过" names no memory fault
        self._not_parts = g.not_parts if g is not None else frozenset()
        self._owner_first = frozenset(mk.get("possessive", ()))  # "GPU 3's heatsink", GPU3之导热垫
        self._owned_first = frozenset(mk.get("possessive_of", ()))  # "thermal pads of the GPU"
        self._part_of = taxonomy.part_of

    def read(self, text: str) -> Evidence:
        """The evidence of one canonical (glued-split) text."""
        actions, negated = [], False
        hits = [h for h in self.index["action"].scan(text) if h[2] != VAGUE]
        for i, (a, b, code, _, status) in enumerate(hits):
            negated = negated or status == NEG
            upto = next((h[0] for h in hits[i + 1:] if h[2] == code and not h[4]), None)
            actions.append((a, b, code, not status, self._outcome(text, a, b, upto)))
        parts: list[tuple[int, int, str, bool]] = []
        end_of = None  # where the last part named as a cable's end stopped
        # a power cycle's words name no part: "整机断电，拔电源线等一分钟再上电" pulled the power cords
        cycled = [(a, b) for a, b, code, done, _ in actions if done and code == self._cycle]
        for a, b, code, strength, status in self.index["part"].scan(text):
            if code == VAGUE or strength < S_EXACT:
                continue  # "card", "module" alone name no part for certain
            if any(x <= a and b <= y for x, y in cycled):
                continue
            if code == self._verdict and text[a:b] in self._no_verdict and (a, b) != (0, len(text)):
                continue  # "resolution=none": nothing done, no finding
            if self._ends and parts and (parts[-1][2] == CABLE or end_of is not None):
                gap = text[end_of if end_of is not None else parts[-1][1]:a].split()
                if gap and len(gap) <= 3 and (gap[0] in self._ends or (end_of is not None and self._ends & set(gap))):
                    end_of = b  # "cable between the PSU backplane and the GPU board": its ends,
                    prev = parts[-1]  # and the cable's name runs to the last of them
                    parts[-1] = (prev[0], b, prev[2], prev[3])
                    continue
            end_of = None
            if parts and status != NEG and parts[-1][2] not in self._not_parts and code not in self._not_parts:
                gap = text[parts[-1][1]:a].split()
                if len(gap) == 1 and gap[0] in self._owner_first | self._owned_first:
                    parts[-1] = self._part_of_part(text, parts[-1], b, code, gap[0] in self._owner_first)
                    continue
            acted = any(e <= a and tokens_between(text, e, a) <= self._reach for _, e, *_ in actions)
            ok = self._ok is not None and self._ok.search(text[b:]) is not None
            ruled_out = (self._ruled_out is not None and self._ruled_out.search(text[b:])) or (ok and not acted)
            if status == NEG or (ruled_out and code not in self._not_parts):
                # ("未发现异常，恢复业务" is a verdict followed by its result, not a part said fine)
                negated = True  # "not the GPU", "GPU ok", "PSU tested good": named to be ruled out
            elif parts and tokens_between(text, parts[-1][1], a) == 0 and (code != self._listed or text[a:b] in self._generic) \
                    and parts[-1][2] not in self._not_parts:
                # a GPU is no head noun: "NVSwitch tray, GPU5" is two parts whose comma
                # canonical text dropped, where "GPU fan" is a fan
                # "GPU fan": the head noun, unless a bare generic word ("PCIe retimer card")
                prev = parts[-1]
                parts[-1] = (prev[0], b, prev[2] if text[a:b] in self._generic else code, ok)
            else:
                parts.append((a, b, code, ok))
        negated = negated or any(h[4] == NEG for h in self.index["symptom"].scan(text))
        return Evidence(text, tuple(parts), tuple(actions), negated)

    def _part_of_part(self, text: str, prev: tuple[int, int, str, bool], end: int, code: str,
                      owner_first: bool) -> tuple[int, int, str, bool]:
        """One part named as part of another ("GPU 3's thermal pads", "heatsink of GPU 0",
        GPU3之导热垫): the part meant is the one owned, the head of the phrase (CODING-GUIDE 1, 4:
        a GPU's heatsink is ``COOLING``), unless the taxonomy's ``part_of`` says that part belongs
        to its owner (CODING-GUIDE 5: "the PSU's fan", "fan of PSU 1" is the ``PSU``; "memory of
        GPU 3" is GPU memory)."""
        owner, owned = (prev[2], code) if owner_first else (code, prev[2])
        kept = owner if self._part_of.get(owned) == owner else owned
        return prev[0], end, kept, self._ok is not None and self._ok.search(text[end:]) is not None

    def _outcome(self, text: str, start: int, end: int, upto: int | None = None) -> str:
        """``failed`` / ``resolved`` when such a word follows within a few words (or ends the
        alias itself: 重启后恢复), else ``""``; ``upto``: where the next action of the same kind
        starts, before which a failure word counts however far ("swapped GPU 4 last month; this
        time the fault stayed with the slot. Replaced the baseboard": the first swap failed)."""
        found = []
        for how, rx in (("failed", self._failed), ("resolved", self._resolved)):
            m = rx.search(text, start) if rx is not None else None
            if m is not None and (tokens_between(text, end, m.start()) <= OUTCOME_REACH or
                                  (how == "failed" and upto is not None and m.end() <= upto)):
                found.append((m.start(), how))
        return min(found)[1] if found else ""


S_CONTEXT, S_IMPLIED, S_AGREE = 92.0, 90.0, 90.0
OVERHEAT = "OVERHEAT"
OTHER = "OTHER"  # the taxonomy's code for what it has no code for (rule 10)
RESEAT = "RESEAT"  # beside the replacing actions, the other one done to a part itself
REBOOT = "REBOOT"  # a power cycle: the power cords it names are not parts acted on
#: words a resolution of "nothing done" needs to be a finding ("closed", "remediator: no action" tell nothing)
VERDICT_WORDS = 5
SLOWDOWN = "PERFORMANCE"  # the symptom a slowdown gets only when no thermal or power cause is reported


def _slowdown_rx(tax: Taxonomy) -> re.Pattern:
    return _phrases_rx(tuple(tax.markers["slowdown_cause_unknown"]))


@functools.lru_cache(maxsize=8)
def _phrases_rx(phrases: tuple[str, ...]) -> re.Pattern:
    return _marker_re(phrases, "any")


def decide(tax: Taxonomy, thr: float, get: Callable[[str, str], Match], ev: Callable[[str], Evidence],
           keys: tuple[str, str, str]) -> tuple[dict[str, Match], dict[str, set[str]]]:
    """Part, symptom and action of one ticket by the guide, with the doubt tags of each.

    ``get(dimension, key)`` is a canonical text's own match in a dimension, ``ev(key)`` its
    evidence; ``keys`` the (part, symptom, action) canonical texts; ``thr`` the raw score a
    match needs to count as confident.
    """
    part_key, symptom_key, action_key = keys
    g, skip = tax.guide, tax.no_context
    texts = [ev(k) for k in keys]
    # a no-fault verdict is the finding, written where the part or the resolution is; in the
    # symptom field "user code fault" is what was reported (APP_FAULT)
    verdict = g is not None and g.no_fault is not None and any(e.names_part(g.no_fault) for e in (texts[0], texts[2]))
    tags: dict[str, set[str]] = {"part": set(), "symptom": set(), "action": set()}
    if any(e.negated for e in texts):
        for t in tags.values():
            t.add("negation")

    # action: its own field, else a resolving action told in another field (rule 12)
    action, src = get("action", action_key), action_key
    if not _sure(action, thr):
        for key in (symptom_key, part_key):
            h = get("action", key)
            if not _sure(h, thr) or h.code in skip["action"]:
                continue
            if action.code is not None and action.code != h.code:
                break  # the field says something else, if weakly: a person decides
            e = ev(key)
            if not any(c == h.code and d for _, _, c, d, _ in e.actions):
                continue  # announced or tried as a test, not done
            outcome = e.outcome(h.code)
            if outcome == "resolved" or (g is not None and h.code in g.replaced and outcome != "failed"):
                action, src = _context(action, h), key
                tags["action"].add("context")
                break
    if action.how == "priority":
        tags["action"].add("several")
    if g is not None and g.no_fault_action and not _sure(action, thr) and texts[2].names_part(g.no_fault):
        # the resolution is only a verdict ("user code issue", 检查未发现异常): nothing was done
        action, src = Match(g.no_fault_action, S_ACTED, "no_fault"), action_key
    act = action.code if _sure(action, thr) else None
    if act and g is not None and _reinstalled(tax, ev(src), act, texts):
        action = Match(sorted(g.software_actions)[0], action.score, action.how)  # "reinstalled 550 + reboot"
        act = action.code
    if g is not None and g.no_fault and tax.markers.get("server_untouched") and \
            _phrases_rx(tuple(tax.markers["server_untouched"])).search(action_key) and \
            (act is None or (act in g.replaced and ev(src).acted_part(act, g.reach_after, g.reach_before)[0] is None)):
        # "DC fitted the blanking panel. No change on the server", 物业修好空调，服务器没动: what was
        # done was done outside the server, and nothing to it (CODING-GUIDE 3); a reseat or a
        # firmware fix beside "no hardware touched" keeps its code
        action, act, verdict = _no_fault_action(g), None, True
    own_part = get("part", part_key)
    named = own_part.code if _sure(own_part, thr) else None
    if g is not None and g.no_fault and _outside(tax, keys, act, ev(src), named):
        action = _no_fault_action(g)
        act, verdict = action.code, True
    if act and ev(src).outcome(act) == "failed":
        tags["action"].add("failed_action")
    if g is not None and g.no_fault and not verdict and (act is None or act in skip["action"]):
        # nothing done to the server: "PDU breaker tripped", 係客戶程式寫錯 in the symptom is the finding
        verdict = texts[1].names_part(g.no_fault)
    if g is not None and g.no_fault and g.no_fault_action and act == g.no_fault_action and src == action_key and \
            tokens_between(action_key, 0, len(action_key)) >= VERDICT_WORDS and not (
                tax.markers.get("still_open") and any(_phrases_rx(tuple(tax.markers["still_open"])).search(k) for k in keys)):
        # the resolution tells why nothing was done ("was a bug in the code of his application. Closed
        # without action", 机房侧已整改，服务器未处理): no part of the server was at fault (CODING-GUIDE 3),
        # whatever part the report named; in the labelled corpus 273 of 278 tickets whose action is
        # NONE have part NONE, the others still open ("No action yet", "waiting for cust. info") or bare
        verdict = True

    own_symptom = get("symptom", symptom_key)
    if own_symptom.how == "vague":
        tags["symptom"].add("vague")  # "broken", "pls check", 有问题: the reporter said little
    symptom = _fill(own_symptom, [get("symptom", action_key), get("symptom", part_key)],
                    thr, skip["symptom"], tags["symptom"])
    if symptom.how == "first":
        tags["symptom"].add("several")
    if symptom.code == SLOWDOWN and tax.markers.get("slowdown_cause_unknown") and \
            _slowdown_rx(tax).search(symptom_key):
        symptom = Match(None, symptom.score, "undecided")  # "HW slowdown, didn't check temps" (rule 8)
    else:
        symptom = _no_cause(tax, symptom, symptom_key)

    hints = [get("part", symptom_key), get("part", action_key)]
    implied = tax.implies_part.get(symptom.code or "") if _sure(symptom, thr) else None
    if implied:
        hints.append(Match(implied, min(symptom.score, S_IMPLIED), "implied"))
    if own_part.how in ("ambiguous", "head"):
        tags["part"].add("two_parts")  # "GPU / riser": two parts, or a compound no alias lists
    part = _fill(own_part, hints, thr, skip["part"], tags["part"])
    xid_gpu = g is not None and g.xid_part == part.code and _XID.search(symptom_key) is not None
    if part.how == "context" and implied and implied != part.code:
        tags["part"].add("parts_conflict")  # "内存 uncorrectable ECC": named host memory, a GPU-memory symptom
    elif part.how == "context" and not implied and not xid_gpu and own_part.code != part.code:
        # a part only mentioned in another field, which neither the symptom implies nor the part
        # field suggests ("GPU 當機", rebooted): the fault may be the node's; an Xid is the GPU's
        # own report
        tags["part"].add("unsupported")
    if g is not None and act:
        skip_parts = g.not_parts
        acted, two = ev(src).acted_part(act, g.reach_after, g.reach_before, skip_parts)
        if acted is None and src != symptom_key:
            # "更换" alone, the symptom field telling what: "巡检：预防性更换GPU3"
            acted, two = ev(symptom_key).acted_part(act, g.reach_after, g.reach_before, skip_parts)
        if acted is None and act in g.fixes and act not in g.replaced:
            # a cleaning or a reseat whose text names one part and no other, if not right beside
            # the verb: "散热器积灰严重，清灰后恢复", "aux power cable 没插紧，重新插好": that part
            # was acted on (CODING-GUIDE 4), not the GPU the part field names
            sole = {p[2] for p in ev(src).parts if p[2] not in skip_parts and not p[3]}
            acted = sole.pop() if len(sole) == 1 else None
        other_fix = {c for _, _, c, d, _ in ev(src).actions if d and c != act and c not in skip["action"]}
        done = {c for e in texts for _, _, c, d, _ in e.actions if d}
        if act in g.replaced and acted:
            part = _acted(acted, named, tags)
        elif g.software and act in g.software_actions and not (done & g.replaced):
            tags["part"] -= {"context", "unsupported", "two_parts"}
            part = Match(g.software, S_ACTED, "software")
        elif verdict and act not in g.fixes:
            tags["part"] -= {"context", "unsupported", "two_parts"}
            part = Match(g.no_fault, S_ACTED, "no_fault")
        elif acted and act not in g.replaced:
            part = _acted(acted, named, tags)
        if part.how == "acted" and (two or (act not in g.replaced and other_fix & g.software_actions)):
            tags["part"].add("two_parts")  # "swapped GPU5 and riser 3", "BIOS updated and DIMMs reseated"
    elif verdict:
        tags["part"] -= {"context", "unsupported", "two_parts"}
        part = Match(g.no_fault, S_ACTED, "no_fault")
    if part.how not in ("acted", "software", "no_fault") and len(_hardware(texts, g)) > 1:
        # "GPU4 + riser ordered", "g1 xid79 + riser1 aer errs", fixed: two parts named and no
        # action says which one was at fault (CODING-GUIDE 13: a person decides)
        tags["part"].add("two_parts")
    if g is not None and g.no_fault and part.code != g.no_fault and any(e.names_part(g.no_fault) for e in texts):
        tags["part"].add("negation")  # "未发现异常" beside a replacement: the ticket disagrees with itself
    if g is not None and (act in g.replaced or act == RESEAT) and part.how in ("exact", "named") and _sure(part, thr) and \
            not texts[2].parts and _hardware(texts, g) <= {part.code} and "two_parts" not in tags["part"]:
        # "GPU board" | "swap, new sn ...", 加速卡 | 更换备件, 显卡 | 重新插拔后恢复: a bare replace or
        # reseat verb, and the part field is the one part the ticket names: that part was acted on
        # (out of fold: 51 of 51 right, "GPU 伺服器" aside, which names the server: taxonomy vague)
        part = Match(part.code, S_ACTED, "acted")
    if _sure(part, thr) and "two_parts" not in tags["part"] and symptom.code and symptom.code not in tax.part_symptoms.get(part.code, (symptom.code,)):
        # a NIC "not detected", a drive "hung": the GPU's symptom codes are not theirs (rule 10)
        symptom = Match(_first_symptom(tax, part.code), min(symptom.score, S_IMPLIED), "part_symptom")
    slowdown_open = bool(tax.markers.get("slowdown_cause_unknown")) and _slowdown_rx(tax).search(symptom_key) is not None
    if symptom.code is None and _sure(part, thr) and "two_parts" not in tags["part"] and not slowdown_open and (
            symptom.how == "vague" or (symptom.how != "undecided" and texts[1].names_part(part.code))):
        # "Redundancy Lost" on a fan is a fan fault; on a PSU a power fault; a NIC, drive or BMC
        # the symptom field reports on, with no symptom word ("smartd: Critical Warning", "网口 link
        # 断") has the symptom its part may have: OTHER (rule 10); a DIMM or CPU, whose own errors
        # have memory codes, is left to a person, and so is a symptom field that is empty or says
        # nothing of the part ("qwxz"); so is a "HW Slowdown" with no thermal or power reading, whatever
        # part was then replaced or reseated (rule 8: "GPU HW Slowdown" | 已更换PSU, "Reseated PSUs")
        allowed = tax.part_symptoms.get(part.code or "", frozenset())
        other = OTHER in allowed and not any(c.startswith("MEMORY_") for c in allowed)
        implied = tax.implies_symptom.get(part.code) or (OTHER if other else None)
        if implied:
            symptom = Match(implied, min(part.score, S_IMPLIED), "implied")
    part, action = _decline(tax, keys, part, action, act, named or next((p[2] for p in texts[0].parts), None))
    return {"part": part, "symptom": symptom, "action": action}, tags


def _decline(tax: Taxonomy, keys: tuple[str, str, str], part: Match, action: Match, act: str | None,
             named: str | None) -> tuple[Match, Match]:
    """The part (and action) a careful engineer would not write, where the words leave the fault's
    part open (CODING-GUIDE: when they point several ways, a person decides; rule 13). ``act`` is
    the action done (None: none found), ``named`` a part the part field names (None: none).

    * a swap done as a test whose result is not told ("swapped GPU 3 and GPU 5 between slots to see
      whether the fault follows"; 对调测试，继续观察), unless a replacement followed it;
    * a part ordered, in transit or awaited and none fitted, reseated or cleaned, where the part
      field names no part ("整機" | 主機板已訂貨，尚未到貨): the part at fault is a diagnosis not
      yet proved. Where the part field names it ("GPU" | "new GPU ordered, ETA fri") the corpus's
      writers code it (HOLDOUT2.md: "part coded when the text names it"; 17 of 18 such tickets
      in the tuning files), and so does the matcher;
    * a resolution that says only that something was done ("Done.", "fixed", 已处理) and no action
      found anywhere: what was done to which part is not said;
    * a fault still being observed whose resolution reads as "nothing done" (NONE): the action is
      not yet known, and neither is a verdict of no fault.

    A verdict (no fault, a software fix) found in the words stands. The phrases are data
    (``markers.trial``, ``trial_verdict``, ``awaiting``, ``bare_resolution``, ``observing``); a
    declined code keeps its score and goes to review (``how`` ``declined``).
    """
    g, mk = tax.guide, tax.markers
    if g is None:
        return part, action

    def said(marker: str) -> bool:
        return bool(mk.get(marker)) and any(_phrases_rx(tuple(mk[marker])).search(k) for k in keys)

    if act == g.no_fault_action and said("observing"):
        action = Match(None, action.score, "declined")
        if part.how == "no_fault":
            return Match(None, part.score, "declined"), action
    if part.code is None or part.how in ("no_fault", "software"):
        return part, action
    if (said("trial") and not said("trial_verdict") and act not in g.replaced) or \
            (said("awaiting") and act not in g.fixes and named is None) or (act is None and _bare(tax, keys[2])):
        part = Match(None, part.score, "declined")
    return part, action


def _no_fault_action(g) -> Match:
    """The action of a no-fault finding (the guide's ``no_fault_action``; else none)."""
    return Match(g.no_fault_action, S_ACTED, "no_fault") if g.no_fault_action else Match(None, 0.0, "none")


def _outside(tax: Taxonomy, keys: tuple[str, str, str], act: str | None, e: Evidence, named: str | None) -> bool:
    """Whether what was done was done outside the server, whatever it was (CODING-GUIDE 3):

    * the resolution says the server itself was not worked on ("cleaned the cabinet intake
      filter (outside the server). No work in the chassis", 车队换了逆变器，工控机本身没动:
      ``markers.outside_server``);
    * an RMA lab's disposition finds no fault in the unit returned ("FLD replaced. TST bench 72h:
      CND. DISP: NTF": ``markers.lab_no_fault``), where the replacement told is the field's of
      that very unit (no part named beside it, or the part field's): the lab did nothing to it.
      A replacement of another part keeps its code ("GPU NTF, returned to stock; customer's
      DIMM replaced").
    """
    g, mk = tax.guide, tax.markers
    if mk.get("outside_server") and _phrases_rx(tuple(mk["outside_server"])).search(keys[2]):
        return True
    if not mk.get("lab_no_fault") or act not in g.replaced or \
            not any(_phrases_rx(tuple(mk["lab_no_fault"])).search(k) for k in keys[1:]):
        return False
    acted, _ = e.acted_part(act, g.reach_after, g.reach_before, g.not_parts)
    return acted is None or acted == named


def _bare(tax: Taxonomy, key: str) -> bool:
    """Whether a canonical resolution says only that something was done ("Done.", "Resolution:
    fixed", 【處置】已處理), a field label before it aside (``markers.bare_resolution``)."""
    words = tax.markers.get("bare_resolution")
    if not words or not key:
        return False
    labels = tax.markers.get("resolution_labels", ())
    rest = key
    for label in sorted(labels, key=len, reverse=True):
        if rest.startswith(label) and rest != label:
            rest = rest[len(label):].strip()
            break
    return rest in words


def _no_cause(tax: Taxonomy, symptom: Match, key: str) -> Match:
    """CODING-GUIDE 8: a slowdown told with no thermal cause ("no throttle reasons, temps fine",
    无降频) is ``PERFORMANCE``, not the heat read from those very words."""
    phrases = tax.markers.get("no_slowdown_cause")
    if not phrases or not key or not _phrases_rx(tuple(phrases)).search(key):
        return symptom
    if symptom.code == SLOWDOWN:
        return symptom
    # heat read from "temps fine", and OTHER's filler ("比其它卡慢"); a power brake is a cause
    # whatever the temperature
    if symptom.code in (None, OVERHEAT, OTHER):
        slow = tax.codes["symptom"].get(SLOWDOWN)
        if slow is not None and _phrases_rx(slow.aliases).search(key):
            return Match(SLOWDOWN, S_IMPLIED, "no_cause")
    return symptom  # no slowdown told: "温度正常，但 HBM 95 度" is still heat


def _reinstalled(tax: Taxonomy, e: Evidence, act: str, texts: list[Evidence]) -> bool:
    """"reinstalled" with software named in the ticket and no hardware part beside it: the
    driver was reinstalled, not a card reseated ("reinstalled 550.90.07 + reboot", 重新安装驱动)."""
    g, words = tax.guide, tax.markers.get("reinstall")
    if g is None or not g.software or not words or act in g.software_actions:
        return False
    spans = [e.text[a:b] for a, b, c, done, _ in e.actions if c == act and done]
    if not spans or not all(s in words for s in spans):
        return False
    if not any(t.names_part(g.software) for t in texts):
        return False
    acted, _ = e.acted_part(act, g.reach_after, g.reach_before, frozenset(c for c in (g.software, g.no_fault) if c))
    return acted is None


def _first_symptom(tax: Taxonomy, part: str) -> str:
    """What a symptom a part cannot have becomes: OTHER where the part may have it, else the
    part's first symptom in the taxonomy's order."""
    allowed = tax.part_symptoms[part]
    return OTHER if OTHER in allowed else next(c for c in tax.codes["symptom"] if c in allowed)


def _fill(own: Match, hints: list[Match], thr: float, skip: frozenset[str], tags: set[str]) -> Match:
    """Own result when confident, else the first confident hint from other fields
    (codes in ``skip`` are never taken from another field)."""
    if _sure(own, thr):
        return own
    for h in hints:
        if _sure(h, thr) and h.code not in skip:
            if own.code is not None and own.code != h.code:
                return own  # the field says something else, if weakly: a person decides
            tags.add("context")
            return _context(own, h)
    return own if own.how != "empty" else Match(None, 0.0, "empty")


def _context(own: Match, h: Match) -> Match:
    score = max(min(h.score, S_CONTEXT), S_AGREE) if own.code == h.code else min(h.score, S_CONTEXT)
    return Match(h.code, score, "context")


def _acted(acted: str, named: str | None, tags: dict[str, set[str]]) -> Match:
    tags["part"] -= {"context", "unsupported", "two_parts"}  # the action says which part
    if named and named != acted:
        tags["part"].add("parts_conflict")
    return Match(acted, S_ACTED, "acted")


def _sure(m: Match, thr: float) -> bool:
    return m.code is not None and m.score >= thr


def _hardware(texts: list[Evidence], g) -> set[str]:
    """The parts named in the symptom and action texts, verdicts and software aside."""
    skip = g.not_parts if g is not None else frozenset()
    return {p[2] for e in texts[1:] for p in e.parts if p[2] not in skip}
