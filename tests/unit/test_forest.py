"""suite.report.compare.forest: which cases the comparison's forest plot draws, in which order and colour, and
its caption."""

from __future__ import annotations

import math

import pytest
from matplotlib.colors import to_rgba

import suite.report.compare.forest as forest
from suite.report.compare.verdicts import VERDICT_COLORS, CaseComparison, Comparison


def _case(i: int, verdict: str, ratio: float, half: float = 1.02) -> CaseComparison:
    key = (("experiment", "synthetic"), ("op", "all_reduce"), ("size_bytes", 1024 * (i + 1)))
    return CaseComparison(
        key=key,
        base_median_us=100.0,
        new_median_us=100.0 * ratio,
        ratio=ratio,
        ci_low=ratio / half,
        ci_high=ratio * half,
        p_value=0.5,
        verdict=verdict,
    )


def _comparison(cases: list[CaseComparison]) -> Comparison:
    return Comparison(
        base_name="base", new_name="new", cases=cases, overall_ratio=1.01, overall_ci=(0.99, 1.03), overall="same"
    )


def _many() -> list[CaseComparison]:
    """3 slower, 2 faster, 60 inconclusive (ratios spread about 1, wide intervals) and 100 same."""
    cases = [_case(i, "slower", 1.5 + i) for i in range(3)]
    cases += [_case(3 + i, "faster", 0.5 + 0.1 * i) for i in range(2)]
    cases += [_case(5 + i, "inconclusive", math.exp((i - 30) / 100), half=2.0) for i in range(60)]
    cases += [_case(65 + i, "same", 1 + (i - 50) / 2000) for i in range(100)]
    return cases


def test_many_cases_draw_every_finding_and_a_sample_of_the_same_ones():
    cases = _many()
    f = forest.select(cases)
    assert len(f.rows) == forest.MAX_ROWS
    verdicts = [r.verdict for r in f.rows]
    # top to bottom: slower, faster, inconclusive, same; every slower and faster one drawn
    assert verdicts == ["slower"] * 3 + ["faster"] * 2 + ["inconclusive"] * (forest.MAX_ROWS - 5 - 8) + ["same"] * 8
    assert [r.ratio for r in f.rows[:3]] == [3.5, 2.5, 1.5]  # largest first
    # the inconclusive ones drawn are those furthest from 1; the same ones span their ratios
    drawn_inc = [abs(math.log(r.ratio)) for r in f.rows if r.verdict == "inconclusive"]
    left_inc = [abs(math.log(r.ratio)) for r in cases if r.verdict == "inconclusive" and r not in f.rows]
    assert min(drawn_inc) >= max(left_inc)
    same = [r.ratio for r in f.rows if r.verdict == "same"]
    assert max(same) == max(r.ratio for r in cases if r.verdict == "same")
    assert min(same) == min(r.ratio for r in cases if r.verdict == "same")
    assert f.not_drawn == {"inconclusive": 60 - 27, "same": 92}
    text = forest.caption(_comparison(cases), f)
    assert text.startswith("3 of 165 cases slower beyond the 5% tolerance, 2 faster, 60 inconclusive, 100 same; ")
    assert "overall (median case ratio) 1.010 [0.990, 1.030]: same" in text
    assert text.endswith("Not drawn: 125 of 165 (33 inconclusive nearest 1, 92 same)")


def test_few_cases_are_all_drawn_and_the_caption_says_nothing_is_left_out():
    cases = [_case(0, "same", 1.0), _case(1, "slower", 1.3)]
    f = forest.select(cases)
    assert [r.verdict for r in f.rows] == ["slower", "same"] and f.not_drawn == {}
    assert "Not drawn" not in forest.caption(_comparison(cases), f)


def test_findings_beyond_the_cap_are_cut_and_counted():
    cases = [_case(i, "slower", 1.2 + i / 100) for i in range(50)]
    f = forest.select(cases, max_rows=10)
    assert len(f.rows) == 10 and f.not_drawn == {"slower": 40}
    assert min(r.ratio for r in f.rows) > max(r.ratio for r in cases if r not in f.rows)  # the largest kept


@pytest.mark.parametrize("verdict", ["slower", "faster", "same", "inconclusive"])
def test_each_case_is_drawn_in_its_verdicts_colour_inside_a_log_axis_about_1(verdict):
    ratio = {"slower": 3.0, "faster": 0.3, "same": 1.0, "inconclusive": 1.1}[verdict]
    case = _case(0, verdict, ratio, half=100.0)  # an interval far wider than the axis: clipped
    c = _comparison([case, _case(1, "same", 1.0)])
    fig = forest.forest_figure(c, forest.select(c.cases))
    (ax,) = fig.axes
    (marker,) = [a for a in ax.get_lines() if a.get_gid() == "case:synthetic-all_reduce-1024B"]
    assert to_rgba(marker.get_color()) == to_rgba(VERDICT_COLORS[verdict])
    assert list(marker.get_xdata()) == [ratio]
    lo, hi = ax.get_xlim()
    assert ax.get_xscale() == "log" and lo * hi == pytest.approx(1.0) and lo < ratio < hi
    (bar,) = [a for a in ax.get_lines() if a.get_gid() == "case:synthetic-all_reduce-1024B/ci"]
    assert list(bar.get_xdata()) == pytest.approx([lo, hi])  # clipped to the axis
