"""The part swap a ticket records: which part, the serial taken out, the serial put in.

RMA portals list the parts they swapped (``"partsReplaced": [{"partType": "GPU Module",
"defectiveSerial": ..., "replacementSerial": ...}]``, ``更换配件: [{配件类型, 旧件SN, 新件SN}]``);
the JSON reader turns such a list into one column per key holding one value per swap, and
the layout finds which column is the kind, the removed and the installed serial. Flat
exports write one swap as ``Old SN`` / ``New SN`` columns. :func:`pick_swap` keeps one swap
per ticket: the GPU's when there is one (the failure that counts), else the first; the
others are named so that they can be noted in the part text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from pipeline.ingest.tickets.columns import cell_text, clean_serial

#: Words that name a GPU (card, SXM/OAM module, a GPU model) ...
_GPU = re.compile(r"gpu|graphics|accelerator|sxm|oam|tesla|[ahlbv]\d{2,3}\b|h[12]00|显卡|顯卡|加速卡|计算卡|計算卡|"
                  r"算力卡|gpu卡|模组|模組", re.I)
#: ... unless they name a part beside it (the GPU's baseboard, riser, bridge, fan, cable ...).
_NOT_GPU = re.compile(r"base ?board|tray|sled|riser|bridge|switch|retimer|fan|cable|power|psu|heat ?sink|cold ?plate|"
                      r"thermal|pad|bracket|cage|backplane|board assy|基板|托盘|托盤|底板|载板|載板|转接|轉接|桥|橋|风扇|風扇|"
                      r"线|線|电源|電源|散热|散熱|导热|導熱|支架", re.I)


def is_gpu_part(text: object) -> bool:
    """Whether a swapped part's kind names the GPU itself (``GPU Module``, ``H100 SXM5``,
    ``显卡``), not a part beside it (``GPU baseboard``, ``GPU riser``)."""
    s = unicodedata.normalize("NFKC", cell_text(text) or "")
    return bool(_GPU.search(s)) and not _NOT_GPU.search(s)


@dataclass
class Swap:
    kind: str | None = None
    removed: str | None = None
    removed_text: str | None = None
    installed: str | None = None
    #: The ticket's other swaps, one short phrase each (``PSU (old A, new B)``).
    others: list[str] = field(default_factory=list)


def _items(cell: object) -> list:
    """A swap column's values, one per swap: a list from a list of swaps, else the one cell."""
    if isinstance(cell, list):
        return cell
    return [] if cell_text(cell) is None else [cell]


def pick_swap(kinds: object, removed: object, installed: object) -> Swap:
    """The ticket's swap from the kind, removed-serial and installed-serial cells (each a
    list with one value per swap, or one value)."""
    k, r, i = _items(kinds), _items(removed), _items(installed)
    n = max(len(k), len(r), len(i))
    at = lambda xs, j: xs[j] if j < len(xs) else None  # noqa: E731
    filled = [j for j in range(n) if any(cell_text(at(xs, j)) for xs in (k, r, i))]
    if not filled:
        return Swap()
    keep = next((j for j in filled if is_gpu_part(at(k, j))), filled[0])
    swap = Swap(cell_text(at(k, keep)), clean_serial(at(r, keep)), cell_text(at(r, keep)), clean_serial(at(i, keep)))
    for j in filled:
        if j != keep:
            serials = ", ".join(f"{w} {s}" for w, s in (("old", cell_text(at(r, j))), ("new", cell_text(at(i, j)))) if s)
            swap.others.append(f"{cell_text(at(k, j)) or 'part'}" + (f" ({serials})" if serials else ""))
    return swap
