"""The script behind docs/shapiq.md's and docs/inseq.md's pictures (``experiments/docs_figures.py``)."""

import numpy as np
import pytest
from browser import needs_chromium
from slalom_core.experiments.docs_figures import inseq_figure, shapiq_figure


@pytest.mark.slow  # the demo model's load and fit: ~10-40 s on the shared 2-core machine
def test_shapiq_figure_draws_a_small_png_from_the_demo_model(tmp_path):
    pytest.importorskip("shapiq")
    from PIL import Image

    out = shapiq_figure(tmp_path / "net.png", n_samples=200)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size < 300 * 1024
    with Image.open(out) as im:
        # A drawn network, not a blank canvas: the plot's colours and the labels' grey levels.
        assert len(im.convert("RGB").getcolors(maxcolors=1 << 16) or []) > 20


@pytest.mark.slow  # a tiny GPT-2's generation, SLALOM per generated token, and a browser start
@needs_chromium
def test_inseq_figure_photographs_show_with_its_colours(tmp_path):
    pytest.importorskip("inseq")
    from PIL import Image

    out = inseq_figure(tmp_path / "show.png", max_new_tokens=2, n_samples=50)
    assert out.stat().st_size < 300 * 1024
    with Image.open(out) as im:
        rgb = np.asarray(im.convert("RGB"), dtype=int)
    # Heatmap cells are tinted red or blue; inseq's own numpy-2 CSS would leave every pixel
    # grey (text and borders only), so tinted pixels show that the colours reached the browser.
    tinted = np.abs(rgb[..., 0] - rgb[..., 2]) > 40
    assert tinted.sum() > 500
