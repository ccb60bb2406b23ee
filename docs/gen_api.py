"""Write docs/api.md from the public docstrings (run: ``python docs/gen_api.py``).

The reference lists, for each public module, every name in its ``__all__`` with its signature and
docstring, and ends with the ``stein-coreset`` command's ``--help`` texts. It documents the
installed package, so run it with the environment you built (it imports ``stein_coreset``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import sys

# import the installed package, not the source tree beside this file
_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _root]

MODULES = [
    ("stein_coreset", "Kernels, discrepancies and `compress`: the public API."),
    ("stein_coreset.algorithms", "The paper's building blocks, one function per algorithm."),
    ("stein_coreset.estimators", "Minimum Stein discrepancy estimation."),
    ("stein_coreset.datasets", "Simulated biased chains with exact scores (demo, experiments)."),
    ("stein_coreset.distributed",
     "Debiased compression on Dask, for chains beyond one process (extra `dask`; "
     "[More than one machine](distributed.md))."),
]


def _signature(obj) -> str:
    try:
        try:
            text = str(inspect.signature(obj, eval_str=True))
        except (NameError, TypeError, SyntaxError):  # unevaluable annotations stay strings
            text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    text = re.sub(r"stein_coreset\.(?:\w+\.)*(?=[A-Za-z_]\w*)", "", text)
    text = text.replace("typing.", "")
    if inspect.isclass(obj):
        text = text.removesuffix(" -> None")
    return text


def _doc(obj) -> str:
    doc = inspect.getdoc(obj) or "*(no docstring)*"
    return doc


def _members(cls):
    """Public methods and documented properties (inherited ones included)."""
    out = []
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or name in getattr(cls, "__dataclass_fields__", {}):
            continue
        if inspect.isfunction(member) or (isinstance(member, property) and member.__doc__):
            out.append((name, member))
    return out


def _entry(qual: str, obj) -> list[str]:
    lines = []
    if inspect.isclass(obj):
        lines.append(f"### class `{qual}{_signature(obj)}`\n")
        lines.append(_indent_doc(_doc(obj)))
        for name, member in _members(obj):
            if isinstance(member, property):
                lines.append(f"- **`{name}`** (property): {_first_line(member)}")
            else:
                lines.append(f"- **`{name}{_signature(member)}`**: {_first_line(member)}")
        lines.append("")
    elif callable(obj):
        lines.append(f"### `{qual}{_signature(obj)}`\n")
        lines.append(_indent_doc(_doc(obj)))
    else:
        lines.append(f"### `{qual}`\n")
        lines.append(f"`{obj!r}`\n")
    return lines


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj)
    return doc.strip().splitlines()[0] if doc else ""


def _indent_doc(doc: str) -> str:
    # NumPy-format docstrings read well as preformatted text
    return "```text\n" + doc.rstrip() + "\n```\n"


def _cli_help() -> list[str]:
    from stein_coreset.cli import build_parser

    parser = build_parser()
    lines = ["## The `stein-coreset` command\n", "```text", parser.format_help().rstrip(), "```\n"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines += [f"### `stein-coreset {name}`\n", "```text"]
                lines += [sub.format_help().rstrip(), "```\n"]
    return lines


def _methods() -> list[str]:
    """The ``compress`` methods and their options, from the method table (cannot drift)."""
    from stein_coreset.compress import METHODS

    lines = [
        "## `compress` methods and their options\n",
        "From `stein_coreset.methods.METHODS`. Pass options as keywords of `sc.compress`; an "
        "unknown option is a `TypeError` naming it, raised before any work. `rank` / `tau` apply "
        "to the methods marked *rank*, `weights` to those marked *weights*.\n",
        "| method | debias | thin | kind | needs S | takes | summary |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in METHODS.items():
        flags = (("rank", m.uses_rank), ("weights", m.takes_weights))
        takes = ", ".join(t for t, on in flags if on)
        lines.append(
            f"| `{name}` | {m.debias} | {m.thin} | {m.kind} | {'yes' if m.debiased else 'no'} "
            f"| {takes or '-'} | {m.summary} |"
        )
    lines.append("")
    for name, m in METHODS.items():
        lines.append(f"### `method=\"{name}\"`\n")
        if not m.options:
            lines.append("No options.\n")
            continue
        for opt_name, opt in m.options.items():
            lines.append(f"- `{opt_name}` (default `{opt.default!r}`): {opt.doc}")
        lines.append("")
    return lines


def build() -> str:
    lines = [
        "# API reference\n",
        "Generated from the docstrings by `python docs/gen_api.py`; do not edit by hand.\n",
    ]
    toc = []
    body = []
    for modname, blurb in MODULES:
        try:
            mod = importlib.import_module(modname)
        except ImportError as e:  # a module not built yet
            body.append(f"## `{modname}`\n\n*(not importable: {e})*\n")
            continue
        names = list(getattr(mod, "__all__", []))
        toc.append(f"- [`{modname}`](#{modname.replace('.', '')}): {blurb}")
        body.append(f"## `{modname}`\n\n{blurb}\n")
        if not names:
            body.append("*(no public names yet)*\n")
        for name in names:
            body += _entry(
                f"{modname}.{name}" if modname != "stein_coreset" else f"sc.{name}",
                getattr(mod, name),
            )
    toc.append("- [`compress` methods and their options](#compress-methods-and-their-options)")
    toc.append("- [The `stein-coreset` command](#the-stein-coreset-command)")
    return "\n".join(lines + toc + [""] + body + _methods() + _cli_help()) + "\n"


def main() -> int:
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api.md")
    text = build()
    with open(out, "w") as f:
        f.write(text)
    print(f"wrote {out} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
