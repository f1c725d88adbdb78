import polars as pl
from hypothesis import given, strategies as st

from pipeline.output import neutralize, write_table


def test_formula_cells_are_neutralized_in_csv_and_xlsx(tmp_path):
    df = pl.DataFrame({"text": ["=cmd|' /C calc'!A0", "+1", "-2+3", "@SUM(A1)", "fine", None], "n": [-1, 2, 3, 4, 5, 6]})
    write_table(df, tmp_path / "t.csv")
    back = pl.read_csv(tmp_path / "t.csv")
    assert back["text"].to_list()[:5] == ["'=cmd|' /C calc'!A0", "'+1", "'-2+3", "'@SUM(A1)", "fine"]
    assert back["n"].to_list()[0] == -1  # numbers untouched
    write_table(df, tmp_path / "t.xlsx")
    from openpyxl import load_workbook

    ws = load_workbook(tmp_path / "t.xlsx").active
    assert ws["A2"].value == "'=cmd|' /C calc'!A0" and ws["A2"].data_type == "s"
    write_table(df, tmp_path / "t.parquet")
    assert pl.read_parquet(tmp_path / "t.parquet")["text"][0] == "=cmd|' /C calc'!A0"


@given(st.text())
def test_neutralized_text_never_starts_a_formula(s):
    out = neutralize(s)
    assert not out.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert out.endswith(s)
