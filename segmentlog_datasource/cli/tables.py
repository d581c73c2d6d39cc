"""Tables for the terminal that never crop or fold a number.

rich squeezes a table that is wider than the terminal by folding its cells, numbers
included (`1811` becomes `18` over `11`), or cuts them as a last resort. Here each column
gets at least the width of its longest number (or, in a column of words, its longest
word), and a table that still does not fit is split into several, one after the other:
each repeats the key columns (those that name a row: the partition; a group, topic and
partition), so that every row of a continuation says which row it continues, and takes
as many of the other columns as fit. Only a single column wider than the terminal makes
a table wider than it (the terminal then wraps its lines; nothing is lost).
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

CELL_PADDING = 2  # rich's default: one space either side of a cell
SPLIT_NOTE = "(continued)"


@dataclass(frozen=True)
class Column:
    name: str
    justify: str = "right"
    # Whether a cell may break between words (lists, sentences). A column that does not
    # wrap keeps every line of a cell whole: numbers, offsets, timestamps, names.
    wraps: bool = False
    # Whether the column names the row (with the other key columns): every table a wide
    # one is split into repeats it. A table without one repeats its first column.
    key: bool = False


def _lines(cell: str) -> List[str]:
    return cell.split("\n")


def _widths(column: Column, cells: Sequence[str]):
    """(narrowest, natural) width of a column: the narrowest keeps each unbreakable piece
    whole (a header may always break between its words)."""
    lines = [line for cell in cells for line in _lines(cell)]
    pieces = [word for line in lines for word in line.split()] if column.wraps else lines
    narrowest = max([cell_len(piece) for piece in pieces + column.name.split()] or [1])
    natural = max([cell_len(line) for line in lines] + [cell_len(column.name), narrowest])
    return max(narrowest, 1), max(natural, 1)


def _table_width(widths: Sequence[int]) -> int:
    """A rich table's width for these column widths: padding, a rule between columns and
    the two edges."""
    return sum(width + CELL_PADDING for width in widths) + len(widths) + 1


def _column_groups(narrowest: List[int], available: int, keys: List[int]) -> List[List[int]]:
    """Columns in order, cut into groups that fit `available` at their narrowest, each
    group holding the key columns (in their places) and at least one other."""
    groups: List[List[int]] = []
    current: List[int] = []
    for index in (i for i in range(len(narrowest)) if i not in keys):
        wider = sorted(set(keys) | set(current) | {index})
        if current and _table_width([narrowest[i] for i in wider]) > available:
            groups.append(sorted(set(keys) | set(current)))
            current = [index]
        else:
            current.append(index)
    groups.append(sorted(set(keys) | set(current)))
    return groups


def _shared_widths(group: List[int], narrowest: List[int], natural: List[int],
                   available: int) -> List[int]:
    """Each column at its narrowest, the room left given first to the columns that need
    least of it to reach their natural width (a header on one line, a list unbroken)."""
    widths = {index: narrowest[index] for index in group}
    room = available - _table_width(list(widths.values()))
    for index in sorted(group, key=lambda i: natural[i] - narrowest[i]):
        grow = min(max(room, 0), natural[index] - narrowest[index])
        widths[index] += grow
        room -= grow
    return [widths[index] for index in group]


def print_table(console: Console, title: Optional[str], columns: Sequence[Column],
                rows: Sequence[Sequence[str]]) -> None:
    """Print `rows` (text cells, lines split by newlines) under `columns` on `console`,
    in as many tables as it takes to show every cell whole (see the module's doc)."""
    keys = [number for number, column in enumerate(columns) if column.key] or [0]
    bounds = [_widths(column, [row[number] for row in rows])
              for number, column in enumerate(columns)]
    narrowest = [low for low, _ in bounds]
    natural = [high for _, high in bounds]
    available = console.width
    for part, group in enumerate(_column_groups(narrowest, available, keys)):
        needed = _table_width([narrowest[i] for i in group])
        widths = _shared_widths(group, narrowest, natural, max(available, needed))
        shown = title if part == 0 else (f"{title} {SPLIT_NOTE}" if title else None)
        table = Table(title=None if shown is None else Text(shown), title_justify="left")
        for index, width in zip(group, widths):
            column = columns[index]
            # A fixed width rich does not shrink; every piece fits it, so nothing folds.
            table.add_column(Text(column.name), justify=column.justify, width=width,
                             overflow="fold")
        for row in rows:
            # Text, not markup: a path or a reason may hold "[".
            table.add_row(*(Text(row[index]) for index in group))
        _print_at_least(console, table, needed)


def _print_at_least(console: Console, table: Table, width: int) -> None:
    """Print `table` on `console`, made `width` wide for it if it is narrower: a table
    rich had to fit into fewer columns it would crop."""
    if width <= console.width:
        console.print(table)
        return
    before = console.width
    console.width = width
    try:
        console.print(table)
    finally:
        console.width = before
