"""Look at built docs pages in a real browser: what scrolls sideways, and which words break across lines.

Serves a built site (``mkdocs build``) on loopback, opens each page in headless Chromium at a desktop
width, and has the browser itself measure the laid-out page: the page, and every box in the article
(code block, table, cell), that is wider than the screen or its frame (it scrolls sideways or cuts
off what it holds), and every line that breaks inside a word (``judge_bac|kend``). A line may break
at a space, and after ``-`` or ``/`` as browsers do (``local-|chat-completions``).

    python docs/_tools/layout_check.py SITE_DIR [PAGE ...] [--width 1280] [--shots DIR]   # exit 1 on a finding
    python docs/_tools/layout_check.py site settings/ "" getting-started/ --shots shots

``--shots DIR`` also saves a screenshot of each page as the browser drew it (``settings.png``,
``index.png``, ...), to look at.

Needs ``chromium`` (or ``chromium-browser``, ``google-chrome``; or the path in ``$CHROMIUM``).
"""

from __future__ import annotations

import argparse
import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--virtual-time-budget=15000")
REPORT = re.compile(r'<pre id="layout-report">(.*?)</pre>', re.S)

# Runs in the page once it has loaded; writes what it found into <pre id="layout-report"> as JSON.
MEASURE = r"""
<script>
window.addEventListener("load", () => {
  const root = document.querySelector("article") || document.body, found = [];
  const name = el => el.tagName.toLowerCase() + ": " + el.textContent.trim().slice(0, 70);
  if (document.documentElement.scrollWidth > window.innerWidth)
    found.push(`the page scrolls sideways by ${document.documentElement.scrollWidth - window.innerWidth}px`);
  for (const el of root.querySelectorAll("*")) {  // a box that scrolls or cuts off what it holds
    if (getComputedStyle(el).overflowX !== "visible" && el.scrollWidth > el.clientWidth + 1)
      found.push(`scrolls sideways by ${el.scrollWidth - el.clientWidth}px: ${name(el)}`);
  }
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (node.parentElement.closest("pre") || !node.data.trim()) continue;
    let top = null;
    for (let i = 0; i < node.data.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rects = range.getClientRects();
      if (!rects.length) continue;
      const before = node.data[i - 1] || " ", at = node.data[i];
      if (top !== null && rects[0].top > top + 2 && !/[\s\-\/]/.test(before) && !/\s/.test(at))
        found.push(`breaks inside a word (${name(node.parentElement.closest("p, li, td, th, h1, h2, h3, h4")
                                                 || node.parentElement)}): `
                   + `${node.data.slice(Math.max(0, i - 30), i)}|${node.data.slice(i, i + 30)}`);
      top = rects[0].top;
    }
  }
  const out = document.createElement("pre");
  out.id = "layout-report";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>
"""


class _Pages(http.server.SimpleHTTPRequestHandler):
    """The site's files, with the measuring script added to each page."""

    def do_GET(self):
        path = Path(self.translate_path(self.path))
        page = path / "index.html" if path.is_dir() else path
        if page.suffix != ".html" or not page.is_file():
            return super().do_GET()
        body = page.read_text("utf-8").replace("</body>", MEASURE + "</body>").encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def browser() -> str | None:
    return os.environ.get("CHROMIUM") or next((b for b in map(shutil.which, BROWSERS) if b), None)


def check(site: Path, pages: list[str], width: int = 1280, height: int = 2000,
          shots: Path | None = None) -> dict[str, list[str]]:
    """page -> what the browser found on it (empty: nothing scrolls, no word is broken); with ``shots``,
    a screenshot of each page is saved there as well (``shot_name``)."""
    exe = browser()
    if exe is None:
        raise SystemExit("no Chromium found: apt-get install chromium (or set $CHROMIUM)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Pages, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        found = {}
        for page in pages:
            url = f"http://127.0.0.1:{server.server_port}/{page}"
            found[page] = _measure(exe, url, width, height)
            if shots is not None:
                found[page] += _shoot(exe, url, width, height, shots / shot_name(page))
        return found
    finally:
        server.shutdown()
        server.server_close()


def shot_name(page: str) -> str:
    """``settings/`` -> ``settings.png``; the home page ``""`` -> ``index.png``."""
    return (page.strip("/").replace("/", "-") or "index") + ".png"


def _chromium(exe: str, width: int, height: int, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", *args],
                              capture_output=True, text=True, timeout=180)


def _shoot(exe: str, url: str, width: int, height: int, path: Path) -> list[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    done = _chromium(exe, width, height, f"--screenshot={path}", url)
    return [] if path.is_file() else [f"no screenshot (exit {done.returncode}): {done.stderr.strip()[-300:]}"]


def _measure(exe: str, url: str, width: int, height: int) -> list[str]:
    done = _chromium(exe, width, height, "--dump-dom", url)
    match = REPORT.search(done.stdout)
    if match is None:
        return [f"the page did not report (exit {done.returncode}): {done.stderr.strip()[-300:]}"]
    return json.loads(html.unescape(match.group(1)))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Look at built docs pages in headless Chromium.")
    parser.add_argument("site", type=Path, help="the folder mkdocs build wrote")
    parser.add_argument("pages", nargs="*", default=[""], help='pages under it, e.g. settings/ ("" = home)')
    parser.add_argument("--width", type=int, default=1280, help="the window's width in CSS pixels")
    parser.add_argument("--shots", type=Path, help="save a screenshot of each page into this folder")
    args = parser.parse_args(argv)
    found = check(args.site, args.pages, args.width, shots=args.shots)
    for page, problems in found.items():
        print(f"/{page}: " + ("ok" if not problems else f"{len(problems)} finding(s)"))
        for problem in problems:
            print("   " + problem)
    return 1 if any(found.values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
