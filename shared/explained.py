"""What the views and the file format read of an explanation: a protocol, so that they
look down at it instead of up at :class:`~slalom_core.SlalomExplanation`.

``SlalomExplanation`` (``explanation.py``) stands above ``views/`` and ``saving.py``: its
``to_html``, ``save`` and ``to_pandas`` hand the work down to them. They in turn read only
the members named here, which :class:`SlalomExplanation` has (``tests/engine/test_layout.py``
checks it).

Example:
    >>> import slalom_core as sc
    >>> sorted(set(Explained.__annotations__) - set(sc.SlalomExplanation.__annotations__))
    []
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from .diagnostics import Diagnostics
    from .surrogate import SlalomSurrogate

__all__ = ["Explained"]


class Explained(Protocol):
    """The fields and methods of one explanation that views and files read."""

    tokens: list[str]
    unit_index: np.ndarray
    surrogate: SlalomSurrogate
    method: str
    granularity: str
    target: int | None
    class_names: list[str] | None
    model_output: np.ndarray | float | None
    base_value: np.ndarray | float
    class_index: int | None
    diagnostics: Diagnostics
    text: str | None

    @property
    def value(self) -> np.ndarray: ...

    @property
    def importance(self) -> np.ndarray: ...

    @property
    def n_positions(self) -> int: ...

    @property
    def surrogate_output(self) -> np.ndarray | float: ...

    @property
    def full_text_gap(self) -> np.ndarray | float: ...

    def scores(self, name: str) -> np.ndarray: ...

    def to_dict(self) -> dict[str, Any]: ...
