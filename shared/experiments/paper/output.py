"""What every experiment writes: its output folder, CSV and markdown tables, mean ± s.e.
cells and matplotlib figures (no pyplot, so any backend works).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "output_dir",
    "write_csv",
    "markdown_table",
    "mean_se",
    "plus_minus",
    "new_figure",
    "runs_phrase",
    "identity_scatter",
]


def output_dir(out_dir: str | Path) -> Path:
    """The experiment's output folder, created if missing.

    Args:
        out_dir: the folder.

    Returns:
        It as a ``Path``.

    Example:
        >>> output_dir(tmp / "fig3").is_dir()  # doctest: +SKIP
        True
    """
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence]) -> Path:
    """Write a CSV file; floats with 6 significant digits.

    Args:
        path: the file.
        header: the column names.
        rows: the rows.

    Returns:
        ``path``.

    Example:
        >>> write_csv(tmp / "t.csv", ["k", "mse"], [[1, 0.1234567]]).read_text().split()  # doctest: +SKIP
        ['k,mse', '1,0.123457']
    """
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow([f"{x:.6g}" if isinstance(x, float) else x for x in row])
    return path


def markdown_table(header: Sequence[str], rows: Sequence[Sequence], fmt: str = "{:.3f}") -> str:
    """A markdown table; floats formatted with ``fmt``, anything else with ``str``.

    Args:
        header: the column names.
        rows: the rows.
        fmt: the format of float cells.

    Returns:
        The table, one line per row, ending in a newline.

    Example:
        >>> print(markdown_table(["k", "mse"], [[1, 0.5]]), end="")
        | k | mse |
        | --- | --- |
        | 1 | 0.500 |
    """

    def cell(x):
        return fmt.format(x) if isinstance(x, float) else str(x)

    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (``std(ddof=1) / sqrt(n)``; 0 for a single value).

    Args:
        values: the numbers (one per run).

    Returns:
        ``(mean, standard error)``.

    Example:
        >>> mean_se([1.0, 3.0])
        (2.0, 1.0)
    """
    arr = np.asarray(values, dtype=np.float64)
    se = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else 0.0
    return float(arr.mean()), se


def plus_minus(mean: float, se: float, n: int, scale: float = 1.0, digits: int = 2) -> str:
    """A table cell ``mean ± se`` (the mean alone for a single run).

    Args:
        mean: the mean.
        se: its standard error.
        n: the number of runs.
        scale: multiply both by this (e.g. 100 for percent).
        digits: decimals.

    Returns:
        The cell text.

    Example:
        >>> plus_minus(0.123, 0.01, 3), plus_minus(0.123, 0.01, 1)
        ('0.12 ± 0.01', '0.12')
    """
    if n > 1:
        return f"{mean * scale:.{digits}f} ± {se * scale:.{digits}f}"
    return f"{mean * scale:.{digits}f}"


def new_figure(nrows: int, ncols: int, size: tuple[float, float]):
    """A matplotlib figure with a grid of axes, made without pyplot (any backend works).

    Args:
        nrows: rows of axes.
        ncols: columns of axes.
        size: figure size in inches.

    Returns:
        ``(figure, 2-D array of axes)``.

    Example:
        >>> fig, axes = new_figure(1, 2, (6, 3))
        >>> axes.shape
        (1, 2)
    """
    from matplotlib.figure import Figure  # no pyplot: works under any backend

    fig = Figure(figsize=size, layout="constrained")
    axes = np.atleast_2d(np.asarray(fig.subplots(nrows, ncols, squeeze=False)))
    return fig, axes


def runs_phrase(n_runs: int) -> str:
    """How a table's caption names the number of runs.

    Args:
        n_runs: the number of independent trainings.

    Returns:
        The phrase.

    Example:
        >>> runs_phrase(3)
        '3 run(s), mean ± s.e.'
    """
    return f"{n_runs} run(s){', mean ± s.e.' if n_runs > 1 else ''}"


def identity_scatter(
    ax, x: np.ndarray, y: np.ndarray, *, size: float, lims: tuple[float, float] | None = None, **scatter
) -> None:
    """Scatter ``y`` against ``x`` over the dashed identity line.

    Args:
        ax: the matplotlib axes.
        x: horizontal values.
        y: vertical values.
        size: marker size.
        lims: the identity line's range (default: both arrays' range).
        scatter: passed on to ``ax.scatter``.

    Example:
        >>> fig, axes = new_figure(1, 1, (3, 3))
        >>> identity_scatter(axes[0, 0], np.array([0.0, 1.0]), np.array([0.1, 0.9]), size=4)
    """
    lo, hi = lims if lims is not None else (float(min(x.min(), y.min())), float(max(x.max(), y.max())))
    ax.plot([lo, hi], [lo, hi], "--k", linewidth=1)
    ax.scatter(x, y, s=size, **scatter)
