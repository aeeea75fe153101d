"""How list commands print: ``-o table`` (aligned columns, the default), ``-o json`` (one JSON array),
``-o csv`` (a header line, then one line per row), or ``-q`` (the ids only, one a line, for scripts:
``switchboard api-keys list -t shop -q | xargs -n1 switchboard api-keys revoke -t shop``).

A command takes ``output: OutputOpt = "table"`` and ``quiet: QuietOpt = False`` and hands its rows to
:func:`print_rows`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

import typer

__all__ = ["Output", "OutputOpt", "QuietOpt", "print_rows"]


class Output(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table (default), json or csv.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Only the ids, one a line.")]


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def print_rows(
    rows: Sequence[Mapping[str, Any]],
    *,
    columns: Sequence[str],
    output: Output = Output.table,
    quiet: bool = False,
    id_column: str = "id",
    empty: str = "",
) -> None:
    """Print ``rows`` (each a mapping holding at least ``columns``) the way the options ask.

    ``empty`` is what ``-o table`` prints for no rows (json prints ``[]``, csv the header, ``-q`` nothing).
    """
    if quiet:
        for row in rows:
            typer.echo(_text(row[id_column]))
        return
    if output == Output.json:
        typer.echo(
            json.dumps(
                [{c: _json_value(row.get(c)) for c in columns} for row in rows], ensure_ascii=False, indent=2
            )
        )
        return
    if output == Output.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else _text(row.get(c)) for c in columns])
        typer.echo(buffer.getvalue(), nl=False)
        return
    if not rows:
        if empty:
            typer.echo(empty)
        return
    cells = [[_text(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(columns)]
    typer.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for line in cells:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
