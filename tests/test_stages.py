"""``res.info["stages"]`` says what each stage reached and names a winner only where coresets of
the same number of picks were compared: every stage carries its KSD and its size (distinct
points), and ``"winner"`` is the one of lower KSD after KT-Swap among candidates of one size."""

import numpy as np
import pytest

import stein_coreset as sc

DEBIASED = ["st", "skt", "lskt", "sr", "lsr", "sc", "lsc"]


@pytest.fixture(scope="module")
def chain():
    X = 0.7 + 1.5 * np.random.default_rng(4).standard_normal((1024, 3))
    return X, -X


def _winner_won(stages, res):
    """Whether the named winner is the compared coreset of lowest KSD after swapping, and the
    result is it."""
    swap = stages["kt_swap"]
    compared = {k[len("ksd_"):]: v for k, v in swap.items() if k.startswith("ksd_")}
    won = stages["winner"]
    return (
        won in compared
        and len(compared) >= 2
        and compared[won] == min(compared.values())
        and compared[won] == swap["ksd"]
        and abs(swap["ksd"] - res.ksd) <= 1e-9 * max(res.ksd, 1e-300)
        and stages[won]["picks"] == stages["baseline"]["picks"] == swap["picks"]
    )


@pytest.mark.parametrize("method", DEBIASED)
def test_every_stage_has_a_size_and_a_winner_only_won_a_comparison(chain, method):
    X, S = chain
    res = sc.compress(X, S, 32, method, seed=0)
    stages = res.info.get("stages")
    if method == "st":
        assert stages is None
        return
    for name, st in stages.items():
        if name != "winner":
            assert isinstance(st["size"], int) and st["size"] >= 1, (name, st)
            assert "ksd" in st, name
    if method in ("sr", "lsr", "sc", "lsc"):  # no competing candidates: nothing won
        assert "winner" not in stages
        assert "winner" not in repr(res) and " won" not in res.summary()
    else:
        assert _winner_won(stages, res), stages
        assert f"{stages['winner']} won" in res.summary()
        last = list(stages)[-2]
        assert stages[last]["size"] == len(res)


def test_the_winner_check_fails_on_a_label_that_did_not_win(chain):
    """The check above can fail: a winner that names the loser, or a stage of another size."""
    X, S = chain
    res = sc.compress(X, S, 32, "skt", seed=0)
    stages = dict(res.info["stages"])
    loser = "kt_split" if stages["winner"] == "baseline" else "baseline"
    assert not _winner_won({**stages, "winner": loser}, res)
    assert not _winner_won({**stages, "winner": "stein_thinning"}, res)


@pytest.mark.parametrize("d", [2, 4, 10])
def test_skt_refining_more_candidates_is_never_worse_than_refining_one(d):
    """SKT's KT-Swap refines the best few KT-SPLIT candidates beside the baseline (4 up to
    d = 16): the shortlist only grows, so the KSD is never above Alg. D.3's one
    candidate, and it is lower where a candidate other than the first wins after swapping."""
    from stein_coreset.algorithms.skt import swap_candidates

    X = 0.7 + 1.5 * np.random.default_rng(d).standard_normal((2048, d))
    one = sc.compress(X, -X, 32, "skt", seed=0, swap_candidates=1)
    auto = sc.compress(X, -X, 32, "skt", seed=0)
    assert auto.ksd <= one.ksd * (1 + 1e-12)
    assert auto.info["stages"]["kt_swap"]["swapped"] == min(swap_candidates(d),
                                                            auto.info["stages"]["kt_split"]
                                                            ["candidates"])
    assert [swap_candidates(k) for k in (1, 4, 16, 17, 100)] == [4, 4, 4, 1, 1]
