"""The API cache serves an answer only when it can vouch that the call is the one that wrote
it: an edit anywhere the call reads (a prompt in an object, a class, a module of the user's,
a helper) is never served the old answers, and what only grants access (a key, a timeout)
or does not run (a docstring, a local variable's name) never throws the cache away."""

import copy
import importlib
import json
import pickle
import sys
import textwrap
import warnings

import pytest
import slalom_core as sc
import torch
from slalom_core.models.code_digest import access_only, call_digest


def _module(source: str, name: str = "user_calls"):
    """The namespace of a user's module defined by ``source`` (another process would build it again)."""
    namespace = {"__name__": name}
    exec(textwrap.dedent(source), namespace)
    return namespace


def _first(call, path) -> None:
    clf = sc.APIClassifier(call, class_names=["neg", "pos"], cache_file=path)
    clf.score([[j for u in clf.segment("good film").unit_ids for j in u]])
    assert clf.usage()["calls"] == 1


def _served(call, path) -> bool:
    """Whether a classifier of ``call`` answers "good film" from the cache file (no call but
    the cache's check, which asks the one stored answer again)."""
    try:
        clf = sc.APIClassifier(call, class_names=["neg", "pos"], cache_file=path)
    except ValueError as err:
        assert "another classifier" in str(err)
        return False
    clf.score([[j for u in clf.segment("good film").unit_ids for j in u]])
    usage = clf.usage()
    return usage["calls"] == usage["cache_checks"] == 1


# Each: the user's module (PROMPT marks what the edit changes), and the edit.
EDITS = {
    "dataclass": """
        from dataclasses import dataclass
        @dataclass
        class Settings:
            prompt: str
            temperature: float = 0.0
        SETTINGS = Settings("Is it good? PROMPT")
        def call(text):
            return [0.0, float(len(SETTINGS.prompt + text) % 7)]
    """,
    "simple namespace": """
        import types
        CFG = types.SimpleNamespace(prompt="Is it good? PROMPT")
        def call(text):
            return [0.0, float(len(CFG.prompt + text) % 7)]
    """,
    "class attribute": """
        class Prompts:
            REVIEW = "Is it good? PROMPT"
        def call(text):
            return [0.0, float(len(Prompts.REVIEW + text) % 7)]
    """,
    "slots": """
        class Settings:
            __slots__ = ("prompt",)
            def __init__(self, prompt):
                self.prompt = prompt
        SETTINGS = Settings("Is it good? PROMPT")
        def call(text):
            return [0.0, float(len(SETTINGS.prompt + text) % 7)]
    """,
    "compiled regex": """
        import re
        WORDS = re.compile("PROMPT|good")
        def call(text):
            return [0.0, float(len(WORDS.findall(text)))]
    """,
    "string.Template": """
        from string import Template
        TEMPLATE = Template("Is $text good? PROMPT")
        def call(text):
            return [0.0, float(len(TEMPLATE.substitute(text=text)) % 7)]
    """,
    "bound method's class attribute": """
        class Asker:
            QUESTION = "Is it good? PROMPT"
            def call(self, text):
                return [0.0, float(len(self.QUESTION + text) % 7)]
        call = Asker().call
    """,
    "bound method's other method": """
        class Asker:
            def prompt(self, text):
                return "Is it good? PROMPT" + text
            def call(self, text):
                return [0.0, float(len(self.prompt(text)) % 7)]
        call = Asker().call
    """,
    "bound method's private attribute": """
        class Asker:
            def __init__(self):
                self._prompt = "Is it good? PROMPT"
            def call(self, text):
                return [0.0, float(len(self._prompt + text) % 7)]
        call = Asker().call
    """,
}


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_an_edited_prompt_is_never_served_the_old_answers(tmp_path, kind):
    path = tmp_path / "cache.json"
    source = EDITS[kind]
    _first(_module(source)["call"], path)
    assert _served(_module(source)["call"], path)  # the same program, run again: free
    assert not _served(_module(source.replace("PROMPT", "EDITED"))["call"], path)


def _files(tmp_path, monkeypatch, **modules):
    """Modules of the user's own, as files on the path, (re)imported."""
    tmp_path.mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, source in modules.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return {name: importlib.import_module(name) for name in modules}


@pytest.mark.parametrize(
    "helper, user",
    [
        # A prompt read as prompts.TEMPLATE.
        (
            'TEMPLATE = "Is it good? PROMPT {text}"\n',
            "import rel48_helper\ndef call(text):\n    return [0.0, float(len(rel48_helper.TEMPLATE.format(text=text)) % 7)]\n",
        ),
        # A helper imported from the user's own module.
        (
            'def build(text):\n    return "Is it good? PROMPT " + text\n',
            "from rel48_helper import build\ndef call(text):\n    return [0.0, float(len(build(text)) % 7)]\n",
        ),
    ],
)
def test_an_edit_in_the_users_other_module_is_never_served(tmp_path, monkeypatch, helper, user):
    path = tmp_path / "cache.json"
    mods = _files(tmp_path / "src", monkeypatch, rel48_helper=helper, rel48_user=user)
    _first(mods["rel48_user"].call, path)
    mods = _files(tmp_path / "src", monkeypatch, rel48_helper=helper, rel48_user=user)
    assert _served(mods["rel48_user"].call, path)
    mods = _files(tmp_path / "src", monkeypatch, rel48_helper=helper.replace("PROMPT", "EDITED"), rel48_user=user)
    assert not _served(mods["rel48_user"].call, path)


def test_what_the_digest_cannot_see_turns_the_cache_off_and_is_named(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "cache.json"
    source = """
        def call(text):
            return [0.0, float(len(LABELS.iloc[1] + text) % 7)]
    """
    user = _module(source)
    user["LABELS"] = pd.Series(["neg", "pos PROMPT"])
    exec(textwrap.dedent(source), user)
    with pytest.warns(UserWarning, match=r"is not used: the call reads LABELS \(pandas.*Series\).*cache_identity"):
        clf = sc.APIClassifier(user["call"], class_names=["neg", "pos"], cache_file=path)
    clf.score([[j for u in clf.segment("good film").unit_ids for j in u]])
    assert clf.usage()["calls"] == 1 and not path.exists()  # asked, and nothing kept to serve later
    assert call_digest(user["call"]).unseen == ("LABELS (pandas.Series)",)


KEYED = """
    API_KEY = "sk-old-0123456789"
    TIMEOUT = 30
    RETRIES = 3
    PROMPT = "Is it good? {text}"

    def call(text, api_key=API_KEY, timeout=TIMEOUT):
        '''Ask the model.'''
        headers = {"Authorization": "Bearer " + api_key}
        prompt = PROMPT.format(text=text)
        return [0.0, float(len(prompt) % 7)] if headers and timeout and RETRIES else [0.0, 0.0]

    def make(key):
        def call(text):
            return [0.0, float(len(PROMPT.format(text=text)) % 7)] if key else [0.0, 0.0]
        return call

    class Client:
        def __init__(self, api_key, timeout):
            self.api_key, self.timeout, self.model = api_key, timeout, "m1"
        def call(self, text):
            return [0.0, float(len(self.model + text) % 7)] if self.api_key else [0.0, 0.0]
"""


@pytest.mark.parametrize(
    "pick",
    [
        lambda m: m["call"],
        lambda m: m["make"](m["API_KEY"]),
        lambda m: m["Client"](m["API_KEY"], m["TIMEOUT"]).call,
    ],
    ids=["global and default", "closure", "attribute"],
)
def test_a_rotated_key_a_timeout_a_docstring_or_a_local_name_keeps_the_cache(tmp_path, pick):
    path = tmp_path / "cache.json"
    _first(pick(_module(KEYED)), path)
    for edit in [
        KEYED.replace("sk-old-0123456789", "sk-new-9876543210"),
        KEYED.replace("TIMEOUT = 30", "TIMEOUT = 120").replace("RETRIES = 3", "RETRIES = 9"),
        KEYED.replace("'''Ask the model.'''", "'''Ask the model, in one request per text.'''"),
        KEYED.replace("prompt = PROMPT", "asked = PROMPT").replace("len(prompt)", "len(asked)"),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # and no warning: the cache vouches
            assert _served(pick(_module(edit)), path)
    assert not _served(pick(_module(KEYED.replace("Is it good?", "Is it bad?").replace('"m1"', '"m2"'))), path)


def test_a_declared_identity_takes_precedence_and_never_counts_a_key(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tmp_path / "cache.json"
    source = """
        API_KEY = "sk-old-0123456789"
        def call(text):
            return [0.0, float(len(CLIENT.iloc[0] + text) % 7)] if API_KEY else [0.0, 0.0]
        call.cache_identity = {"model": "m1", "prompt": "Is it good?", "api_key": API_KEY}
    """

    def user(src):
        m = _module(src)
        m["CLIENT"] = pd.Series(["a client the digest cannot see into"])
        return m["call"]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # declared: nothing unseen, the cache is used
        _first(user(source), path)
        assert _served(user(source.replace("sk-old-0123456789", "sk-new-9876543210")), path)
    assert "sk-old" not in path.read_text()
    assert not _served(user(source.replace('"m1"', '"m2"')), path)


def test_access_only_names():
    assert all(map(access_only, ["api_key", "OPENAI_API_KEY", "_secret", "headers", "timeout", "max_retries"]))
    assert not any(map(access_only, ["max_tokens", "temperature", "prompt", "labels", "model", "stop_token"]))


# -- what reading code cannot see: the cache asks again (issue 56) ----------------------------


def _ids(clf, text: str) -> list[list[int]]:
    return [[j for u in clf.segment(text).unit_ids for j in u]]


def _rewrite_module(tmp_path, monkeypatch, prompt: str) -> None:
    """The user's module ``iss56_prompts`` on the path, (re)written: the next import reads it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "iss56_prompts.py").write_text(f"PROMPT = {prompt!r}\n")
    sys.modules.pop("iss56_prompts", None)
    importlib.invalidate_caches()


# Each: a call whose answer (len of "m1", 2.0; after the edit len of "model-two", 9.0) comes
# through something the digest neither hashes nor lists as unseen, and the edit.
HIDDEN = {
    "environment variable": (
        """
        import os
        def call(text):
            return [0.0, float(len(os.environ["ISS56_MODEL"]))]
        """,
        lambda tmp, mp: mp.setenv("ISS56_MODEL", "model-two"),
    ),
    "file read inside the call": (
        """
        def call(text):
            with open(PROMPT_FILE) as fh:
                return [0.0, float(len(fh.read()))]
        """,
        lambda tmp, mp: (tmp / "prompt.txt").write_text("model-two"),
    ),
    'globals()["PROMPT"]': (
        """
        PROMPT = "m1"
        def call(text):
            return [0.0, float(len(globals()["PROMPT"]))]
        """,
        None,  # the module is built again with PROMPT edited
    ),
    "import inside the call's body": (
        """
        def call(text):
            import iss56_prompts
            return [0.0, float(len(iss56_prompts.PROMPT))]
        """,
        lambda tmp, mp: _rewrite_module(tmp, mp, "model-two"),
    ),
}


@pytest.mark.parametrize("finding", sorted(HIDDEN))
def test_an_edit_the_digest_cannot_see_is_refused_by_asking_again(tmp_path, monkeypatch, finding):
    # Before: the next process made 0 calls and served 2.0 where the call now gives 9.0.
    source, edit = HIDDEN[finding]
    path = tmp_path / "cache.json"
    monkeypatch.setenv("ISS56_MODEL", "m1")
    (tmp_path / "prompt.txt").write_text("m1")
    _rewrite_module(tmp_path, monkeypatch, "m1")

    def process():  # the user's program, loaded again as a new process would
        user = _module(source)
        user["PROMPT_FILE"] = str(tmp_path / "prompt.txt")
        if edit is None and edited:
            user["PROMPT"] = "model-two"
        return user["call"]

    edited = False
    first = sc.APIClassifier(process(), class_names=["neg", "pos"], cache_file=path)
    assert first.score(_ids(first, "good film")).tolist() == [[0.0, 2.0]]
    blind = call_digest(process())
    assert blind.unseen == () and blind.left_out == ()  # reading the code finds nothing to distrust
    again = sc.APIClassifier(process(), class_names=["neg", "pos"], cache_file=path)
    assert again.score(_ids(again, "good film")).tolist() == [[0.0, 2.0]]
    assert again.usage()["calls"] == again.usage()["cache_checks"] == 1  # the check's one call
    stored = path.read_bytes()
    edited = True
    if edit is not None:
        edit(tmp_path, monkeypatch)
    assert call_digest(process()).digest == blind.digest  # the edit is invisible to the digest
    clf = sc.APIClassifier(process(), class_names=["neg", "pos"], cache_file=path)
    message = (
        r"cache file .*cache\.json' holds answers this call no longer gives: of 1 stored answers asked again "
        r"\(chosen at random\), 1 differ by more than cache_tolerance=1e-06 \('good film': stored \[0\.0, 2\.0\], "
        r"now \[0\.0, 9\.0\]\).*nothing was served from the file\. Delete .*cache\.json' \(or give another cache_file\)"
    )
    with pytest.raises(sc.CacheChangedError, match=message):
        clf.score(_ids(clf, "good film"))
    with pytest.raises(sc.CacheChangedError):  # refused for the classifier's life, not only once
        clf.score(_ids(clf, "good film"))
    assert clf.usage()["calls"] == clf.usage()["cache_checks"] == 1 and clf.usage()["cache_hits"] == 0
    assert path.read_bytes() == stored  # nothing written over the old answers either


def _counting(answers: dict[str, float] | None = None):
    seen = []

    def call(text):
        seen.append(text)
        return [0.0, float(text.count("good")) + (answers or {}).get(text, 0.0)]

    return call, seen


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # a word-count model
def test_the_check_is_paid_within_the_budget_and_the_estimate_and_drawn_reproducibly(tmp_path):
    path = tmp_path / "cache.json"
    text = "a good film with a good cast"
    call, seen = _counting()
    first = sc.APIClassifier(call, class_names=["neg", "pos"], cache_file=path)
    sc.explain(first, text, method="eff", n_samples=60, seed=0)
    n_stored = len(seen)
    # Its own answers need no check: this process asked for them.
    assert sc.explain(first, text, method="eff", n_samples=60, seed=0).diagnostics["api_usage"]["calls"] == 0
    picks = []
    for _ in range(2):
        call, seen = _counting()
        clf = sc.APIClassifier(call, class_names=["neg", "pos"], cache_file=path, cache_check_seed=7)
        est = sc.estimate_cost(clf, text, method="eff", n_samples=60, seed=0)
        assert est["cache_checks"] == 3 and est["calls"] == 3 and est["cache_hits"] == n_stored
        usage = sc.explain(clf, text, method="eff", n_samples=60, seed=0).diagnostics["api_usage"]
        assert usage["calls"] == usage["cache_checks"] == 3 and usage["estimate"]["calls"] == 3
        picks.append(seen)
    assert picks[0] == picks[1]  # seeded: the same stored answers asked again
    # Unseeded: torch's global generator, so torch.manual_seed reproduces the choice.
    drawn = []
    for _ in range(2):
        torch.manual_seed(3)
        call, seen = _counting()
        clf = sc.APIClassifier(call, class_names=["neg", "pos"], cache_file=path)
        clf.score(_ids(clf, text))
        drawn.append(seen)
    assert drawn[0] == drawn[1] and len(drawn[0]) == 3
    # Within the budget: a budget that leaves no room for the check refuses before any call.
    call, seen = _counting()
    tight = sc.APIClassifier(call, class_names=["neg", "pos"], cache_file=path, max_calls=2)
    with pytest.raises(sc.BudgetExceededError, match="3 calls"):
        sc.explain(tight, text, method="eff", n_samples=60, seed=0)
    assert seen == []
    # A copy in another process (a Ray worker) checks again; a shallow copy shares the check.
    plain = tmp_path / "plain.json"
    sc.explain(sc.APIClassifier(_good, class_names=["neg", "pos"], cache_file=plain), text, n_samples=60, seed=0)
    clf = sc.APIClassifier(_good, class_names=["neg", "pos"], cache_file=plain)
    clf.score(_ids(clf, text))
    assert clf.usage()["cache_checks"] == 3
    assert copy.copy(clf)._pending_check() == [] and len(pickle.loads(pickle.dumps(clf))._pending_check()) == 3


def _good(text):
    return [0.0, float(text.count("good"))]


def test_a_tolerance_for_an_endpoint_that_is_not_deterministic(tmp_path, monkeypatch):
    path = tmp_path / "cache.json"
    source = """
        import os
        def call(text):
            return [0.0, 1.0 + float(os.environ["ISS56_NOISE"])]
    """
    monkeypatch.setenv("ISS56_NOISE", "0")
    first = sc.APIClassifier(_module(source)["call"], class_names=["neg", "pos"], cache_file=path)
    first.score(_ids(first, "good film"))
    monkeypatch.setenv("ISS56_NOISE", "0.001")  # the endpoint's noise, nothing edited
    clf = sc.APIClassifier(_module(source)["call"], class_names=["neg", "pos"], cache_file=path)
    with pytest.raises(sc.CacheChangedError, match="set cache_tolerance to its noise"):
        clf.score(_ids(clf, "good film"))
    clf = sc.APIClassifier(_module(source)["call"], class_names=["neg", "pos"], cache_file=path, cache_tolerance=1e-2)
    assert clf.score(_ids(clf, "good film")).tolist() == [[0.0, 1.0]]  # the stored answer
    for bad in (dict(cache_checks=-1), dict(cache_checks=True), dict(cache_tolerance=float("nan"))):
        with pytest.raises(ValueError, match="cache_"):
            sc.APIClassifier(_good, cache_file=tmp_path / "other.json", **bad)


# -- secrets never on disk; settings left out by their name are named (issue 56) ---------------


def test_a_secret_nested_in_a_declared_identity_is_never_written_or_hashed(tmp_path):
    # Only top-level keys were dropped: {"client": {"api_key": ...}} was written verbatim.
    path = tmp_path / "cache.json"

    def declared(secret: str, model: str = "m1"):
        def call(text):
            return [0.0, float(len(text))]

        call.cache_identity = {
            "model": model,
            "client": {"api_key": secret, "base_url": "http://127.0.0.1:8000/v1", "headers": {"x": secret}},
            "fallbacks": [{"token": secret, "model": "m0"}],
        }
        return call

    clf = sc.APIClassifier(declared("sk-nested-0123456789abcdef"), class_names=["neg", "pos"], cache_file=path)
    clf.score(_ids(clf, "good film"))
    assert clf.cache_identity()["call_settings"] == {
        "model": "m1",
        "client": {"base_url": "http://127.0.0.1:8000/v1"},
        "fallbacks": [{"model": "m0"}],
    }
    assert "sk-nested" not in path.read_text()
    # Not hashed either: a rotated key is the same call, served.
    rotated = declared("sk-rotated-9876543210fedcba")
    assert call_digest(rotated).digest == call_digest(declared("sk-nested-0123456789abcdef")).digest
    assert _served(rotated, path)
    # Another model is refused, and the message quotes no key.
    with pytest.raises(ValueError, match="another classifier") as err:
        sc.APIClassifier(declared("sk-nested-0123456789abcdef", "m2"), class_names=["neg", "pos"], cache_file=path)
    assert "sk-" not in str(err.value)
    # A file an older release wrote, the nested key verbatim in it: its message quotes no key either.
    old = json.loads(path.read_text())
    old["identity"]["call_settings"]["client"]["api_key"] = "sk-written-verbatim-0123456789"
    old["identity"]["call_settings"]["model"] = "m0"
    path.write_text(json.dumps(old))
    with pytest.raises(ValueError, match="another classifier: its call_settings") as err:
        sc.APIClassifier(declared("sk-nested-0123456789abcdef"), class_names=["neg", "pos"], cache_file=path)
    assert "sk-" not in str(err.value)


LEFT_OUT = """
    HEADERS = {"Authorization": "Bearer sk-old-0123456789", "temperature": 0.0}
    key = "Is this review positive? Answer yes or no."

    def call(text):
        sent = {"prompt": key + text, **HEADERS}
        return [0.0, float(len(sent["prompt"]) % 7) + 10 * sent["temperature"]]
"""


def test_a_setting_left_out_by_its_access_like_name_is_named_and_its_edit_refused(tmp_path):
    # HEADERS and key were dropped whatever they held: editing them was served the old answers.
    path = tmp_path / "cache.json"
    with pytest.warns(UserWarning, match=r"leaves out global HEADERS, global key by their access-like names") as caught:
        first = sc.APIClassifier(_module(LEFT_OUT)["call"], class_names=["neg", "pos"], cache_file=path)
    said = " ".join(str(w.message) for w in caught)
    assert "sk-old" not in said and "Is this review" not in said  # names, never values
    first.score(_ids(first, "good film"))
    assert call_digest(_module(LEFT_OUT)["call"]).left_out == ("global HEADERS", "global key")
    edited = _module(LEFT_OUT.replace('"temperature": 0.0', '"temperature": 0.7'))["call"]
    with pytest.warns(UserWarning, match="leaves out"):
        clf = sc.APIClassifier(edited, class_names=["neg", "pos"], cache_file=path)
    with pytest.raises(sc.CacheChangedError, match=r"left out of the key by its access-like name \(global HEADERS"):
        clf.score(_ids(clf, "good film"))
    assert "sk-old" not in path.read_text() and "Is this review" not in path.read_text()
