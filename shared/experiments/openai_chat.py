"""An OpenAI-compatible chat endpoint as a SLALOM black box (label log-probs), stdlib only.

``chat_label_logprobs`` builds the ``call(text) -> scores`` that
:class:`slalom_core.APIClassifier` needs: one ``POST {base_url}/chat/completions`` per
text, asking for one answer token with ``logprobs=true`` and ``top_logprobs``; a class's
score is the log-probability of its label word among the returned top tokens. Servers
that speak this protocol: OpenAI, vLLM, llama.cpp's server, Ollama, TGI... No client
library is needed (``urllib``), so nothing is added to the install.

Example:
    >>> call = chat_label_logprobs("http://127.0.0.1:8000/v1", "my-model", ["negative", "positive"])  # doctest: +SKIP
    >>> clf = openai_classifier("http://127.0.0.1:8000/v1", "my-model", ["negative", "positive"],
    ...                         max_calls=2000, workers=8, cache_file="cache.json")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from ..models.api_classifier import APIClassifier, APIError, TransientAPIError, redact_secrets

__all__ = ["chat_label_logprobs", "openai_classifier", "DEFAULT_TEMPLATE", "RETRY_STATUS"]

DEFAULT_TEMPLATE = (
    "Classify the sentiment of this review. Answer with one word: {labels}.\n\nReview: {text}\n\nSentiment:"
)
#: HTTP statuses worth a retry: timeouts, conflicts, rate limits, server errors.
RETRY_STATUS = (408, 409, 425, 429, 500, 502, 503, 504)


def chat_label_logprobs(
    base_url: str,
    model: str,
    labels: Sequence[str],
    *,
    template: str = DEFAULT_TEMPLATE,
    api_key: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    top_logprobs: int = 20,
    timeout: float = 60.0,
    missing: str = "error",
) -> Callable[[str], list[float]]:
    """``call(text) -> [log p(label) for label in labels]`` against an OpenAI-compatible chat API.

    Args:
        base_url: the API root, e.g. ``"https://api.openai.com/v1"``.
        model: the model name the endpoint serves.
        labels: one label word per class, as the model would answer it (compared with
            each returned token stripped of whitespace; several matching tokens, e.g.
            "positive" and " positive", are added up in probability).
        template: the user message; ``{text}`` is the review, ``{labels}`` the label words.
        api_key: the bearer token; default: the environment variable ``api_key_env``
            (none is sent if it is unset, as local servers expect).
        top_logprobs: how many alternatives the endpoint returns (OpenAI allows up to 20).
        timeout: seconds for the whole request: each wait on the server is bounded by it,
            and an answer still arriving after it is abandoned (urllib's own timeout bounds
            each socket read only, so a server that sends a few bytes at a time could hold a
            request for ever).
        missing: a label word not among the returned tokens: "error" (default; raises, so
            no made-up number is fitted) or "floor" (the lowest returned log-prob, an upper
            bound of the label's own).

    Transient failures (HTTP 408/409/425/429/5xx, timeouts, refused connections) raise
    :class:`slalom_core.TransientAPIError` (retried by :class:`slalom_core.APIClassifier`);
    other HTTP errors and answers without log-probs raise :class:`slalom_core.APIError`.
    An error quotes up to 300 characters of the server's body, with the API key and any
    Authorization / Bearer / api-key value replaced by ``[redacted]`` (a gateway may echo
    the request's headers). The returned function's ``cache_identity`` (endpoint, model,
    template, labels, top_logprobs, missing; never the key) keys an API cache file.

    Example:
        >>> call = chat_label_logprobs("http://127.0.0.1:8000/v1", "m", ["negative", "positive"])  # doctest: +SKIP
        >>> call("a wonderful film")  # doctest: +SKIP
        [-4.1, -0.02]
    """
    if "{text}" not in template:
        raise ValueError("the template needs a {text} slot for the review")
    if missing not in ("error", "floor"):
        raise ValueError(f"missing must be 'error' or 'floor', got {missing!r}")
    words = [str(w).strip() for w in labels]
    if len(words) < 2 or any(not w for w in words):
        raise ValueError(f"give at least 2 non-empty label words, got {list(labels)!r}")
    for i, w in enumerate(words):
        if w in words[:i]:
            # Each is compared with the answer's tokens stripped: one score for two classes.
            first = list(labels)[words.index(w)]
            raise ValueError(
                f"the label words {first!r} and {list(labels)[i]!r} are one label once stripped of whitespace "
                "(answer tokens are compared stripped): give distinct words"
            )
    key = api_key if api_key is not None else os.environ.get(api_key_env)
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"

    def call(text: str) -> list[float]:
        prompt = template.replace("{labels}", ", ".join(words)).replace("{text}", text)
        body = {
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": int(top_logprobs),
        }
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            deadline = time.monotonic() + timeout
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                data = json.loads(_read_within(resp, deadline, timeout).decode())
        except urllib.error.HTTPError as err:
            # Redacted before it is cut, so that no key survives half-cut at the 300th character.
            body = err.read(65536).decode(errors="replace")
            detail = redact_secrets(body, secrets)[:300]
            if err.code in RETRY_STATUS:
                raise TransientAPIError(f"HTTP {err.code} from {shown_url}: {detail}") from err
            raise APIError(f"HTTP {err.code} from {shown_url}: {detail}") from err
        except (TimeoutError, urllib.error.URLError, ConnectionError) as err:
            raise TransientAPIError(f"no answer from {shown_url}: {redact_secrets(str(err), secrets)}") from err
        return _label_scores(data, words, missing)

    secrets = [key] if key else []
    shown_url = redact_secrets(url, secrets)
    # Everything that shapes an answer besides the text (an APIClassifier keys its cache by
    # it); the key only grants access, and must not be written into a cache file.
    call.cache_identity = {
        "base_url": shown_url.rstrip("/").removesuffix("/chat/completions"),
        "model": model,
        "template": template,
        "labels": words,
        "top_logprobs": int(top_logprobs),
        "missing": missing,
    }
    return call


def _label_scores(data: object, words: list[str], missing: str) -> list[float]:
    try:
        content = data["choices"][0]["logprobs"]["content"]  # type: ignore[index]
        top = content[0]["top_logprobs"]
    except (KeyError, IndexError, TypeError) as err:
        raise APIError(
            "the endpoint returned no log-probs (choices[0].logprobs.content[0].top_logprobs): it must "
            "support logprobs=true with top_logprobs; SLALOM needs scores, not just the answer"
        ) from err
    if not top:
        raise APIError("the endpoint returned an empty top_logprobs list; SLALOM needs the label words' log-probs")
    scores = []
    floor = min(float(t["logprob"]) for t in top)
    for w in words:
        hits = [float(t["logprob"]) for t in top if str(t["token"]).strip() == w]
        if hits:
            m = max(hits)
            scores.append(m + math.log(sum(math.exp(h - m) for h in hits)))
        elif missing == "floor":
            scores.append(floor)
        else:
            raise APIError(
                f"the label word {w!r} is not among the {len(top)} tokens the endpoint returned "
                f"({[t['token'] for t in top][:10]}...): raise top_logprobs, reword the labels, or pass missing='floor'"
            )
    return scores


def openai_classifier(
    base_url: str,
    model: str,
    labels: Sequence[str],
    *,
    template: str = DEFAULT_TEMPLATE,
    tokenizer: object | None = None,
    api_key: str | None = None,
    top_logprobs: int = 20,
    timeout: float = 60.0,
    missing: str = "error",
    **api_options,
) -> APIClassifier:
    """An :class:`slalom_core.APIClassifier` on an OpenAI-compatible chat endpoint.

    ``api_options`` go to :class:`~slalom_core.APIClassifier` (``workers``, ``retries``,
    ``cache_file``, ``max_calls``, ``max_input_tokens``, ``count_tokens`` ...). The cache
    key is the endpoint, model, template and labels, so a cache file never mixes prompts.
    ``tokens_per_call`` defaults to the template's own size in ``count_tokens`` units.

    Example:
        >>> clf = openai_classifier(url, "gpt-4o-mini", ["negative", "positive"], max_calls=3000)  # doctest: +SKIP
        >>> exp = slalom_core.explain(clf, review, method="eff", n_samples=1000, seed=0)  # doctest: +SKIP
        >>> exp.diagnostics["api_usage"]  # doctest: +SKIP
    """
    call = chat_label_logprobs(
        base_url,
        model,
        labels,
        template=template,
        api_key=api_key,
        top_logprobs=top_logprobs,
        timeout=timeout,
        missing=missing,
    )
    words = [str(w).strip() for w in labels]
    api_options.setdefault("cache_key", json.dumps([base_url, model, template, words]))
    clf = APIClassifier(call, tokenizer, class_names=words, **api_options)
    if "tokens_per_call" not in api_options:
        frame = template.replace("{labels}", ", ".join(words)).replace("{text}", "")
        clf.tokens_per_call = clf.count_tokens(frame)
    return clf


def _read_within(resp: object, deadline: float, timeout: float) -> bytes:
    """The response body, read in pieces and abandoned once ``deadline`` has passed."""
    parts = []
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the answer took longer than timeout={timeout} s to arrive")
        piece = resp.read1(65536) if hasattr(resp, "read1") else resp.read(65536)
        if not piece:
            return b"".join(parts)
        parts.append(piece)
