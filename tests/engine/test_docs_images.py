"""The pictures of the README and docs/: every image a page links is there, is a PNG and is
small enough to keep in the repository; every file in docs/img is shown somewhere; and each
picture made by ``slalom_core.experiments.docs_figures`` is shown on the page that gives the
command that made it."""

import re
from pathlib import Path

import slalom_core

ROOT = Path(slalom_core.__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: The repository keeps its pictures small (a clone carries every version of them).
MAX_BYTES = 300 * 1024
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def _images(page: Path) -> list[Path]:
    return [(page.parent / link).resolve() for link in IMAGE.findall(page.read_text(encoding="utf-8"))]


def test_every_linked_image_is_a_small_png_in_the_tree():
    linked = [(page.name, img) for page in PAGES for img in _images(page)]
    assert len(linked) >= 5
    for page, img in linked:
        assert img.is_file(), f"{page} links {img}, which is not there"
        assert img.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{page}: {img.name} is not a PNG"
        assert img.stat().st_size < MAX_BYTES, f"{img.name} is {img.stat().st_size // 1024} KB"


def test_every_picture_in_docs_img_is_shown():
    shown = {img for page in PAGES for img in _images(page)}
    assert sorted(p.name for p in IMG.iterdir() if p.resolve() not in shown) == []


def test_each_generated_picture_sits_beside_its_command():
    made = 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for out in re.findall(r"experiments\.docs_figures \w+ --out (\S+\.png)", text):
            made += 1
            assert (ROOT / out).resolve() in _images(page), (
                f"{page.name} gives the command for {out} but not the picture"
            )
    assert made >= 2  # docs/shapiq.md and docs/inseq.md
