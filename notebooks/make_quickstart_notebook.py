"""Writes notebooks/quickstart.ipynb (run it, then execute the notebook to fill outputs)."""

from pathlib import Path

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell(
        "# SLALOM quick start\n\n"
        "SLALOM gives every token two scores: a **value** (its effect on the log-odds when it stands alone) "
        "and an **importance** (how much weight it takes from the other tokens). This notebook explains the "
        "packaged MiniLM (offline, with a small adapter trained for IMDB sentiment) with the default method "
        "(`hybrid`) and the other fitting methods, shows the derived scores and draws the paper's "
        "value-vs-importance scatter.\n\n"
        "Set `SLALOM_NOTEBOOK_SMALL=1` for a fast run (fewer samples)."
    ),
    nbf.v4.new_code_cell(
        "import io\n"
        "import os\n"
        "import warnings\n\n"
        "# tqdm.auto asks for ipywidgets in a notebook and falls back to a text bar without them.\n"
        "warnings.filterwarnings('ignore', message='IProgress not found')\n\n"
        "import numpy as np\n"
        "import pandas as pd\n"
        "import torch\n"
        "import transformers\n"
        "import matplotlib\n"
        "matplotlib.use('Agg')\n"
        "import matplotlib.pyplot as plt\n"
        "from IPython.display import HTML, Image, display\n\n"
        "import slalom_core as sc\n"
        "from slalom_core import plots\n"
        "from slalom_core.packaged.demo_model import load_default_model\n\n"
        "# This notebook prints each fit's full-text gap and held-out R² itself (see below), so the\n"
        "# SlalomFitWarning that reports the same numbers is not repeated under every cell.\n"
        "warnings.filterwarnings('ignore', category=sc.SlalomFitWarning)\n"
        "transformers.logging.disable_progress_bar()  # the weight-loading bar says nothing here\n\n"
        "SMALL = os.environ.get('SLALOM_NOTEBOOK_SMALL') == '1'\n"
        "N_SAMPLES = 300 if SMALL else 1000\n"
        "torch.set_num_threads(1)  # the same scores on any machine, and light on a shared CPU\n"
        "model, tok = load_default_model()"
    ),
    nbf.v4.new_markdown_cell(
        "## Explain one sentence (the default method, `hybrid`)\n\n"
        "`sc.explain` returns a `SlalomExplanation`: one row per token, every score from one fit."
    ),
    nbf.v4.new_code_cell(
        "text = 'The acting was wonderful, but the plot was painfully slow.'\n"
        "exp = sc.explain(model, text, tokenizer=tok, n_samples=N_SAMPLES, seed=0)  # method='hybrid'\n"
        "print(exp)\n"
        "display(pd.DataFrame({name: exp.scores(name) for name in ('value', 'importance', 'lin', 'removal', 'contribution')},\n"
        "                     index=exp.tokens).round(3))\n"
        "d = exp.diagnostics\n"
        'print(f"model log-odds {exp.model_output:+.3f}, surrogate {exp.surrogate_output:+.3f} "\n'
        "      f\"(full-text gap {exp.full_text_gap:+.2f}), held-out R² {d['heldout_r2']:.3f}, \"\n"
        "      f\"{d['model_evaluations']} model calls\")"
    ),
    nbf.v4.new_markdown_cell(
        "The surrogate meets the model's log-odds on this very sentence closely (`exp.full_text_gap`): the "
        "default, `hybrid`, measures each token alone on random triples of the text's tokens, then carries "
        "that fit to every scale with a length law that single tokens, the triples and 50 deletions of the "
        "sentence determine (`exp.surrogate.law`; `exp.predict(positions)` is the surrogate on any sub-text). "
        "Each value is its token's output alone, in log-odds. `eff` (below) fits short samples alone, "
        "and it misses the sentence's output. "
        "A `SlalomFitWarning` says when an explanation would mislead (e.g. a surrogate moving against the "
        "model).\n\n"
        "The scatter (paper Fig. 5): tokens to the right push towards *positive*, tokens high up dominate the "
        "softmax weighting. Colour shows `lin` = v·exp(s)."
    ),
    nbf.v4.new_code_cell(
        "fig, ax = plt.subplots(figsize=(6, 4.5))\n"
        "plots.plot_scatter(exp, ax=ax)\n"
        "fig.tight_layout()\n"
        "# Shown as a PNG: under the Agg backend chosen above, display(fig) would print only the figure's repr.\n"
        "buf = io.BytesIO()\n"
        "fig.savefig(buf, format='png', dpi=80)\n"
        "plt.close(fig)\n"
        "display(Image(buf.getvalue()))\n"
        "display(HTML(plots.highlight_html(exp, score='lin')))"
    ),
    nbf.v4.new_markdown_cell(
        "## The page: `exp.to_html()`\n\n"
        "One self-contained HTML page (it opens offline from a file; a notebook shows the same for `exp` "
        "itself). First what each token did to this prediction: the sum from the reference point b through the "
        "tokens' contributions to the surrogate's output F(x), beside the model's own f(x), as a sentence and a "
        "force bar; the text coloured by contribution; the tokens ranked. One tab away: SLALOM's two channels, "
        "value as colour and importance as underline (no underline where the data do not determine it). Last, a "
        "table of every token with its standard errors."
    ),
    nbf.v4.new_code_cell(
        "# Path('explanation.html').write_text(exp.to_html(), encoding='utf-8') writes it as a page.\n"
        "HTML(exp.to_html(full_page=False))"
    ),
    nbf.v4.new_markdown_cell(
        "## The fitting methods\n\n"
        "`hybrid` (the default) measures each token alone on random triples, then in the text's context on "
        "deletions of it; `eff-slope` fits the triples alone, with the importances' prior centred on a fitted "
        "slope times each token's |value| (not a measurement: kept for comparison); "
        "`eff` fits random 2-token samples (the paper's "
        "Algorithm 1); `fidel` fits deletions from the full text (all three with a Gaussian prior on the "
        "importances; `solver='als'` gives fidel's alternating least squares); `ana` uses exactly 2U − 1 "
        "passes. Their `lin` scores rank tokens similarly but not identically: each is a different local fit. "
        "The cost is in model calls and in the tokens those calls read (`tokens_evaluated`)."
    ),
    nbf.v4.new_code_cell(
        "fits = {m: sc.explain(model, text, tokenizer=tok, method=m, n_samples=N_SAMPLES, seed=0)\n"
        "        for m in ('hybrid', 'eff-slope', 'eff', 'fidel', 'ana')}\n"
        "for m, e in fits.items():\n"
        "    d = e.diagnostics\n"
        "    top = [e.tokens[i] for i in np.argsort(-np.abs(e.lin))[:4]]\n"
        "    r2 = d.get('heldout_r2', float('nan'))\n"
        "    print(f\"{m:>9}: {d['model_evaluations']:>5} calls, {d['tokens_evaluated']:>6} tokens read, \"\n"
        '          f"held-out R² {r2:.3f}, full-text gap {e.full_text_gap:+.2f}, top |lin|: {top}")\n'
        "from scipy.stats import spearmanr\n"
        "print('Spearman(lin eff-slope, lin fidel) =', round(spearmanr(fits['eff-slope'].lin, fits['fidel'].lin)[0], 3))"
    ),
    nbf.v4.new_markdown_cell(
        "## Word granularity and batches\n\n"
        "`granularity='word'` samples, deletes and scores a word's sub-tokens together; `explain_batch` explains "
        "several texts in one call (each read and fitted apart from the others)."
    ),
    nbf.v4.new_code_cell(
        "texts = ['An unforgettable, heartwarming masterpiece.', 'Unwatchable: clumsy editing and lifeless performances.']\n"
        "for e in sc.explain_batch(model, texts, tokenizer=tok, granularity='word', n_samples=N_SAMPLES, seed=0):\n"
        "    print(' '.join(f'{t}[{v:+.2f}]' for t, v in zip(e.tokens, e.lin)))"
    ),
    nbf.v4.new_markdown_cell(
        "## Shapley values of the surrogate\n\n"
        "Computed on the fitted SLALOM, with no further model calls. The game is the surrogate measured from the "
        "reference point (F(∅) = 0, as for every score here), so they sum to the surrogate's output minus "
        "`base_value`, not to `surrogate_output` itself."
    ),
    nbf.v4.new_code_cell(
        "phi = exp.shapley()\n"
        "print(np.round(phi, 3))\n"
        "print(f'sum {phi.sum():+.4f} = surrogate output {exp.surrogate_output:+.4f} '\n"
        "      f'- base_value {exp.base_value:+.4f}')"
    ),
]
nb = nbf.v4.new_notebook(
    cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
)
out = Path(__file__).resolve().parent / "quickstart.ipynb"
nbf.write(nb, out)
print("wrote", out)
