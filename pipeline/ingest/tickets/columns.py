"""What a ticket export's cells mean: header recognition, serial cleaning, dates.

Every service point names its columns its own way (``工单号``, ``Ticket #``, ``ticketId``);
:func:`map_columns` maps them to the ticket schema, from the point's config first and
then by fuzzy matching against the aliases in :data:`FIELD_ALIASES`. Serials come back
from spreadsheets damaged (``1.65462E+12``, ``1654620012345.0``, ``SN:``); dates come in
each point's own order (``05/03/2025`` is March in one point and May in another).
"""

from __future__ import annotations

import re
import unicodedata
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from rapidfuzz import fuzz, process

from pipeline.timeutil import local_to_utc

#: Ticket schema field -> header aliases (compared after :func:`canonical_header`).
FIELD_ALIASES: dict[str, list[str]] = {
    "ticket_id": ["ticket_id", "ticket", "ticket #", "ticket no", "ticket number", "ticketid", "ticket num",
                  "case", "case id", "case #", "case no", "case number", "incident", "incident id", "rma #",
                  "rma no", "work order", "wo", "wo #", "id", "case number", "ref", "reference", "工单号", "工单编号", "工单", "单号", "工单id",
                  "服务单号", "报修单号", "维修单号", "案例号", "工單號", "工單編號", "number", "issue key", "key",
                  "rma", "rma number", "rma id", "ticket nr", "ticket-nr", "vorgang", "事件编号", "事件单号", "工單", "incident number", "工单号码",
                  "故障单号", "故障单编号", "报障单号", "故障工单号", "故障單號"],
    "opened_at": ["opened_at", "opened", "open time", "open date", "opened on", "created", "created at",
                  "create time", "created on", "creation date", "created date", "open", "opened at", "reported", "reported at", "report time",
                  "report date", "date", "datetime", "time", "start time", "开单时间", "报修时间", "创建时间",
                  "日期", "故障时间", "报障时间", "提交时间", "开始时间", "開單時間", "報修時間", "建立時間", "date submitted",
                  "submitted", "submitted at", "submit date", "request date", "erstellt", "erstellt am", "创建日期",
                  "申请时间", "发起时间", "建單時間", "发生时间", "發生時間", "reported date", "date opened",
                  "报修日期", "报障日期", "报修時間", "報修日期", "创建日期时间",
                  "上报时间", "上报日期", "上報時間"],
    "closed_at": ["closed_at", "closed", "close time", "closed on", "close date", "resolved", "resolved at",
                  "resolved on", "resolution date", "end time", "完成时间", "关闭时间", "结单时间", "解决时间",
                  "结束时间", "關閉時間", "完成時間", "closed at", "resolved at", "处理完成时间", "結案時間",
                  "solved", "solved at", "结单日期", "完成日期", "关闭日期", "結案日期"],
    "updated_at": ["updated_at", "updated", "last updated", "update time", "modified", "last modified",
                   "更新时间", "修改时间", "最后更新", "更新時間"],
    "status": ["status", "state", "ticket status", "状态", "工单状态", "狀態", "处理状态", "服务状态", "维修状态",
               "處理狀態", "工單狀態", "case status", "rma status"],
    "host": ["host", "hostname", "host name", "server", "server name", "node", "node name", "machine", "system",
             "主机", "主机名", "服务器", "服务器名", "节点", "机器名", "主機名", "伺服器", "configuration item", "ci",
             "cmdb ci", "affected ci", "主机名称", "主機名稱", "设备名称", "設備名稱", "服务器名称",
             "ip", "ip address", "host ip", "server ip", "node ip", "主机ip", "服务器ip", "管理ip", "业务ip", "ip地址",
             "主機ip", "伺服器ip", "节点ip", "節點ip"],
    "slot": ["slot", "gpu slot", "slot #", "slot no", "gpu index", "gpu #", "gpu id", "gpu", "gpu no", "position", "槽位",
             "卡槽", "gpu槽位", "gpu位置", "槽位号", "插槽", "卡位", "故障卡位", "gpu卡位", "卡槽位", "gpu position",
             "gpu location", "card position", "card slot", "gpu bay", "故障gpu位置", "故障卡槽", "槽位編號", "卡槽號",
             "card", "card #", "card no", "gpu card"],
    "serial": ["serial", "sn", "s/n", "serial number", "serial no", "serial #", "gpu sn", "gpu serial",
               "board serial", "board sn", "gpu serial number", "module sn", "序列号", "sn号", "gpu序列号", "gpu sn号", "板卡序列号",
               "序號", "序列號", "service tag", "设备sn", "设备序列号", "設備序號", "設備序列號", "seriennummer",
               "serial tag", "sn码", "gpu sn码"],
    "part_text": ["part", "parts", "failed part", "faulty part", "fault part", "component", "part name",
                  "failed component", "defective part", "hardware", "category", "故障部件", "部件", "故障件", "更换部件",
                  "配件", "故障配件", "故障部位", "部件名称", "故障部件名称", "part description", "component description",
                  "bauteil", "komponente", "部件描述", "故障部件描述", "replaced part", "更换部件名称",
                  "更换备件", "更换配件", "更换件", "更換備件", "更換部件"],
    "symptom_text": ["symptom", "symptoms", "issue", "problem", "fault", "fault description",
                     "error", "issue description", "problem description", "failure", "failure mode",
                     "故障现象", "现象", "故障描述", "问题描述", "故障", "问题", "故障現象", "問題描述",
                     "failure description", "fehlerbeschreibung", "fehler", "故障描述信息", "故障現象描述",
                     "故障现象描述", "reported problem", "problem reported", "customer reported problem"],
    # The one-line title beside the symptom (Summary, Subject, 标题): read with the symptom,
    # first, so a title and a fault description are two columns of one text, not rivals.
    "title": ["summary", "short description", "subject", "title", "problem summary", "issue summary", "headline",
              "标题", "標題", "主题", "主題", "工单标题", "工單標題", "摘要", "概要", "betreff"],
    # A long free text beside the short one (ServiceNow's Description beside Short description):
    # appended to the symptom text, and the only text of an export that has nothing else.
    "description": ["description", "details", "detail", "detailed description", "long description",
                    "full description", "详细描述", "描述", "详情", "故障详情", "问题详情", "詳細描述", "描述信息"],
    "action_text": ["action", "actions", "resolution", "fix", "action taken", "solution", "repair action",
                    "repair", "remedy", "work done", "corrective action", "measure", "measures",
                    "resolution notes", "action notes", "处理措施", "处理方式", "解决方案", "维修措施", "处理",
                    "措施", "处理结果", "维修方式", "處理措施", "處理方式", "close notes", "closure notes", "resolution code",
                    "disposition", "comments", "work notes", "maßnahme", "massnahme", "处理记录", "处理过程", "處理結果",
                    "維修措施", "处理方法", "resolution description", "resolution summary", "resolution details",
                    "fix description", "action description", "维修记录", "维修结果", "维修过程", "解决办法", "解决措施", "work performed", "work done notes",
                    "fix applied", "action applied", "fix performed"],
    # A part swap (an RMA portal's list of replaced parts, or Old SN / New SN columns): the
    # removed serial is the failed unit. The kind of part is taken only from a list of swaps
    # (a ``parts[].type`` column), where "type" and "description" cannot mean anything else.
    "removed_serial": ["old sn", "old serial", "old serial number", "old s n", "removed sn", "removed serial",
                       "removed serial number", "defective sn", "defective serial", "defective serial number",
                       "defective part sn", "defective part serial", "failed sn", "failed serial", "faulty sn",
                       "faulty serial", "bad sn", "original sn", "original serial", "returned sn", "returned serial",
                       "serial out", "sn out", "old part sn", "old part serial", "outgoing serial", "old ppid",
                       "removed ppid", "defective ppid", "old", "removed", "defective", "out",
                       "旧件sn", "旧sn", "原sn", "旧件序列号", "旧序列号", "原序列号", "坏件sn", "坏件序列号", "故障件sn",
                       "故障件序列号", "拆下sn", "下线sn", "旧卡sn", "旧卡序列号", "舊件sn", "舊件序號", "原序號", "舊sn"],
    "installed_serial": ["new sn", "new serial", "new serial number", "new s n", "installed sn", "installed serial",
                         "installed serial number", "replacement sn", "replacement serial",
                         "replacement serial number", "replacement part sn", "good sn", "serial in", "sn in",
                         "new part sn", "new part serial", "incoming serial", "new ppid", "replacement ppid",
                         "new", "installed", "replacement", "in",
                         "新件sn", "新sn", "新件序列号", "新序列号", "备件sn", "备件序列号", "上线sn", "新卡sn", "新卡序列号",
                         "新件序號", "新序號", "新sn號"],
    "swap_part_text": ["part", "parts", "part type", "part kind", "part name", "part description", "component",
                       "component type", "component name", "kind", "type", "item", "item description", "category",
                       "description", "name", "commodity", "fru description", "配件类型", "部件类型", "备件类型",
                       "配件名称", "部件名称", "备件名称", "物料描述", "物料名称", "类型", "名称", "部件", "配件", "零件",
                       "配件類型", "部件類型", "零件名稱"],
    # Columns that look like the ones above but are not: matched exactly, then dropped.
    "_ignore": ["part number", "part no", "part #", "p n", "pn", "fru", "fru number", "assignment group", "assignee",
                "assigned to", "requester", "reporter", "caller", "priority", "issue id", "issue type", "tags",
                "labels", "机房", "机柜", "机架", "机位", "rack", "location", "site", "区域", "機房", "機櫃",
                "impact", "urgency", "category id", "料号", "物料号", "型号", "model", "服务器sn", "服务器序列号", "主机sn",
                "整机sn", "整机序列号", "机器sn", "server sn", "server serial", "server serial number", "host sn",
                "chassis sn", "chassis serial", "system serial", "system serial number", "伺服器序號"],
}
TEXT_FIELDS = ("part_text", "symptom_text", "action_text")
#: Fields that make a row a ticket header, beside the ticket id.
_TEXT_LIKE = (*TEXT_FIELDS, "title", "description")
#: Roles found only among the columns of a list of part swaps (``parts[].type``).
SWAP_ROLES = ("swap_part_text", "removed_serial", "installed_serial")
#: Below this rapidfuzz ratio a header is not taken for an alias; headers shorter than
#: :data:`HEADER_MIN_FUZZY_LEN` must match an alias exactly (short words are too alike).
HEADER_MIN_SCORE = 84.0
HEADER_MIN_FUZZY_LEN = 5


#: Zones a header may name for its times: ``Opened (ET)``, ``created_utc``, ``报修时间(北京时间)``.
HEADER_ZONES = {
    "utc": "UTC", "gmt": "UTC", "z": "UTC", "et": "America/New_York", "est": "America/New_York",
    "edt": "America/New_York", "pt": "America/Los_Angeles", "pst": "America/Los_Angeles",
    "pdt": "America/Los_Angeles", "cet": "Europe/Berlin", "cest": "Europe/Berlin", "北京时间": "Asia/Shanghai",
    "bjt": "Asia/Shanghai",
}
_ZONE_IN_HEADER = re.compile(
    r"(?:\(\s*(" + "|".join(HEADER_ZONES) + r")\s*\)|[\s_](utc|gmt)$)", re.I)


def header_zone(name: object) -> str | None:
    """The zone a header names for its times, if any (``Opened (ET)`` -> America/New_York)."""
    m = _ZONE_IN_HEADER.search(unicodedata.normalize("NFKC", str(name or "")).strip())
    return HEADER_ZONES[(m.group(1) or m.group(2)).lower()] if m else None


def canonical_header(name: object) -> str:
    """Header text for comparison: NFKC, lower case, a zone tag dropped, separators as one space."""
    s = unicodedata.normalize("NFKC", str(name or "")).strip()
    s = _CUSTOM_FIELD.sub(r"\1", s)
    s = _ZONE_IN_HEADER.sub("", s).lower().strip()
    s = re.sub(r"[_\-./\\:()\[\]（）]+", " ", s)
    return re.sub(r"\s+", " ", s).strip()


# Jira writes custom fields as ``Custom field (Serial Number)``.
_CUSTOM_FIELD = re.compile(r"^custom\s*field\s*[(（]\s*(.+?)\s*[)）]$", re.I)


def _split_camel(name: object) -> str:
    s = unicodedata.normalize("NFKC", str(name or "")).strip()
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", s)


def _squash(s: str) -> str:
    return re.sub(r"[\s#]+", "", s)


_ALIASES = {f: [canonical_header(a) for a in names] for f, names in FIELD_ALIASES.items()}


def _tokens(s: str) -> list[str]:
    """Words of a canonical header, Chinese runs apart from Latin ones (``服务器sn`` -> 服务器, sn)."""
    return re.findall(r"[\u3400-\u9fff]+|[^\s\u3400-\u9fff]+", s)


#: Each alias with what matching needs of it, worked out once: (alias, squashed, words, a
#: Chinese word of three or more characters that may sit inside a longer word).
_ALIAS_PARTS = {f: [(a, _squash(a), _tokens(a), bool(re.fullmatch(r"[\u3400-\u9fff]{3,}", a))) for a in names]
                for f, names in _ALIASES.items()}


def _contains_words(words: list[str], squashed: str, alias: str, alias_squashed: str, want: list[str],
                    cjk: bool) -> float:
    """A score when the header (its ``words``, and ``squashed``) holds the alias as whole words
    (``Asset Serial Number``) or a Chinese alias of three or more characters (``cjk``) inside a
    word (``工单号码``), higher the more of the header it covers and when it ends the header (the
    head noun: ``故障发生时间``)."""
    if not want or not words or words == want:
        return 0.0
    n = len(want)
    at = -1
    if n == 1 and cjk:
        if alias not in squashed:
            return 0.0
        at = next((i for i, w in enumerate(words) if alias in w and w != alias), -1)
        at = next((i for i, w in enumerate(words) if w == alias), at)
        ends = at == len(words) - 1 and words[at].endswith(alias)
    elif len(alias) >= HEADER_MIN_FUZZY_LEN or want == ["sn"]:
        if want[0] not in words:
            return 0.0
        at = next((i for i in range(len(words) - n + 1) if words[i:i + n] == want), -1)
        ends = at == len(words) - n
        if want == ["sn"] and not ends:
            return 0.0
    if at < 0:
        return 0.0
    cover = len(alias_squashed) / max(len(squashed), 1)
    return HEADER_MIN_SCORE + 1 + (10 * cover + 2 if ends else 5 * cover)


@lru_cache(maxsize=1 << 16)
def _score(header: str, field: str) -> float:
    """How well a canonical header names ``field``, 0-100: an alias exactly, fuzzily
    (rapidfuzz ratio, headers of five characters or more) or inside longer words."""
    squashed, words = _squash(header), _tokens(header)
    best = 0.0
    for alias, alias_squashed, want, cjk in _ALIAS_PARTS[field]:
        if header == alias or squashed == alias_squashed:
            return 100.0
        best = max(best, _contains_words(words, squashed, alias, alias_squashed, want, cjk))
    if len(header) >= HEADER_MIN_FUZZY_LEN:
        hit = process.extractOne(header, _ALIASES[field], scorer=fuzz.ratio)
        best = max(best, hit[1] if hit else 0.0)
    return best


def map_columns(headers: list[object], configured: dict[str, str] | None = None) -> dict[str, int]:
    """Map ticket fields to column positions from the headers alone (configured names win).

    Returns an empty dict when the row does not look like a ticket header (no ticket id,
    or no text column). :func:`pipeline.ingest.tickets.layout.recognise` also weighs the
    values and says when it is unsure.
    """
    from pipeline.ingest.tickets.layout import headers_only  # it builds on this module

    return headers_only(headers, configured)


# -- cells -------------------------------------------------------------------------

def cell_text(value: object) -> str | None:
    """A cell as text: numbers without a spurious ``.0``, dates in ISO form, empty -> None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if value != value:  # NaN
            return None
        return str(int(value)) if value.is_integer() and abs(value) < 1e18 else repr(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    s = str(value).strip()
    return s or None


_SERIAL_PREFIX = re.compile(r"^(?:gpu\s*)?(?:s/?n|serial(?:\s*(?:no|number|#))?|序列号|序號|序列號)\s*[:：#=]?\s*", re.I)
_SCI = re.compile(r"^(\d)(?:\.(\d+))?E\+?(\d+)$", re.I)
_FLOAT_ZERO = re.compile(r"^(\d+)\.0+$")


def clean_serial(value: object) -> str | None:
    """A serial as the inventory writes it (trimmed, upper case, no ``SN:`` prefix).

    Spreadsheet damage is undone where it can be: number cells and ``1654620012345.0``
    become digits. A rounded scientific form (``1.65462E+12``) cannot be undone and is
    returned in a canonical ``1.65462E+12`` form, which :func:`rounded_serial` reads.

    >>> clean_serial("SN: 1654620012345"), clean_serial(1654620012345.0), clean_serial(" 1.65462e+12 ")
    ('1654620012345', '1654620012345', '1.65462E+12')
    """
    s = cell_text(value)
    if s is None:
        return None
    s = unicodedata.normalize("NFKC", s).strip().strip("'\"`").strip()
    s = _SERIAL_PREFIX.sub("", s)
    s = re.sub(r"\s+", "", s).upper()
    if m := _FLOAT_ZERO.match(s):
        return m.group(1)
    if m := _SCI.match(s):
        digits = m.group(1) + (m.group(2) or "")
        exp = int(m.group(3))
        if len(digits) - 1 <= exp <= 30:
            if len(digits) - 1 == exp:  # every digit is there: undo exactly
                return digits
            return f"{m.group(1)}.{m.group(2) or '0'}E+{exp}"
    return s or None


def rounded_serial(serial: str) -> tuple[Decimal, int, int] | None:
    """For a spreadsheet-rounded serial: (value, significant digits, digit count), else None."""
    m = _SCI.match(serial or "")
    if not m:
        return None
    try:
        value = Decimal(serial)
    except InvalidOperation:
        return None
    return value, 1 + len(m.group(2) or ""), int(m.group(3)) + 1


def clean_slot(value: object) -> int | None:
    """A slot number from ``3``, ``3.0``, ``GPU3``, ``slot 3``, ``#3``, ``3号``, ``第5卡``,
    ``GPU three`` (:func:`pipeline.link.slots.slot_number`); else None."""
    from pipeline.link.slots import slot_number

    return slot_number(value)


# -- dates -------------------------------------------------------------------------

_NUMERIC_DATE = re.compile(r"^\s*(\d{1,2})[/.\-](\d{1,2})[/.\-](\d{2,4})\b")
_TIME_OF_DAY = re.compile(r"(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?\s*(?P<ampm>[AaPp][Mm])?")


def infer_dayfirst(values: list[str | None], default: bool) -> bool:
    """Day/month order of ``dd/mm/yyyy``-like values: any first field above 12 means
    day first, any second field above 12 means month first, else ``default``."""
    for v in values:
        m = _NUMERIC_DATE.match(v or "")
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            if a > 12 >= b:
                return True
            if b > 12 >= a:
                return False
    return default


def _local_datetime(s: str, dayfirst: bool, fmt: str) -> datetime:
    if fmt:
        return datetime.strptime(s, fmt)
    if s[:4].isdigit() and s[4:5] == "-":  # the common case first: ISO 8601 as written
        try:
            return datetime.fromisoformat(s.replace("Z", "+00:00") if s.endswith("Z") else s)
        except ValueError:
            pass
    s = unicodedata.normalize("NFKC", s).strip()
    s = re.sub(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*[日号號]?", r"\1-\2-\3", s)
    s = _CJK_TIME.sub(lambda m: f"{m[1]}:{m[2] or '00'}:{m[3] or '00'}", s).strip()
    s = s.replace("T", " ") if re.match(r"^\d{4}-\d{2}-\d{2}T", s) else s
    iso = s.replace("/", "-").replace("Z", "+00:00")
    iso = re.sub(r"^(\d{4})-(\d{1,2})-(\d{1,2})", lambda m: f"{m[1]}-{int(m[2]):02d}-{int(m[3]):02d}", iso)
    iso = re.sub(r"^(\d{4}-\d{2}-\d{2}[ T])(\d)(?=:)", r"\g<1>0\2", iso)  # 9:05 -> 09:05
    try:
        return datetime.fromisoformat(iso)
    except ValueError:
        pass
    m = _NUMERIC_DATE.match(s)
    if m:
        a, b, y = int(m.group(1)), int(m.group(2)), int(m.group(3))
        # 04.03.2025 is always day first (nobody writes month.day.year).
        day, month = (a, b) if dayfirst or "." in m.group(0) else (b, a)
        if y < 100:
            y += 2000
        rest = s[m.end():].strip()
        if not rest:
            return datetime(y, month, day)
        t = _TIME_OF_DAY.fullmatch(rest)
        if not t:
            raise ValueError(f"unreadable time of day {rest!r}")
        return _at_time(datetime(y, month, day), t, rest)
    for f in ("%Y%m%d %H%M%S", "%Y%m%d"):
        try:
            return datetime.strptime(s, f)
        except ValueError:
            continue
    return _worded_datetime(s)


#: ``14时22分``, ``14點22分30秒``.
_CJK_TIME = re.compile(r"(\d{1,2})\s*[时時点點]\s*(?:(\d{1,2})\s*分\s*(?:(\d{1,2})\s*秒)?)?")
#: Dates with a month name, as Jira (``05/Mar/25``), Excel (``5-Mar-2025``) and mail write them.
_WORDED_DATES = ("%d %b %Y", "%d %B %Y", "%b %d %Y", "%B %d %Y", "%d/%b/%y", "%d/%b/%Y", "%d-%b-%Y", "%d-%b-%y",
                 "%a %b %d %Y", "%A %B %d %Y")


def _worded_datetime(s: str) -> datetime:
    """``Mar 5, 2025 2:22 PM``, ``5 March 2025 14:22``, ``05/Mar/25 2:22 PM``."""
    t = _TIME_OF_DAY.search(s)
    day_part = (s[:t.start()] if t else s).replace(",", " ").replace(".", " ")
    day_part = re.sub(r"\s+", " ", day_part).strip()
    if t and s[t.end():].strip():
        raise ValueError(f"unreadable date/time {s!r}")
    for f in _WORDED_DATES:
        try:
            day = datetime.strptime(day_part, f)
            break
        except ValueError:
            continue
    else:
        raise ValueError(f"unreadable date/time {s!r}")
    return _at_time(day, t, s) if t else day


def _at_time(day: datetime, t: re.Match, text: str) -> datetime:
    """``day`` at the time of day matched by :data:`_TIME_OF_DAY` (12-hour clock with AM/PM)."""
    hour = int(t["h"])
    if t["ampm"]:
        if not 1 <= hour <= 12:
            raise ValueError(f"unreadable time of day {text!r}")
        hour = hour % 12 + (12 if t["ampm"].lower() == "pm" else 0)
    micro = int((t["f"] or "0")[:6].ljust(6, "0"))
    return day.replace(hour=hour, minute=int(t["m"]), second=int(t["s"] or 0), microsecond=micro)


def parse_when(value: object, tz: str, *, dayfirst: bool = False, fmt: str = "") -> datetime | None:
    """A cell (text, datetime, Excel serial day number or epoch) to naive UTC; None if empty.

    Zone-less times are read in ``tz``. Raises ValueError when unreadable.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return local_to_utc(value, tz)
    if isinstance(value, date):
        return local_to_utc(datetime(value.year, value.month, value.day), tz)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if 20000 <= v < 80000:  # an Excel serial day number (1954-2119)
            return local_to_utc(datetime(1899, 12, 30) + timedelta(days=v), tz)
        if 1e9 <= v < 1e10:
            return datetime(1970, 1, 1) + timedelta(seconds=v)
        if 1e12 <= v < 1e13:
            return datetime(1970, 1, 1) + timedelta(milliseconds=v)
        raise ValueError(f"unreadable date/time {value!r}")
    s = str(value).strip()
    if not s:
        return None
    if re.fullmatch(r"\d{10}(\d{3})?", s):
        return parse_when(int(s), tz)
    if re.fullmatch(r"[2-7]\d{4}(\.\d+)?", s):  # an Excel day number that a CSV export wrote as text
        return parse_when(float(s), tz)
    return local_to_utc(_local_datetime(s, dayfirst, fmt), tz)
