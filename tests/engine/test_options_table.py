"""The options are stated once (:class:`slalom_core.CallOptions`: names and defaults;
:data:`slalom_core.api.OPTION_CHECKS`: what each may be); every entry point takes them as
explicit keyword parameters with the table's defaults, documented in its docstring, and
hands them on by name (never through ``locals()``); each call checks them once."""

import ast
import dataclasses
import inspect
from pathlib import Path

import pytest
import slalom_core as sc
import torch
from slalom_core.amortized.pipeline import explain_corpus_amortized
from slalom_core.api import OPTION_CHECKS
from slalom_core.cli.command import build_parser
from slalom_core.corpus import explain_corpus

from captum_slalom import SlalomAttribution
from shap_slalom import SlalomExplainer

ROOT = Path(__file__).resolve().parents[2]

#: The option table: CallOptions' fields with their defaults (stated there once).
TABLE = {f.name: f.default for f in dataclasses.fields(sc.CallOptions) if f.name != "fit_options"}
FIT = set(sc.FitOptions.__optional_keys__)
EXPLAIN = set(sc.ExplainOptions.__optional_keys__)
RUN = {"batch_size", "device", "show_progress"}  # how the model is run, not what is fitted


def test_the_table_is_call_options_and_every_option_has_one_check():
    assert TABLE["method"] == sc.DEFAULT_METHOD and TABLE["n_samples"] == sc.DEFAULT_N_SAMPLES
    # The method is checked by the fitters' own tables (get_fitter), every other option here.
    assert set(OPTION_CHECKS) == set(TABLE) - {"method"}
    # The typed dicts are typing aids for **kwargs, held to the table.
    assert FIT <= set(TABLE) and EXPLAIN == set(TABLE) | RUN


def test_check_call_takes_the_object_or_its_keywords_alike():
    opts = sc.CallOptions(method="eff", n_samples=200, seed=[1, 2], fit_options={"sample_length": 3})
    a = sc.check_call(opts)
    b = sc.check_call(method="eff", n_samples=200, seed=[1, 2], sample_length=3)
    assert (a.fitter.name, a.fitter.sample_length, a.seed) == (b.fitter.name, b.fitter.sample_length, b.seed)
    assert a.seed == (1, 2)
    with pytest.raises(TypeError, match="not both"):
        sc.check_call(opts, n_samples=3)


def _named(func) -> dict[str, inspect.Parameter]:
    return {
        n: p
        for n, p in inspect.signature(func).parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


CORPUS = (set(TABLE) - {"gamma"}) | RUN  # a corpus run normalises nothing (no gamma)
# (entry point, the options it must show, options whose default is its own and why)
ENTRY_POINTS = [
    (sc.explain, EXPLAIN, {}),
    (sc.explain_batch, EXPLAIN, {}),
    # rows: the target and seed are per row; Captum's perturbations_per_eval is 64.
    (sc.explain_rows, FIT | {"seed", "batch_size", "show_progress"}, {"batch_size": 64}),
    # an estimate is of one call's exact samples: a fixed seed.
    (sc.estimate_cost, {"method", "n_samples", "seed", "reference", "granularity", "truncate"}, {"seed": 0}),
    # a corpus run: reproducible (seed 0), cuts long texts as the command line does, shows a bar.
    (explain_corpus, CORPUS, {"seed": 0, "truncate": True, "show_progress": True}),
    # the pipeline's per-text fits are a corpus run's (its head explains as trained: no target, ...).
    (
        explain_corpus_amortized,
        {"method", "n_samples", "seed", "truncate"} | RUN,
        {"seed": 0, "truncate": True, "show_progress": True},
    ),
    (SlalomAttribution.attribute, FIT | {"seed", "show_progress"}, {}),
    # shap's explainers are deterministic by default (Partition): seed 0.
    (SlalomExplainer.__init__, FIT | {"seed", "batch_size", "device"}, {"seed": 0}),
]


@pytest.mark.parametrize("func, options, own", ENTRY_POINTS, ids=lambda x: getattr(x, "__qualname__", ""))
def test_entry_point_shows_every_option_with_the_tables_default(func, options, own):
    params = _named(func)
    missing = sorted(options - set(params))
    assert missing == [], f"{func.__qualname__} hides {missing} (in **kwargs or not at all)"
    explain_defaults = {n: p.default for n, p in _named(sc.explain).items()}
    for name in sorted(options):
        expected = own.get(name, TABLE.get(name, explain_defaults.get(name)))
        assert params[name].default == expected, f"{func.__qualname__}({name}=...) defaults differ from the table"


def test_the_command_lines_defaults_are_the_tables():
    parser = build_parser("explain")
    explain = parser._subparsers._group_actions[0].choices["explain"]
    defaults = {a.dest: a.default for a in explain._actions}
    for name in ("method", "n_samples", "target", "granularity"):
        assert defaults[name] == TABLE[name], name
    # A corpus run's own defaults, as explain_corpus states them.
    corpus = _named(explain_corpus)
    assert defaults["seed"] == corpus["seed"].default and defaults["truncate"] == corpus["truncate"].default
    choices = {a.dest: a.choices for a in explain._actions}
    assert set(choices["granularity"]) == set(OPTION_CHECKS["granularity"].choices)


@pytest.mark.parametrize("func", [sc.explain, sc.explain_rows, SlalomAttribution.attribute, SlalomExplainer])
def test_every_option_is_documented(func):
    doc = inspect.getdoc(func) or ""
    if func is SlalomAttribution.attribute:
        doc = func.__doc__
    names = EXPLAIN if func is sc.explain else FIT
    undocumented = [n for n in sorted(names) if f"{n}:" not in doc and f"{n} (" not in doc and f"{n}," not in doc]
    assert undocumented == []


def test_the_check_sees_a_hidden_option():
    def hides(model, text, **options):  # the shape the entry points had before
        return None

    assert {"method", "n_samples"} - set(_named(hides))


def _calls_to_locals(source: str) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "locals"
    ]


def test_options_are_handed_on_by_name_never_through_locals():
    # A hand-off through locals() is invisible to static tools and an IDE's "find usages":
    # the entry points' rooms and the adapters name every option they pass on.
    rooms = ("shared/api", "shared/corpus", "shared/amortized", "shared/cli", "captum_slalom", "shap_slalom")
    files = [p for r in rooms for p in (ROOT / r).rglob("*.py")] + list((ROOT / "inseq_slalom").rglob("*.py"))
    found = {str(p.relative_to(ROOT)): lines for p in files if (lines := _calls_to_locals(p.read_text()))}
    assert found == {}


def test_the_locals_check_sees_one():
    assert _calls_to_locals("def f(a=1):\n    return g(**locals())\n") == [2]


def test_each_call_checks_its_options_once(monkeypatch):
    import slalom_core.api.driver as driver

    calls = []
    real = driver.check_call
    monkeypatch.setattr(driver, "check_call", lambda opts: calls.append(opts) or real(opts))
    w = torch.tensor([0.1, -0.1])
    clf = sc.TorchClassifier(lambda ids, mask: (ids * mask).float().sum(1, keepdim=True) * w)
    exps = sc.explain_batch(clf, [[5, 6, 7], [8, 9]], method="eff", n_samples=60, seed=0, sample_length=2)
    assert len(exps) == 2 and len(calls) == 1
    assert calls[0] == sc.CallOptions(method="eff", n_samples=60, seed=0, fit_options={"sample_length": 2})


def test_a_corpus_run_refuses_gamma_by_name():
    """explain's gamma (the importances' sum) is not an option of a corpus run: refused
    before any model is loaded, naming it, instead of reaching the fitter as unknown."""
    from slalom_core.corpus.checks import check_run_options

    with pytest.raises(TypeError, match="a corpus run takes no gamma"):
        check_run_options(sc.CallOptions(method="eff", seed=0, fit_options={"gamma": 0.5}), None, 64, "local")
    opts, call = check_run_options(sc.CallOptions(method="eff", seed=0), None, 64, "local")
    assert call.fitter.name == "eff" and opts.fit_options == {}
