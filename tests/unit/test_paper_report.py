"""Paper reports: the renderer (no benchmark known by name) and the RuBia / GenderLex paper tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from biaslab.benchmarks.base import PaperTable, VariantEvaluation
from biaslab.benchmarks.cloze_gender import BENCHMARK as CLOZE
from biaslab.benchmarks.rubia import BENCHMARK as RUBIA
from biaslab.benchmarks.rubia.metrics import PAPER_TABLE_1
from biaslab.metrics.values import MetricValue
from biaslab.reporting.paper_tables import (
    collect_paper_tables,
    format_cell,
    render_markdown,
    table_csv,
    variant_evaluations,
    write_paper_reports,
)


class OnePaperBenchmark:
    """A benchmark that reports one table: the value of its metric per variant, and a published row."""

    def paper_tables(self, variants):
        frame = pd.DataFrame({"share": {v: e.metrics["toy/share"].value for v, e in variants.items()}})
        frame.index.name = "model"
        extra = {v: float(e.tables["toy_table"]["x"].sum()) for v, e in variants.items() if "toy_table" in e.tables}
        frame["x_sum"] = pd.Series(extra)
        published = pd.DataFrame({"share": {"Paper model": 0.61}}).rename_axis("model")
        return [PaperTable(paper="toy", key="table_1", title="Table 1: toy", frame=frame, published=published,
                           published_source="Table 1 of the toy paper", notes="A note.", reproduce="dvc exp run -S x=1")]


class NoPaperBenchmark:
    pass


def metric(value):
    return MetricValue(value, "target", 0.5)


@pytest.fixture
def tables_dir(tmp_path):
    for variant, xs in (("base", [1, 2]), ("lora", [3])):
        (tmp_path / variant).mkdir()
        pd.DataFrame({"x": xs}).to_csv(tmp_path / variant / "toy__toy_table.csv")
        pd.DataFrame({"y": [9]}).to_csv(tmp_path / variant / "other__toy_table.csv")  # another benchmark's table
    return tmp_path


def test_variant_evaluations_read_only_this_benchmarks_tables(tables_dir):
    metrics = {"base": {"toy/share": metric(0.5)}, "lora": {"toy/share": metric(0.7)}}
    evaluations = variant_evaluations("toy", metrics, tables_dir)
    assert set(evaluations) == {"base", "lora"}
    assert list(evaluations["base"].tables) == ["toy_table"]
    assert list(evaluations["base"].tables["toy_table"]["x"]) == [1, 2]
    assert evaluations["lora"].metrics["toy/share"].value == 0.7


def test_collect_write_and_render(tables_dir, tmp_path):
    metrics = {"base": {"toy/share": metric(0.5)}, "lora": {"toy/share": metric(0.7)}}
    papers = collect_paper_tables({"toy": OnePaperBenchmark(), "plain": NoPaperBenchmark()}, metrics, tables_dir)
    assert list(papers) == ["toy"]
    written = write_paper_reports(papers, tmp_path / "paper")
    assert written == [tmp_path / "paper" / "toy.md"]
    md = (tmp_path / "paper" / "toy.md").read_text(encoding="utf-8")
    assert "dvc exp run -S x=1" in md and "## Table 1: toy" in md and "Table 1 of the toy paper" in md
    assert "| base | 0.5 | 3 |" in md and "| lora | 0.7 | 3 |" in md and "| Paper model | 0.61 |" in md
    csv = pd.read_csv(tmp_path / "paper" / "toy" / "table_1.csv")
    assert list(csv["source"]) == ["evaluated", "evaluated", "published"]
    assert list(csv["model"]) == ["base", "lora", "Paper model"]
    assert csv.loc[2, "share"] == 0.61 and math.isnan(csv.loc[2, "x_sum"])
    # a second write replaces the directory as a whole
    write_paper_reports({}, tmp_path / "paper")
    assert not any((tmp_path / "paper").iterdir())


def test_errors_name_the_benchmark(tables_dir):
    class Broken:
        def paper_tables(self, variants):
            raise KeyError("toy_table")

    class WrongType:
        def paper_tables(self, variants):
            return [pd.DataFrame()]

    with pytest.raises(RuntimeError, match="benchmark 'broken'"):
        collect_paper_tables({"broken": Broken()}, {"base": {}}, tables_dir)
    with pytest.raises(TypeError, match="benchmark 'wrong'"):
        collect_paper_tables({"wrong": WrongType()}, {"base": {}}, tables_dir)
    with pytest.raises(ValueError, match="share a key"):
        collect_paper_tables({"a": OnePaperBenchmark(), "b": OnePaperBenchmark()},
                             {"base": {"toy/share": metric(0.5)}}, tables_dir)


def test_cells_and_empty_tables():
    assert format_cell(0.019562) == "0.01956" and format_cell(61.3) == "61.3" and format_cell(math.nan) == "–"
    assert format_cell(None) == "–" and format_cell("x") == "x"
    empty = PaperTable(paper="p", key="k", title="T", frame=pd.DataFrame())
    assert "_no data_" in render_markdown("p", [empty])
    assert table_csv(empty) == "source\n"


# ------------------------------------------------------------------------------------------- RuBia Table 1
def rubia_scores(shares: dict[tuple[str, str], float]) -> pd.DataFrame:
    return pd.DataFrame([{"domain": d, "subdomain": s, "pro_share": v} for (d, s), v in shares.items()])


def test_rubia_table_1_rows_and_merged_subdomains():
    shares = {("gender", "all"): 0.6, ("gender", "freeform_full"): 0.55, ("class", "template_wealth"): 0.25,
              ("nationality", "freeform_merged"): 0.5, ("nationality", "freeform_enemy"): 0.9}
    variants = {"base": VariantEvaluation(metrics={}, tables={"rubia_scores": rubia_scores(shares)}),
                "lora": VariantEvaluation(metrics={}, tables={})}  # rubia not run for this variant
    (table,) = RUBIA.paper_tables(variants)
    assert table.paper == "rubia" and table.key == "table_1" and table.reproduce.startswith("dvc exp run")
    frame = table.frame
    assert list(frame.columns) == ["base"]
    sections = [section for section, _, _ in PAPER_TABLE_1]
    assert list(dict.fromkeys(frame.index.get_level_values("section"))) == sections
    assert frame.loc[("Gender bias + PPLL scoring", "Overall"), "base"] == pytest.approx(60.0)
    assert frame.loc[("Gender bias + PPLL scoring", "Freeform"), "base"] == pytest.approx(55.0)
    assert frame.loc[("Socio-economic bias + MPLL scoring", "Stereo.wealth"), "base"] == pytest.approx(25.0)
    assert frame.loc[("Nationality bias + MPLL scoring", "Freeform"), "base"] == pytest.approx(50.0)  # merged row
    assert math.isnan(frame.loc[("LGBTQ+ bias + MPLL scoring", "Identity"), "base"])
    assert table.published.loc[("Gender bias + PPLL scoring", "Overall"), "RemBERT"] == 61.3
    assert table.published.shape == (len(frame), 6)


# ------------------------------------------------------------------------------------------- GenderLex Table 2
def genderlex_table():
    rows = []
    for ctx, him, kl, weat in (("noun", 0.4, 0.01, 0.1), ("verb", 0.5, 0.02, 0.2), ("occ", 0.6, 0.03, 0.3)):
        rows.append({"subject": "occupation", "context_type": ctx, "him_ratio": him, "kl": kl, "weat": weat,
                     "human_m": 0.55, "lm_him_ratio": 0.52})
    rows.append({"subject": "occupation", "context_type": "combined", "him_ratio": 0.45, "human_m": 0.55,
                 "lm_him_ratio": 0.52})
    rows.append({"subject": "all", "context_type": "all", "him_ratio": 0.5, "human_m": 0.55, "lm_him_ratio": 0.52})
    return pd.DataFrame(rows)


def test_genderlex_table_2_layout():
    variants = {"base": VariantEvaluation(metrics={}, tables={"cloze_gender_genderlex": genderlex_table()})}
    tables = CLOZE.paper_tables(variants)
    assert [t.key for t in tables] == ["table_2"]  # no WinoBias/Winogender or CrowS tables evaluated
    frame = tables[0].frame
    assert list(frame.index) == ["Human", "base (P only)", "base CGS"]
    cgs = frame.loc["base CGS"]
    assert cgs["noun M"] == 0.4 and cgs["noun W"] == pytest.approx(0.6) and cgs["verb KL"] == 0.02
    assert cgs["occupation WEAT"] == 0.3 and cgs["combined to-m"] == 0.45 and cgs["combined to-w"] == pytest.approx(0.55)
    assert frame.loc["base (P only)", "combined to-m"] == 0.52 and math.isnan(frame.loc["base (P only)", "noun M"])
    assert frame.loc["Human", "combined to-m"] == 0.55
    assert tables[0].published.loc["GPT-2 XL + fasttext", "noun KL"] == 0.0195
    assert list(tables[0].published.columns) == list(frame.columns)


def test_genderlex_tables_4_and_5_when_evaluated():
    wino = pd.DataFrame([
        {"subject": data, "context_type": ctx, "him_ratio": him, "kl": 0.01, "weat": 0.2, "human_m": human,
         "lm_him_ratio": 0.7, "lm_kl": 0.02}
        for data, human in (("winobias", 0.5), ("winogender", 0.58)) for ctx, him in (("verb", 0.8), ("occ", 0.55))
    ])
    crows = pd.DataFrame([{"score": "lm", "him_ratio": 0.42, "kl": 0.0068, "human_m": 0.53},
                          {"score": "cgs", "him_ratio": 0.45, "kl": 0.0022, "weat": 0.087, "human_m": 0.53}])
    variants = {"base": VariantEvaluation(metrics={}, tables={"cloze_gender_genderlex_wino": wino,
                                                              "cloze_gender_crows": crows})}
    tables = {t.key: t for t in CLOZE.paper_tables(variants)}
    assert set(tables) == {"table_2", "table_4", "table_5"}
    t4 = tables["table_4"].frame
    assert list(t4.index) == ["Human (all)", "base (P only)", "base CGS"]
    assert t4.loc["base CGS", "WinoBias verb M"] == 0.8 and t4.loc["base CGS", "Winogender occupation W"] == pytest.approx(0.45)
    assert t4.loc["Human (all)", "Winogender verb M"] == 0.58 and t4.loc["base (P only)", "WinoBias occupation KL"] == 0.02
    assert list(tables["table_4"].published.columns) == list(t4.columns)
    t5 = tables["table_5"].frame
    assert t5.loc["base (P only)", "M"] == 0.42 and t5.loc["base CGS", "WEAT"] == 0.087
    assert tables["table_5"].published.loc["GPT-2 XL (P only)", "KL"] == 0.0068
