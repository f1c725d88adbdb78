"""Canonical ticket text: the one form both ticket text and taxonomy aliases are matched in.

Technicians write the same thing many ways: full-width ``ＧＰＵ``, ``GPU#3``, ``Xid: 79``,
traditional or simplified Chinese, serial numbers and model names in the middle of the
sentence, "customer reports ..." in front. :func:`canonical` removes what carries no
meaning for coding (serials, slot numbers, model names, boilerplate, punctuation, case) and
keeps what does (words, Chinese characters, Xid numbers, PCIe widths like ``x8``).

It is idempotent: ``canonical(canonical(t)) == canonical(t)``, so a stored canonical text
and a fresh one always compare equal.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["canonical", "is_cjk"]

# Traditional -> simplified for the characters that occur in hardware tickets; aliases are
# canonicalized the same way, so either script matches either.
_TRAD = "戶饋顯記憶體風電換報錯誤溫過熱線纜網絡驅動韌級機啟開關無現測試檢損壞燒轉內頻寬鏈連斷應復觀監設備處維廠組壓異識別讀寫權碟條統時間後態診斷當掛響逾籤資訊軟硬插槽點節盤陣卡類請問題廣載導膠擴聯數據號貨單發現進運濾塵灰潔風扇藍圖形計算處狀況還樣嗎這麼與為從會過來說對議複禍認證歸屬帶際適幫確實離遠閉順續綁緊鬆脫毀鍵錄層嚴擬靈幣構標準勢變邊針鎖閃燈環獲結論擊繼總裝彈驗舊雙糾碼頁滿廢項員購貼費銷價庫濕溼氣顆紅綠黃亂緩區儲範圍闆塊張鍊隊負執術書話詢專業務約舉萬億歲齊階優蓋輪鬧腦沒補調墊撥腳擋隨"
_SIMP = "户馈显记忆体风电换报错误温过热线缆网络驱动韧级机启开关无现测试检损坏烧转内频宽链连断应复观监设备处维厂组压异识别读写权碟条统时间后态诊断当挂响逾签资讯软硬插槽点节盘阵卡类请问题广载导胶扩联数据号货单发现进运滤尘灰洁风扇蓝图形计算处状况还样吗这么与为从会过来说对议复祸认证归属带际适帮确实离远闭顺续绑紧松脱毁键录层严拟灵币构标准势变边针锁闪灯环获结论击继总装弹验旧双纠码页满废项员购贴费销价库湿湿气颗红绿黄乱缓区储范围板块张链队负执术书话询专业务约举万亿岁齐阶优盖轮闹脑没补调垫拨脚挡随"
assert len(_TRAD) == len(_SIMP)
_TRAD_MAP = str.maketrans(_TRAD, _SIMP)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RE = re.compile(f"[{_CJK}]")

_XID = re.compile(r"(?<![a-z])(s?)x+i+d+s?\s*(?:\(pci:[0-9a-f:.]+\)\s*)?(?:error|err|code|event)?\s*[:#=\-_ ]?\s*(\d{1,3})(?![0-9])(?:\s*[x×*]\s*\d+(?![0-9a-z]))?")
_SXID_BARE = re.compile(r"(?<![a-z0-9])sxid(?![a-z])\d*")
_PCI = re.compile(r"\b[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?\b")
_SERIAL_TAG = re.compile(r"(?:\bs/?n\b|\bserial(?:\s*(?:no|number|#))?\b|序列号|序号|sn号)\s*[:：#=]?\s*[a-z0-9\-]*")
_SLOT = re.compile(r"(?:\bslot|\bbay|\bindex|\bidx|槽位|卡槽|插槽|位置|编号)\s*[:#=]?\s*\d+|第\s*\d+\s*[张块个号位槽片]?|\d+\s*号|#\s*\d+")
_BOILER = re.compile(
    r"customers? (?:report(?:s|ed)?|says?|said|complain(?:s|ed)?|states?)|cust(?:omer)? reports?|"
    r"reported by (?:the )?(?:customer|user)|per (?:the )?customer|users? report(?:s|ed)?|"
    r"(?:issue|problem|fault|symptom|action|part|description|desc|remark|notes?|comment)\s*:|"
    r"(?:seen|found) in (?:dmesg|syslog|the logs?|logs)|\bp(?:lea)?se? check\b|\bpls check\b|\burgent\b|\basap\b|"
    r"\bdo the needful\b|\bkindly\b|\bfyi\b|\bbitte\b|"
    r"(?:according to|per|at|as per) (?:the )?(?:customer|user)(?:'?s)? requests?|as (?:the (?:customer|user) )?requested|"
    r"\bdcgm diag(?:nostics?)?\b"
)
_BOILER_ZH = re.compile(
    "客户反馈|客户反映|客户报修|客户报|客户称|客户说|用户反馈|用户报修|用户报|用户称|经检查|经排查|经测试|"
    # "按客户要求整机断电": done at the customer's request (a bare 要求 before an action is a request)
    "按照客户要求|按客户要求|应客户要求|根据客户要求|依客户要求|按要求|"
    "故障描述|问题描述|故障现象|现场工程师|现场|工程师|麻烦|帮忙|谢谢|已经|巡检发现|巡检|(?<![无無不])需要处理|(?<![无無不])需处理|请处理|"
    "请尽快|紧急"
)
# GPU model names as nvidia-smi and asset registries write them: H100 80GB HBM3,
# A100-SXM4-80GB, Tesla V100-SXM2-32GB, RTX 6000 Ada, L40S, H200 141GB HBM3e, GB200 NVL72.
_MODEL = re.compile(
    r"(?<![a-z0-9])(?:rtx\s*(?:pro\s*)?\d{4}|(?:gb|gh|mi|[abhlvtkpm])\d{2,4}[a-z]?)"
    r"(?:[\s\-]*(?:sxm\d?|pcie|nvl\d*|ada|blackwell|\d+\s*gb|hbm\d?e?|mig|max\s*q))*(?![a-z0-9])"
)
# Host names (sha-gpu126, node-12, gpu-a01): hyphenated, one part mixing letters and digits
# or a number of two or more digits. re-seat, nvidia-smi and connectx-7 stay.
_HOST = re.compile(r"(?<![a-z0-9])[a-z0-9]+(?:[\-_.][a-z0-9]+)+(?![a-z0-9])")
_HOSTISH = re.compile(r"[a-z]+\d|\d+[a-z]|^\d{2,}$")
_SOFTWARE_PKG = frozenset("nvidia driver drivers cuda firmware fw kernel ofed nccl linux dkms fabricmanager vbios bios".split())
# OEM part-number prefixes name the part: PWS-2K04A-1R is a Supermicro power supply, RSC-R2UG-2E4E
# a riser, CBL-MCIO-1240M5 a cable, 935-24287-... an NVIDIA HGX baseboard assembly
_PN_PREFIX = {"pws": "psu", "rsc": "riser", "fan": "fan", "cbl": "cable", "mcp": "shroud", "snk": "heatsink",
              "mem": "dimm", "hds": "disk", "aoc": "nic", "935": "hgx baseboard", "692": "gpu", "699": "gpu", "900": "gpu"}
_PN = re.compile(r"(?<![a-z0-9])(" + "|".join(_PN_PREFIX) + r")-(?=[a-z0-9\-]*\d)[a-z0-9]+(?:-[a-z0-9]+)*")
_NUMBER_SIGN = re.compile(r"(?<![a-z])no\.\s*(?=\d)")
_VERSION_BUMP = re.compile(r"(?<![a-z0-9])v?\d+(?:\.\d+)+\s*(?:->|=>|→|-->)\s*v?\d+(?:\.\d+)+")
_TEMP = re.compile(r"(?<![a-z0-9.])(?:\d{2,3}(?:\.\d)?|0)\s*(?:°\s*c|℃|度)(?![a-z0-9])|(?<![a-z0-9.])(?:\d{2,3}|0)\s?c(?![a-z0-9])")
# a temperature the sensor could not read: "temp N/A", "温度 N/A", "Temperature: ERR!"
_NO_READING = re.compile(r"(temp(?:erature)?s?|温度|gpu temp)\s*[:=：]?\s*(?:reads?|shows?|显示|读数|为)?\s*(?:n/a|n\.a\.|err!|unknown)(?![a-z0-9])")
_SIZE = re.compile(r"(?<![a-z0-9])\d+\s*(?:gb|gib|tb|mb|mib|w|mhz|ghz|c|°c|℃|rpm|v|a)(?![a-z0-9])")
# Abbreviations technicians write, expanded so aliases need to list only the full word.
ABBREVIATIONS = {
    "pwr": "power", "temp": "temperature", "temps": "temperature", "mem": "memory", "err": "error",
    "errs": "errors", "rbt": "reboot", "repl": "replaced", "rplcd": "replaced", "replcd": "replaced",
    "perf": "performance", "fail": "failure", "mod": "module", "cust": "customer", "w": "with",
    "assy": "assembly", "hw": "hardware", "sw": "software", "fw": "firmware",
    "mobo": "motherboard", "mb": "motherboard", "psus": "psu", "gpus": "gpu", "pkg": "package",
}
_NOT_WORD = re.compile(f"[^a-z0-9{_CJK}]+")
_ASCII_CJK = re.compile(f"(?<=[a-z0-9])(?=[{_CJK}])|(?<=[{_CJK}])(?=[a-z0-9])")
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")
_KEEP_DIGIT_TOKEN = re.compile(r"xid\d{1,3}|x\d{1,2}")
_GPU_SHORT = re.compile(r"g\d{1,2}")  # Slack shorthand: g3 is GPU 3
# "RMA 88123", "RMA#5566": a case number names the case, not a replacement
_RMA_CASE = re.compile(r"(?<![a-z])rma\s*(?:case|no|number)?\s*[#:]?\s*\d{3,}")
_WORD_SLOT = re.compile(r"([a-z]{2,})\d{1,2}")
_STOP = frozenset(
    "the a an is are was were been be has have had kindly thanks thx also again "
    "then tesla hopper ampere blackwell volta geforce quadro rtx nvidia's".split()
)
# (请 stays: "请更换" is a request, not a replacement)
_CJK_STOP = re.compile("[了的已咗嘅]")  # 咗/嘅: Cantonese 了/的
_DIGITS = re.compile(r"\d+")
_ANY_DIGIT = re.compile(r"\d")
_DASHES = re.compile(r"\s*[\-\u2010-\u2015/]+\s*")


def is_cjk(text: str) -> bool:
    """True when ``text`` contains a Chinese character."""
    return bool(_CJK_RE.search(text))


def _drop_host(m: re.Match) -> str:
    parts = re.split(r"[\-_.]", m.group())
    if not any(_HOSTISH.search(p) for p in parts):
        return m.group()
    if _SOFTWARE_PKG.intersection(parts):
        # a package, not a host: "nvidia-driver-550" is the NVIDIA driver
        return " " + " ".join(p for p in parts if not _ANY_DIGIT.search(p)) + " "
    return " "


BOGUS_READING = 125  # °C: at or above, and at 0, no GPU sensor reads this; 255 and 127 are its error values
NORMAL_READING = (35, 75)  # °C: a GPU reading in here is no heat complaint ("HW slowdown, temp 52C");
# below it, more often a difference ("20 C above its neighbours") than a reading


def _temperature(m: re.Match) -> str:
    value = float(re.match(r"\d+(?:\.\d)?", m.group()).group())
    if value == 0 or value >= BOGUS_READING:
        return " bogus reading "  # a sensor's fault, not heat (CODING-GUIDE 10)
    return " normal " if NORMAL_READING[0] <= value < NORMAL_READING[1] else " temperature "


def _part_number(m: re.Match) -> str:
    return f" {_PN_PREFIX[m.group(1)]} "


def _once(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).casefold().translate(_TRAD_MAP)
    # The guards only skip patterns that cannot match: a text is canonicalized at least twice.
    if "xi" in t:
        t = _XID.sub(lambda m: f" {'sxid' if m.group(1) else 'xid' + m.group(2)} ", t)
        t = _SXID_BARE.sub(" sxid ", t)
    digits = _ANY_DIGIT.search(t) is not None
    if digits:
        t = _NUMBER_SIGN.sub(" ", t)  # "GPU No.2": a number, not a negation
        t = _VERSION_BUMP.sub(" updated to ", t)  # "bmc fw 13.2 -> 13.5" is an update
        t = _RMA_CASE.sub(" rma case ", t)
        t = _PN.sub(_part_number, t)
        t = _PCI.sub(" ", t)
        t = _HOST.sub(_drop_host, t)
        t = _MODEL.sub(" ", t)
        t = _TEMP.sub(_temperature, t)  # "hitting 102C" is about temperature; "temp 52C" is a normal one
        t = _SIZE.sub(" ", t)
        t = _SLOT.sub(" ", t)
    if "/a" in t or "err!" in t or "unknown" in t:
        t = _NO_READING.sub(r" \1 bogus reading ", t)
    t = _SERIAL_TAG.sub(" ", t)
    cjk = _CJK_RE.search(t) is not None
    t = _BOILER.sub(" ", t)
    if cjk:
        t = _BOILER_ZH.sub(" ", t)
        t = _CJK_STOP.sub("", t)
    t = _NOT_WORD.sub(" ", t)
    if cjk:
        t = _ASCII_CJK.sub(" ", t)
    words = []
    for w in t.split():
        if digits and _ANY_DIGIT.search(w) and not (cjk and _CJK_RE.search(w)):
            if _KEEP_DIGIT_TOKEN.fullmatch(w):
                words.append(w)
            elif _GPU_SHORT.fullmatch(w):
                words.append("gpu")
            elif m := _WORD_SLOT.fullmatch(w):
                words.append(m.group(1))  # gpu3, psu2, sxm5: the word without its number
            else:  # card1gsp -> card gsp; serials and bare numbers leave nothing
                words.extend(p for p in _DIGITS.split(w) if len(p) > 1 and p not in _STOP)
            continue
        w = ABBREVIATIONS.get(w, w)
        if w not in _STOP:
            words.append(w)
    t = " ".join(words)
    return _CJK_SPACE.sub("", t) if cjk else t


def canonical(text: str | None) -> str:
    """The canonical form of a ticket text (``""`` for None or text with no content).

    Parameters
    ----------
    text : str or None
        Free text from a ticket field or a taxonomy alias.

    Returns
    -------
    str
        Lower case, half-width, simplified Chinese, words separated by single spaces, no
        space between Chinese characters; serials, host names, slot numbers, model names
        and boilerplate removed (a text that is only a model name is ``gpu``); ``Xid 79`` as ``xid79``.

    Examples
    --------
    >>> canonical("Customer reports: ＧＰＵ#3 (SN 1652345678901) fell off the bus, XID: 79")
    'gpu fell off bus xid79'
    >>> canonical("客户反馈 H100 顯卡 掉卡了")
    '显卡掉卡'
    """
    if text is None:
        return ""
    t = str(text)
    if _DASHES.fullmatch(t):
        return "none"  # a cell holding only "-" or "/" means none
    raw = t
    for _ in range(8):  # each pass only removes; a fixpoint makes it idempotent
        nxt = _once(t)
        if nxt == t:
            break
        t = nxt
    if not t and _MODEL.search(unicodedata.normalize("NFKC", raw).casefold()):
        return "gpu"  # nothing but a model name ("H100 SXM5 80GB"): the GPU
    return t
