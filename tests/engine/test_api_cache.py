"""The API cache serves an answer only when it can vouch that the call is the one that wrote
it: an edit anywhere the call reads (a prompt in an object, a class, a module of the user's,
a helper) is never served the old answers, and what only grants access (a key, a timeout)
or does not run (a docstring, a local variable's name) never throws the cache away."""

import importlib
import sys
import textwrap
import warnings

import pytest
import slalom_core as sc
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
    """Whether a classifier of ``call`` answers "good film" from the cache file (no call)."""
    try:
        clf = sc.APIClassifier(call, class_names=["neg", "pos"], cache_file=path)
    except ValueError as err:
        assert "another classifier" in str(err)
        return False
    clf.score([[j for u in clf.segment("good film").unit_ids for j in u]])
    return clf.usage()["calls"] == 0


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
