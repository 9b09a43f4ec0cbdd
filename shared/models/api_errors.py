"""What can go wrong with a paid endpoint, said without leaking its credentials."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence

__all__ = ["APIError", "TransientAPIError", "BudgetExceededError", "redact_secrets", "retry_after", "REDACTED"]

# Credentials a server may echo back in an error body (a gateway that quotes the request's
# headers, a URL with its key): the value after the name, up to a quote, comma, brace or space.
_SECRET_PATTERNS = [
    re.compile(r"(?i)(\bbearer\s+)[^\s\"',;}\]]+"),
    re.compile(r"(?i)(\bbasic\s+)[A-Za-z0-9+/=]{8,}"),
    re.compile(r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?!bearer\s|basic\s)[^\s\"',;}\]]+"),
    re.compile(r"(?i)(\b(?:x-)?api[-_]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;&}\]]+"),
    re.compile(r"(?i)([?&](?:api[-_]?)?key=)[^&\s\"']+"),
    re.compile(r"()\bsk-[A-Za-z0-9_-]{16,}"),  # OpenAI-style keys, wherever they appear
]
REDACTED = "[redacted]"


def redact_secrets(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with credentials replaced by ``[redacted]``: the given ``secrets`` wherever
    they occur, and values of Authorization / Bearer / api-key patterns.

    For anything quoted from a server or an exception into an error message, a log or a
    failures table: a gateway that echoes the request headers must not put the API key there.

    Example:
        >>> redact_secrets('HTTP 400: {"headers": {"Authorization": "Bearer abc123", "x-api-key": "k9"}}')
        'HTTP 400: {"headers": {"Authorization": "Bearer [redacted]", "x-api-key": "[redacted]"}}'
    """
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


class TransientAPIError(RuntimeError):
    """Raise this from a call function for a failure worth retrying (rate limit, 5xx, timeout).

    ``retry_after``: the seconds the server asked to wait (its ``Retry-After`` header on a
    429 or 503), which :class:`APIClassifier` honours up to its ``max_backoff``.

    Example:
        >>> def call(text):
        ...     raise TransientAPIError("HTTP 429: rate limited", retry_after=2.0)  # retried after 2 s
    """

    def __init__(self, *args: object, retry_after: float | None = None) -> None:
        super().__init__(*args)
        self.retry_after = retry_after


def retry_after(err: BaseException) -> float | None:
    """Seconds a transient error asks to wait: its ``retry_after``, or the ``Retry-After``
    header (seconds, or an HTTP date) of the response it carries (requests, httpx)."""
    given = getattr(err, "retry_after", None)
    if given is None:
        headers = getattr(getattr(err, "response", None), "headers", None)
        given = headers.get("Retry-After") if headers is not None and hasattr(headers, "get") else None
    if given is None:
        return None
    try:
        wait = float(given)
    except (TypeError, ValueError):
        from email.utils import parsedate_to_datetime

        try:
            wait = parsedate_to_datetime(str(given)).timestamp() - time.time()
        except (TypeError, ValueError):
            return None  # unreadable: the exponential backoff decides
    return wait if math.isfinite(wait) and wait >= 0 else None


class APIError(RuntimeError):
    """A black-box call failed for good: a permanent error, or transient ones past the retries.

    Example:
        >>> clf = APIClassifier(lambda text: [], retries=0)
        >>> try:
        ...     clf.score([clf.segment("a film").unit_ids[0]])
        ... except APIError as err:
        ...     print(str(err)[:40])
        the black box returned no usable scores
    """


class BudgetExceededError(ValueError):
    """The planned (or next) calls exceed ``max_calls`` or ``max_input_tokens``; nothing was sent.

    Example:
        >>> clf = APIClassifier(lambda text: [0.0, 1.0], max_calls=0)
        >>> try:
        ...     clf.score([clf.segment("a film").unit_ids[0]])
        ... except BudgetExceededError as err:
        ...     print(str(err)[:35])
        1 more calls would exceed max_calls
    """
