"""A PyMC model's compiled maps between constrained draws, unconstrained points and scores.

:class:`ModelFunctions` builds, once per model (:func:`model_functions` caches it), the PyTensor
functions :func:`stein_coreset.integrations.pymc.trace_scores` needs: the forward transforms of
the free variables to the value variables PyMC samples in, the gradient of the joint log density
there (Jacobian terms included), the backward transforms and the log density, each vectorised
over draws. PyMC and PyTensor are imported lazily.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import _progress

__all__ = ["ModelFunctions", "model_functions"]


class ModelFunctions:
    """Compiled maps of a PyMC model between constrained draws, unconstrained points and scores.

    ``forward`` (constrained free-variable values -> value variables), ``backward`` (value
    variables -> constrained values), ``dlogp`` (value variables -> gradient of the joint log
    density, Jacobian terms included, i.e. the score PyMC's samplers follow) and ``logp``. Each is
    vectorised over a leading batch dimension with ``pytensor.graph.replace.vectorize_graph``;
    when a graph cannot be vectorised (or the vectorised result disagrees with the per-draw one
    on the first draw) the per-draw function is looped over instead and ``vectorized`` is False.
    Use :func:`model_functions` to get one: it caches the instance per model.

    Parameters
    ----------
    model : pymc.Model
        A model whose free variables are all continuous (the scores need a gradient);
        otherwise a ``ValueError`` names the discrete ones.

    Attributes
    ----------
    names : list of str
        The free variables, in column order.
    value_names : list of str
        Their value variables (``sigma_log__`` for a positive ``sigma``): the unconstrained
        coordinates.
    d : int
        Number of unconstrained columns.
    vectorized : dict of str to bool
        Per compiled map, whether it runs batched (True) or draw by draw.

    Notes
    -----
    Construction builds the PyTensor graphs (no compilation); each map compiles on its first
    use, once per model (about a second with a warm PyTensor cache, tens of seconds on a cold
    one). Evaluation is one compiled call per batch of draws.

    See Also
    --------
    model_functions : the cached instance of a model.
    trace_scores : applies these maps to a whole trace.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from stein_coreset.integrations.pymc import ModelFunctions
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     sigma = pm.HalfNormal("sigma", 1.0)
    >>> fns = ModelFunctions(model)
    >>> fns.names, fns.value_names, fns.d
    (['mu', 'sigma'], ['mu', 'sigma_log__'], 2)
    >>> X = np.array([[0.5, 0.0], [-1.0, np.log(2.0)]])   # rows (mu, log sigma)
    >>> fns.scores(X).round(3)                             # (-mu, 1 - sigma^2)
    array([[-0.5,  0. ],
           [ 1. , -3. ]])
    >>> [v.round(3) for v in fns.to_constrained(X)]        # mu, sigma
    [array([ 0.5, -1. ]), array([1., 2.])]
    """

    def __init__(self, model):
        import pytensor
        import pytensor.tensor as pt
        from pytensor.graph.replace import clone_replace  # pytensor 2.x and 3.x

        self.model = model
        self.free = list(model.free_RVs)
        if not self.free:
            raise ValueError("model: it has no free random variables to compress over")
        self.names = [rv.name for rv in self.free]
        self.values = [model.rvs_to_values[rv] for rv in self.free]
        discrete = [
            n
            for n, v in zip(self.names, self.values, strict=True)
            if not v.dtype.startswith("float")
        ]
        if discrete:
            raise ValueError(
                f"model: free variables {discrete} are discrete; the scores need a gradient, so "
                "every free variable must be continuous (marginalise discrete ones out)"
            )
        self.value_names = [v.name for v in self.values]
        transforms = getattr(model, "rvs_to_transforms", {})
        self.transforms = [transforms.get(rv) for rv in self.free]
        ip = model.initial_point()
        self._initial = [np.asarray(ip[name]) for name in self.value_names]
        self.value_shapes = [tuple(np.shape(ip[name])) for name in self.value_names]
        self.value_sizes = [int(np.prod(s, dtype=np.int64)) for s in self.value_shapes]
        self.d = int(sum(self.value_sizes))

        # forward: constrained placeholders -> value-variable values
        consts = [rv.type(name=f"{rv.name}_constrained") for rv in self.free]
        fwd = [
            tr.forward(rv, *rv.owner.inputs) if tr is not None else rv
            for rv, tr in zip(self.free, self.transforms, strict=True)
        ]
        fwd = clone_replace(fwd, replace=dict(zip(self.free, consts, strict=True)))
        fwd = [pt.as_tensor_variable(f) for f in fwd]
        # backward and the joint log density, in the value variables
        bwd = model.replace_rvs_by_values(self.free)
        logp = model.logp(jacobian=True)
        dlogp = pytensor.grad(logp, self.values)

        self._single_fns: dict = {}
        self._graphs = {
            "forward": (consts, fwd),
            "backward": (self.values, bwd),
            "dlogp": (self.values, dlogp),
            "logp": (self.values, [logp]),
        }
        self._batched: dict = {}
        self.vectorized: dict = {}
        # A compiled PyTensor function keeps its inputs and outputs in storage of its own, so
        # two threads calling one at once read each other's values: every compile and call on
        # these functions holds the model's lock (calls on other models run in parallel).
        self._lock = threading.RLock()

    def single(self, key):
        """The compiled per-draw map ``key`` (compiled on first use)."""
        with self._lock:
            if key not in self._single_fns:
                self._single_fns[key] = self._compile(*self._graphs[key])
            return self._single_fns[key]

    @staticmethod
    def _compile(inputs, outputs):
        import pytensor

        # float64 draws into a floatX=float32 model are cast down, as PyMC's own functions do
        return pytensor.function(
            inputs, outputs, on_unused_input="ignore", allow_input_downcast=True
        )

    def _batched_fn(self, key):
        with self._lock:
            return self._batched_fn_locked(key)

    def _batched_fn_locked(self, key):
        if key not in self._batched:
            import pytensor.tensor as pt
            from pytensor.graph.replace import vectorize_graph

            inputs, outputs = self._graphs[key]
            try:
                binputs = [
                    pt.tensor(
                        name=f"{v.name}_batch", dtype=v.dtype, shape=(None,) + tuple(v.type.shape)
                    )
                    for v in inputs
                ]
                bout = vectorize_graph(outputs, replace=dict(zip(inputs, binputs, strict=True)))
                self._batched[key] = self._compile(binputs, bout)
            except Exception:  # noqa: BLE001 - any failure falls back to the per-draw loop
                self._batched[key] = None
        return self._batched[key]

    def __call__(
        self, key: str, args: list, batch_size: int = 1024, progress: str | None = None
    ) -> list:
        """Evaluate map ``key`` on batched inputs, each ``(n, *shape)``; list of ``(n, *shape)``.
        ``progress``: a label to show a bar over the batches (or draws) under. Thread-safe: the
        evaluation holds the model's lock."""
        with self._lock:
            return self._call_locked(key, args, batch_size, progress)

    def _call_locked(self, key, args, batch_size, progress):
        n = int(args[0].shape[0])
        single = self.single(key)
        fn = self._batched_fn(key)
        if key not in self.vectorized:
            self._check_vectorized(key, args)
        if fn is not None and self.vectorized.get(key):
            starts = range(0, n, batch_size)
            if progress:
                starts = _progress.progress_bar(starts, f"{progress} (batches of {batch_size})")
            parts = [fn(*[a[i : i + batch_size] for a in args]) for i in starts]
            return [np.concatenate([np.asarray(p[j]) for p in parts]) for j in range(len(parts[0]))]
        self.vectorized[key] = False
        draws = range(n)
        if progress:
            draws = _progress.progress_bar(draws, f"{progress} (draw by draw)")
        rows = [single(*[a[i] for a in args]) for i in draws]
        return [np.stack([np.asarray(r[j]) for r in rows]) for j in range(len(rows[0]))]

    def _check_vectorized(self, key: str, args: list) -> None:
        """Call the batched and the per-draw map ``key`` on the first row of ``args`` and set
        ``vectorized[key]`` to whether they agree (False when there is no batched map). The
        caller holds the lock."""
        fn, ok = self._batched_fn(key), False
        if fn is not None:
            try:
                got = fn(*[a[:1] for a in args])
                want = self.single(key)(*[a[0] for a in args])
                ok = all(
                    np.allclose(
                        np.asarray(g)[0], np.asarray(w), rtol=1e-10, atol=1e-12, equal_nan=True
                    )
                    for g, w in zip(got, want, strict=True)
                )
            except Exception:  # noqa: BLE001 - any failure falls back to the per-draw loop
                ok = False
        self.vectorized[key] = ok

    def compile(self, keys=("forward", "dlogp", "backward")) -> None:
        """Compile the per-draw and batched maps ``keys`` now and make their first call, at the
        model's initial point (PyTensor 3 finishes building a function on its first call), so
        that later evaluations time evaluation only. Each map once per model."""
        with self._lock:
            for key in keys:
                if key in self.vectorized:
                    continue
                example = [v[None] for v in self._initial]
                if key == "forward":  # takes constrained values
                    example = [np.asarray(v)[None]
                               for v in self.single("backward")(*self._initial)]
                self._check_vectorized(key, example)

    # flat views -------------------------------------------------------------------------------
    def split(self, X):
        """``(n, d)`` unconstrained rows -> list of ``(n, *value_shape)`` arrays."""
        n, out, start = X.shape[0], [], 0
        for shape, size in zip(self.value_shapes, self.value_sizes, strict=True):
            out.append(np.ascontiguousarray(X[:, start : start + size]).reshape((n,) + shape))
            start += size
        return out

    def join(self, parts) -> np.ndarray:
        """List of ``(n, *value_shape)`` arrays -> ``(n, d)`` float64 rows (undoes ``split``)."""
        n = parts[0].shape[0]
        return np.concatenate(
            [np.asarray(p, dtype=np.float64).reshape(n, -1) for p in parts], axis=1
        )

    def to_unconstrained(self, constrained: list, batch_size: int = 1024) -> np.ndarray:
        """``(n, *shape)`` constrained values per free variable -> ``(n, d)`` unconstrained
        rows."""
        return self.join(self("forward", constrained, batch_size))

    def to_constrained(self, X, batch_size: int = 1024) -> list:
        """``(n, d)`` unconstrained rows -> list of ``(n, *shape)`` constrained values per
        variable."""
        return self("backward", self.split(X), batch_size)

    def scores(self, X, batch_size: int = 1024, progress: str | None = None) -> np.ndarray:
        """(n, d) gradients of the joint log density at the unconstrained rows of X."""
        return self.join(self("dlogp", self.split(X), batch_size, progress))

    def logp(self, X, batch_size: int = 1024) -> np.ndarray:
        """(n,) joint log density (Jacobian terms included) at the unconstrained rows of X."""
        return np.asarray(self("logp", self.split(X), batch_size)[0]).reshape(-1)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: Held while the cache is read or filled: threads asking for one model's functions at once get
#: one instance (and build its graphs once).
_CACHE_LOCK = threading.Lock()


def model_functions(model) -> ModelFunctions:
    """The model's :class:`ModelFunctions`, cached per model.

    The cache is keyed on the model and its current set of variables (a variable added
    later gives a fresh instance), so compressing one trace with several methods compiles the
    gradient once. It holds the model weakly: a model that is dropped frees its functions.

    Parameters
    ----------
    model : pymc.Model
        The model; one that cannot be weakly referenced is not cached.

    Returns
    -------
    ModelFunctions

    See Also
    --------
    ModelFunctions : the compiled maps.
    trace_scores : the one user of this cache most callers need.

    Examples
    --------
    >>> import pymc as pm
    >>> from stein_coreset.integrations.pymc import model_functions
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    >>> model_functions(model) is model_functions(model)
    True
    >>> with model:
    ...     tau = pm.HalfNormal("tau", 1.0)
    >>> model_functions(model).names       # a new variable: a new instance
    ['mu', 'tau']
    """
    key = (
        tuple(id(v) for v in model.free_RVs),
        tuple(id(v) for v in model.value_vars),
        tuple(id(v) for v in model.potentials),
        tuple(id(v) for v in model.observed_RVs),
    )
    with _CACHE_LOCK:
        try:
            hit = _CACHE.get(model)
        except TypeError:  # not weak-referenceable: no cache
            return ModelFunctions(model)
        if hit is not None and hit[0] == key:
            return hit[1]
        fns = ModelFunctions(model)
        _CACHE[model] = (key, fns)
        return fns
