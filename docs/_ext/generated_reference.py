"""Directives that generate reference text from the code at build time, so it cannot drift:

- ``method-table``: ``compress``'s methods and their options, from
  ``stein_coreset.methods.METHODS``;
- ``cli-help``: the ``stein-coreset`` command's ``--help`` texts, from its argument parser.

Both emit MyST markdown (they are used from the MyST pages docs/api/methods.md and cli.md,
whose directives parse their content as markdown). In a MyST page::

    ```{method-table}
    ```
"""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective


def _cell(text: str) -> str:
    return " ".join(str(text).split())


def method_table_md() -> list[str]:
    """The table and the per-method option lists, as MyST markdown lines."""
    from stein_coreset.methods import METHODS

    lines = [
        "| method | debias | thin | kind | needs S | takes | summary |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in METHODS.items():
        flags = (("rank", m.uses_rank), ("weights", m.takes_weights))
        takes = ", ".join(t for t, on in flags if on) or "-"
        lines.append(
            f"| `{name}` | {_cell(m.debias)} | {_cell(m.thin)} | {_cell(m.kind)} "
            f"| {'yes' if m.debiased else 'no'} | {takes} | {_cell(m.summary)} |"
        )
    lines.append("")
    for name, m in METHODS.items():
        lines += [f'```{{rubric}} method="{name}"', "```", ""]
        if not m.options:
            lines += ["No options.", ""]
            continue
        for opt_name, opt in m.options.items():
            lines.append(f"- `{opt_name}` (default `{opt.default!r}`): {_cell(opt.doc)}")
        lines.append("")
    return lines


class MethodTable(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(method_table_md(), source="METHODS"), 0, container)
        return container.children


def cli_help_md() -> list[str]:
    """The top-level and each subcommand's ``--help``, as MyST markdown lines."""
    import argparse

    from stein_coreset.cli import build_parser

    def block(text: str) -> list[str]:
        return ["```text", *text.rstrip().splitlines(), "```", ""]

    parser = build_parser()
    lines = block(parser.format_help())
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                lines += [f"```{{rubric}} stein-coreset {name}", "```", ""]
                lines += block(sub.format_help())
    return lines


class CliHelp(SphinxDirective):
    has_content = False

    def run(self) -> list[nodes.Node]:
        container = nodes.container()
        self.state.nested_parse(StringList(cli_help_md(), source="cli"), 0, container)
        return container.children


def setup(app):
    app.add_directive("method-table", MethodTable)
    app.add_directive("cli-help", CliHelp)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
