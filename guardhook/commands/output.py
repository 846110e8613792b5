"""How the one-shot commands write for people (issue 39), as kubectl and the Kyverno CLI do.

- Colour only on a terminal, and never with `NO_COLOR` set (no-color.org) or `--no-color`.
- On a terminal, long lines wrap at the terminal's width and tables are drawn by `rich`; anywhere
  else (a pipe, a file, CI logs) the output is plain text, one finding a line, tables as aligned
  columns, the same bytes whatever the environment, so scripts and tests can read it.
- `--quiet` keeps the findings only: no summary, no notes.
- Warnings go to stderr as `Warning: …` (kubectl's form); log lines only with `--verbose`
  (`configure_logging`).

Imported by command modules inside their run functions: `rich` loads only when a terminal is
there to draw on.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO


def wants_colour(stream: TextIO, no_color_flag: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """Whether to colour `stream`: a terminal, no `--no-color`, and `NO_COLOR` unset or empty
    (no-color.org: "when present and not an empty string")."""
    env = os.environ if env is None else env
    if no_color_flag or env.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass
class Output:
    """Where a command's text goes: `out` (findings, tables) and `err` (warnings, notes,
    summary), whether they are terminals, whether to colour, and `quiet`."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    colour: bool = False
    quiet: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Output:
        """The Output for a parsed command line (`--no-color`, `--quiet`), on sys.stdout/stderr."""
        no_color = bool(getattr(args, "no_color", False))
        return cls(
            sys.stdout, sys.stderr, wants_colour(sys.stdout, no_color), bool(getattr(args, "quiet", False))
        )

    @property
    def terminal(self) -> bool:
        isatty = getattr(self.out, "isatty", None)
        return bool(isatty and isatty())

    def _console(self, stream: TextIO) -> Any:
        from rich.console import Console

        return Console(
            file=stream,
            no_color=not self.colour,
            color_system="auto" if self.colour else None,
            highlight=False,
            soft_wrap=False,
        )

    def line(self, text: str, style: str = "") -> None:
        """One line on `out`: wrapped (and styled, when colouring) on a terminal, else as it is."""
        if self.terminal:
            from rich.text import Text

            self._console(self.out).print(Text(text, style=style if self.colour else ""))
        else:
            print(text, file=self.out)

    def finding(self, text: str, action: str) -> None:
        """A finding line on `out`, its action coloured on a terminal (Deny/Invalid red, Warn and
        Advisory yellow)."""
        self.line(text, ACTION_STYLES.get(action, ""))

    def note(self, text: str) -> None:
        """A note or summary line on `err`; nothing with `--quiet`."""
        if not self.quiet:
            print(text, file=self.err)

    def warning(self, text: str) -> None:
        """`Warning: text` on `err` (kubectl's form), even with `--quiet`."""
        print(f"Warning: {text}", file=self.err)

    def table(
        self,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        styles: Mapping[int, Callable[[str], str]] | None = None,
        stream: TextIO | None = None,
    ) -> None:
        """A table on `stream` (default `out`): drawn by rich on a terminal (cells in column i
        styled by `styles[i](cell)` when colouring), else aligned columns, two spaces apart, with
        trailing blanks stripped, as `kubectl get` prints."""
        target = self.out if stream is None else stream
        isatty = getattr(target, "isatty", None)
        if isatty and isatty():
            from rich.table import Table

            table = Table(*header, box=None, pad_edge=False, header_style="bold" if self.colour else "")
            for row in rows:
                cells = [
                    f"[{styles[i](c)}]{_escape(c)}[/]"
                    if self.colour and styles and i in styles
                    else _escape(c)
                    for i, c in enumerate(row)
                ]
                table.add_row(*cells)
            self._console(target).print(table)
            return
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            print(line.rstrip(), file=target)


ACTION_STYLES = {"Deny": "red", "Invalid": "red", "Warn": "yellow", "Advisory": "yellow", "Audit": "cyan"}


def _escape(text: str) -> str:
    from rich.markup import escape

    return str(escape(text))


class WarningFormatter(logging.Formatter):
    """A log record as kubectl words it: `Warning: message` (`Error: message` for errors)."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = "Error" if record.levelno >= logging.ERROR else "Warning"
        return f"{prefix}: {record.getMessage()}"


def configure_logging(verbose: bool) -> None:
    """For a one-shot command: without `verbose`, only warnings and errors reach stderr, as
    `Warning: …` lines (no timestamp or logger name); with it, the log lines main configured stay."""
    if verbose:
        return
    root = logging.getLogger()
    for handler in root.handlers:
        if getattr(handler, "guardhook", False):
            handler.setFormatter(WarningFormatter())
    root.setLevel(logging.WARNING)
