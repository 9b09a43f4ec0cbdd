"""Every score of a fixed set of calls, saved, so a refactoring can show that no score moved.

The calls cover the fitting methods, three model families (BERT, GPT-2 without a pad token,
a three-class BERT explained jointly), a Python string classifier, and the three adapters
(``explain``/``explain_batch``, Captum, SHAP), all on tiny seeded random models built from
configs (offline, about a minute on one CPU core). Two snapshots are compared bit for bit.

Example:
    python -m slalom_core.experiments.benchmarks.score_snapshot --out before.npz
    # ... change the code ...
    python -m slalom_core.experiments.benchmarks.score_snapshot --out after.npz --compare before.npz
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

TEXTS = ("the movie was great but the plot was boring", "i loved it , not a bad film at all !")
METHODS = ("eff-slope", "hybrid", "eff", "fidel", "ana")


def _tiny_models(tmp: Path):
    """The test suite's tiny model builders (tests/tiny_models.py), imported from the checkout."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    import tiny_models as tm

    bert_tok = tm.bert_tokenizer(tmp / "bert")
    gpt_tok = tm.gpt2_tokenizer(tmp / "gpt2")
    return {
        "bert": (tm.tiny_classifier("bert", bert_tok, initializer_range=0.2), bert_tok),
        "gpt2": (tm.tiny_classifier("gpt2", gpt_tok, initializer_range=0.2), gpt_tok),
        "bert3": (tm.tiny_classifier("bert", bert_tok, num_labels=3, initializer_range=0.2), bert_tok),
    }


def _explanation_arrays(prefix: str, exp) -> Iterator[tuple[str, np.ndarray]]:
    from slalom_core import SCORES

    for name in SCORES:
        yield f"{prefix}/{name}", np.asarray(exp.scores(name))
    for attr in ("base_value", "model_output", "unit_value_se", "unit_importance_se"):
        value = getattr(exp, attr)
        if value is not None:
            yield f"{prefix}/{attr}", np.asarray(value)


def snapshot(n_samples: int = 200) -> dict[str, np.ndarray]:
    """Run the fixed calls; returns {call/score: array}."""
    import slalom_core as sc

    from captum_slalom import SlalomAttribution
    from shap_slalom import SlalomExplainer

    torch.set_num_threads(1)
    out: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        models = _tiny_models(Path(tmp))
        model, tok = models["bert"]
        for method in METHODS:
            exp = sc.explain(model, TEXTS[0], tok, method=method, n_samples=n_samples, seed=0)
            out.update(_explanation_arrays(f"bert/{method}", exp))
        for name in ("gpt2", "bert3"):
            model_n, tok_n = models[name]
            exp = sc.explain(model_n, TEXTS[1], tok_n, n_samples=n_samples, seed=1)
            out.update(_explanation_arrays(f"{name}/default", exp))
        for i, exp in enumerate(sc.explain_batch(model, list(TEXTS), tok, n_samples=n_samples, seed=2)):
            out.update(_explanation_arrays(f"bert/batch{i}", exp))

        def positive_words(texts: list[str]) -> np.ndarray:
            good = ("great", "loved", "good", "fun")
            return np.array([[sum(w in good for w in t.split()) - 0.5 * len(t.split()) / 10] for t in texts])

        strings = sc.StringClassifier(positive_words)
        exp = sc.explain(strings, TEXTS[0], n_samples=n_samples, seed=3)
        out.update(_explanation_arrays("strings/default", exp))

        ids = tok(TEXTS[0], return_tensors="pt")["input_ids"]
        attr = SlalomAttribution(model, tokenizer=tok).attribute(ids, target=1, n_samples=n_samples, seed=4)
        out["captum/contribution"] = attr.detach().numpy()
        sv = SlalomExplainer(model, tok, n_samples=n_samples, seed=5)([TEXTS[1]])
        out["shap/values"] = np.asarray(sv.values[0], dtype=float)
        out["shap/base_values"] = np.asarray(sv.base_values, dtype=float)
    return out


def compare(after: dict[str, np.ndarray], before: dict[str, np.ndarray], report: Callable = print) -> int:
    """Bit-for-bit comparison; returns the number of arrays that differ or are missing."""
    bad = 0
    for key in sorted(set(before) | set(after)):
        if key not in after or key not in before:
            report(f"only in {'before' if key in before else 'after'}: {key}")
            bad += 1
        elif not np.array_equal(before[key], after[key], equal_nan=True):
            diff = np.nanmax(np.abs(np.asarray(before[key], float) - np.asarray(after[key], float)))
            report(f"differs: {key} (max |Δ| = {diff:.3g})")
            bad += 1
    report(f"{len(set(before) | set(after))} arrays compared, {bad} differ")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to save the snapshot (.npz)")
    parser.add_argument("--compare", default=None, help="an earlier snapshot to compare with, bit for bit")
    parser.add_argument("--n-samples", type=int, default=200)
    args = parser.parse_args(argv)
    arrays = snapshot(args.n_samples)
    np.savez(args.out, **arrays)
    if args.compare:
        with np.load(args.compare) as before:
            return 1 if compare(arrays, dict(before)) else 0
    print(f"{len(arrays)} arrays saved to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
