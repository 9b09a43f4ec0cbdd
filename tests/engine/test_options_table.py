"""Every entry point takes the engine's options as explicit keyword parameters, with the
defaults of the option table (:func:`slalom_core.check_call`), documented in its docstring."""

import inspect

import pytest
import slalom_core as sc

from captum_slalom import SlalomAttribution
from shap_slalom import SlalomExplainer

#: The option table: what check_call takes, with its defaults (stated there once).
TABLE = {
    name: p.default
    for name, p in inspect.signature(sc.check_call).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}
FIT = set(sc.FitOptions.__optional_keys__)
CALL = set(sc.CallOptions.__optional_keys__)
EXPLAIN = set(sc.ExplainOptions.__optional_keys__)


def test_the_table_is_check_calls_signature():
    assert set(TABLE) == CALL
    assert TABLE["method"] == sc.DEFAULT_METHOD and TABLE["n_samples"] == sc.DEFAULT_N_SAMPLES


def _named(func) -> dict[str, inspect.Parameter]:
    return {
        n: p
        for n, p in inspect.signature(func).parameters.items()
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }


# (entry point, the options it must show, options whose default is its own and why)
ENTRY_POINTS = [
    (sc.explain, EXPLAIN, {}),
    (sc.explain_batch, EXPLAIN, {}),
    # rows: the target and seed are per row; Captum's perturbations_per_eval is 64.
    (sc.explain_rows, FIT | {"seed", "batch_size", "show_progress"}, {"batch_size": 64}),
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


def test_passed_on_hands_on_the_tables_options_and_refuses_a_lost_one():
    import pytest
    from slalom_core.api import CallOptions, FitOptions, passed_on

    def entry(*, method="eff", n_samples=300, output="auto", reference="empty", multiclass="joint", gamma=0.5, x=1):
        return passed_on(locals(), FitOptions)

    assert entry() == dict(method="eff", n_samples=300, output="auto", reference="empty", multiclass="joint", gamma=0.5)
    with pytest.raises(TypeError, match=r"missing \['granularity', 'seed', 'target', 'truncate'\]"):
        passed_on(dict(entry.__kwdefaults__), CallOptions)
