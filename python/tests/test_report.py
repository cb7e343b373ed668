"""`longhaul report`: the studies' results as a static site, loaded in a real browser
(Debian's headless Chromium through chromedriver): every page loads, every image
decodes, every link resolves, and the run tables hold the numbers of summary.json."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import REPO, cli_run

STUDIES = ("sctp-slow-start", "snoop")  # about 3 s of runs between them


@pytest.fixture(scope="module")
def site(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    for s in STUDIES:
        cli_run(cli, str(REPO / "studies" / s), "--out", str(d / "results" / s))
    r = subprocess.run([cli, "report", str(d / "results"), "--studies", str(REPO / "studies"),
                        "--out", str(d / "site")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "2 study pages" in r.stdout
    return d


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    assert chromium and driver, "needs Debian's chromium and chromium-driver (.ci/run installs them)"
    o = webdriver.ChromeOptions()
    o.binary_location = chromium
    # As the machine's own probe starts it: no sandbox as root, and no background
    # connections (the network is closed).
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1200,1600",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        o.add_argument(flag)
    b = webdriver.Chrome(options=o, service=Service(driver))
    yield b
    b.quit()


def _path(url: str) -> Path:
    return Path(unquote(urlparse(url).path))


def _check_page(browser, page: Path) -> set:
    """Loads `page`; asserts its images decoded and its links resolve; returns the
    pages it links to."""
    browser.get(page.as_uri())
    assert browser.execute_script("return document.readyState") == "complete"
    assert browser.title, page
    images = browser.execute_script(
        "return [...document.images].map(i => [i.src, i.complete && i.naturalWidth > 0])")
    for src, ok in images:
        assert ok, f"{page}: image {src} did not load"
    links = browser.execute_script("return [...document.links].map(a => a.href)")
    pages = set()
    for href in links:
        u = urlparse(href)
        assert u.scheme == "file", f"{page}: link off the site: {href}"
        target = _path(href)
        assert target.is_file(), f"{page}: dead link {href}"
        if u.fragment:
            browser.get(href)
            assert browser.execute_script(
                "return document.getElementById(arguments[0]) !== null", u.fragment), href
            browser.get(page.as_uri())
        if target.suffix == ".html":
            pages.add(target)
    return pages


def test_every_page_loads_with_its_images_and_links(site, browser):
    root = site / "site"
    index = root / "index.html"
    linked = _check_page(browser, index)
    assert linked == {root / s / "index.html" for s in STUDIES}
    text = browser.find_element("tag name", "body").text
    for other in ("ar-udt", "diffserv", "high-speed-tcp"):
        assert f"longhaul sim run studies/{other}" in text  # not run: the command
    for page in sorted(linked):
        back = _check_page(browser, page)
        assert index in back
        n_images = browser.execute_script("return document.images.length")
        assert n_images >= 2, f"{page}: the sweeps' plots are missing"
        body = browser.find_element("tag name", "body").text
        study = page.parent.name
        assert f"longhaul sim run studies/{study}" in body
        readme = (REPO / "studies" / study / "README.md").read_text()
        title = readme.splitlines()[0].lstrip("# ").strip()
        assert browser.find_element("tag name", "h1").text == title
        findings = next(l for l in readme.splitlines() if l.startswith("## What we found"))
        assert findings[3:].strip() in body


def test_run_tables_hold_the_numbers_of_summary_json(site, browser):
    for study in STUDIES:
        browser.get((site / "site" / study / "index.html").as_uri())
        rows = browser.execute_script("""
            return [...document.querySelectorAll('table.runs tr[data-point]')].map(r => [
                r.closest('table').dataset.sweep, r.dataset.point, r.dataset.flow,
                r.querySelector('.goodput').textContent, r.querySelector('.bytes').textContent])
        """)
        results = site / "results" / study
        expected = 0
        for sweep in (p for p in results.iterdir() if (p / "sweep.csv").is_file()):
            for point in sweep.glob("point-*/summary.json"):
                expected += len(json.loads(point.read_text())["flows"])
        assert len(rows) == expected > 0, study
        for sweep, point, flow, goodput, delivered in rows:
            s = json.loads((results / sweep / f"point-{int(point):04}" / "summary.json").read_text())
            f = s["flows"][int(flow)]
            assert goodput == f"{f['goodput_mbps']:.3f}", (sweep, point, flow)
            assert int(delivered) == f["delivered_bytes"], (sweep, point, flow)


def test_a_study_page_renders(site, browser, tmp_path):
    browser.get((site / "site" / "snoop" / "index.html").as_uri())
    png = tmp_path / "snoop.png"
    assert browser.save_screenshot(str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_report_without_results_says_what_to_do(cli, tmp_path):
    r = subprocess.run([cli, "report", str(tmp_path / "nothing"), "--studies",
                        str(REPO / "studies"), "--out", str(tmp_path / "site")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "nothing" in r.stderr and "longhaul sim run studies/NAME" in r.stderr
