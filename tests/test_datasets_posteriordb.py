"""The posteriordb harness: a fixed tuning / validation split, reference draws (constrained and
unconstrained), scores with the Jacobian adjustment, biased chains; the package needs no data.

The data: ``$STEIN_CORESET_POSTERIORDB``, else (a development checkout beside the shared data)
``../shared/posteriordb``; the tests that read it are skipped without it. The model tests use
eight schools only, the program tests/test_integrations_stan.py compiles too."""

import asyncio
import os
from pathlib import Path

import numpy as np
import pytest

from stein_coreset.datasets import posteriordb as pdb

_HERE = Path(__file__).resolve().parents[1]
DATA = os.environ.get(pdb.ENV) or str(_HERE.parent / "shared" / "posteriordb")
needs_data = pytest.mark.skipif(not Path(DATA, "posteriors").is_dir(),
                                reason=f"no posteriordb folder (set {pdb.ENV})")
SCHOOLS = "eight_schools-eight_schools_noncentered"
#: The validation set of the 33 shared posteriors, as written in the module's docstring.
VALIDATION = [
    "earnings-earn_height", "earnings-logearn_height_male", "earnings-logearn_logheight_male",
    "hmm_example-hmm_example", "kidiq-kidscore_momhsiq",
    "kidiq_with_mom_work-kidscore_interaction_c2", "mesquite-logmesquite",
    "mesquite-logmesquite_logvolume", "nes1976-nes", "nes1988-nes", "sblrc-blr",
]


def test_without_a_folder_the_error_names_the_argument_and_the_variable(monkeypatch):
    monkeypatch.delenv(pdb.ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=f"pass root= or set the environment variable "
                                                f"{pdb.ENV}"):
        pdb.names()
    with pytest.raises(FileNotFoundError, match="is not a posteriordb folder"):
        pdb.load(SCHOOLS, root=_HERE)


@needs_data
def test_the_split_is_every_third_sorted_name_from_the_third():
    names = pdb.names(DATA)
    s = pdb.split(DATA)
    assert len(names) == 33 and names == sorted(names)
    assert s["validation"] == names[2::3] and len(s["validation"]) == 11
    assert sorted(s["tuning"] + s["validation"]) == names
    assert s["validation"] == VALIDATION


@needs_data
def test_the_environment_variable_names_the_folder(monkeypatch):
    monkeypatch.setenv(pdb.ENV, DATA)
    assert pdb.locate() == Path(DATA) and SCHOOLS in pdb.names()


@pytest.fixture(scope="module")
def schools():
    pytest.importorskip("stan")
    if not Path(DATA, "posteriors").is_dir():
        pytest.skip(f"no posteriordb folder (set {pdb.ENV})")
    return pdb.load(SCHOOLS, DATA)


def test_reference_draws_unconstrained_map_back_and_rebuild_what_the_reference_lacks(schools):
    assert schools.reference_names[:2] == ["theta[1]", "theta[2]"]
    assert schools.reference_constrained().shape == (10000, 10)   # theta, mu, tau
    X = schools.reference_unconstrained(thin=20)   # theta_trans (rebuilt), mu, log tau
    assert X.shape == (500, 10) and schools.d == 10
    ref = schools.reference_constrained()[::20]
    np.testing.assert_allclose(X[:, 9], np.log(ref[:, 9]), rtol=1e-12)
    back, names = schools.constrain(X[:3])
    np.testing.assert_allclose(back[:, names.index("theta.4")], ref[:3, 3], rtol=1e-10)


def test_scores_are_gradients_of_the_log_density_with_the_jacobian(schools):
    X = schools.reference_unconstrained(thin=20)[:3]
    S = schools.scores(X)
    h = 1e-6
    for x, s in zip(X, S, strict=True):
        fd = [(schools.log_density_and_score(x + h * e)[0]
               - schools.log_density_and_score(x - h * e)[0]) / (2 * h) for e in np.eye(10)]
        np.testing.assert_allclose(s, fd, rtol=1e-5, atol=1e-6)
    # Stein's identity holds on exact draws: the scores average to about zero
    Xall = schools.reference_unconstrained(thin=20)
    assert np.abs(schools.scores(Xall).mean(axis=0)).max() < 0.2


def test_a_short_warmup_is_kept_and_a_thinned_copy_thins(schools):
    chain = schools.nuts(num_warmup=20, num_samples=80, num_chains=2, seed=1)
    assert chain.X.shape == (200, 10) and chain.S.shape == (200, 10)
    assert chain.info["warmup"].sum() == 40 and chain.info["chain"].tolist()[99:101] == [0, 1]
    thinned = schools.nuts(num_warmup=20, num_samples=80, num_chains=1, seed=1, thin=4)
    assert thinned.X.shape == (25, 10) and thinned.info["warmup"].sum() == 5


def test_a_tempered_chain_is_overdispersed_and_carries_the_scores_of_p(schools):
    chain = schools.tempered(n=1500, T=2.0, seed=0)
    ref = schools.reference_unconstrained(thin=20)
    ratio = chain.X.var(axis=0) / ref.var(axis=0)
    assert 1.3 < np.median(ratio) < 3.0           # about T = 2
    np.testing.assert_allclose(chain.S[:5], schools.scores(chain.X[:5]), rtol=1e-10)


def test_the_harness_runs_inside_a_running_event_loop(schools):
    """PyStan's build and sample call asyncio.run, which a running loop (Jupyter) refuses;
    the harness moves them to a worker thread."""

    async def main():
        fresh = pdb.load(SCHOOLS, DATA)
        return fresh.nuts(num_warmup=10, num_samples=10, seed=2)

    assert asyncio.run(main()).X.shape == (20, 10)
