"""APIClassifier: cache, concurrency, retries, budget and cost report; and an OpenAI-compatible
endpoint served by a local stand-in (no network)."""

import json
import threading
import time

import numpy as np
import pytest
import slalom_core as sc
from api_standin import StandIn, review_logprobs
from slalom_core.experiments.openai_chat import chat_label_logprobs, openai_classifier

TEXT = "a good film with a boring plot but great fun"
POS = {"good", "great", "fun"}
NEG = {"boring", "bad"}


class Counter:
    """A black box that counts its calls: every string it sees, and how many run at once."""

    def __init__(self, delay: float = 0.0):
        self.seen: list[str] = []
        self.delay = delay
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, text: str) -> list[float]:
        with self.lock:
            self.seen.append(text)
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.delay)
        with self.lock:
            self.active -= 1
        words = text.split()
        return [0.0, 0.5 * sum(w in POS for w in words) - 0.7 * sum(w in NEG for w in words)]


def _score_one(clf, text):
    """The black box's scores for one text (segmented first, so that its ids are known)."""
    return clf.score([[i for u in clf.segment(text).unit_ids for i in u]])[0]


def test_unique_strings_scored_once_and_usage_reported():
    f = Counter()
    clf = sc.APIClassifier(f, class_names=["neg", "pos"])
    exp = sc.explain(clf, TEXT, method="eff", n_samples=300, seed=0)
    usage = exp.diagnostics["api_usage"]
    assert exp.diagnostics.api_usage is usage  # the typed attribute is the entry
    assert len(f.seen) == len(set(f.seen)) == usage["calls"]  # no string sent twice
    # the explanation reads each distinct sample once, so within one call nothing is a hit
    assert usage["calls"] == exp.diagnostics["model_evaluations"] and usage["cache_hits"] == 0
    again = sc.explain(clf, TEXT, method="eff", n_samples=300, seed=0).diagnostics["api_usage"]
    assert again["calls"] == 0 and again["cache_hits"] == usage["calls"] and again["hit_rate"] == 1.0
    assert usage["input_tokens"] == sum(len(t.split()) for t in f.seen)
    # the estimate checked before the first call was exact (eff's samples are known in advance)
    assert usage["estimate"]["calls"] == usage["calls"]
    assert usage["estimate"]["input_tokens"] == usage["input_tokens"]
    # the same as the plain string black box: caching changes the cost, not the answer
    plain = sc.explain(
        sc.StringClassifier(lambda ts: [Counter()(t) for t in ts]), TEXT, method="eff", n_samples=300, seed=0
    )
    np.testing.assert_allclose(exp.value, plain.value)
    np.testing.assert_allclose(exp.importance, plain.importance)


def test_cache_file_makes_a_rerun_free(tmp_path):
    path = tmp_path / "cache.json"
    first = sc.explain(sc.APIClassifier(Counter(), cache_file=path, cache_key="m1"), TEXT, n_samples=200, seed=1)
    f = Counter()
    again = sc.explain(sc.APIClassifier(f, cache_file=path, cache_key="m1"), TEXT, n_samples=200, seed=1)
    # What a re-run pays: the cache's check, three stored answers asked again, as estimated.
    usage = again.diagnostics["api_usage"]
    assert usage["calls"] == usage["cache_checks"] == usage["estimate"]["calls"] == len(f.seen) == 3
    assert set(f.seen) <= set(json.loads(path.read_text())["entries"])
    trusting = sc.APIClassifier(Counter(), cache_file=path, cache_key="m1", cache_checks=0)
    assert sc.explain(trusting, TEXT, n_samples=200, seed=1).diagnostics["api_usage"]["hit_rate"] == 1.0
    # Exact: the cache returns the very answers, so the fit is the same call on the same targets.
    np.testing.assert_array_equal(first.value, again.value)
    # no temporary file left (the lock file stays: deleting it would race another process's lock)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json", "cache.json.lock"]
    with pytest.raises(ValueError, match="cache_key='m1'"):
        sc.APIClassifier(f, cache_file=path, cache_key="another model")
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the cache file"):
        sc.APIClassifier(f, cache_file=path, cache_key="m1")


def test_a_cache_is_keyed_by_everything_that_shapes_an_answer(tmp_path):
    path = tmp_path / "cache.json"

    def three(text):
        return [0.0, 1.0, 2.0]

    _score_one(sc.APIClassifier(three, class_names=["neg", "neu", "pos"], cache_file=path), "good film")
    # Default cache_key on both: a 2-label classifier must not be served 3-score answers.
    with pytest.raises(
        ValueError, match=r"another classifier: .*class_names \['neg', 'neu', 'pos'\], not \['neg', 'pos'\]"
    ):
        sc.APIClassifier(Counter(), class_names=["neg", "pos"], cache_file=path)
    with pytest.raises(ValueError, match="another classifier: .*call"):
        sc.APIClassifier(lambda t: [0.0, 1.0, 2.0], class_names=["neg", "neu", "pos"], cache_file=path)
    # The same classifier reads its answers back.
    again = sc.APIClassifier(three, class_names=["neg", "neu", "pos"], cache_file=path)
    assert _score_one(again, "good film").tolist() == [0.0, 1.0, 2.0]
    assert again.usage()["calls"] == again.usage()["cache_checks"] == 1  # the cache's check alone
    # An endpoint's settings (here its prompt and labels) key the cache as well, never its key.
    with StandIn("ok") as server:
        kw = dict(cache_file=tmp_path / "api.json", cache_key="shared", api_key="sk-secret-1234567890abcdef")
        _score_one(openai_classifier(server.base_url, "standin", ["negative", "positive"], **kw), "good")
        with pytest.raises(ValueError, match="another classifier: .*call_settings"):
            openai_classifier(server.base_url, "standin", ["positive", "negative"], **kw)
    assert "sk-secret" not in (tmp_path / "api.json").read_text()


def test_processes_sharing_a_cache_file_keep_each_others_answers(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "cache.json"
    a = sc.APIClassifier(Counter(), cache_file=path)
    b = sc.APIClassifier(Counter(), cache_file=path)  # opened before a wrote anything
    _score_one(a, "good film")
    _score_one(b, "bad plot")
    assert set(json.loads(path.read_text())["entries"]) == {"good film", "bad plot"}
    # Two processes writing many batches at once: every answer of both is in the file.
    code = (
        "import sys, slalom_core as sc\n"
        "clf = sc.APIClassifier(lambda t: [0.0, 1.0], cache_file=sys.argv[1], batch_size=1)\n"
        "for i in range(40):\n"
        "    text = f'{sys.argv[2]} {i}'\n"
        "    clf.score([[j for u in clf.segment(text).unit_ids for j in u]])\n"
    )
    env = {**__import__("os").environ, "PYTHONPATH": ":".join(sys.path)}
    shared = tmp_path / "shared.json"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(shared), name], env=env) for name in ("p", "q")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    entries = json.loads(shared.read_text())["entries"]
    assert {f"{n} {i}" for n in "pq" for i in range(40)} <= set(entries)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_concurrent_calls_give_the_same_explanation():
    serial = sc.explain(sc.APIClassifier(Counter()), TEXT, n_samples=150, seed=2)
    f = Counter(delay=0.005)
    parallel = sc.explain(sc.APIClassifier(f, workers=4), TEXT, n_samples=150, seed=2)
    assert f.peak > 1  # requests really overlapped
    # Exact: each string's answer does not depend on the worker pool and is put back in order,
    # so the fit gets the same targets in the same order (no batch of the model is involved).
    np.testing.assert_array_equal(serial.value, parallel.value)
    np.testing.assert_array_equal(serial.importance, parallel.importance)


def test_transient_errors_are_retried_with_backoff():
    tries: dict[str, int] = {}
    waits: list[float] = []

    def flaky(text):
        tries[text] = tries.get(text, 0) + 1
        if tries[text] <= 2:
            raise sc.TransientAPIError("rate limited")
        return Counter()(text)

    clf = sc.APIClassifier(flaky, retries=2, backoff=0.5, sleep=waits.append)
    exp = sc.explain(clf, "good boring film", n_samples=20, seed=0)
    usage = exp.diagnostics["api_usage"]
    assert usage["retries"] == 2 * usage["calls"] and set(tries.values()) == {3}
    assert waits == [0.5, 1.0] * usage["calls"]  # doubled each time
    # each attempt sends the text again: tokens are counted per attempt
    assert usage["input_tokens"] == 3 * sum(len(t.split()) for t in tries)


def test_retry_after_is_honoured_up_to_max_backoff():
    from email.utils import formatdate
    from types import SimpleNamespace

    class HTTPError(Exception):  # what requests/httpx raise: the response carries the headers
        def __init__(self, retry_after):
            super().__init__("HTTP 429")
            self.response = SimpleNamespace(status_code=429, headers={"Retry-After": retry_after})

    for asked, expected in ((7.0, [7.0]), ("3", [3.0]), ("soon", [0.5]), (100.0, [30.0])):
        waits: list[float] = []
        tries: list[str] = []

        def busy(text, asked=asked, tries=tries):
            tries.append(text)
            if len(tries) == 1:
                raise (
                    sc.TransientAPIError("HTTP 429", retry_after=asked)
                    if isinstance(asked, float)
                    else HTTPError(asked)
                )
            return [0.0, 1.0]

        clf = sc.APIClassifier(busy, backoff=0.5, transient=(sc.TransientAPIError, HTTPError), sleep=waits.append)
        clf.score([clf.segment("good film").unit_ids[0]])
        assert waits == expected, asked  # bounded by max_backoff (30 s by default)
    # An HTTP date: the seconds until then.
    # tol: an HTTP date has whole seconds, and the clock moves between the two calls (not a float comparison)
    assert sc.models.api_errors.retry_after(HTTPError(formatdate(time.time() + 60, usegmt=True))) == pytest.approx(
        60, abs=2
    )


def test_permanent_and_exhausted_errors_stop_with_nothing_half_written(tmp_path):
    path = tmp_path / "c.json"

    def broken(text):
        if "boring" in text.split()[:2] and len(text.split()) <= 2:  # one of eff's samples
            raise PermissionError("invalid API key")
        return [0.0, 2.0]

    clf = sc.APIClassifier(broken, cache_file=path, workers=3)
    with pytest.raises(sc.APIError, match="invalid API key"):
        sc.explain(clf, TEXT, method="eff", n_samples=100, seed=0)
    saved = json.loads(path.read_text())["entries"]
    assert saved and all(v == [0.0, 2.0] for v in saved.values())  # only complete answers were kept
    assert TEXT in saved and "" in saved  # the first round's answers were kept
    assert not any("boring" in t.split() and len(t.split()) <= 2 for t in saved)
    assert clf.usage()["failed_calls"] >= 1

    def always_busy(text):
        raise TimeoutError("read timed out")

    with pytest.raises(sc.APIError, match="failed 2 times"):
        _score_one(sc.APIClassifier(always_busy, retries=1, sleep=lambda s: None), "good film")
    with pytest.raises(sc.APIError, match="no usable scores"):
        _score_one(sc.APIClassifier(lambda t: [float("nan"), 1.0]), "good film")


def test_retries_stay_within_the_token_budget():
    def busy(text):
        raise sc.TransientAPIError("HTTP 503")

    clf = sc.APIClassifier(busy, retries=5, max_input_tokens=5, sleep=lambda s: None)
    with pytest.raises(sc.BudgetExceededError, match="retrying"):
        _score_one(clf, "good film")  # 2 tokens per attempt: the third would make 6
    assert clf.usage()["input_tokens"] == 4


def test_budget_refused_before_any_call():
    f = Counter()
    est = sc.estimate_cost(sc.APIClassifier(f), TEXT, method="eff", n_samples=300, seed=0)
    assert f.seen == []  # estimating calls nothing
    clf = sc.APIClassifier(f, max_calls=est["calls"] - 1)
    with pytest.raises(sc.BudgetExceededError, match=r"method 'eff' with n_samples=300.*max_calls="):
        sc.explain(clf, TEXT, method="eff", n_samples=300, seed=0)
    assert f.seen == [] and clf.usage()["calls"] == 0
    tokens = sc.APIClassifier(f, max_input_tokens=est["input_tokens"] - 1)
    with pytest.raises(sc.BudgetExceededError, match="max_input_tokens"):
        sc.explain(tokens, TEXT, method="eff", n_samples=300, seed=0)
    assert f.seen == []
    # exactly enough: it runs, and a second explanation of another seed is refused
    ok = sc.APIClassifier(f, max_calls=est["calls"])
    sc.explain(ok, TEXT, method="eff", n_samples=300, seed=0)
    assert ok.usage()["calls"] == est["calls"]
    with pytest.raises(sc.BudgetExceededError):
        sc.explain(ok, TEXT, method="eff", n_samples=300, seed=5)


@pytest.mark.parametrize("method", [None, "hybrid"])
def test_the_default_methods_estimate_is_exact(method):
    # the default's triples, and hybrid's pairs and deletions, are all drawn before the first
    # call, as eff's
    opts = {} if method is None else {"method": method}
    clf = sc.APIClassifier(Counter())
    est = sc.estimate_cost(clf, TEXT, n_samples=200, seed=3, **opts)
    exp = sc.explain(sc.APIClassifier(Counter()), TEXT, n_samples=200, seed=3, **opts)
    usage = exp.diagnostics["api_usage"]
    assert exp.diagnostics["method"] == (method or sc.DEFAULT_METHOD)
    assert (usage["calls"], usage["input_tokens"]) == (est["calls"], est["input_tokens"])


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # ana on a non-SLALOM
def test_estimates_bound_methods_with_later_samples():
    f = Counter()
    clf = sc.APIClassifier(f)
    for method, options in (("ana", {}), ("fidel", {"check_samples": 10})):
        est = sc.estimate_cost(clf, TEXT, method=method, n_samples=60, seed=0, **options)
        exp = sc.explain(sc.APIClassifier(Counter()), TEXT, method=method, n_samples=60, seed=0, **options)
        usage = exp.diagnostics["api_usage"]
        assert usage["calls"] <= est["calls"] and usage["input_tokens"] <= est["input_tokens"], method
    assert f.seen == []


def test_openai_compatible_endpoint_through_the_standin(tmp_path):
    words = ["negative", "positive"]
    with StandIn("flaky", fail_times=1) as server:
        clf = openai_classifier(
            server.base_url, "standin", words, workers=4, backoff=0.0, cache_file=tmp_path / "api.json"
        )
        exp = sc.explain(clf, "a good film with a boring plot", method="eff", n_samples=80, seed=0)
        usage = exp.diagnostics["api_usage"]
        assert usage["retries"] == usage["calls"]  # every prompt failed once with HTTP 503
        assert server.requests == 2 * usage["calls"]
        assert np.isfinite(exp.value).all()
        assert (
            sc.explain(clf, "a good film with a boring plot", method="eff", n_samples=80, seed=0).diagnostics[
                "api_usage"
            ]["calls"]
            == 0
        )  # answered from the cache
        lp = _score_one(clf, "good")
        prompt = [p for p in server.prompts if p.endswith("Review: good\n\nSentiment:")][0]
        want = review_logprobs(prompt)
        assert lp.tolist() == pytest.approx([want["negative"], want["positive"]])
        # the explained output is the endpoint's log-odds of "positive" against "negative":
        # the stand-in's logit 0.3 + (1 positive word) - (1 negative word)
        # tol: float64 rounding: the stand-in's log-odds are sums of a few float64 terms
        assert exp.model_output == pytest.approx(0.3, abs=1e-9)


def test_endpoint_errors_are_clear():
    with StandIn("no_logprobs") as server:
        call = chat_label_logprobs(server.base_url, "standin", ["negative", "positive"])
        with pytest.raises(sc.APIError, match="no log-probs"):
            _score_one(sc.APIClassifier(call), "good film")
        clf = sc.APIClassifier(call)
        with pytest.raises(sc.APIError, match="no log-probs"):
            sc.explain(clf, "a good film", n_samples=20, seed=0)
        assert clf.usage()["calls"] <= 3  # stopped in the first round, not after every sample
    with StandIn("bad_request") as server:
        clf = openai_classifier(server.base_url, "standin", ["negative", "positive"], retries=3, sleep=lambda s: None)
        with pytest.raises(sc.APIError, match="HTTP 400"):
            _score_one(clf, "good film")
        assert server.requests == 1  # a permanent error is not retried
    with StandIn("ok") as server:
        call = chat_label_logprobs(server.base_url, "standin", ["negative", "enthusiastic"])
        with pytest.raises(sc.APIError, match="'enthusiastic' is not among"):
            call("good film")
        floor = chat_label_logprobs(server.base_url, "standin", ["negative", "enthusiastic"], missing="floor")
        assert floor("good film")[1] == pytest.approx(min(review_logprobs("Review: good film").values()))
    key = "sk-test-0123456789abcdefXYZ"
    with StandIn("echo_headers") as server:
        clf = openai_classifier(server.base_url, "standin", ["negative", "positive"], api_key=key, retries=0)
        with pytest.raises(sc.APIError, match="HTTP 400") as caught:
            _score_one(clf, "good film")
    message = str(caught.value) + str(caught.value.__cause__)
    assert "Bearer [redacted]" in message and "0123456789abcdef" not in message
    assert sc.models.redact_secrets("boom: api-key=abc; key mine1234", ["mine1234"]) == (
        "boom: api-key=[redacted]; key [redacted]"
    )
    with pytest.raises(ValueError, match="slot"):
        chat_label_logprobs("http://127.0.0.1:9/v1", "m", ["a", "b"], template="no slot")


def test_chat_labels_equal_up_to_whitespace_are_refused():
    # Both would be compared with the same stripped token: two classes of one score.
    with pytest.raises(ValueError, match="' positive' and 'positive' are one label once stripped of whitespace"):
        chat_label_logprobs("http://127.0.0.1:9/v1", "m", ["negative", " positive", "positive"])


def test_timeout_bounds_the_whole_request_not_each_read():
    # The stand-in drips its answer (8 bytes every 0.1 s, ~3 s in all): no single read
    # waits long, so a per-read timeout never fires; the request's own deadline must.
    with StandIn("drip") as server:
        fetch = openai_classifier(server.base_url, "standin", ["negative", "positive"], timeout=0.5, retries=0)
        t0 = time.monotonic()
        with pytest.raises(sc.APIError, match="timeout|no answer|took longer"):
            fetch.score_texts(["a good film"])
        assert time.monotonic() - t0 < 2.0


@pytest.mark.parametrize("method", ["eff-slope", "eff", "hybrid"])
def test_each_distinct_sample_is_sent_once_and_the_answer_is_unchanged(method):
    """A short text's samples repeat (TEXT has 10 tokens, "a" twice): a plain string black box
    receives each distinct string once per call, and reading repeats again changes nothing."""
    once, every = Counter(), Counter()
    batch = lambda f: lambda texts: [f(t) for t in texts]  # noqa: E731
    exp = sc.explain(sc.StringClassifier(batch(once)), TEXT, method=method, n_samples=300, seed=0)
    ref = sc.explain(sc.StringClassifier(batch(every), deterministic=False), TEXT, method=method, n_samples=300, seed=0)
    assert len(once.seen) == len(set(once.seen)) == exp.diagnostics["model_evaluations"]
    assert len(every.seen) == ref.diagnostics["model_evaluations"] > len(once.seen)
    assert set(every.seen) == set(once.seen)
    for score in ("value", "importance", "lin"):
        # tol: exact up to float64 rounding: the same distinct samples read once or every time give the same fit
        np.testing.assert_allclose(exp.scores(score), ref.scores(score), atol=1e-8)


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("method", ["eff-slope", "eff", "fidel"])
def test_estimate_is_what_a_plain_model_reads(method, deterministic):
    """Before any call, estimate_cost counts the sequences the model will read: each
    distinct one once, or every one for a model declared not deterministic."""
    clf = sc.StringClassifier(lambda texts: [Counter()(t) for t in texts], deterministic=deterministic)
    est = sc.estimate_cost(clf, TEXT, method=method, n_samples=200, seed=0)
    d = sc.explain(clf, TEXT, method=method, n_samples=200, seed=0).diagnostics
    assert est["calls"] == d["model_evaluations"] and est["input_tokens"] == d["tokens_evaluated"]
    assert (est["calls"] < 200) == deterministic  # a 10-token text's samples repeat


def _user_call(source: str):
    """``call`` as a user's module defines it (its globals are the module's)."""
    namespace = {"__name__": "user_prompts"}
    exec(source, namespace)
    return namespace["call"]


CALL_SOURCE = """
PROMPT = "Is this review positive? {text}"
LABELS = ["neg", "pos"]

def score(prompt):
    return [0.0, float(len(prompt) % 7)]

def call(text):
    return score(PROMPT.format(text=text))
"""


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s.replace("Is this review positive?", "Is this review negative?"),  # the prompt (a global)
        lambda s: s.replace("len(prompt) % 7", "len(prompt) % 5"),  # a helper's body
        lambda s: s.replace("return score(", "return [0.0, 1.0] or score("),  # the call's own body
    ],
)
def test_editing_the_call_function_refuses_its_cache(tmp_path, edit):
    path = tmp_path / "cache.json"
    first = sc.APIClassifier(_user_call(CALL_SOURCE), class_names=["neg", "pos"], cache_file=path)
    _score_one(first, "good film")
    # The same code and settings, defined again (another process would do the same): served.
    again = sc.APIClassifier(_user_call(CALL_SOURCE), class_names=["neg", "pos"], cache_file=path)
    _score_one(again, "good film")
    assert again.usage()["calls"] == again.usage()["cache_checks"] == 1  # the cache's check alone
    # A comment changes no answer: still served.
    commented = _user_call(CALL_SOURCE.replace("def call(text):", "def call(text):  # edited comment"))
    assert sc.APIClassifier(commented, class_names=["neg", "pos"], cache_file=path).usage()["calls"] == 0
    with pytest.raises(ValueError, match="code"):
        sc.APIClassifier(_user_call(edit(CALL_SOURCE)), class_names=["neg", "pos"], cache_file=path)


def test_an_edited_lambda_closure_or_default_refuses_the_cache(tmp_path):
    def make(scale):
        return lambda text: [0.0, scale * len(text)]

    def with_default(text, scale=1.0):
        return [0.0, scale * len(text)]

    def with_default_2(text, scale=2.0):
        return [0.0, scale * len(text)]

    with_default_2.__name__ = with_default_2.__qualname__ = with_default.__qualname__
    cases = [
        (lambda t: [0.0, 1.0], lambda t: [0.0, 2.0]),  # an edited lambda
        (make(1.0), make(2.0)),  # the same code, another value in its closure
        (with_default, with_default_2),  # the same name, another default
    ]
    for k, (old, new) in enumerate(cases):
        path = tmp_path / f"cache{k}.json"
        _score_one(sc.APIClassifier(old, cache_file=path), "good film")
        with pytest.raises(ValueError, match="code"):
            sc.APIClassifier(new, cache_file=path)


def test_estimate_for_several_texts_is_what_a_plain_model_reads():
    # Two texts that share samples ("good", "film"): each text reads its own (its scores
    # must not depend on its neighbours), the input with no tokens is read once for both.
    clf = sc.StringClassifier(lambda texts: [Counter()(t) for t in texts])
    texts = ["good film", "good bad film"]
    est = sc.estimate_cost(clf, texts, method="eff", n_samples=60, seed=[0, 1])
    exps = sc.explain_batch(clf, texts, method="eff", n_samples=60, seed=[0, 1])
    assert est["calls"] == sum(e.diagnostics["model_evaluations"] for e in exps)
    assert est["input_tokens"] == sum(e.diagnostics["tokens_evaluated"] for e in exps)
