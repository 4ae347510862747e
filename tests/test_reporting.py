# Copyright 2026 The linformer-hf authors.
# SPDX-License-Identifier: Apache-2.0
# Licensed under the Apache License, Version 2.0: http://www.apache.org/licenses/LICENSE-2.0
"""benchmarks/reporting.py, and every results page as its renderer writes it from the committed records: a page
whose figures drift from its records (or a renderer that drifts from its page) fails here."""

import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from benchmarks import reporting

REPO = Path(__file__).resolve().parents[1]


def test_table_is_one_row_a_line():
    assert reporting.table(["a", "b"], [[1, "x"], [2.5, None]]) == "| a | b |\n|---|---|\n| 1 | x |\n| 2.5 | None |"
    assert reporting.table(["a"], []) == "| a |\n|---|"  # no rows: the header alone
    assert reporting.body([[1, "x"], [2.5, None]]) == "| 1 | x |\n| 2.5 | None |"  # under a template's header


def test_records_are_read_by_name_and_checked_for_the_fields_a_page_reads(tmp_path):
    assert reporting.records(tmp_path / "none") == {}
    (tmp_path / "b.json").write_text('{"name": "b", "x": 2}')
    (tmp_path / "a.json").write_text('{"name": "a", "x": 1}')
    assert list(reporting.records(tmp_path, "name", "x")) == ["a", "b"]
    (tmp_path / "b.json").write_text('{"name": "b"}')
    with pytest.raises(SystemExit, match=r"b.json is not a results file of this page \(KeyError"):
        reporting.records(tmp_path, "name", "x")
    (tmp_path / "b.json").write_text("{")
    with pytest.raises(SystemExit, match="JSONDecodeError"):
        reporting.records(tmp_path)


def test_interval_and_prose_write_a_figure_as_every_page_does(tmp_path):
    assert reporting.interval(0.0261, 0.009, 0.0444) == "+0.026 [+0.009, +0.044]"
    assert reporting.interval(1.5, 1.25, 1.75, ".2f") == "1.50 [1.25, 1.75]"
    template = tmp_path / "page.template.md"
    template.write_text("<!-- part: goal -->\nabove $bound\n<!-- part: other -->\nx\n")
    assert reporting.prose(template, "goal", bound=2) == "above 2"


def test_paired_bootstrap_is_exact_on_constant_differences_and_wider_with_clusters():
    a = np.array([1.0, 0.0, 1.0, 1.0])
    assert reporting.paired_bootstrap(a, a) == (0.0, 0.0, 0.0)
    assert reporting.paired_bootstrap(a, a - 1) == (1.0, 1.0, 1.0)
    rng = np.random.default_rng(0)
    a, b = (rng.random(600) < 0.6).astype(float), (rng.random(600) < 0.5).astype(float)
    diff, low, high = reporting.paired_bootstrap(a, b)
    assert diff == pytest.approx((a - b).mean()) and low < diff < high
    # The normal approximation of the same interval, within its Monte Carlo error.
    half = 1.96 * (a - b).std() / np.sqrt(600)
    assert low == pytest.approx(diff - half, abs=0.01) and high == pytest.approx(diff + half, abs=0.01)
    # Three queries per document that always agree: resampling documents, not queries, widens the interval.
    doc_a, doc_b = np.repeat(a[:200], 3), np.repeat(b[:200], 3)
    _, by_doc_low, by_doc_high = reporting.paired_bootstrap(doc_a, doc_b, np.arange(600) // 3)
    _, by_item_low, by_item_high = reporting.paired_bootstrap(doc_a, doc_b)
    assert by_doc_high - by_doc_low > 1.4 * (by_item_high - by_item_low)


@pytest.mark.filterwarnings("ignore:Precision loss occurred:RuntimeWarning")  # scipy, on values without spread
def test_t_intervals_over_a_few_seeds_are_students():
    """A mean's t-interval (or where one more value would fall), Welch's for two groups, Student's over paired
    differences, and a one-value side against a pooled spread: scipy's figures, and the edge cases a page meets."""
    values, others = [1.0, 2.0, 4.0], [2.0, 3.5, 5.0, 6.0]
    t2 = stats.t.ppf(0.975, 2)
    assert reporting.t_interval(values) == pytest.approx((7 / 3, t2 * statistics.stdev(values) / 3 ** 0.5))
    predicted = t2 * statistics.stdev(values) * (1 + 1 / 3) ** 0.5  # one more value's spread, not the mean's
    assert reporting.t_interval(values, predict=True)[1] == pytest.approx(predicted)
    assert reporting.t_interval([5.0]) == (5.0, None) and reporting.t_interval([]) == (None, None)
    welch = stats.ttest_ind(values, others, equal_var=False).confidence_interval(0.95)
    assert reporting.welch_interval(values, others) == (welch.low, welch.high)
    assert reporting.welch_interval([1.0, 1.0], [3.0, 3.0]) == (-2.0, -2.0)  # no spread: the difference itself
    assert reporting.welch_interval([1.0], others) is None
    paired = stats.ttest_1samp([0.5, 0.25, 1.0], 0).confidence_interval(0.95)
    assert reporting.paired_t_interval({0: 1.5, 1: 2.25, 2: 5.0}, {0: 1.0, 1: 2.0, 2: 4.0}) == (paired.low, paired.high)
    assert reporting.paired_t_interval({0: 2.0, 1: 3.0}, {0: 1.0, 1: 2.0}) == (1.0, 1.0)
    assert reporting.paired_t_interval({0: 2.0, 1: 3.0}, {0: 1.0, 2: 2.0}) is None  # other keys: not paired
    pooled = reporting.pooled_spread([[1.0, 2.0], [3.0, 5.0, 7.0], [9.0]])  # a group of one has no spread to give
    assert pooled == (pytest.approx(math.sqrt((0.5 * 1 + 4.0 * 2) / 3)), 3)
    assert reporting.pooled_spread([[1.0], [2.0]]) is None
    half = stats.t.ppf(0.975, 3) * pooled[0] * math.sqrt(1 + 1 / 2)
    assert reporting.difference_interval([1.0], [2.0, 2.5], pooled) == pytest.approx((-1.25 - half, -1.25 + half))
    assert reporting.difference_interval([1.0], [2.0, 2.5]) is None  # one value, no spread to borrow
    assert reporting.difference_interval(values, others, pooled) == (welch.low, welch.high)  # Welch's where it can


def test_verdict_is_met_missed_or_undecided_by_where_the_interval_lies():
    met, missed, undecided = reporting.MET, reporting.MISSED, reporting.UNDECIDED
    assert [reporting.verdict(low, high) for low, high in ((0.1, 0.2), (-0.2, -0.1), (-0.1, 0.1), (0.0, 0.2))] == \
        [met, missed, undecided, undecided]
    assert [reporting.verdict(low, high, 1.05, above=False) for low, high in ((1.0, 1.04), (1.06, 1.1), (1.0, 1.1))] \
        == [met, missed, undecided]
    assert reporting.verdict(3.0, 3.0, 5.0, above=False) == met  # no interval: the estimate alone
    assert (reporting.status(True), reporting.status(False)) == (met, missed)


def test_splice_rewrites_only_between_its_markers():
    begin = reporting.BEGIN.format("python -m x: table")
    page = f"before\n{begin}\nold\n{reporting.END}\nafter\n"
    assert reporting.splice(page, "python -m x: table", "new") == f"before\n{begin}\nnew\n{reporting.END}\nafter\n"
    with pytest.raises(SystemExit, match="no block"):
        reporting.splice("no markers", "python -m x: table", "new")


def test_number_writes_a_missing_figure_as_a_dash():
    written = reporting.number(None), reporting.number(0.12345), reporting.number(2.5, "+.1f", "%")
    assert written == ("-", "0.123", "+2.5%")


def test_compose_fills_the_parts_its_records_call_for(tmp_path):
    template = tmp_path / "page.template.md"
    template.write_text("<!-- part: head -->\n# $title\n\n<!-- part: note -->\nalways\n<!-- part: table -->\n$table\n")
    sections = [("head", lambda r: {"title": r["title"]}), "note",
                ("table", lambda r: r.get("rows") and {"table": "t"}),
                ("note", lambda r: True)]
    assert reporting.compose(template, sections, {"title": "A"}) == "# A\n\nalways\nalways\n"  # no rows: no table
    assert reporting.compose(template, sections, {"title": "A", "rows": [1]}) == "# A\n\nalways\nt\nalways\n"


def pages_of(name):
    """{path: text} of every page a renderer writes, from the committed records only (no runs folder)."""
    if name == "quality":
        from experiments.quality import render
        return render.pages(render.load())
    if name == "long_documents":
        from experiments.long_documents import report
        return report.pages(update=[REPO / "model_card.md"])
    if name == "masked_lm":
        from experiments.masked_lm import report
        return {report.HERE / "results.md": report.page()}
    if name == "conversion":
        from experiments.conversion import render
        from experiments.shared import load_all
        return {render.HERE / "results.md": render.page(load_all(render.HERE))}
    from benchmarks import harness, report
    results = report.load(harness.RESULTS)
    return {Path(report.INDEX): report.index(results, harness.RESULTS),
            Path(report.DOC): report.fill(Path(report.DOC).read_text(), results)}


@pytest.mark.parametrize("name", ["quality", "long_documents", "masked_lm", "conversion", "benchmarks"])
def test_every_committed_page_is_what_its_records_render(name):
    for path, text in pages_of(name).items():
        assert path.read_text(encoding="utf-8") == text, f"{path} differs from what its records render"
