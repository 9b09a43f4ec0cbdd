"""Views of explanations: the page of one text (:func:`to_html`: what each token did first,
SLALOM's two channels one tab away), one view of several explanations or scores of a text
(:func:`compare_html`), and the pieces they share.

Every view is self-contained HTML (inline CSS, nothing fetched), opens from a plain file
and enumerates the scores from :data:`slalom_core.SCORES`.

Example:
    >>> from slalom_core.views import to_html
    >>> page = to_html(exp)  # doctest: +SKIP
"""

from .compare import compare_html
from .html import STYLE, document, explanation_fragment, to_html

__all__ = ["to_html", "explanation_fragment", "compare_html", "document", "STYLE"]
