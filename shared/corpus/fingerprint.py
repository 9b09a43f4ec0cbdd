"""What a corpus run records to tell its model and its input rows apart on ``resume``.

A resumed run must explain with the model and the texts of its first call: finished
chunks are kept, so another model (or an edited data file) would leave a run whose rows
mix two models (or explain texts no longer in the file). The model is identified by
:func:`~slalom_core.models.fingerprint.model_fingerprint` (beside the hashing of call
functions it uses); :func:`cell_digest` identifies one row's text; the store hashes a
chunk's ids with their texts' digests into the chunk's fingerprint.
"""

from __future__ import annotations

import hashlib
import json

from ..models.fingerprint import stable_str

__all__ = ["cell_digest", "DUPLICATE"]

#: The digest that stands for the text of a duplicated id (every row of it fails, whatever its text).
DUPLICATE = "duplicate id"


def cell_digest(text: object) -> str:
    """A short digest of one row's text cell (any JSON-able value; others by type and str)."""
    raw = json.dumps(text, sort_keys=True, default=stable_str)
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()
