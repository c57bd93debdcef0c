"""The statistics against textbook values and scipy, and the regression verdict's behaviour."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, norm

from pytest_resilibench.reporting import stats


def test_wilson_8_of_10_matches_the_textbook_interval() -> None:
    low, high = stats.wilson(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)


def test_wilson_at_the_edges_stays_inside_0_1() -> None:
    assert stats.wilson(0, 10)[0] == pytest.approx(0.0, abs=1e-12)
    assert stats.wilson(10, 10)[1] == pytest.approx(1.0, abs=1e-12)
    assert stats.wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        stats.wilson(11, 10)


def test_rate_reports_none_without_data() -> None:
    assert stats.rate(0, 0).value is None
    assert stats.rate(3, 4).to_json()["rate"] == 0.75


def test_pass_hat_k_is_taus_combinatorial_estimate() -> None:
    # Task a: 2 of 4 succeed -> C(2,2)/C(4,2) = 1/6; task b: 4 of 4 -> 1.
    runs = {"a": [True, True, False, False], "b": [True] * 4}
    assert stats.pass_hat_k(runs, 2) == pytest.approx((1 / 6 + 1) / 2)
    assert stats.pass_hat_k(runs, 1) == pytest.approx((0.5 + 1) / 2)
    assert stats.pass_hat_k(runs, 3) == pytest.approx((0 + 1) / 2)
    assert stats.pass_hat_k({"a": [True]}, 2) is None  # too few repeats anywhere
    with pytest.raises(ValueError):
        stats.pass_hat_k(runs, 0)


def test_exact_mcnemar_on_a_hand_computed_table() -> None:
    # 7 vs 1 discordant pairs: p = 2 * P(X <= 1 | 8, 1/2) = 2 * 9 / 256.
    assert stats.mcnemar_exact(7, 1) == pytest.approx(18 / 256)
    assert stats.mcnemar_exact(1, 7) == pytest.approx(18 / 256)
    assert stats.mcnemar_exact(0, 0) == 1.0


def test_newcombe_interval_matches_fagerland_et_al() -> None:
    # Cavo et al. (2012) paired table from Fagerland, Lydersen & Laake, "Statistical Analysis
    # of Contingency Tables", ch. 8: estimate -0.0621, 95% CI -0.1186 to -0.0046.
    low, high = stats.newcombe_paired_ci(59, 6, 16, 80)
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)


def test_paired_binary_counts_discordant_pairs_and_agrees_with_bootstrap() -> None:
    draw = random.Random(7)
    old = [draw.random() < 0.7 for _ in range(400)]
    new = [ok and draw.random() < 0.9 for ok in old]
    c = stats.paired_binary(old, new)
    assert c.b_only == 0 and c.a_only == sum(old) - sum(new)
    assert c.diff == pytest.approx((sum(old) - sum(new)) / 400)
    assert c.diff is not None and c.ci[0] < c.diff < c.ci[1]
    assert c.bootstrap_ci is not None
    # Two honest intervals of the same quantity roughly agree.
    assert abs(c.bootstrap_ci[0] - c.ci[0]) < 0.02 and abs(c.bootstrap_ci[1] - c.ci[1]) < 0.02


def test_bootstrap_is_keyed_and_repeatable() -> None:
    a = [True, False, True, True, False] * 20
    b = [True, True, False, True, False] * 20
    assert stats.paired_bootstrap_ci(a, b) == stats.paired_bootstrap_ci(a, b)
    assert stats.paired_bootstrap_ci(a, b, seed=1) != stats.paired_bootstrap_ci(a, b, seed=2)


def test_paired_samples_must_have_equal_length() -> None:
    with pytest.raises(ValueError, match="length"):
        stats.paired_binary([True], [True, False])


def test_paired_means_finds_a_consistent_shift() -> None:
    a = [1.0] * 30 + [0.0] * 10
    b = [1 / 3] * 30 + [0.0] * 10
    c = stats.paired_means(a, b)
    assert c.diff == pytest.approx(0.5)
    assert c.p_value < 0.01
    assert c.ci[0] > 0.3
    same = stats.paired_means([0.5, 1.0] * 5, [0.5, 1.0] * 5)
    # No spread, yet no certainty: as far as a share of units up to Wilson's limit for 0/10.
    w = stats.wilson(0, 10)[1]
    assert same.p_value == 1.0 and same.diff == 0
    assert same.ci == pytest.approx((-w, w))
    shifted = stats.paired_means([1.0] * 5, [1 / 7] * 5)
    assert shifted.p_value == pytest.approx(2 / 32)
    assert shifted.ci[0] < 6 / 7 < shifted.ci[1] and shifted.ci[1] - shifted.ci[0] > 0.5


def _pairs(n: int, old_rate: float, drop: float, seed: int) -> tuple[list[bool], list[bool]]:
    draw = random.Random(seed)
    old = [draw.random() < old_rate for _ in range(n)]
    new = [ok and draw.random() > drop / old_rate for ok in old]
    return old, new


def test_verdict_regression_pass_and_inconclusive() -> None:
    old, new = _pairs(600, 0.7, 0.15, seed=1)
    assert stats.paired_verdict(old, new, max_drop_pp=5).kind == "regression"
    assert stats.paired_verdict(old, new, max_drop_pp=30).kind == "pass"
    same = stats.paired_verdict(old, old, max_drop_pp=5)
    assert same.kind == "pass" and same.drop_pp == 0 and same.p_value == 1.0
    few = stats.paired_verdict(old[:30], new[:30], max_drop_pp=5)
    assert few.kind == "inconclusive"
    assert few.more_needed is not None and few.more_needed > 0
    assert "more paired episodes" in few.describe()


def test_inconclusive_more_needed_is_roughly_enough() -> None:
    old, new = _pairs(4000, 0.7, 0.12, seed=3)
    first = stats.paired_verdict(old[:60], new[:60], max_drop_pp=5)
    assert first.kind == "inconclusive" and first.more_needed is not None
    # The estimate is a guide, not a promise: with twice as many it decides.
    n = min(len(old), 60 + 2 * first.more_needed)
    assert stats.paired_verdict(old[:n], new[:n], max_drop_pp=5).kind != "inconclusive"


def test_verdict_without_pairs_is_inconclusive() -> None:
    v = stats.paired_verdict([], [], max_drop_pp=5)
    assert v.kind == "inconclusive" and v.drop_pp is None and v.n == 0
    with pytest.raises(ValueError):
        stats.paired_verdict([True], [True], max_drop_pp=5, alpha=0)


def test_unpaired_mde_matches_cohens_h() -> None:
    # statsmodels' NormalIndPower gives h = 0.3962 for n = 100 per arm, alpha .05, power .8.
    drop = stats.mde_unpaired(100, base_rate=0.5)
    h = 2 * math.asin(math.sqrt(0.5)) - 2 * math.asin(math.sqrt(0.5 - drop))
    assert h == pytest.approx(0.3962, abs=1e-4)


def test_paired_mde_solves_connors_formula_and_beats_unpaired() -> None:
    delta = stats.mde_paired(200, discordance=0.2)
    za, zb = 1.959964, 0.841621
    n = (za * math.sqrt(0.2) + zb * math.sqrt(0.2 - delta**2)) ** 2 / delta**2
    assert n == pytest.approx(200, rel=1e-4)
    assert delta < stats.mde_unpaired(200, base_rate=0.6)
    assert stats.mde_paired(2, discordance=0.1) == 0.1  # capped at the discordance


@pytest.mark.parametrize("alpha, power", [(0.05, 0.8), (0.01, 0.9), (0.1, 0.5), (0.05, 0.3)])
def test_paired_mde_closed_form_is_the_root_a_solver_finds(alpha: float, power: float) -> None:
    # The closed form against scipy's Brent root finder on Connor's equation itself.
    from scipy import optimize

    za, zb = stats._z(1 - alpha / 2), stats._z(power)
    for n in (1, 3, 10, 200, 5040, 50400):
        for psi in (0.001, 0.05, 0.2, 0.5, 1.0):
            def gap(delta: float, n: int = n, psi: float = psi) -> float:
                return (za * math.sqrt(psi) + zb * math.sqrt(max(0.0, psi - delta**2))) ** 2 \
                    / delta**2 - n

            found = stats.mde_paired(n, discordance=psi, alpha=alpha, power=power)
            expected = psi if gap(psi) > 0 else optimize.brentq(gap, 1e-9, psi, xtol=1e-15)
            assert found == pytest.approx(expected, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))
def test_newcombe_interval_holds_its_estimate(both: int, a_only: int, b_only: int,
                                              neither: int) -> None:
    n = both + a_only + b_only + neither
    low, high = stats.newcombe_paired_ci(both, a_only, b_only, neither)
    assert -1 <= low <= high <= 1
    if n:
        assert low - 1e-12 <= (a_only - b_only) / n <= high + 1e-12


@settings(max_examples=300)
@given(st.integers(1, 2000), st.data(), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_wilson_is_scipy_s_interval_float_for_float(n: int, data: st.DataObject,
                                                     confidence: float) -> None:
    k = data.draw(st.integers(0, n))
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert stats.wilson(k, n, confidence=confidence) == (float(ci.low), float(ci.high))


@settings(max_examples=300)
@given(st.integers(0, 3000), st.integers(0, 3000))
def test_exact_mcnemar_is_scipy_s_two_sided_binomial_test(a_only: int, b_only: int) -> None:
    expected = 1.0 if a_only + b_only == 0 else binomtest(a_only, a_only + b_only, 0.5).pvalue
    # (scipy's tails underflow to 0.0 sooner: 2.7e-300 against 0.0 for 10 / 1065)
    assert stats.mcnemar_exact(a_only, b_only) == pytest.approx(expected, rel=1e-9, abs=1e-250)


def test_normal_quantiles_are_scipy_s() -> None:
    for p in (0.8, 0.9, 0.95, 0.975, 0.995):
        assert stats._z(p) == float(norm.ppf(p))
