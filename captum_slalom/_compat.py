"""Captum's private names that the adapter uses, in one place, with the versions they are tested on.

Captum keeps its argument types and its progress bar under ``captum._utils``, which it does
not promise to keep. Every module of the adapter imports them from here, so a Captum release
that moves them breaks one file, with a message that names the supported range, instead of
an ``ImportError`` deep in the adapter. The range is also the pin of setup.cfg's ``captum``
extra (``tests/adapters/test_captum_compat.py`` holds the two together).
"""

from __future__ import annotations

import re
import warnings

import captum

#: Captum versions the adapter is tested with: ``SUPPORTED[0] <= version < SUPPORTED[1]``.
SUPPORTED: tuple[tuple[int, int], tuple[int, int]] = ((0, 8), (0, 10))
SUPPORTED_TEXT = f">={SUPPORTED[0][0]}.{SUPPORTED[0][1]},<{SUPPORTED[1][0]}.{SUPPORTED[1][1]}"


def parse_version(version: str) -> tuple[int, int]:
    """The (major, minor) of a version string; pre-release and local parts are ignored.

    Example:
        >>> parse_version("0.9.0"), parse_version("0.10.0rc1"), parse_version("1.0.dev3+g12")
        ((0, 9), (0, 10), (1, 0))
    """
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"cannot read a captum version from {version!r}")
    return int(match[1]), int(match[2])


def is_supported(version: str) -> bool:
    """Whether a Captum version is in the tested range :data:`SUPPORTED`.

    Example:
        >>> is_supported("0.9.0"), is_supported("0.7.0"), is_supported("0.10.0")
        (True, False, False)
    """
    return SUPPORTED[0] <= parse_version(version) < SUPPORTED[1]


try:
    from captum._utils.progress import progress
    from captum._utils.typing import BaselineType, TargetType
except ImportError as err:  # pragma: no cover - only on a Captum outside the range
    raise ImportError(
        f"captum_slalom needs captum{SUPPORTED_TEXT} (installed: captum {captum.__version__}); "
        f"captum moved a private name the adapter uses ({err})"
    ) from err

if not is_supported(captum.__version__):
    warnings.warn(
        f"captum {captum.__version__} is outside the range captum_slalom is tested with ({SUPPORTED_TEXT})",
        stacklevel=2,
    )

__all__ = ["SUPPORTED", "SUPPORTED_TEXT", "BaselineType", "TargetType", "is_supported", "parse_version", "progress"]
