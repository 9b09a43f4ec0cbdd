"""Samplers: which perturbed inputs the model is asked about.

Every sample is a sequence of *unit indices* (0 … U-1 over the text's unique tokens or
words); the driver turns it into token ids. Keeping samplers on unit indices means one
sampler serves token and word granularity alike.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "short_sequences",
    "balanced_sequences",
    "deletion_neighbourhood",
    "subset_sequences",
    "split_holdout",
]


def short_sequences(
    rng: np.random.Generator,
    n_units: int,
    n_samples: int,
    length: int | tuple[int, int] = 2,
    distinct: bool = False,
) -> list[np.ndarray]:
    """SLALOM-eff's design (App. D): random sequences of ``length`` units drawn uniformly
    with replacement from the text's unique units.

    Short sequences make each forward pass cheap, which is where SLALOM-eff's speed comes
    from; a unit drawn twice simply counts twice. ``length=(lo, hi)`` draws each sample's
    length uniformly from lo … hi (App. D mentions lengths 1–3): one-unit samples measure
    values directly, longer ones weigh more units against each other. ``distinct=True``
    draws each sample's units without replacement (on a text with too few distinct sets of
    that length, lengths from 1 up are mixed in): a sample is then a set, which a model that replaces
    absent features by a baseline can be shown as it is.

    Example:
        >>> seqs = short_sequences(np.random.default_rng(0), n_units=4, n_samples=3)
        >>> [len(s) for s in seqs]
        [2, 2, 2]
        >>> sorted({len(s) for s in short_sequences(np.random.default_rng(0), 4, 50, (1, 3))})
        [1, 2, 3]
    """
    lo, hi = (length, length) if not isinstance(length, tuple) else length
    if not 1 <= lo <= hi:
        raise ValueError(f"sample_length must be >= 1 (or a range 1 <= lo <= hi), got {length}")
    if distinct:
        hi = min(hi, n_units)
        if math.comb(n_units, hi) < 3 * n_units:
            # Too few distinct sets of hi units to pin 2n − 1 parameters (4 triples of a
            # 4-unit text are fitted exactly by other values than the true ones): mix in the
            # shorter lengths, down to single units, which measure values directly.
            lo = 1
        lo = min(lo, hi)
        # The first hi columns of a random permutation per sample: hi distinct units.
        draws = np.argsort(rng.random((n_samples, n_units)), axis=1)[:, :hi]
    else:
        draws = rng.integers(0, n_units, size=(n_samples, hi))
    if lo == hi:
        return list(draws)
    lengths = rng.integers(lo, hi + 1, size=n_samples)
    return [row[:k] for row, k in zip(draws, lengths)]


def balanced_sequences(rng: np.random.Generator, n_units: int, n_samples: int, length: int = 2) -> list[np.ndarray]:
    """Like :func:`short_sequences`, but every unit fills the same number of slots (±1).

    The slots of all samples are filled from a stream of concatenated random permutations of
    the units. Uniform draws with replacement leave some units in only a handful of samples
    (the count is roughly Poisson), and those units' values are the noisiest part of the fit;
    a balanced design spends the same budget evenly, and a unit meets itself in a sample only
    where two permutations join.

    Example:
        >>> seqs = balanced_sequences(np.random.default_rng(0), n_units=3, n_samples=3)
        >>> sorted(np.bincount(np.concatenate(seqs)).tolist())
        [2, 2, 2]
    """
    if isinstance(length, tuple) or length < 1:
        raise ValueError(f"the balanced design takes one sample_length >= 1, got {length}")
    slots = n_samples * length
    rounds = -(-slots // n_units)
    stream = np.concatenate([rng.permutation(n_units) for _ in range(rounds)])[:slots]
    return list(stream.reshape(n_samples, length))


def deletion_neighbourhood(
    rng: np.random.Generator,
    position_units: np.ndarray,
    n_samples: int,
    max_delete_fraction: float = 0.5,
) -> list[np.ndarray]:
    """SLALOM-fidel's design: the text with a few random positions deleted.

    For each sample a number of deletions ``k`` is drawn uniformly from
    ``1 … max(1, round(max_delete_fraction · n))`` (never all n positions), and ``k``
    distinct positions are removed; the order of the rest is kept.

    Example:
        >>> s = deletion_neighbourhood(np.random.default_rng(0), np.arange(5), 2)
        >>> all(len(x) < 5 for x in s)
        True
    """
    if not 0.0 < max_delete_fraction <= 1.0:
        raise ValueError(f"max_delete_fraction must be in (0, 1], got {max_delete_fraction}")
    n = len(position_units)
    if n == 1:
        # Nothing can be deleted without leaving an empty text; the only sample is the text.
        return [position_units.copy() for _ in range(n_samples)]
    k_max = min(n - 1, max(1, int(round(max_delete_fraction * n))))
    ks = rng.integers(1, k_max + 1, size=n_samples)
    # Random keys per position; deleting the k smallest gives k distinct positions at once.
    keys = rng.random((n_samples, n))
    order = np.argsort(keys, axis=1)
    out = []
    for row in range(n_samples):
        keep = np.ones(n, dtype=bool)
        keep[order[row, : ks[row]]] = False
        out.append(position_units[keep])
    return out


def subset_sequences(
    rng: np.random.Generator, position_units: np.ndarray, n_samples: int, min_length: int = 2
) -> list[np.ndarray]:
    """Random sub-texts: ``k`` positions of the text kept in their order, ``k`` log-uniform.

    Sizes are spread evenly on a log scale from ``min_length`` to n − 1 positions, so the
    design sees the text's tokens compete in contexts of every size (a pair, a phrase, most
    of the text), while a sample costs k tokens, not n: on a 200-token text the mean sample
    is about 40 tokens long, a fifth of a deletion sample's.

    Example:
        >>> s = subset_sequences(np.random.default_rng(0), np.arange(100), 200)
        >>> min(map(len, s)) >= 2, max(map(len, s)) <= 99
        (True, True)
    """
    n = len(position_units)
    if n <= min_length:
        # Nothing shorter than the text but this long: the text itself.
        return [position_units.copy() for _ in range(n_samples)]
    lo, hi = np.log(min_length), np.log(n - 1)
    ks = np.clip(np.rint(np.exp(rng.uniform(lo, hi, size=n_samples))).astype(int), min_length, n - 1)
    keys = rng.random((n_samples, n))
    order = np.argsort(keys, axis=1)
    return [position_units[np.sort(order[row, :k])] for row, k in enumerate(ks)]


def split_holdout(rng: np.random.Generator, n: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the fitting and held-out parts (held-out empty when too few samples)."""
    n_hold = int(round(fraction * n)) if fraction > 0 else 0
    if n_hold < 2 or n - n_hold < 2:
        return np.arange(n), np.arange(0)
    perm = rng.permutation(n)
    return np.sort(perm[n_hold:]), np.sort(perm[:n_hold])
