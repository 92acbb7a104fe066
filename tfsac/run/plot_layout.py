"""A learning-curve figure's layout: its grid of panels (one or two rows for one env, a
row per env) and beneath it the table of every setting in which its groups differ
(tfsac.run.run_groups.settings_table), where their labels do not say all of them."""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np

from tfsac.run.run_groups import RunGroup, settings_table

TABLE_ROW_INCHES = 0.25


def figure(plt, env_rows: Sequence[Tuple[str, List[RunGroup]]], widths: Sequence[int]):
    """(the figure, its panels' axes [row, column]) for `env_rows` whose rows hold
    `widths` panels each; the settings table drawn beneath where there is one."""
    width = max(widths)
    if len(env_rows) == 1:  # its panels in one or two rows
        rows = 1 if width <= 2 else 2
        columns = math.ceil(width / rows)
    else:  # a row of panels per env
        rows, columns = len(env_rows), width
    # Labels name the fewest settings that tell the groups apart; the table, every one.
    table = settings_table(env_rows)
    heights = [4] * rows
    if table is not None:
        heights.append(TABLE_ROW_INCHES * (len(table[0]) + 1) + 0.4)
    fig = plt.figure(figsize=(5 * columns, sum(heights)))
    grid = fig.add_gridspec(len(heights), columns, height_ratios=heights)
    axes = np.array([[fig.add_subplot(grid[r, c]) for c in range(columns)] for r in range(rows)])
    if table is not None:
        draw_table(fig.add_subplot(grid[rows, :]), table)
    return fig, axes


def draw_table(ax, table: tuple) -> None:
    """run_groups.settings_table on `ax`: a row per setting, a column per group, headed by
    its label in its curves' colour."""
    names, columns = table
    ax.axis("off")
    cells = [[values[row] for _, _, values in columns] for row in range(len(names))]
    heads = [head for head, _, _ in columns]
    drawn = ax.table(cells, rowLabels=names, colLabels=heads, loc="center", cellLoc="left")
    drawn.auto_set_font_size(False)
    drawn.set_fontsize(9)
    drawn.auto_set_column_width(list(range(len(columns))))
    for column, (_, index, _) in enumerate(columns):
        drawn[0, column].get_text().set_color(f"C{index % 10}")
