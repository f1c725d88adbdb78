"""The report in a real browser: headless Chromium opens it, every section is there, every
chart decoded to a non-blank image, and the console stayed clean.

Skips when Chromium is absent, except when ``FLEETFAULT_REQUIRE_BROWSER=1`` (CI sets it),
where a missing browser is a failure. The network is closed: Chromium runs with every
background fetch disabled, which also proves the report needs nothing from outside.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from pipeline.config import Config
from pipeline.report.build import SECTIONS, build_report

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    path = os.environ.get("FLEETFAULT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if Path(path).exists():
        return path
    if os.environ.get("FLEETFAULT_REQUIRE_BROWSER") == "1":
        pytest.fail("FLEETFAULT_REQUIRE_BROWSER=1 but no chromium was found (apt-get install chromium)")
    pytest.skip("chromium is not installed")


@pytest.fixture
def browser_page():
    exe = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("FLEETFAULT_REQUIRE_BROWSER") == "1":
            pytest.fail("FLEETFAULT_REQUIRE_BROWSER=1 but playwright is not installed")
        pytest.skip("playwright is not installed")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            yield page
        finally:
            browser.close()


# Reads each chart's pixels: a blank chart (all one colour) has no spread.
_IMAGE_STATS = """
() => Array.from(document.images).map(img => {
  const c = document.createElement('canvas');
  c.width = img.naturalWidth; c.height = img.naturalHeight;
  let distinct = 0;
  if (img.naturalWidth > 0) {
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    const seen = new Set();
    for (let i = 0; i < d.length; i += 4 * 7) {
      seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      if (seen.size > 64) break;
    }
    distinct = seen.size;
  }
  return {alt: img.alt, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight, distinct};
})
"""


def test_report_renders_in_chromium(wh, tmp_path, browser_page):
    from test_report import fill_warehouse

    fill_warehouse(wh)
    out = tmp_path / "report.html"
    data = tmp_path / "data"  # the simulator's marker: the report must carry the banner
    (data / "truth").mkdir(parents=True)
    (data / "truth" / "params.json").write_text('{"accel": 8}')
    build_report(wh, Config(), at=out, data_dir=data).write(out)
    page = browser_page
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
    page.goto(out.as_uri(), wait_until="load")
    for sid in SECTIONS:
        assert page.locator(f"section#{sid} h2").count() == 1, f"section {sid} missing"
    images = page.evaluate(_IMAGE_STATS)
    assert len(images) >= 9
    for img in images:
        assert img["complete"] and img["width"] > 0 and img["height"] > 0, img
        assert img["distinct"] > 8, f"chart {img['alt']!r} looks blank: {img}"
    assert page.evaluate("() => !!window.__hostile") is False  # no injected script ran
    _check_banner_and_findings(page)
    shots = Path(os.environ.get("FLEETFAULT_SCREENSHOT_DIR", tmp_path))
    shot = shots / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000
    page.locator("section#findings").screenshot(path=str(shots / "findings.png"))
    page.emulate_media(media="print")
    assert page.locator("nav").is_hidden()
    assert page.locator("#data-origin").is_visible()  # the warning prints too
    pdf = page.pdf(path=str(shot.with_suffix(".pdf")), format="A4", print_background=True)
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert pdf.startswith(b"%PDF") and 3 <= pages <= 40, pages  # prints as a document, not one long strip
    assert not errors, errors
    assert not requests, f"the report fetched {requests}"


def _check_banner_and_findings(page) -> None:
    """The simulated-data banner is on screen above everything; Findings comes first and says
    in words which batch fails more, what cannot be judged yet, the failure modes and changes."""
    banner = page.locator("#data-origin")
    assert banner.is_visible()
    assert "Simulated data: failure rates ×8" in banner.inner_text()
    top = banner.bounding_box()
    assert top["y"] < page.locator("section#findings").bounding_box()["y"] < 900  # first screen
    assert page.locator("main > section").first.get_attribute("id") == "findings"
    titles = page.locator("section#findings h3").all_inner_texts()
    assert titles == ["Fails significantly more than the rest of the fleet",
                      "Fails significantly less than the rest of the fleet", "Too little exposure to judge",
                      "Top failure modes", "What changed since the last report"], titles
    flag = page.locator("section#findings p.flag").first.inner_text()
    assert "B-2024-10" in flag and "× the rate of the rest of the fleet" in flag and "CI" in flag
    needed = page.locator("section#findings table th").all_inner_texts()
    assert "GPU-days needed" in needed
    verdicts = page.locator("section#afr table").first.locator("th").all_inner_texts()
    assert verdicts[-1] == "verdict"
