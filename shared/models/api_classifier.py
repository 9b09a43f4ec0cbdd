"""Black boxes that cost per call (a hosted model behind an API): :class:`APIClassifier`.

A :class:`~.models.StringClassifier` whose function is one request per text, with what a
paid endpoint needs:

- every unique sample string is scored once (SLALOM-eff's 2-token samples repeat), and
  optionally kept in a cache file so that a re-run costs nothing;
- concurrent requests (``workers``) for I/O-bound endpoints, retries with exponential
  backoff on transient errors, a clear :class:`APIError` on permanent ones; answers that
  came back are kept (cached) and nothing else: no partial result is returned, and the
  cache file is replaced atomically, never half-written, and merged with what other
  processes wrote to it (under a lock file, POSIX ``flock``);
- a budget (``max_calls``, ``max_input_tokens``) that ``explain`` checks against the
  method's planned samples before the first call, and enforces again before each batch;
- running totals (:meth:`APIClassifier.usage`), which ``explain`` reports per call in
  ``diagnostics["api_usage"]``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path

import numpy as np

from .access import without_access
from .api_cache import CacheChangedError, CacheCheck, read_cache, usable_file, write_cache
from .api_errors import APIError, BudgetExceededError, TransientAPIError, redact_secrets, retry_after
from .code_digest import call_digest
from .reading import OutputShapeError
from .strings import StringClassifier

__all__ = [
    "APIClassifier",
    "APIError",
    "TransientAPIError",
    "BudgetExceededError",
    "CacheChangedError",
    "redact_secrets",
]


def _check_settings(
    call: object,
    workers: object,
    batch_size: object,
    retries: object,
    max_calls: object,
    max_input_tokens: object,
    backoff: float,
    max_backoff: float,
) -> None:
    """:class:`APIClassifier`'s settings checked before anything is set (one message per kind of mistake)."""
    if not callable(call):
        raise TypeError(f"call must be a function text -> scores, got {type(call).__name__}")
    for name, val in (("workers", workers), ("batch_size", batch_size)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ValueError(f"{name} must be an int >= 1, got {val!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an int >= 0, got {retries!r}")
    for name, val in (("max_calls", max_calls), ("max_input_tokens", max_input_tokens)):
        if val is not None and (isinstance(val, bool) or not isinstance(val, int) or val < 0):
            raise ValueError(f"{name} must be None or an int >= 0, got {val!r}")
    if not backoff >= 0 or not max_backoff >= 0:
        raise ValueError("backoff and max_backoff must be >= 0 seconds")


class APIClassifier(StringClassifier):
    """A paid black box, ``call(text) -> scores``, with a cache, concurrency, retries and a budget.

    Args:
        call: one request: a text in, one score per class out (e.g. label log-probs).
            Raise :class:`TransientAPIError` (or one of ``transient``) to have it retried;
            any other exception is permanent.
        tokenizer: defines the tokens SLALOM explains (see :class:`StringClassifier`);
            default: whitespace words.
        class_names: one name per score.
        workers: requests in flight at once (threads; for I/O-bound endpoints).
        retries: retries per text after a transient error (so ``retries + 1`` attempts).
        backoff: seconds before the first retry, doubled for each further one (at most
            ``max_backoff``). A server's ``Retry-After`` (a 429 or 503 response's header,
            on the error's ``retry_after`` or its ``response``) is waited instead when
            longer, also at most ``max_backoff``.
        transient: exception types that are retried.
        cache_file: a JSON file of answers: read if it exists, rewritten atomically after
            each batch of new answers. ``cache_key`` (e.g. model name and prompt version)
            is stored with it, and so is what else shapes an answer: ``class_names``, the
            number of scores, the call's name, a digest of its code and settings (its
            bytecode, defaults, closure and the globals it reads, followed into objects,
            classes and modules of the user's own; see
            :func:`~slalom_core.models.code_digest.call_digest`, taken when the classifier
            is made) and its ``cache_identity`` attribute (a JSON-able dict of settings,
            e.g. endpoint, model, prompt and labels, as
            :func:`~slalom_core.experiments.openai_chat.chat_label_logprobs` sets it; it
            then stands for everything but the call's code). A file that differs in any of
            them is refused, so answers of one model, prompt, label set or edited call
            function never stand in for another's. A call that reads something the digest
            cannot see into (a library's client object, a pandas frame) and declares no
            ``cache_identity`` does not use the file at all (a warning names what). Access
            settings (API keys, tokens, headers, timeouts, retries: by name, at any depth of
            the declared identity) never count and are never written; one so named that
            holds more than access (decoding settings in ``HEADERS``, a sentence in ``key``)
            is named in a warning. Reading code cannot see everything that decides an answer
            (an environment variable, a file or module read inside the call, the endpoint's
            model): before it serves a stored answer in a process, the classifier asks
            ``cache_checks`` of them again (see ``cache_checks``). Processes may share
            one file: each write takes an exclusive lock on ``<cache_file>.lock``
            (``fcntl.flock``; POSIX only, elsewhere writes are unlocked), re-reads the file
            and writes the union of its answers and this process's.
        cache_checks: stored answers asked again, chosen at random, at the first request in
            each process while stored answers are held (default 3; 0 trusts the digest alone): paid
            calls, counted in ``estimate_cost``, the budget and ``usage()["cache_checks"]``.
            One off its stored answer by more than ``cache_tolerance`` refuses the file with
            a :class:`CacheChangedError` naming the texts: nothing is served (see
            :class:`~slalom_core.models.api_cache.CacheCheck`). Answers other processes
            merge into the file after this check are trusted.
        cache_tolerance: how far a re-asked answer may be from its stored one, absolute and
            relative (default 1e-6: a deterministic call gives the same floats; set it to
            the noise of an endpoint that is not deterministic).
        cache_check_seed: seeds the choice of the answers re-asked; None (default): a draw
            from torch's global generator.
        max_calls / max_input_tokens: the adapter's budget over its lifetime (all
            ``explain`` calls). ``explain`` refuses a request whose planned samples would
            exceed it, before the first call.
        count_tokens: tokens a text costs when sent; default: the tokenizer's count (or
            whitespace words). Use the API's own tokenizer for exact figures.
        tokens_per_call: fixed tokens each request adds (prompt template, chat framing).
        batch_size: sample strings handed to the worker pool at once (the budget and the
            cache file are checked and written per batch).
        sleep: the function that waits between retries (tests pass a recorder).

    Example:
        >>> from slalom_core import estimate_cost, explain
        >>> def call(text):  # stands for a request to a hosted model
        ...     return [text.count("bad"), text.count("good")]
        >>> clf = APIClassifier(call, class_names=["neg", "pos"], max_calls=100)
        >>> estimate_cost(clf, "good good bad film", n_samples=40, seed=0)["calls"]
        16
        >>> exp = explain(clf, "good good bad film", n_samples=40, seed=0)
        >>> usage = exp.diagnostics["api_usage"]
        >>> usage["calls"], usage["cache_hits"], round(usage["hit_rate"], 2)
        (16, 26, 0.62)
    """

    #: Settings that limit spending, not what an answer is: a corpus run resumed with a new
    #: budget is the same model (its fingerprint leaves these out); a copy in another
    #: process would spend all of it again (the Ray engine refuses them).
    budget_settings = ("max_calls", "max_input_tokens")

    def __init__(
        self,
        call: Callable[[str], Sequence[float]],
        tokenizer: object | None = None,
        *,
        class_names: Sequence[str] | None = None,
        workers: int = 1,
        retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        transient: tuple[type[BaseException], ...] = (TransientAPIError, TimeoutError, ConnectionError),
        cache_file: str | os.PathLike | None = None,
        cache_key: str = "",
        max_calls: int | None = None,
        max_input_tokens: int | None = None,
        count_tokens: Callable[[str], int] | None = None,
        tokens_per_call: int = 0,
        batch_size: int = 64,
        max_length: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        cache_checks: int = 3,
        cache_tolerance: float = 1e-6,
        cache_check_seed: int | None = None,
    ) -> None:
        _check_settings(call, workers, batch_size, retries, max_calls, max_input_tokens, backoff, max_backoff)
        check = CacheCheck(cache_checks, cache_tolerance, cache_check_seed)  # its settings checked first too
        super().__init__(self._answer, tokenizer, class_names=class_names, batch_size=batch_size, max_length=max_length)
        self.call = call
        self.workers = int(workers)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.transient = tuple(transient)
        self.max_calls = max_calls
        self.max_input_tokens = max_input_tokens
        self.tokens_per_call = int(tokens_per_call)
        self._count = count_tokens
        self._sleep = sleep
        self.cache_file = Path(cache_file) if cache_file is not None else None
        self.cache_key = str(cache_key)
        self._take_call_digest(call)
        # Shared by shallow copies (explain copies adapters): one cache, one ledger.
        self._cache: dict[str, list[float]] = {}
        self._ledger = dict.fromkeys(
            ("calls", "cache_hits", "input_tokens", "retries", "failed_calls", "cache_checks"), 0
        )
        self._check = check
        self._lock = threading.Lock()
        if self.cache_file is not None and self.cache_file.exists():
            self._cache.update(self._read_cache())

    def _take_call_digest(self, call: Callable[[str], Sequence[float]]) -> None:
        """The digest of what the call computes with, taken once: its state changing later
        (e.g. a counter it keeps) is not a new call. A call the digest cannot see into
        leaves the cache file unused: a cache that cannot vouch for its answers does not
        serve them."""
        digest = call_digest(call)
        self._call_digest, self._left_out = digest.digest, digest.left_out
        self.cache_file = usable_file(self.cache_file, digest)

    def cache_identity(self) -> dict:
        """What shapes this classifier's answers besides the text: recorded in, and checked
        against, its cache file: the cache key, the class names and their number, the call's
        name and the digest of its code and settings (``call_code``: see
        :func:`~slalom_core.models.code_digest.callable_digest`) and its
        ``cache_identity`` attribute (a JSON-able dict of settings), if it has one.

        Example:
            >>> def call(text):
            ...     return [0.0, 1.0]
            >>> APIClassifier(call, class_names=["neg", "pos"], cache_key="m1").cache_identity()["class_names"]
            ['neg', 'pos']
        """
        settings = getattr(self.call, "cache_identity", None)
        name = getattr(self.call, "__qualname__", type(self.call).__qualname__)
        return {
            "cache_key": self.cache_key,
            "class_names": self.class_names,
            "call": f"{getattr(self.call, '__module__', '?')}.{name}",
            "call_code": self._call_digest,
            "n_labels": None if self.class_names is None else len(self.class_names),
            # Access-only entries left out at any depth: a nested {"client": {"api_key": ...}} too.
            "call_settings": json.loads(json.dumps(without_access(settings), default=str))
            if settings is not None
            else None,
        }

    # -- tokens and budget -------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens one request for ``text`` costs (``count_tokens`` or the tokenizer's count, plus ``tokens_per_call``)."""
        if self._count is not None:
            n = self._count(text)
        elif callable(self.tokenizer) and hasattr(self.tokenizer, "convert_ids_to_tokens"):
            n = len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0
        else:
            n = len(text.split())
        return int(n) + self.tokens_per_call

    def __copy__(self) -> APIClassifier:
        # A shallow copy shares the cache and the ledger, so it shares their lock too.
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        return twin

    def __getstate__(self) -> dict:
        # A copy for another process (a Ray worker) takes no lock with it: it makes its own.
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def estimate_cost(self, known: Sequence[Sequence[int]], bounds: Sequence[Sequence[int]] = ()) -> dict[str, int]:
        texts = [self.decode(s) for s in known]
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        extra = [self.decode(s) for s in bounds]
        # The cache's check (the stored answers it will ask again, chosen now and kept) is paid too.
        check = self._pending_check()
        return {
            "calls": len(new) + len(extra) + len(check),
            "cache_hits": len(texts) - len(new),
            "input_tokens": sum(self.count_tokens(t) for t in [*new, *extra, *check]),
            "calls_at_upper_bound": len(extra),
            "cache_checks": len(check),
        }

    def _pending_check(self) -> list[str]:
        return self._check.pending(self._cache) if self.cache_file is not None else []

    def check_budget(self, estimate: Mapping[str, int], what: str) -> None:
        used = self.usage()
        for key, limit in (("calls", self.max_calls), ("input_tokens", self.max_input_tokens)):
            if limit is None:
                continue
            left = limit - used[key]
            if estimate[key] > left:
                name = "max_calls" if key == "calls" else "max_input_tokens"
                raise BudgetExceededError(
                    f"{what} needs up to {estimate['calls']} calls and {estimate['input_tokens']} input tokens "
                    f"({estimate['cache_hits']} sample strings answered by the cache, "
                    f"{estimate.get('calls_at_upper_bound', 0)} calls counted at an upper bound), but {name}="
                    f"{limit} leaves {left} {key.replace('_', ' ')}; nothing was sent. Lower n_samples, "
                    f"choose a cheaper method (slalom_core.estimate_cost compares them) or raise {name}"
                )

    def usage(self) -> dict[str, int]:
        """Totals so far: ``calls`` answered, ``cache_hits``, ``input_tokens`` sent (every
        attempt, retries included), ``retries``, ``failed_calls``, ``cache_checks`` (stored
        answers asked again by the cache's check, within ``calls``)."""
        with self._lock:
            return dict(self._ledger)

    # -- scoring -------------------------------------------------------------------------

    def _answer(self, texts: list[str]) -> np.ndarray:
        """Scores for a batch of sample strings: cached ones from the cache, the others requested once."""
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        with self._check.here().lock:  # one check per process, whatever the threads
            check = self._pending_check()
            if check:
                self._spend_check(check + new)
                self._verify(check)
        with self._lock:
            self._ledger["cache_hits"] += len(texts) - len(new)
        if new:
            self._spend_check(new)
            try:
                self._request_all(new)
            finally:
                # Whatever was answered has been paid for: keep it, even if another failed.
                self._save()
        return np.array([self._cache[t] for t in texts], dtype=np.float64)

    def _verify(self, texts: list[str]) -> None:
        """Ask stored answers again; refuse the file (CacheChangedError) if any changed."""
        asked = {t: self._request(t) for t in texts}
        with self._lock:
            self._ledger["cache_checks"] += len(texts)
        self._check.compare(self.cache_file, asked, self._cache, self._left_out)

    def _spend_check(self, new: list[str]) -> None:
        used = self.usage()
        if self.max_calls is not None and used["calls"] + len(new) > self.max_calls:
            raise BudgetExceededError(
                f"{len(new)} more calls would exceed max_calls={self.max_calls} ({used['calls']} made); nothing sent"
            )
        if self.max_input_tokens is not None:
            tokens = sum(self.count_tokens(t) for t in new)
            if used["input_tokens"] + tokens > self.max_input_tokens:
                raise BudgetExceededError(
                    f"{tokens} more input tokens would exceed max_input_tokens={self.max_input_tokens} "
                    f"({used['input_tokens']} sent); nothing sent"
                )

    def _request_all(self, texts: list[str]) -> None:
        if self.workers == 1 or len(texts) == 1:
            for t in texts:
                self._store(t, self._request(t))
            return
        pool = ThreadPoolExecutor(max_workers=min(self.workers, len(texts)))
        try:
            futures = {pool.submit(self._request, t): t for t in texts}
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for f in pending:
                f.cancel()  # not started yet: never sent
            done |= {f for f in pending if not f.cancelled()}
            wait(done)  # requests already in flight finish (and are paid for)
            error = None
            for f in futures:  # in submission order: the same error whatever the timing
                if f.cancelled():
                    continue
                if f.exception() is not None:
                    error = error or f.exception()
                else:
                    self._store(futures[f], f.result())
            if error is not None:
                raise error
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _store(self, text: str, scores: list[float]) -> None:
        width = len(next(iter(self._cache.values()))) if self._cache else len(scores)
        if len(scores) != width:
            # The endpoint's fault, not this text's: an OutputShapeError, never retried or
            # taken for a problem of the input.
            raise OutputShapeError(
                f"the black box returned {len(scores)} scores for {text[:60]!r}, earlier answers had {width}"
            )
        self._cache[text] = scores
        self._check.here().own.add(text)  # this process's own answer: nothing to check

    def _request(self, text: str) -> list[float]:
        """One text, with retries; the validated scores."""
        tokens = self.count_tokens(text)
        for attempt in range(self.retries + 1):
            with self._lock:
                self._ledger["input_tokens"] += tokens
            try:
                out = self.call(text)
            except self.transient as err:
                if attempt == self.retries:
                    with self._lock:
                        self._ledger["failed_calls"] += 1
                    raise APIError(
                        f"the black box failed {self.retries + 1} times on {text[:60]!r} (last: "
                        f"{type(err).__name__}: {redact_secrets(str(err))}); raise retries= or backoff= if the "
                        "endpoint is overloaded"
                    ) from err
                with self._lock:
                    self._ledger["retries"] += 1
                    over = (
                        self.max_input_tokens is not None
                        and self._ledger["input_tokens"] + tokens > self.max_input_tokens
                    )
                if over:
                    # A retry sends the text again: the token budget holds for retries too.
                    raise BudgetExceededError(
                        f"retrying {text[:60]!r} would exceed max_input_tokens={self.max_input_tokens} "
                        f"(last error: {type(err).__name__}: {redact_secrets(str(err))})"
                    ) from err
                asked = retry_after(err) or 0.0
                self._sleep(min(self.max_backoff, max(self.backoff * 2**attempt, asked)))
                continue
            except Exception as err:
                with self._lock:
                    self._ledger["failed_calls"] += 1
                raise APIError(
                    f"the black box failed on {text[:60]!r}: {type(err).__name__}: {redact_secrets(str(err))}"
                ) from err
            with self._lock:
                # Answered (and paid for), even if the answer turns out unusable.
                self._ledger["calls"] += 1
            return _as_scores(out, text)
        raise AssertionError("unreachable")  # the loop returns or raises

    # -- cache file ------------------------------------------------------------------------

    def _read_cache(self) -> dict[str, list[float]]:
        assert self.cache_file is not None
        return read_cache(self.cache_file, self.cache_key, self.cache_identity(), self.class_names)

    def _save(self) -> None:
        """Merge this process's answers into the file (see :func:`.api_cache.write_cache`)."""
        if self.cache_file is not None:
            write_cache(self.cache_file, self._cache, self.cache_key, self.cache_identity(), self.class_names)


def _as_scores(out: object, text: str) -> list[float]:
    try:
        arr = np.asarray(out, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as err:
        raise APIError(f"the black box returned {out!r} for {text[:60]!r}; expected one score per class") from err
    if arr.size == 0 or not all(math.isfinite(x) for x in arr.tolist()):
        raise APIError(f"the black box returned no usable scores ({arr.tolist()}) for {text[:60]!r}")
    return arr.tolist()
