"""The bf16 forward verdict: the mean |log-prob diff| against max(table bound, k x floor); greedy flips shown only."""

from __future__ import annotations

from dayone.conform.forward import _bf16_verdict


def figures(mean: float, flips: int, decisive: int) -> dict:
    return {"logprob_mean_abs": mean, "greedy_disagreement": flips, "greedy_disagreement_beyond_near_ties": decisive,
            "greedy_tokens": 14}  # fmt: skip


def test_a_mean_beyond_the_table_and_twice_the_floor_fails():
    floor = figures(0.02, 0, 0)
    assert _bf16_verdict(figures(0.049, 0, 0), floor)[0]  # within the table's 0.05
    assert not _bf16_verdict(figures(0.051, 0, 0), floor)[0]
    assert _bf16_verdict(figures(0.07, 0, 0), figures(0.04, 0, 0))[0]  # within 2 x floor
    assert not _bf16_verdict(figures(0.09, 0, 0), figures(0.04, 0, 0))[0]


def test_greedy_flips_are_reported_not_judged():
    passed, text = _bf16_verdict(figures(0.02, 3, 1), figures(0.02, 0, 0))
    assert passed and "3/14 greedy tokens not the reference's (2 within a near-tie; floor 0)" in text
