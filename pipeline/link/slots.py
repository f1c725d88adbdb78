"""GPU slots as technicians write them, and which base a service point counts them from.

A slot cell or a ticket's free text names the GPU's place in its host in many ways:
``3``, ``GPU 6``, ``card #7``, ``slot3``, ``idx 2``, ``第5卡``, ``五号卡``, ``槽位3``,
``GPU three``, ``3rd GPU``. :func:`slot_number` reads a cell, :func:`slot_in_text` finds
the slot a free text names (only next to a slot word, so ``H100 80GB`` is no slot).

Points count from 0 (nvidia-smi's index, the inventory's slot) or from 1 (the label on
the chassis). :func:`detect_base` decides per point from tickets whose serial is known:
the offset under which their written slots agree with the inventory's; without such
tickets, a written ``0`` means 0-based and a slot one past the inventory's largest means
1-based. ``link.slot_base`` in the config overrides it per point.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

_EN_NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split())}
_EN_ORDINALS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth".split())}
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7,
              "八": 8, "九": 9}
_ZH_NUM = "零〇一二两兩三四五六七八九十"


def zh_number(text: str) -> int | None:
    """``五`` -> 5, ``十二`` -> 12, ``二十`` -> 20 (the numbers a slot can be); else None."""
    if not text or any(c not in _ZH_NUM for c in text):
        return None
    if "十" not in text:
        return _ZH_DIGITS[text] if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    if len(tens) > 1 or len(ones) > 1:
        return None
    return (_ZH_DIGITS[tens] if tens else 1) * 10 + (_ZH_DIGITS[ones] if ones else 0)


def _number(token: str) -> int | None:
    token = token.strip().lower()
    if token.isdigit():
        return int(token) if len(token) <= 2 else None
    if m := re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)", token):
        return int(m[1])
    if token in _EN_NUMBERS:
        return _EN_NUMBERS[token]
    if token in _EN_ORDINALS:
        return _EN_ORDINALS[token]
    return zh_number(token)


_NUM = rf"(\d{{1,2}}(?:st|nd|rd|th)?|[{_ZH_NUM}]{{1,3}}|" + "|".join(
    sorted([*_EN_NUMBERS, *_EN_ORDINALS], key=len, reverse=True)) + ")"
_WORD = r"(?:gpu|card|slot|idx|index|position|pos|module|卡槽|槽位|插槽|卡位|卡|槽|显卡|顯卡)"
#: The slot named next to a slot word: ``GPU 6``, ``card #7``, ``slot3``, ``槽位3``, ``卡5``.
_AFTER_WORD = re.compile(rf"(?<![a-z0-9]){_WORD}\s*(?:no\.?|nr\.?|number)?\s*[#:：=№]?\s*{_NUM}(?![0-9a-z])", re.I)
#: ``第5卡``, ``第五张卡``, ``5号卡``, ``五号GPU``, ``3rd GPU``, ``third card``.
_BEFORE_WORD = re.compile(
    rf"(?:第\s*{_NUM}\s*[张張块塊个個号號]?\s*{_WORD}|(?<![a-z0-9]){_NUM}\s*[号號]\s*{_WORD}|"
    rf"(?<![a-z0-9]){_NUM}\s+{_WORD}(?![a-z]))", re.I)
#: A bare ``#3``: a slot in a slot cell, but in prose as likely a drive's or a fan's number.
_HASH = re.compile(r"^#\s*(\d{1,2})$")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).strip()


def slot_number(value: object) -> int | None:
    """The slot a cell names: ``3``, ``3.0``, ``GPU3``, ``card #7``, ``第5卡``, ``五号卡``,
    ``GPU three``; None when it names none.

    >>> [slot_number(v) for v in ("3", 3.0, "GPU 6", "card #7", "slot3", "第5卡", "五号卡", "gpu three", "-")]
    [3, 3, 6, 7, 3, 5, 5, 3, None]
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value) if value == value and float(value).is_integer() and 0 <= value < 100 else None
    s = _norm(str(value))
    if not s:
        return None
    if re.fullmatch(r"\d{1,2}(?:\.0+)?", s):
        return int(float(s))
    if (n := _number(s)) is not None:
        return n
    if m := _HASH.match(s):
        return int(m[1])
    found = slot_in_text(s)
    if found is not None:
        return found
    m = re.search(r"(?<![0-9a-z])(\d{1,2})(?![0-9a-z])", s, re.I)  # GPU-3, [3], 3#: a lone small number
    return int(m[1]) if m else None


def slot_in_text(text: object) -> int | None:
    """The slot a free text names next to a slot word (``Xid 79 on GPU 3``, ``第5卡掉卡``);
    None when it names none or several different ones."""
    if not text:
        return None
    s = _norm(str(text))
    found = set()
    for rx in (_AFTER_WORD, _BEFORE_WORD):
        for m in rx.finditer(s):
            tok = next(g for g in m.groups() if g)
            n = _number(tok)
            if n is not None and n < 64:
                found.add(n)
    return found.pop() if len(found) == 1 else None


def detect_base(pairs: Iterable[tuple[int, int]], written: Iterable[int], inventory_max: int | None) -> int | None:
    """A point's slot base (0 or 1) from its tickets; None when the data cannot tell.

    ``pairs`` are (slot written, inventory slot of the ticket's serial-linked GPU);
    ``written`` every slot the point wrote; ``inventory_max`` the largest inventory slot.
    The base under which the pairs agree wins when two or more show it and none the other
    (one alone may be a typo), or when at least three show it and it explains clearly more of them than the other (a slot mistyped now
    and then); else a written 0 means 0-based and a written slot above ``inventory_max``
    means 1-based.
    """
    votes = Counter()
    for w, inv in pairs:
        if w - inv in (0, 1):
            votes[w - inv] += 1
    zero, one = votes[0], votes[1]
    if (min(zero, one) == 0 and max(zero, one) >= 2) or (max(zero, one) >= 3 and max(zero, one) >= 2 * min(zero, one) + 1):
        return 0 if zero > one else 1
    seen = set(written)
    if 0 in seen:
        return 0
    if inventory_max is not None and seen and max(seen) == inventory_max + 1:
        return 1
    return None
