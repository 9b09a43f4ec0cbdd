"""shapiq's approximators on a model itself, as the harness runs them: the model as a
shapiq game on token deletions, and one approximator at a given budget of model calls.

Both ``slalom-xai bench`` (methods ``kernelshapiq`` and ``svarmiq``, rows
``shapiq-kernelshapiq`` / ``shapiq-svarmiq``) and the interaction benchmark
(:mod:`slalom_core.experiments.benchmarks.shapiq_compare`) go through here, so that the two
put the same game and the same approximator beside SLALOM. shapiq is imported inside the
functions (``pip install "slalom-xai[shapiq]"``).

Example:
    >>> import numpy as np
    >>> game = deletion_game(lambda rows: np.array([float(len(r)) for r in rows]), [7, 8, 9])
    >>> game(np.array([[True, False, True], [False, False, False]]))
    array([2., 0.])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["APPROXIMATORS", "approximate", "deletion_game", "first_order", "require_shapiq"]

#: Approximator key (a ``--methods`` key of ``slalom-xai bench``) → shapiq class name.
APPROXIMATORS: dict[str, str] = {"kernelshapiq": "KernelSHAPIQ", "svarmiq": "SVARMIQ"}


def require_shapiq() -> Any:
    """The ``shapiq`` module, or an ``ImportError`` that says how to install it.

    Example:
        >>> require_shapiq().__name__  # doctest: +SKIP
        'shapiq'
    """
    try:
        import shapiq
    except ImportError as err:
        raise ImportError("shapiq is not installed: pip install 'slalom-xai[shapiq]'") from err
    return shapiq


def deletion_game(
    score: Callable[[list[list[int]]], np.ndarray],
    token_ids: Sequence[int],
    replacement_id: int | None = None,
) -> Callable[[np.ndarray], np.ndarray]:
    """A text as a shapiq game: a coalition keeps its tokens, the others are removed.

    Args:
        score: the explained output (one number) of each token-id sequence, e.g. the
            bench's counted ``ctx.log_odds``; called once per batch of coalitions.
        token_ids: the text's ids, one player per id (no special tokens).
        replacement_id: None deletes absent tokens (the empty coalition is the empty
            text); an id (mask, pad) is put in their place instead.

    Returns:
        ``game(coalitions)`` for a (k, n) boolean matrix, returning k values, which is what
        shapiq's approximators and ``ExactComputer`` call.

    Example:
        >>> game = deletion_game(lambda rows: np.array([sum(r) for r in rows], float), [1, 2], replacement_id=0)
        >>> game(np.array([[False, True]]))
        array([2.])
    """
    ids = [int(t) for t in token_ids]

    def game(coalitions: np.ndarray) -> np.ndarray:
        masks = np.asarray(coalitions, dtype=bool).reshape(-1, len(ids))
        if replacement_id is None:
            rows = [[t for t, keep in zip(ids, m) if keep] for m in masks]
        else:
            rows = [[t if keep else int(replacement_id) for t, keep in zip(ids, m)] for m in masks]
        return np.asarray(score(rows), dtype=float).reshape(-1)

    return game


def approximate(
    name: str,
    game: Callable[[np.ndarray], np.ndarray],
    n_players: int,
    budget: int,
    *,
    seed: int = 0,
    max_order: int = 2,
    index: str = "SII",
) -> Any:
    """One shapiq approximator's interaction values of ``game`` from ``budget`` game calls.

    Args:
        name: a key of :data:`APPROXIMATORS`.
        game: see :func:`deletion_game`.
        n_players: the number of players (token positions).
        budget: coalitions the approximator may evaluate (shapiq asks each at most once,
            and takes all 2^n when the budget allows).
        seed: the approximator's ``random_state``.
        max_order, index: shapiq's, pairwise SII by default (order 1 = Shapley values).

    Returns:
        A ``shapiq.InteractionValues``.

    Example:
        >>> iv = approximate("kernelshapiq", game, 9, 267)  # doctest: +SKIP
        >>> iv[(1, 7)]  # doctest: +SKIP
    """
    if name not in APPROXIMATORS:
        raise ValueError(f"unknown shapiq approximator {name!r}; choose from {sorted(APPROXIMATORS)}")
    if budget < 2:
        raise ValueError("a shapiq approximator needs a budget of at least 2 (the empty and the full text)")
    cls = getattr(require_shapiq(), APPROXIMATORS[name])
    approximator = cls(n=int(n_players), max_order=max_order, index=index, random_state=seed)
    return approximator.approximate(budget=int(budget), game=game)


def first_order(values: Any, n_players: int) -> np.ndarray:
    """The order-1 values of an ``InteractionValues``, one per player (0 where absent).

    Example:
        >>> first_order(iv, 9).shape  # doctest: +SKIP
        (9,)
    """
    return np.array([float(values[(i,)]) for i in range(n_players)], dtype=float)
