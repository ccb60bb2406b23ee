"""The registry of backends, the one dispatch point and the capability table.

:func:`get_backend` picks the backend of a kernel matrix once, from the arrays' namespace and
the base kernels. :func:`runner` is the one place where an operation finds who runs it: the
backend itself when it :meth:`~stein_coreset.engine.protocol.Backend.supports` the operation for
the sizes asked, else the backend its declaration names as the fallback, and so on.
:func:`capability_table` renders the same answers for the docs, so the table is what runs.
"""

from __future__ import annotations

from .protocol import OPERATIONS, Backend, registered

__all__ = [
    "BACKENDS",
    "COMPILED_KERNELS",
    "compiled_kernel",
    "is_compiled_kernel",
    "check_backend",
    "get_backend",
    "runner",
    "capability_table",
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


#: The backends' names, in the order "auto" tries them.
BACKENDS = ("cpu", "cuda", "xp")


def check_backend(backend, name: str = "backend"):
    """``backend`` itself when it is "auto", a backend's name or a :class:`Backend`; else a
    ValueError naming the argument (the check of a public ``backend=`` parameter)."""
    if isinstance(backend, Backend) or backend == "auto" or (
            isinstance(backend, str) and backend in registered()):
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
    chosen = registered(backend) if isinstance(backend, str) and backend != "auto" else (
        backend if isinstance(backend, Backend) else None)
    unknown = [b for b in bases if not is_compiled_kernel(b)]
    if chosen is None:
        if unknown or xp is None:
            return registered("xp")
        for name in BACKENDS:
            if registered(name).native_namespace(xp):
                return registered(name)
        return registered("xp")
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


def runner(backend: Backend, op: str, **ctx) -> Backend:
    """The backend that runs the operation ``op`` (a key of
    :data:`~stein_coreset.engine.protocol.OPERATIONS`) for ``backend`` in the context ``ctx``
    (the sizes and namespaces its ``supports`` reads): ``backend`` itself when it supports it,
    else its declared fallback's runner. The one dispatch point of the engine: the kernel
    matrix's loops, AMD, the DKSD pass and the capability table all go through it."""
    seen = []
    b = backend
    while not b.supports(op, **ctx):
        seen.append(b.name)
        b = registered(b.fallback(op))
        if b.name in seen:
            raise RuntimeError(f"no backend runs {op!r}: the fallbacks of "
                               f"{' -> '.join(seen)} go round in a circle")
    return b


def capability_table() -> str:
    """The markdown table of which backend runs which operation: each backend's entry of
    :func:`runner` at the default settings (a rank, a count of coresets that every backend
    handles), marked with the backend it hands the operation to where that is another."""
    backends = [registered(name) for name in BACKENDS]
    head = "| operation | " + " | ".join(f"`{b.name}`" for b in backends) + " |"
    rule = "|---" * (len(backends) + 1) + "|"
    rows = [head, rule]
    for op, spec in OPERATIONS.items():
        cells = []
        for b in backends:
            r = runner(b, op)
            cells.append(r.how[op] if r is b else f"{r.how[op]} (handed to `{r.name}`)")
        rows.append(f"| {spec.what} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
