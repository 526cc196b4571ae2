"""report.html opened in a real browser (headless Chromium, Debian's `chromium`): what a person
sees, for a small hand-written history (every op drawn) and a generated one big enough to be
drawn from bins, both with findings."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from checkers.api import check
from checkers.report import data as report_data
from tests.unit.checkers.histories import H
from tests.unit.checkers.runs import make_run

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="needs headless Chromium: `apt-get install chromium` (kchaos setup installs it)",
)

# After the load event (images decoded), the probe writes on <body>: the verdict badge's text,
# the in-page links whose target id is missing, and on each <img> its natural size.
PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) {
    img.dataset.w = img.naturalWidth;
    img.dataset.h = img.naturalHeight;
  }
  const links = [...document.querySelectorAll('a[href^="#"]')];
  const missing = links.filter((a) => !document.getElementById(a.getAttribute("href").slice(1)));
  document.body.dataset.links = links.length;
  document.body.dataset.missing = missing.map((a) => a.getAttribute("href")).join(" ");
  document.body.dataset.badge = document.querySelector(".status").textContent;
  document.body.dataset.probed = "yes";
});
</script>"""


def _chromium(profile: Path, url: str, *args: str) -> subprocess.Popen[str]:
    cmd = [
        CHROMIUM,
        "--headless=new",
        "--disable-gpu",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
        url,
    ]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")  # Chromium refuses to start as root with its sandbox
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finished(browser: subprocess.Popen[str]) -> tuple[str, str]:
    """(stdout, stderr) once the browser has exited: --dump-dom and --screenshot exit after
    the page's load event."""
    out, err = browser.communicate(timeout=120)
    assert browser.returncode == 0, err[-2000:]
    return out, err


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def assert_a_person_sees_the_report(report: Path, tmp: Path, badge: str) -> None:
    """Loads the report twice at once: probed (after its load event, a script writes on <body>
    and each <img> what it found, read back from the dumped DOM) and as it is, screenshot."""
    probed, shot = tmp / "probed.html", tmp / "shot.png"
    probed.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    dom = _chromium(tmp / "profile-dom", probed.as_uri(), "--dump-dom")
    screen = _chromium(
        tmp / "profile-shot", report.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000"
    )
    html, log = _finished(dom)
    _finished(screen)

    parser = _Elements()
    parser.feed(html)
    body = next(a for t, a in parser.found if t == "body")
    assert body.get("data-probed") == "yes", log[-2000:]
    assert body["data-badge"] == badge
    assert int(body["data-links"]) > 0 and body["data-missing"] == ""
    images = [a for t, a in parser.found if t == "img"]
    assert len(images) >= 2
    for img in images:  # each plot decoded, at the size it was drawn
        assert int(img["data-w"]) > 300 and int(img["data-h"]) > 100, img["alt"]
    # Console messages (a script error, a resource that failed to load) are logged as CONSOLE.
    assert [line for line in log.splitlines() if ":CONSOLE" in line] == []

    pixels = matplotlib.image.imread(shot)[..., :3]
    colours = np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    ink = (pixels.min(axis=-1) < 0.9).mean()
    assert len(colours) > 50 and ink > 0.02  # text, badge and plots, not a blank page


def test_a_small_report_as_a_browser_shows_it(tmp_path):
    run = make_run(tmp_path / "run", lose_write=True)
    verdict = check(run, engine="local")
    assert verdict.status == "invalid"
    html = (run / "report.html").read_text()
    assert "One line per operation" in html
    assert_a_person_sees_the_report(run / "report.html", tmp_path, "INVALID")


def big_history_with_lost_writes(directory: Path, sends: int, lost: set[int]) -> Path:
    """Four producers sending to 40 keys, two pollers reading each key's new records after
    every 10 sends, skipping the records of sends numbered in `lost`; a partition meanwhile and
    observer samples."""
    rng = random.Random(1)
    h = H()
    offsets: dict[int, int] = {}
    unread: dict[int, list[tuple[int, int]]] = {}
    for i in range(sends):
        if i == sends // 3:
            h.nemesis("start-partition", {"kind": "majority-ring"})
        if i == 2 * sends // 3:
            h.nemesis("stop-partition", {"healed": True})
        if i % 500 == 0:
            for n in (1, 2, 3):
                h.observe(f"n{n}", raft={"state": "leader" if n == 1 else "follower",
                                         "leader": 1, "epoch": 2, "high_watermark": i})  # fmt: skip
        key = rng.randrange(40)
        offset = offsets.get(key, 0)
        offsets[key] = offset + 1
        h.send(i % 4, key, i, offset, type_=rng.choice(["ok"] * 30 + ["fail", "info"]))
        if h.lines[-1]["type"] == "ok" and i not in lost:
            unread.setdefault(key, []).append((offset, i))
        if i % 10 == 9:
            k = rng.choice(sorted(unread)) if unread else 0
            h.poll(4 + i % 2, {k: unread.pop(k, [])})
    for k in sorted(unread):  # the final reads: everything left, so a lost write is certain
        h.poll(4, {k: unread.pop(k)})
    directory.mkdir(parents=True, exist_ok=True)
    return h.write(directory)


def test_a_big_report_is_binned_and_links_its_findings(tmp_path, monkeypatch):
    # Big is above PER_OP_LIMIT: lowered, so that the history is quick to make, and still drawn
    # from the aggregates as a history of millions of ops is.
    monkeypatch.setattr(report_data, "PER_OP_LIMIT", 2_000)
    run = tmp_path / "run"
    big_history_with_lost_writes(run, sends=3_000, lost={99, 2500})
    verdict = check(run, engine="local")
    assert verdict.status == "invalid"
    assert {"lost-write"} <= {f.kind for f in verdict.findings}
    html = (run / "report.html").read_text()
    assert "Aggregated: each cell is the worst outcome" in html
    for f in verdict.findings:  # every cited op has its row, and its finding links to it
        for i in f.ops:
            assert f'id="op-{i}"' in html and f'href="#op-{i}"' in html
    assert_a_person_sees_the_report(run / "report.html", tmp_path, "INVALID")
