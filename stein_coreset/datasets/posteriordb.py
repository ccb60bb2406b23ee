"""Real posteriors with gold-standard draws (a posteriordb subset), for validation and tuning.

A posteriordb folder (``posteriors/``, ``models/stan/``, ``data/data/``,
``reference_posteriors/draws/draws/``, as in stan-dev/posteriordb) holds Stan programs, their data
and reference draws of the constrained parameters (10 chains x 1000 draws from long, checked NUTS
runs). This module reads it and, through PyStan 3, gives what a validation needs as plain NumPy
arrays: the reference draws (constrained, and unconstrained), scores (gradients of the log
density with the Jacobian adjustment, in the unconstrained space Stan samples in) at any points,
and deliberately biased chains (NUTS with too short a warm-up, kept; a tempered chain; thinned
copies). The package does not ship or need the data: pass ``root=`` or set the environment
variable ``STEIN_CORESET_POSTERIORDB``.

**Tuning and validation split** (fixed, no randomness): the posterior names sorted as strings,
every third one, starting from the third (sorted positions 2, 5, 8, ...), is in the VALIDATION
set, the others in the TUNING set. Thresholds are chosen on the tuning set and reported on the
validation set (:func:`split`). For the 33 posteriors of the shared subset the validation set is
earnings-earn_height, earnings-logearn_height_male, earnings-logearn_logheight_male,
hmm_example-hmm_example, kidiq-kidscore_momhsiq, kidiq_with_mom_work-kidscore_interaction_c2,
mesquite-logmesquite, mesquite-logmesquite_logvolume, nes1976-nes, nes1988-nes and sblrc-blr.

**Compiled models**: each Stan program is compiled once per machine and Python executable:
``stan.build`` caches the compiled module in httpstan's cache (``~/.cache/httpstan/VERSION``, or
under ``$XDG_CACHE_HOME``), keyed on the program text, httpstan's version and the Python
executable; a later build of the same program, with any data, loads it (about a second). Within a
process :meth:`Posterior.model` keeps the built model. PyStan runs an asyncio event loop for each
call: from code that already runs a loop (Jupyter, an async test) the calls are made on a worker
thread, so no ``nest_asyncio`` is needed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import io
import json
import os
import re
import time
import zipfile
from pathlib import Path

import numpy as np

from .samplers import Chain, mala

__all__ = ["ENV", "locate", "names", "split", "load", "Posterior", "stan_name"]

#: The environment variable naming the posteriordb folder.
ENV = "STEIN_CORESET_POSTERIORDB"

#: Parameters some reference draws lack, rebuilt from what they hold (name -> function of the
#: reference's variables); checked by :meth:`Posterior.reference_unconstrained`.
_REBUILD = {
    # the reference stores theta = theta_trans * tau + mu, not the parameter theta_trans
    "eight_schools-eight_schools_noncentered": lambda v: {
        "theta_trans": (v["theta"] - v["mu"][:, None]) / v["tau"][:, None]
    },
}


def locate(root: str | os.PathLike | None = None) -> Path:
    """The posteriordb folder: ``root`` if given, else ``$STEIN_CORESET_POSTERIORDB``.

    Parameters
    ----------
    root : str or path, optional
        A folder holding ``posteriors/``, ``models/``, ``data/`` and
        ``reference_posteriors/``.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    FileNotFoundError
        Naming the argument, the environment variable and what the folder must hold.

    Examples
    --------
    >>> from stein_coreset.datasets import posteriordb
    >>> posteriordb.locate("/nonexistent")
    Traceback (most recent call last):
    ...
    FileNotFoundError: root: '/nonexistent' is not a posteriordb folder (it needs posteriors/, models/stan/, data/data/ and reference_posteriors/draws/draws/); pass root= or set STEIN_CORESET_POSTERIORDB
    """  # noqa: E501
    if root is None:
        root = os.environ.get(ENV)
        if not root:
            raise FileNotFoundError(
                f"no posteriordb folder: pass root= or set the environment variable {ENV} to a "
                "folder holding posteriors/, models/stan/, data/data/ and "
                "reference_posteriors/draws/draws/ (the data is not part of the package)"
            )
    path = Path(root).expanduser()
    if not (path / "posteriors").is_dir() or not (path / "models" / "stan").is_dir():
        raise FileNotFoundError(
            f"root: {str(root)!r} is not a posteriordb folder (it needs posteriors/, "
            "models/stan/, data/data/ and reference_posteriors/draws/draws/); pass root= or "
            f"set {ENV}"
        )
    return path


def names(root: str | os.PathLike | None = None) -> list:
    """The posteriors of the folder that have reference draws, sorted by name.

    Parameters
    ----------
    root : str or path, optional
        The posteriordb folder (default: ``$STEIN_CORESET_POSTERIORDB``; :func:`locate`).

    Returns
    -------
    list of str
        Names such as ``"eight_schools-eight_schools_noncentered"`` (data, then model).

    Examples
    --------
    >>> from stein_coreset.datasets import posteriordb
    >>> posteriordb.names()[:2]                    # doctest: +SKIP
    ['arma-arma11', 'bball_drive_event_0-hmm_drive_0']
    """
    base = locate(root)
    draws = base / "reference_posteriors" / "draws" / "draws"
    return sorted(
        p.name[: -len(".json")] for p in (base / "posteriors").glob("*.json")
        if (draws / f"{p.name}.zip").is_file()
    )


def split(root: str | os.PathLike | None = None) -> dict:
    """The fixed split of the posteriors into a tuning and a validation set.

    Sorted by name; sorted positions 2, 5, 8, ... (every third, from the third) are
    validation, the others tuning. With the 33 posteriors of the shared subset: 22 tuning, 11
    validation.

    Parameters
    ----------
    root : str or path, optional
        The posteriordb folder (default: ``$STEIN_CORESET_POSTERIORDB``; :func:`locate`).

    Returns
    -------
    dict
        ``{"tuning": [...], "validation": [...]}``, each sorted.

    Examples
    --------
    >>> from stein_coreset.datasets import posteriordb
    >>> s = posteriordb.split()                    # doctest: +SKIP
    >>> len(s["tuning"]), len(s["validation"])     # doctest: +SKIP
    (22, 11)
    """
    all_names = names(root)
    return {
        "tuning": [n for i, n in enumerate(all_names) if i % 3 != 2],
        "validation": [n for i, n in enumerate(all_names) if i % 3 == 2],
    }


def load(name: str, root: str | os.PathLike | None = None) -> Posterior:
    """One posterior of the folder.

    Parameters
    ----------
    name : str
        One of :func:`names`.
    root : str or path, optional
        The posteriordb folder (default: ``$STEIN_CORESET_POSTERIORDB``; :func:`locate`).

    Returns
    -------
    Posterior

    Examples
    --------
    >>> from stein_coreset.datasets import posteriordb
    >>> post = posteriordb.load("eight_schools-eight_schools_noncentered")   # doctest: +SKIP
    >>> post.reference_names[:2], post.reference_constrained().shape          # doctest: +SKIP
    (['theta[1]', 'theta[2]'], (10000, 10))
    """
    base = locate(root)
    known = names(base)
    if name not in known:
        raise ValueError(f"name: {name!r} is not a posterior of {base} (there are {known})")
    return Posterior(name, base)


def _outside_event_loop(fn, *args, **kwargs):
    """Call ``fn`` (which runs ``asyncio.run``, as PyStan does) from a thread without a running
    event loop: here, or on a worker thread when this one runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn(*args, **kwargs)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


@contextlib.contextmanager
def _quiet(enabled: bool):
    if not enabled:
        yield
        return
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _read_zip_json(path: Path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read(z.namelist()[0]))


class Posterior:
    """A posteriordb posterior: its Stan program, data, reference draws and PyStan model.

    Parameters
    ----------
    name : str
        The posterior's name.
    root : pathlib.Path
        The posteriordb folder (:func:`locate`).

    Attributes
    ----------
    name, model_name, data_name : str
        posteriordb's names.
    code : str
        The Stan program.
    data : dict
        Its data.
    reference_names : list of str
        The reference draws' entries, in posteriordb's names (``theta[1]``).

    Notes
    -----
    PyStan (``pip install pystan``) is needed for everything but the program, the data and
    the constrained reference draws. The first :meth:`model` of a program compiles it (about
    30-50 s on two cores), once per machine and Python executable.

    See Also
    --------
    load : builds one.

    Examples
    --------
    >>> from stein_coreset.datasets import posteriordb
    >>> post = posteriordb.load("eight_schools-eight_schools_noncentered")   # doctest: +SKIP
    >>> X = post.reference_unconstrained()          # theta_trans, mu, log tau   # doctest: +SKIP
    >>> S = post.scores(X[:100])                                               # doctest: +SKIP
    >>> X.shape, S.shape                                                       # doctest: +SKIP
    ((10000, 10), (100, 10))
    """

    def __init__(self, name: str, root: Path):
        info = json.loads((root / "posteriors" / f"{name}.json").read_text())
        self.name = name
        self.root = root
        self.model_name = info["model_name"]
        self.data_name = info["data_name"]
        self.code = (root / "models" / "stan" / f"{self.model_name}.stan").read_text()
        self.data = _read_zip_json(root / "data" / "data" / f"{self.data_name}.json.zip")
        self._draws = _read_zip_json(
            root / "reference_posteriors" / "draws" / "draws" / f"{name}.json.zip"
        )
        self.reference_names = list(self._draws[0])
        self._model = None
        self._functions = None
        self._unconstrained = {}

    def __repr__(self) -> str:
        return f"Posterior({self.name!r})"

    # the model ----------------------------------------------------------------------------------
    def model(self, seed: int | None = None, *, quiet: bool = True):
        """The PyStan model (``stan.build(code, data=data, random_seed=seed)``), compiled
        once per machine (httpstan's cache) and built once per process and seed."""
        try:
            import stan
        except ImportError as exc:
            raise ImportError(
                "posteriordb models need PyStan 3: pip install -r requirements/stan.txt in the "
                "stein_coreset source tree (or pip install pystan)"
            ) from exc
        if seed is None and self._model is not None:
            return self._model
        with _quiet(quiet):
            model = _outside_event_loop(stan.build, self.code, data=self.data, random_seed=seed)
        if seed is None:
            self._model = model
        return model

    def functions(self):
        """The model under BridgeStan's method names
        (:class:`stein_coreset.integrations.stan.PyStanModel`)."""
        if self._functions is None:
            from ..integrations.stan import PyStanModel

            self._functions = PyStanModel(self.model())
        return self._functions

    @property
    def d(self) -> int:
        """Number of unconstrained parameters."""
        return self.functions().param_unc_num()

    @property
    def param_names(self) -> list:
        """Stan's names of the constrained parameter entries (``theta_trans.1``, ...)."""
        return self.functions().param_names()

    # reference draws -----------------------------------------------------------------------------
    def reference_constrained(self) -> np.ndarray:
        """``(10 * 1000, p)`` reference draws of the entries ``reference_names``, chain
        after chain."""
        return np.column_stack([
            np.concatenate([np.asarray(ch[k], dtype=np.float64) for ch in self._draws])
            for k in self.reference_names
        ])

    def reference_variables(self) -> dict:
        """The reference draws by variable: name -> ``(n, *shape)`` (Stan's shapes)."""
        from ..integrations.stan import StanVariables

        stan_names = [stan_name(k) for k in self.reference_names]
        variables = StanVariables(stan_names)
        return variables.from_flat(self.reference_constrained()[:, _stan_order(stan_names)])

    def reference_unconstrained(self, thin: int = 1) -> np.ndarray:
        """``(n / thin, d)`` reference draws in the unconstrained space: ``param_unconstrain``
        of every ``thin``-th draw (about a millisecond each with large data; kept for the
        next call). Parameters the reference lacks are rebuilt where that is known (eight
        schools' ``theta_trans`` from ``theta``, ``mu``, ``tau``) and checked by mapping
        back."""
        from ..integrations.stan import StanVariables

        if thin in self._unconstrained:
            return self._unconstrained[thin].copy()
        fns = self.functions()
        values = {k: v[::thin] for k, v in self.reference_variables().items()}
        if self.name in _REBUILD:
            values.update(_REBUILD[self.name](values))
        variables = StanVariables(fns.param_names())
        missing = [v for v in variables.names if v not in values]
        if missing:
            raise ValueError(f"{self.name}: the reference draws lack the parameters {missing}")
        theta = variables.to_flat(values)
        X = np.stack([fns.param_unconstrain(t) for t in theta])
        back, names_tp = self.constrain(X[:5])
        ref = self.reference_constrained()[::thin][:5]
        cols = [names_tp.index(stan_name(k)) for k in self.reference_names]
        if not np.allclose(back[:, cols], ref, rtol=1e-6, atol=1e-8):
            raise ValueError(f"{self.name}: the unconstrained reference does not map back")
        self._unconstrained[thin] = X
        return X.copy()

    # maps ---------------------------------------------------------------------------------------
    def scores(self, X, *, progress: bool = False) -> np.ndarray:
        """``(n, d)`` gradients of the log density (Jacobian adjustment included) at the
        unconstrained rows of ``X``; NaN rows where Stan refuses a point."""
        fns = self.functions()
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        if X.shape[1] != self.d:
            raise ValueError(f"X must have {self.d} columns (unconstrained), got {X.shape[1]}")
        rows = range(X.shape[0])
        if progress:
            from .._progress import progress_bar

            rows = progress_bar(rows, f"{self.name}: scores")
        S = np.empty_like(X)
        for i in rows:
            try:
                S[i] = fns.log_density_gradient_only(X[i])
            except (RuntimeError, ValueError):
                S[i] = np.nan
        return S

    def log_density_and_score(self, x):
        """``(log p, grad log p)`` at one unconstrained point (Jacobian included)."""
        try:
            return self.functions().log_density_gradient(np.asarray(x, dtype=np.float64))
        except (RuntimeError, ValueError):
            return -np.inf, np.full(self.d, np.nan)

    def constrain(self, X, *, include_tp: bool = True):
        """Unconstrained rows -> ``(n, p')`` constrained entries (with the transformed
        parameters by default) and their Stan names."""
        fns = self.functions()
        out = np.stack([fns.param_constrain(x, include_tp=include_tp) for x in np.atleast_2d(X)])
        return out, fns.param_names(include_tp=include_tp)

    # biased chains ------------------------------------------------------------------------------
    def nuts(self, *, num_warmup: int, num_samples: int, num_chains: int = 1, seed: int = 0,
             thin: int = 1, init=None, quiet: bool = True) -> Chain:
        """A PyStan NUTS run with its warm-up kept (``save_warmup=True``), unconstrained.

        ``num_warmup`` far below Stan's default 1000 gives a biased chain: its warm-up draws
        (burn-in from Stan's random inits, uniform(-2, 2) on the unconstrained scale unless
        ``init`` is given) and a poorly adapted step size and metric. ``thin`` keeps every
        thin-th draw (a thinned copy). ``info``: ``warmup`` (bool per row), ``chain``,
        ``kind``, ``seconds``, ``names``.
        """
        model = self.model(seed)
        t0 = time.perf_counter()
        kwargs = {"num_chains": num_chains, "num_warmup": num_warmup, "num_samples": num_samples,
                  "save_warmup": True, "num_thin": thin}
        if init is not None:
            kwargs["init"] = [init] * num_chains
        with _quiet(quiet):
            fit = _outside_event_loop(model.sample, **kwargs)
        seconds = time.perf_counter() - t0
        from ..integrations.stan import fit_scores

        sd = fit_scores(fit, self.functions(), progress=False)
        stats = np.asarray(fit["accept_stat__"]).ravel()
        return Chain(
            sd.X, sd.S, np.full(sd.n, np.nan), float(np.mean(stats)), info={
                "kind": "nuts", "sampler": "NUTS (PyStan)", "num_warmup": num_warmup,
                "num_samples": num_samples, "thin": thin, "seed": seed,
                "warmup": sd.source_group == "warmup_posterior", "chain": sd.source_chain,
                "seconds": seconds, "names": self.param_names,
            })

    def tempered(self, *, n: int, T: float = 2.0, seed: int = 0, step: float | None = None,
                 x0=None) -> Chain:
        """A P-MALA chain on p^(1/T), started at a reference draw, with the scores of p.

        Preconditioned by T times the covariance of the unconstrained reference (every 10th
        draw); ``step``
        defaults to 1.2 d^(-1/3). The whole chain is biased (over-dispersed by about sqrt(T)),
        not only its start: no burn-in removal helps.
        """
        ref = self.reference_unconstrained(thin=10)
        rng = np.random.default_rng(seed)
        cov = np.cov(ref.T).reshape(self.d, self.d) * T
        x0 = ref[rng.integers(ref.shape[0])] if x0 is None else np.asarray(x0, np.float64)
        h = 1.2 * self.d ** (-1 / 3) if step is None else float(step)

        def tempered(x):
            lp, g = self.log_density_and_score(x)
            return lp / T, np.asarray(g) / T

        t0 = time.perf_counter()
        chain = mala(tempered, x0, int(n), h, precond=cov, rng=rng)
        chain.S = chain.S * T  # the scores of p, not of p^(1/T)
        chain.log_density = chain.log_density * T
        chain.info.update({"kind": "tempered", "T": T, "seed": seed,
                           "seconds": time.perf_counter() - t0, "names": self.param_names,
                           "warmup": np.zeros(int(n), bool), "chain": np.zeros(int(n), int)})
        return chain


def stan_name(name: str) -> str:
    """posteriordb's entry name -> Stan's indexed name (``param_names()``).

    Examples
    --------
    >>> from stein_coreset.datasets.posteriordb import stan_name
    >>> stan_name("theta[1,2]"), stan_name("mu")
    ('theta.1.2', 'mu')
    """
    return re.sub(r"\[(.*)\]", lambda m: "." + m.group(1).replace(",", "."), name).replace(" ", "")


def _stan_order(stan_names: list) -> list:
    """Column order putting each variable's entries in Stan's column-major order."""
    def key(item):
        i, full = item
        name, *idx = full.split(".")
        first = next(j for j, f in enumerate(stan_names) if f.split(".")[0] == name)
        return (first, tuple(int(k) for k in reversed(idx)))

    return [i for i, _ in sorted(enumerate(stan_names), key=key)]
