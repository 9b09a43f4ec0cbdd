"""The README's picture of the two-channel view, made with the project's own code.

Explains one review with the packaged demo model (MiniLM with the shipped IMDB adapter,
offline), writes its page with :meth:`SlalomExplanation.to_html` and photographs it with
headless Chromium (``--screenshot``), cropping the empty margin below the view.

    python -m slalom_core.experiments.view_picture --out docs/img/two_channel.png

Example:
    >>> main(["--out", "two_channel.png"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

REVIEW = (
    "An unexpectedly moving film: the acting is superb and the score is lovely, "
    "though the ending drags and one subplot feels completely pointless."
)
# Chromium without its background services, sandbox or GPU: it only draws a local file.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def screenshot(page: Path, png: Path, *, width: int = 1000, height: int = 900) -> Path:
    """Photograph the local HTML file ``page`` into ``png`` with headless Chromium,
    cropping the blank rows below the content.

    Args:
        page: the HTML file.
        png: the picture to write.
        width, height: the browser window, in CSS pixels.

    Returns:
        ``png``.

    Raises:
        RuntimeError: chromium is not installed, or failed.

    Example:
        >>> screenshot(Path("view.html"), Path("view.png"))  # doctest: +SKIP
        PosixPath('view.png')
    """
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="slx-shot-") as profile:
        cmd = [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            f"--screenshot={Path(png).resolve()}",
            Path(page).resolve().as_uri(),
        ]
        done = subprocess.run(cmd, capture_output=True, timeout=120)
    if done.returncode != 0 or not Path(png).exists():
        raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr.decode()[-1000:]}")
    from PIL import Image, ImageChops

    with Image.open(png) as im:
        rgb = im.convert("RGB")
    box = ImageChops.difference(rgb, Image.new("RGB", rgb.size, (255, 255, 255))).getbbox()
    if box is not None:
        rgb.crop((0, 0, rgb.width, min(rgb.height, box[3] + 16))).save(png, optimize=True)
    return Path(png)


def main(argv: Sequence[str] | None = None) -> int:
    """Explain :data:`REVIEW` with the demo model and write its page's picture to ``--out``.

    Example:
        >>> main(["--out", "docs/img/two_channel.png"])  # doctest: +SKIP
        0
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/img/two_channel.png"), help="PNG to write (%(default)s)")
    parser.add_argument("--html", type=Path, default=None, help="also keep the page here (default: not kept)")
    parser.add_argument("--samples", type=int, default=1000, help="SLALOM samples (%(default)s)")
    args = parser.parse_args(argv)

    import torch

    from ..api import explain
    from ..packaged.demo_model import default_adapter

    torch.set_num_threads(1)
    exp = explain(default_adapter(), REVIEW, n_samples=args.samples, seed=0)
    with tempfile.TemporaryDirectory(prefix="slx-view-") as tmp:
        page = args.html or Path(tmp) / "two_channel.html"
        page.write_text(exp.to_html(), encoding="utf-8")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        screenshot(page, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
