"""The library's colour conventions, shared by the HTML views and the matplotlib plots.

A signed score is drawn on a diverging scale, red = positive (pushes the output up), blue
= negative, white = 0, symmetric around 0 so that equal colour means equal size. Blue
rather than green keeps the pair readable for red-green colour-blind readers. Importance
has no direction: it is drawn on a sequential scale (underline thickness, font weight).

Example:
    >>> diverging_rgb(1.0, scale=1.0) == _mix(1.0, POSITIVE_RGB)
    True
    >>> round(sequential_level(0.5, low=0.0, high=1.0), 2)
    0.5
"""

from __future__ import annotations

import math

__all__ = ["POSITIVE_RGB", "NEGATIVE_RGB", "MAX_MIX", "diverging_rgb", "css_rgb", "sequential_level"]

POSITIVE_RGB = (214, 39, 40)
NEGATIVE_RGB = (31, 119, 180)
#: The strongest share of the full colour in a token's background: dark text stays readable.
MAX_MIX = 0.75


def _mix(share: float, rgb: tuple[int, int, int]) -> tuple[int, int, int]:
    """White mixed with ``rgb``, ``share`` (0..1) of the way, capped at :data:`MAX_MIX`."""
    t = MAX_MIX * min(max(share, 0.0), 1.0)
    return tuple(round(255 * (1 - t) + c * t) for c in rgb)  # type: ignore[return-value]


def diverging_rgb(x: float, *, scale: float) -> tuple[int, int, int]:
    """The colour of a signed number on the symmetric scale [-scale, +scale].

    Args:
        x: the number (NaN is white: no colour claims a direction it does not have).
        scale: the magnitude drawn at full colour; larger ones are clipped to it.

    Returns:
        An (r, g, b) tuple of ints.

    Example:
        >>> diverging_rgb(0.0, scale=2.0)
        (255, 255, 255)
    """
    if not math.isfinite(x) or scale <= 0:
        return (255, 255, 255)
    return _mix(abs(x) / scale, POSITIVE_RGB if x > 0 else NEGATIVE_RGB)


def css_rgb(rgb: tuple[int, int, int]) -> str:
    """``rgb(r, g, b)`` for CSS.

    Example:
        >>> css_rgb((1, 2, 3))
        'rgb(1, 2, 3)'
    """
    return f"rgb({rgb[0]}, {rgb[1]}, {rgb[2]})"


def sequential_level(x: float, *, low: float, high: float) -> float:
    """Where ``x`` lies between ``low`` (0) and ``high`` (1), clipped; 0.5 when they are equal.

    Args:
        x: the number.
        low, high: the ends of the scale (the text's smallest and largest importance).

    Returns:
        A float in [0, 1].

    Example:
        >>> sequential_level(3.0, low=1.0, high=2.0)
        1.0
    """
    if not math.isfinite(x):
        return 0.0
    if high <= low:
        return 0.5
    return min(max((x - low) / (high - low), 0.0), 1.0)
