"""The :class:`Backend` protocol of the engine, the registry of backends and their capability
table.

A backend is an object with the engine's kernel products (``block``, ``column``, ``matvec``,
``quad``, ...) and loops (Stein thinning, KT-SPLIT, KT-Swap, KT-Swap-LS, weighted RPCholesky,
AMD, the DKSD pass), each taking the :class:`~stein_coreset.engine.KernelMatrix` (or the arrays)
it runs on. Beside every operation sits :meth:`Backend.supports`, which says whether the backend
runs it itself for the given sizes; where it does not, the backend hands the call to the
reference (:class:`~stein_coreset.engine.xp.XpBackend`) or to the C++ on a host copy, and
:meth:`Backend.runs` names who does. :func:`capability_table` renders those answers for the
docs. Algorithms call ``K.backend.<operation>(K, ...)`` and never test a backend's name: the
engine (this package) is the only place that knows which backends exist.
"""

from __future__ import annotations

__all__ = [
    "Backend",
    "BACKENDS",
    "COMPILED_KERNELS",
    "compiled_kernel",
    "is_compiled_kernel",
    "register",
    "check_backend",
    "get_backend",
    "capability_table",
    "OPERATIONS",
]

#: The base-kernel classes the compiled backends (C++ and CUDA) evaluate by their ``code``,
#: registered by :mod:`stein_coreset.kernels` with :func:`compiled_kernel`.
COMPILED_KERNELS: list[type] = []


def compiled_kernel(cls):
    """Class decorator: the compiled backends know the formula of exactly this class (its
    ``code``); a subclass is not compiled, its ``radial`` may differ."""
    COMPILED_KERNELS.append(cls)
    return cls


def is_compiled_kernel(base) -> bool:
    """Whether the compiled backends know this base kernel: exactly one of the classes
    registered with :func:`compiled_kernel` (IMQ, Gaussian, Matern), not a subclass."""
    return type(base) in COMPILED_KERNELS


#: The operations of a backend, in the order of the capability table, with what each computes.
OPERATIONS = {
    "block": "kernel blocks k_P(x_rows, x_cols) and the dense matrix",
    "column": "one column of K",
    "matvec": "K w, one slab at a time",
    "quad": "w^T K w",
    "row_means": "row means of K",
    "coreset_sums": "sums of K over coresets",
    "stein_thinning": "Stein thinning (Alg. D.1)",
    "kt_split": "KT-SPLIT (Alg. D.2) and its batched halvings",
    "kt_swap": "KT-Swap (Alg. D.3)",
    "kt_swap_ls": "KT-Swap-LS (Alg. G.2)",
    "weighted_rpcholesky": "weighted RPCholesky (Alg. F.1)",
    "amd": "AMD on F F^T + diag (Alg. F.2)",
    "dksd_pass": "the DKSD pair pass (Barp et al., 2019, Eq. 7)",
}


class Backend:
    """One way of computing the engine's operations (:data:`OPERATIONS`).

    Subclasses set :attr:`name`, :attr:`compiled`, and :attr:`how` (operation -> a short
    description of who runs it, shown in the capability table) and implement the operations.
    Instances are stateless singletons; per-matrix state (host copies, compiled handles) lives
    in the :class:`~stein_coreset.engine.KernelMatrix`'s cache.
    """

    #: The name users pass as ``backend=`` ("cpu", "cuda", "xp").
    name: str = ""
    #: Whether the backend runs compiled code (C++ or CUDA) rather than array-API operations.
    compiled: bool = False
    #: Operation -> who runs it on this backend (the capability table's cell).
    how: dict[str, str] = {}

    def supports(self, op: str, **ctx) -> bool:
        """Whether this backend runs ``op`` itself for the context ``ctx`` (e.g. ``xp=``,
        ``rank=``, ``coresets=``); where it does not, the call is handed on (:meth:`runs`)."""
        if op not in OPERATIONS:
            raise ValueError(f"unknown engine operation {op!r}; one of {', '.join(OPERATIONS)}")
        return op in self.how

    def runs(self, op: str, **ctx) -> str:
        """Who runs ``op`` for the context ``ctx``: this backend's entry of the capability
        table, or the description of the backend it hands the call to."""
        return self.how[op] if self.supports(op, **ctx) else self.fallback(op).runs(op, **ctx)

    def fallback(self, op: str) -> Backend:
        """The backend that runs ``op`` where this one does not support it."""
        return _REGISTRY["xp"]

    def native_namespace(self, xp) -> bool:
        """Whether "auto" picks this backend for arrays of namespace ``xp``."""
        return False

    def accepts(self, xp) -> str | None:
        """None when this backend can hold arrays of namespace ``xp``, else why not."""
        return None

    def __repr__(self) -> str:
        return f"<stein_coreset engine backend {self.name!r}>"

    def __reduce__(self):  # singletons: unpickled (e.g. in a Dask worker) as the same object
        return (get_backend, (self.name,))


_REGISTRY: dict[str, Backend] = {}


def register(cls):
    """Class decorator: one instance of ``cls`` becomes the backend named ``cls.name``."""
    _REGISTRY[cls.name] = cls()
    return cls


#: The backends' names, in the order "auto" tries the compiled ones.
BACKENDS = ("cpu", "cuda", "xp")


def check_backend(backend, name: str = "backend"):
    """``backend`` itself when it is "auto", a backend's name or a :class:`Backend`; else a
    ValueError naming the argument (the check of a public ``backend=`` parameter)."""
    if isinstance(backend, Backend) or backend == "auto" or (
            isinstance(backend, str) and backend in _REGISTRY):
        return backend
    raise ValueError(
        f"{name} must be 'auto' or one of {', '.join(map(repr, BACKENDS))}, got {backend!r}"
    )


def get_backend(backend="auto", xp=None, *bases) -> Backend:
    """The backend for arrays of namespace ``xp`` and the base kernels ``bases``.

    ``backend`` is "auto", a backend's name (:data:`BACKENDS`) or a :class:`Backend`. "auto"
    gives the reference ("xp") as soon as one base kernel is not compiled
    (:func:`is_compiled_kernel`), else "cpu" for NumPy arrays, "cuda" for CuPy's and "xp" for
    any other namespace. A compiled backend asked for by name refuses a kernel it does not know
    rather than evaluate another one, and "cuda" refuses arrays that are not CuPy's.
    """
    check_backend(backend)
    chosen = _REGISTRY[backend] if isinstance(backend, str) and backend != "auto" else (
        backend if isinstance(backend, Backend) else None)
    unknown = [b for b in bases if not is_compiled_kernel(b)]
    if chosen is None:
        if unknown or xp is None:
            return _REGISTRY["xp"]
        for name in BACKENDS:
            if _REGISTRY[name].native_namespace(xp):
                return _REGISTRY[name]
        return _REGISTRY["xp"]
    if chosen.compiled and unknown:
        raise ValueError(
            f"backend {chosen.name!r} cannot evaluate {type(unknown[0]).__name__}: the compiled "
            f"backends know only {', '.join(c.__name__ for c in COMPILED_KERNELS)}; use "
            "backend='xp'"
        )
    if xp is not None:
        why = chosen.accepts(xp)
        if why is not None:
            raise ValueError(why)
    return chosen


def capability_table() -> str:
    """The markdown table of which backend runs which operation, from :meth:`Backend.runs` at
    the default settings (a rank, a count of coresets that every backend handles)."""
    backends = [_REGISTRY[name] for name in BACKENDS]
    head = "| operation | " + " | ".join(f"`{b.name}`" for b in backends) + " |"
    rule = "|---" * (len(backends) + 1) + "|"
    rows = [head, rule]
    for op, what in OPERATIONS.items():
        cells = [b.runs(op) for b in backends]
        rows.append(f"| {what} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
