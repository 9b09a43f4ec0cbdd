"""Settings that only grant or pace access to an endpoint (an API key, a header, a timeout):
their names, a value stripped of them at any depth, and whether a value so named holds more.

An answer cache and a model's digest leave such settings out by their name (rotating a key is
the same call), so that no key is ever written to a cache file, a manifest, a log or a page.
A setting that only looks like one by its name (decoding settings kept in ``HEADERS``, a
prompt in ``key``) is then left out too: :func:`holds_more_than_access` is how the cache
notices and names it (:class:`~slalom_core.models.APIClassifier` warns).
"""

from __future__ import annotations

import re

__all__ = ["ACCESS_ONLY", "access_only", "without_access", "holds_more_than_access", "hidden_settings"]

#: Names of settings that grant or pace access, never what an answer is (any case, leading
#: underscores dropped; also any name ending in ``_api_key``, ``_secret`` or ``_password``).
ACCESS_ONLY = frozenset(
    "api_key apikey key secret secret_key client_secret password passwd token access_token auth_token api_token "
    "hf_token bearer_token authorization auth credentials credential headers timeout timeouts request_timeout "
    "connect_timeout read_timeout retries max_retries n_retries num_retries retry backoff max_backoff".split()
)
_ACCESS_SUFFIXES = ("_api_key", "_secret", "_password")
# How a credential is spelled in a header: a scheme and one word ("Bearer sk-...").
_SCHEME = re.compile(r"(?i)^(bearer|basic|token|digest)\s+\S+$")


def access_only(name: object) -> bool:
    """Whether a setting so named only grants or paces access (an API key, a timeout).

    Example:
        >>> access_only("OPENAI_API_KEY"), access_only("timeout"), access_only("max_tokens")
        (True, True, False)
    """
    if not isinstance(name, str):
        return False
    low = name.lower().lstrip("_")
    return low in ACCESS_ONLY or low.endswith(_ACCESS_SUFFIXES)


def without_access(value: object) -> object:
    """``value`` with every dict entry under an access-only name left out, at any depth
    (dicts inside lists and tuples included): what may be hashed, written or shown.

    Example:
        >>> without_access({"model": "m1", "client": {"api_key": "sk-1", "base_url": "http://h"}})
        {'model': 'm1', 'client': {'base_url': 'http://h'}}
    """
    if isinstance(value, dict):
        return {k: without_access(v) for k, v in value.items() if not access_only(k)}
    if type(value) in (list, tuple):
        return type(value)(without_access(v) for v in value)
    return value


def holds_more_than_access(value: object) -> bool:
    """Whether a value kept under an access-only name holds what looks like a setting of the
    answer rather than of access: a sentence (not "Bearer <key>"), or, inside a dict, a
    number, a sentence or a container under a name that is not access-only (a header's
    value is one word). Keys, tokens, headers, timeouts and retry counts do not.

    Example:
        >>> holds_more_than_access({"Authorization": "Bearer sk-1", "Content-Type": "application/json"})
        False
        >>> holds_more_than_access({"temperature": 0.7}), holds_more_than_access("Is it good? {text}")
        (True, True)
    """
    if isinstance(value, str):
        return bool(re.search(r"\s", value.strip())) and not _SCHEME.match(value.strip())
    if isinstance(value, (list, tuple)):
        return any(holds_more_than_access(v) for v in value)
    if isinstance(value, dict):
        return any(
            holds_more_than_access(v) if access_only(k) else not (isinstance(v, str) and not re.search(r"\s", v))
            for k, v in value.items()
        )
    return False  # numbers (a timeout, retries), None, and objects (a library's auth or retry policy)


def hidden_settings(value: object, where: str) -> list[str]:
    """Where, in ``value``, an entry under an access-only name holds more than access (see
    :func:`holds_more_than_access`): names only, never the values.

    Example:
        >>> hidden_settings({"model": "m1", "headers": {"temperature": 0.7}, "api_key": "sk-1"}, "identity")
        ["identity['headers']"]
    """
    if isinstance(value, dict):
        found = []
        for k, v in value.items():
            if not access_only(k):
                found += hidden_settings(v, f"{where}[{k!r}]")
            elif holds_more_than_access(v):
                found.append(f"{where}[{k!r}]")
        return found
    if type(value) in (list, tuple):
        return [w for i, v in enumerate(value) for w in hidden_settings(v, f"{where}[{i}]")]
    return []
