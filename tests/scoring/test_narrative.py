"""results/REPORT.md is generated: the committed report is exactly what the committed tables
give, and a number changed in a table changes the report."""
from __future__ import annotations

import shutil

import pytest

from analysis.narrative import write_report
from tests.conftest import ROOT

TABLES, PAPER = ROOT / "results" / "tables", ROOT / "datasets" / "paper"


def test_the_committed_report_is_generated_from_the_committed_tables(tmp_path):
    out = write_report(TABLES, PAPER, tmp_path / "REPORT.md")
    assert out.read_text() == (ROOT / "results" / "REPORT.md").read_text(), "rerun cmc-harness report"


def test_a_table_number_flows_into_the_report(tmp_path):
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    contrasts = tables / "table1_contrasts.csv"
    contrasts.write_text(contrasts.read_text().replace("cmc,prior_read_refresh,mh,400,196,195,9,46.75",
                                                       "cmc,prior_read_refresh,mh,400,197,194,9,47.00"))
    text = write_report(tables, PAPER, tmp_path / "REPORT.md").read_text()
    assert "+47.00 points" in text and "197 wins / 194 ties" in text and "+46.75 points" not in text
    assert "(paper: +56.75)" in text  # the paper's number, from datasets/paper/table1.json


def test_an_experiment_without_per_view_paper_cells_reports_the_papers_contrasts(tmp_path):
    """Table 5's paper file has contrasts only (B.1 gives no per-view cells): the report says
    so instead of a column of dashes, and each contrast carries the paper's number."""
    text = write_report(TABLES, PAPER, tmp_path / "REPORT.md").read_text()
    section = text.split("\n## table5\n", 1)[1].split("\n## ", 1)[0]
    assert "no per-view cells; its contrasts are given beside ours below" in section
    assert "| SH paper |" not in section
    assert "stale_closure vs disjoint_random, all:" in section and "(paper: +18.38)" in section


def test_the_non_overflow_table_sits_beside_the_papers_table6(tmp_path):
    """Table 6 comes from table5_non_overflow.csv and datasets/paper/table5.json: our cell,
    then the paper's, and the truncated prompts left in the population."""
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    (tables / "table5_non_overflow.csv").write_text(
        "population,lengths,hop,cmc,latest_state_full,stale_closure,raw_history,interaction,questions,"
        "truncated_prompts,truncated_raw_history\n"
        "paper,6k+32k+64k,sh,95.0,90.0,30.0,20.0,-5.0,300,110,100\npaper,6k+32k+64k,mh,70.0,20.0,15.0,4.0,39.0,300,120,100\n"
        "untruncated,6k+32k,sh,96.0,91.0,31.0,21.0,-5.0,200,0,0\nuntruncated,6k+32k,mh,71.0,21.0,16.0,5.0,39.0,200,0,0\n")
    (tables / "table5_non_overflow.md").write_text("## table5: non-overflow\n\n| our markdown |\n")
    text = write_report(tables, PAPER, tmp_path / "REPORT.md").read_text()
    section = text.split("\n## table5\n", 1)[1].split("\n## ", 1)[0]
    assert "### Non-overflow population (paper Table 6)" in section and "| our markdown |" in section
    assert "| mh | 70.00 / 85.67 | 20.00 / 27.00 | 15.00 / 15.67 | 4.00 / 3.33 | +39.00 / +46.33 | 120 of 1200 |" in section
    assert "| sh | 95.00 / 97.67 |" in section and "-5.00 / +5.00" in section
    assert "| mh | 71.00 / 85.67 |" not in section  # the untruncated population is not the paper's


def test_a_diagnostic_pattern_includes_every_matching_table(tmp_path):
    """Table 7's selection tables are one per frontend: each one found is in the report."""
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    for committed in tables.glob("table7_short*_selection.md"):
        committed.unlink()
    for frontend in ("alpha", "beta"):
        (tables / f"table7_short_{frontend}_selection.md").write_text(f"## t\n\n| {frontend} rows |\n")
    (tables / "table7_short_selection.md").write_text("## t\n\n| grammar rows |\n")
    text = write_report(tables, PAPER, tmp_path / "REPORT.md").read_text()
    assert "From `results/tables/table7_short_alpha_selection.md`.\n\n| alpha rows |" in text
    assert "From `results/tables/table7_short_beta_selection.md`.\n\n| beta rows |" in text
    # each titled by its frontend; the table without a suffix is the grammar frontend's
    titles = [line for line in text.splitlines() if line.startswith("## Table 7 on the 6K and 32K histories")]
    assert [t.rsplit(" ", 1)[1] for t in titles] == ["alpha", "beta", "grammar"]


def _frontend_table(tables, stem: str, frontend: str, rows: str, header: str) -> None:
    """A generated table of one frontend, as make_tables writes it (title, provenance, Markdown)."""
    (tables / f"{stem}.csv").write_text(header + rows)
    (tables / f"{stem}.md").write_text(f"## t\n\nReader: r (e). Frontend: {frontend}. Population: all (n=800).\n\n| rows of {stem} |\n")


def test_an_llm_frontends_table_is_its_own_section_beside_the_papers_llm_cells(tmp_path):
    """Table 7 on a direct LLM extraction is set beside the paper's direct-LLM row (97.25 / 78.25),
    the grammar's beside the grammar adapter's; a part of it (_selection) is no section of its own."""
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    header = "view,n,SH,SH 95% CI,MH,MH 95% CI,Tokens,Trunc.\n"
    _frontend_table(tables, "table7_llm_lines_x", "llm_lines_x", "cmc,800,90.0,\"[1, 2]\",60.0,\"[1, 2]\",300,0\n", header)
    _frontend_table(tables, "table7_llm_lines_x_selection", "llm_lines_x",
                    "reader,frontend,arm,hop,n,correct,gold_in_evidence,correct_with_gold,reader_rate_with_gold,"
                    "correct_without_gold,wrong_with_gold_answer_shown,gold_on_grammar,lost_to_extraction,"
                    "gained_by_extraction\nr,llm_lines_x,cmc,mh,400,240,300,238,79.33,2,40,340,45,5\n",
                    "")
    text = write_report(tables, PAPER, tmp_path / "REPORT.md").read_text()
    section = text.split("\n## table7_llm_lines_x\n", 1)[1].split("\n## ", 1)[0]
    assert "| cmc | 90.00 | 60.00 | 97.25 | 78.25 |" in section
    assert "the paper's cells come from" not in section  # its own kind's cells
    assert ("cmc, mh: on the grammar's extraction a gold string was in 340 packets; this extraction loses it "
            "from 45 and adds it to 5, so a gold string is in 300 of 400 evidence packets") in section
    assert "\n## table7_llm_lines_x_selection\n" not in text
    grammar = text.split("\n## table7\n", 1)[1].split("\n## ", 1)[0]
    assert "| cmc | 93.75 | 63.50 | 97.50 | 79.75 |" in grammar
    table1 = text.split("\n## table1\n", 1)[1].split("\n## ", 1)[0]
    assert "the paper's cells come from its direct LLM extraction, this table's from the grammar frontend" in table1


EXTRACTION_HEADER = ("arm,hop,stratum,n,records_added,records_dropped,gold_here,gold_on_grammar,correct,"
                     "correct_on_grammar\n")


@pytest.mark.parametrize("same_reader", [True, False])
def test_what_the_extraction_changes_is_told_per_stratum_only_against_the_same_reader(tmp_path, same_reader):
    """The strata table goes in whole; a sentence per stratum sets its answers beside the
    grammar's only where the grammar's bundle had the same reader (else the cell is blank)."""
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    header = "view,n,SH,SH 95% CI,MH,MH 95% CI,Tokens,Trunc.\n"
    _frontend_table(tables, "table7_llm_lines_x", "llm_lines_x", "cmc,800,90.0,\"[1, 2]\",60.0,\"[1, 2]\",300,0\n", header)
    grammar = ("221", "33") if same_reader else ("", "")
    _frontend_table(tables, "table7_llm_lines_x_extraction", "llm_lines_x",
                    f"cmc,mh,same walk,328,18.1,0.0,290,289,154,{grammar[0]}\n"
                    f"cmc,mh,walk differs,72,84.6,0.4,50,51,8,{grammar[1]}\n", EXTRACTION_HEADER)
    text = write_report(tables, PAPER, tmp_path / "REPORT.md").read_text()
    section = text.split("\n## table7_llm_lines_x\n", 1)[1].split("\n## ", 1)[0]
    assert "### What the extraction changes in the packets" in section
    assert "| rows of table7_llm_lines_x_extraction |" in section
    lines = ("- cmc, mh, same walk (328 questions, 18.1 records added on average): 154 right here, 221 on the "
             "grammar's extraction (-67).",
             "- cmc, mh, walk differs (72 questions, 84.6 records added on average): 8 right here, 33 on the "
             "grammar's extraction (-25).")
    assert all((line in section) == same_reader for line in lines)
    assert "\n## table7_llm_lines_x_extraction\n" not in text


def test_the_order_control_sits_beside_the_papers_table12_on_all_800_only(tmp_path):
    """Table 12's strata: ours, then the paper's count and accuracy where its text gives them;
    a QUICK table's strata are no population of the paper's, so they stand alone."""
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    (tables / "table1_key_change.csv").write_text(
        "arm,hop,keys_change,n,correct,accuracy,wilson_low,wilson_high\n"
        "cmc,mh,True,360,250,69.44,1.0,2.0\nprior_read_refresh,sh,False,110,100,90.91,1.0,2.0\n")
    text = write_report(tables, PAPER, tmp_path / "REPORT.md").read_text()
    section = text.split("\n## table1\n", 1)[1].split("\n## ", 1)[0]
    assert "### Order control by key-change stratum (paper Table 12)" in section
    assert "| cmc | mh | True | 360 / 369 | 69.44 / 76.42 |" in section
    assert "| prior_read_refresh | sh | False | 110 / 110 | 90.91 / -- |" in section
    quick = text.split("\n## table1_quick\n", 1)[1].split("\n## ", 1)[0]
    assert "### Order control by key-change stratum" in quick and "/ 369" not in quick


def test_a_frontend_name_with_dots_is_read_whole(tmp_path):
    tables = tmp_path / "tables"
    shutil.copytree(TABLES, tables)
    header = "view,n,SH,SH 95% CI,MH,MH 95% CI,Tokens,Trunc.\n"
    _frontend_table(tables, "table7_llm_lines_qwen2.5_1.5b", "llm_lines_qwen2.5_1.5b",
                    "cmc,800,90.0,\"[1, 2]\",60.0,\"[1, 2]\",300,0\n", header)
    text = write_report(tables, PAPER, tmp_path / "REPORT.md").read_text()
    assert "\n## table7_llm_lines_qwen2.5_1.5b\n" in text
