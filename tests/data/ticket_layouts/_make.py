"""Writes the corpus files that are not plain UTF-8 text: the Chinese workbook, the GBK CSV
and the Big5 HTML table. Run from this folder (``python _make.py``) after editing; the files
it writes are committed, so the tests do not run it."""

from datetime import datetime
from pathlib import Path

import openpyxl

HERE = Path(__file__).parent


def cn_xlsx() -> None:
    book = openpyxl.Workbook()
    ws = book.active
    ws.title = "工单明细"
    ws.append(["华东一区 GPU 服务器故障工单汇总（2025年4月）"])
    ws.merge_cells("A1:N1")
    ws.append(["导出时间：2025-05-01 08:00　导出人：运维平台"])
    ws.append([])
    ws.append(["序号", "工单编号", "报修时间", "机房", "机柜", "服务器名称", "故障卡位", "GPU序列号", "故障部件",
               "故障现象", "处理措施", "处理状态", "完成时间", "备注"])
    ws.append([1, "WO-HD1-20250403-0012", datetime(2025, 4, 3, 10, 21), "华东一区", "A07", "hd1-gpu-0112", "第3卡",
               "1652221044103", "GPU", "nvidia-smi 看不到第3张卡，dmesg 报 Xid 79", "重新插拔无效，更换GPU（返厂）", "已完成",
               datetime(2025, 4, 4, 15, 0), None])
    ws.append([2, "WO-HD1-20250409-0031", datetime(2025, 4, 9, 16, 45), "华东一区", "A07", "hd1-gpu-0113", "GPU8",
               1652221044216, "内存", "内存 ECC 报错，EDAC 告警", "更换内存条（B2槽）", "已完成",
               datetime(2025, 4, 10, 9, 30), "GPU8 业务受影响"])
    ws.append([3, "WO-HD1-20250420-0007", datetime(2025, 4, 20, 2, 5), "华东一区", "A08", "hd1-gpu-0112", 5,
               "1652221044105", "显卡", "GPU 温度过高，降频", "清灰，更换导热硅脂", "处理中", None, "待观察"])
    ws.append([])
    ws.append(["合计：3 条"])
    stats = book.create_sheet("统计")
    stats.append(["故障部件", "数量"])
    for part, n in (("GPU", 1), ("内存", 1), ("显卡", 1)):
        stats.append([part, n])
    hidden = book.create_sheet("字典")
    hidden.append(["工单编号", "故障现象", "处理措施"])
    hidden.append(["X-1", "模板行", "请勿删除"])
    hidden.sheet_state = "hidden"
    book.save(HERE / "cn_xlsx_title_totals" / "华东一区工单汇总-2025-04.xlsx")


GBK_CSV = """服务单号,报修日期,客户名称,机型,整机SN,主机IP,故障GPU位置,故障GPU SN,故障现象描述,处理过程,更换部件名称,旧件SN,新件SN,服务状态,结单日期
SR2504030017,2025/4/3 14:22,某AI云,NF5688M7,219358172,10.20.1.17,GPU3,1652221060033,GPU 掉卡，BMC 日志报 PCIe 链路异常,现场重新插拔，复测仍掉卡；更换 GPU 模组,GPU模组,1652221060033,1652221069102,已结单,2025/4/5 10:00
SR2504070008,2025/4/7 9:05,某AI云,NF5688M7,219358172,10.20.1.18,5号卡,1652221060115,显存 UCE 报错，Xid 48,更换 GPU,GPU模组,1652221060115,1652221069150,已结单,2025/4/8 17:40
SR2504150021,2025/4/15 20:31,某AI云,NF5688M7,219358173,10.20.1.17,,,电源告警，PSU2 无输出,更换电源模块,电源模块,PS2209A1123,PS2209B7781,处理中,
"""

BIG5_HTML = """<html><head><meta http-equiv="Content-Type" content="text/html; charset=big5"></head><body>
<table border="1">
<tr><td colspan="8">台北機房 GPU 維修單匯出 2025-04</td></tr>
<tr><th>工單編號</th><th>建立時間</th><th>主機名稱</th><th>卡槽</th><th>序號</th><th>故障現象</th><th>處理結果</th><th>狀態</th></tr>
<tr><td>TW-250408-003</td><td>2025/04/08 13:05</td><td>tpe-gpu-05</td><td>7</td><td>1652221080071</td><td>GPU 溫度過高，風扇轉速異常</td><td>更換風扇模組</td><td>已結案</td></tr>
<tr><td>TW-250412-011</td><td>2025/04/12 08:40</td><td>tpe-gpu-06</td><td>GPU2</td><td>SN:1652221080102</td><td>顯卡掉卡<br>nvidia-smi 看不到</td><td>更換顯示卡</td><td>已結案</td></tr>
<tr><td>TW-250421-002</td><td>2025/04/21 22:15</td><td>tpe-gpu-05</td><td>0</td><td></td><td>訓練任務卡住，GPU 無回應</td><td>重開機後恢復，持續觀察</td><td>處理中</td></tr>
</table></body></html>
"""


if __name__ == "__main__":
    cn_xlsx()
    (HERE / "gbk_vendor_csv" / "服务单导出.csv").write_bytes(GBK_CSV.encode("gbk"))
    (HERE / "big5_html_xls" / "維修單匯出.xls").write_bytes(BIG5_HTML.encode("big5"))
