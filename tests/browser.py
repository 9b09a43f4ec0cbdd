"""Render local HTML in headless Chromium and report what the browser saw.

:func:`render` opens a file with Debian's ``chromium`` and returns the DOM after load
(``--dump-dom``), a screenshot (``--screenshot``) and every URL the browser tried to fetch
that is not on the file system. Requests are observed in Chromium's own net log
(``--log-net-log``): each request it starts is logged with its URL and the site that made
it, whether it succeeds or not (the browser's own update checks are told apart), and every
proxy is set to an unreachable address (port 9 of localhost) so nothing can
leave the machine while the test looks. The tests check this detector on a page
that does load a remote URL, so a silent detector cannot pass a test.

Example:
    >>> seen = render(Path("page.html"))  # doctest: +SKIP
    >>> seen.remote_requests  # doctest: +SKIP
    []
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from slalom_core.experiments.view_picture import CHROMIUM_FLAGS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The harness's flags (Chromium drawing a local file, nothing else), and a dead proxy so
# that a page that reaches for the network fails here instead of hanging.
FLAGS = (*CHROMIUM_FLAGS, "--proxy-server=127.0.0.1:9")
# Schemes that leave the file system; data: and file: stay on this machine.
_REMOTE = re.compile(r"^(https?|wss?|ftp)://", re.IGNORECASE)

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run installs it)"
)


@dataclass
class Rendered:
    """What the browser made of a page."""

    dom: str
    png: bytes
    remote_requests: list[str]


def _page_urls_in_net_log(path: Path) -> list[str]:
    """The URLs of every request the page started, read from Chromium's net log.

    The browser also makes requests of its own (update checks, accounts) whatever the
    flags; those are not the page's. A page opened from a file has the file:// site as its
    network isolation key (and an opaque "null" initiator): its requests carry it.
    """
    text = path.read_text(encoding="utf-8", errors="replace").rstrip()
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # cut short when the browser exited: close the event list
        log = json.loads(text.rstrip(",") + "]}")
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = set()
    for event in log.get("events", []):
        params = event.get("params") or {}
        if event.get("type") == start_job and "url" in params:
            if "file://" in str(params.get("network_isolation_key", "")) or params.get("initiator") == "null":
                urls.add(params["url"])
    return sorted(urls)


def render(page: Path, *, width: int = 1000, height: int = 800, timeout: float = 90.0) -> Rendered:
    """Load ``page`` (a local file) in headless Chromium: its DOM, a PNG and remote requests.

    Two runs (one for the DOM, one for the screenshot), each with a fresh profile and its
    own net log; ``remote_requests`` lists the http(s)/ws(s)/ftp URLs either run requested.
    """
    if CHROMIUM is None:
        pytest.skip("chromium is not installed")
    url = Path(page).resolve().as_uri()
    remote: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="slx-chromium-") as tmp:
        tmp = Path(tmp)
        outputs = {}
        for what in ("dom", "png"):
            log = tmp / f"{what}.netlog.json"
            png = tmp / "shot.png"
            cmd = [
                CHROMIUM,
                *FLAGS,
                f"--user-data-dir={tmp / ('profile-' + what)}",
                f"--log-net-log={log}",
                f"--window-size={width},{height}",
                "--dump-dom" if what == "dom" else f"--screenshot={png}",
                url,
            ]
            done = subprocess.run(cmd, capture_output=True, timeout=timeout)
            if done.returncode != 0:
                raise RuntimeError(f"chromium failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
            outputs[what] = done.stdout.decode("utf-8") if what == "dom" else png.read_bytes()
            remote |= {u for u in _page_urls_in_net_log(log) if _REMOTE.match(u)}
    return Rendered(dom=outputs["dom"], png=outputs["png"], remote_requests=sorted(remote))


def png_colours(png: bytes) -> int:
    """How many distinct colours a PNG has (a blank page has one)."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    return len(colours) if colours is not None else 1 << 20
