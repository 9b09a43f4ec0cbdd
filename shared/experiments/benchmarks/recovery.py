"""Recovery (the paper's Property 3, Proposition 5.2): does a method, with its default options,
recover a model that *is* a SLALOM?

Each model draws values v ~ N(0, 1.5²) and importances s ~ N(0, 1) independently over a
vocabulary of 400 tokens (so no prior built from the values can help); each text is a set
of distinct tokens (30, 80 and 200 by default, so no repetition helps). Per text it reports
the rank correlation of the fitted importances with the true ones, the correlation of the
values, and the R² of the fitted surrogate on 45 sub-texts it never saw (50, 70 and 90 % of the
positions kept, :mod:`.context`). Not a test: the recovery test with the default options is
``tests/engine/test_fitting.py::test_hybrid_recovers_a_true_slalom_with_its_default_options``.

    python -m slalom_core.experiments.benchmarks.recovery --methods hybrid,eff-slope,eff,fidel \\
        --out bench_output/recovery
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import slalom_core as sc
import torch
from scipy.stats import spearmanr
from slalom_core.experiments.benchmarks.context import held_out_subtexts, surrogate_on


class TrueSlalom(torch.nn.Module):
    """A classifier that *is* a SLALOM over token ids: ground truth for the fitters (here and
    in the tests, which import it as ``SlalomModel``).

    ``value`` (V,) gives one log-odds output; (V, C) gives C logits (a joint multi-class
    SLALOM whose centred logits are F_c). The input with no tokens scores 0 (even odds),
    so the default reference point leaves the true values unshifted. ``law`` (one output
    only) makes it a SLALOM under that length law (:class:`slalom_core.LengthLaw`): the
    identity by default, the paper's SLALOM.
    """

    def __init__(self, value: np.ndarray, importance: np.ndarray, law: sc.LengthLaw = sc.IDENTITY_LAW) -> None:
        super().__init__()
        self.register_buffer("value", torch.as_tensor(value, dtype=torch.float64))
        self.register_buffer("importance", torch.as_tensor(importance, dtype=torch.float64))
        self.law = law

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        w = torch.exp(self.importance[input_ids]) * attention_mask
        alpha = w / w.sum(dim=1, keepdim=True).clamp_min(1e-300)
        v = self.value[input_ids]
        if v.ndim == 2:
            mean = (alpha * v).sum(dim=1, keepdim=True)
            if self.law.is_identity:
                return mean
            k = attention_mask.sum(dim=1).detach().cpu().numpy()
            out = self.law.apply(mean[:, 0].detach().cpu().numpy(), k)
            return torch.as_tensor(out, dtype=mean.dtype, device=mean.device)[:, None]
        return torch.einsum("bl,blc->bc", alpha, v)


def recover(method: str, n_models: int, lengths: list[int], vocab: int, n_samples: int) -> list[dict]:
    """One row per (model, text): importance ρ, value r, sub-text R², seconds."""
    rows = []
    for m in range(n_models):
        rng = np.random.default_rng(100 + m)
        v, s = rng.normal(0, 1.5, vocab), rng.normal(0, 1.0, vocab)
        net = TrueSlalom(v, s - s.mean())
        for n in lengths:
            ids = rng.choice(vocab, size=n, replace=False)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sc.SlalomFitWarning)
                exp = sc.explain(sc.TorchClassifier(net), ids.tolist(), method=method, n_samples=n_samples, seed=m)
            seconds = time.perf_counter() - t0
            true_v, true_s = v[ids], s[ids]
            subs = held_out_subtexts(rng, n)
            with torch.no_grad():
                y = np.array([float(net(torch.as_tensor(ids[p])[None], torch.ones(1, len(p)))[0, 0]) for p in subs])
            pred = exp.base_value + surrogate_on(subs, exp.value, exp.importance)
            rows.append(
                {
                    "method": method,
                    "model": m,
                    "n_tokens": n,
                    "importance_rho": float(spearmanr(exp.importance, true_s)[0]),
                    "value_r": float(np.corrcoef(exp.value, true_v)[0, 1]),
                    "subtext_r2": float(1 - np.sum((pred - y) ** 2) / np.sum((y - y.mean()) ** 2)),
                    "determined": float(np.mean(exp.importance_determined)),
                    "seconds": seconds,
                }
            )
    return rows


def summarise(rows: list[dict]) -> str:
    """Markdown: per method, mean and worst text of each measure."""
    lines = [
        "| method | importance ρ mean (min) | value r mean (min) | sub-text R² mean (min) | determined | s / text |",
        "|---|---|---|---|---|---|",
    ]
    for method in dict.fromkeys(r["method"] for r in rows):
        rs = [r for r in rows if r["method"] == method]

        def cell(k: str, rs: list[dict] = rs) -> str:
            x = np.array([r[k] for r in rs])
            return f"{x.mean():.3f} ({x.min():.3f})"

        det = np.mean([r["determined"] for r in rs])
        sec = np.mean([r["seconds"] for r in rs])
        lines.append(
            f"| {method} | {cell('importance_rho')} | {cell('value_r')} | {cell('subtext_r2')} | {det:.2f} | {sec:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", default="hybrid")
    ap.add_argument("--models", type=int, default=6)
    ap.add_argument("--lengths", default="30,80,200")
    ap.add_argument("--vocab", type=int, default=400)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench_output/recovery")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    lengths = [int(x) for x in args.lengths.split(",")]
    rows = []
    for method in args.methods.split(","):
        rows += recover(method, args.models, lengths, args.vocab, args.n_samples)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    table = summarise(rows)
    (out / "recovery.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
