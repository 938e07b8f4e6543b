"""``report.html`` as a person sees it: rendered by headless Chromium from a run with a failure.

A real run (a subprocess against the embedded reference with a fault that makes the
retries come too soon; run through ``bash scripts/test``: a loopback-only namespace)
writes the page; the system Chromium (Debian ``chromium`` and ``chromium-driver``, driven
by Selenium) opens it as a ``file://`` page, takes a screenshot, and the test asserts from
the page that the verdict banner, the failing requirement and its delivery timeline are
visible, and that the filter hides what does not match. Skipped, saying why, where
Chromium, its driver or Selenium is missing (CI installs them when it can).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from suite_run import run_suite

from conformance.reports import HTML_NAME
from conformance.run.cli import EXIT_FAILED

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
FAULT, REQUIREMENT = "backoff-too-short", "DLV-BACKOFF-01"

webdriver = pytest.importorskip(
    "selenium.webdriver", reason="selenium is not installed (pip install '.[test]')"
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="Chromium is not installed: apt-get install chromium chromium-driver "
    "(the browser test of report.html is skipped)",
)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    """Headless Chromium with nothing that talks to the network, and a fresh profile."""
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1280,2000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    # An explicit driver and binary: Selenium then never looks for (or fetches) its own.
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.timeout(300)
def test_report_shows_banner_failure_and_timeline_in_chromium(
    tmp_path: Path, browser: object
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.remote.webdriver import WebDriver

    assert isinstance(browser, WebDriver)
    report_dir = tmp_path / "report"
    done = run_suite(report_dir, faults=[FAULT], only=[REQUIREMENT], workers=0, timeout=240)
    assert done.returncode == EXIT_FAILED, done.describe()
    page = report_dir / HTML_NAME
    browser.get(page.resolve().as_uri())
    assert browser.get_screenshot_as_file(str(tmp_path / "report.png"))

    banner = browser.find_element(By.ID, "verdict")
    assert banner.is_displayed()
    assert banner.text.startswith("Not conformant"), banner.text
    assert REQUIREMENT in banner.text
    assert banner.value_of_css_property("background-color") == "rgba(198, 40, 40, 1)"

    failing = browser.find_element(By.ID, f"req-{REQUIREMENT}")
    assert failing.is_displayed() and failing.get_attribute("data-verdict") == "fail"
    timeline = failing.find_element(By.CSS_SELECTOR, "svg.timeline")
    assert timeline.is_displayed()
    assert timeline.size["width"] > 300 and timeline.size["height"] > 40
    assert failing.find_elements(By.CSS_SELECTOR, "svg.timeline circle.arrival.late")

    # The filter: a search for another id hides the failing requirement, and clearing
    # it shows it again.
    search = browser.find_element(By.ID, "f-text")
    search.send_keys("no-such-requirement")
    assert not failing.is_displayed()
    assert browser.find_element(By.ID, "f-shown").text == "0 shown"
    search.clear()
    search.send_keys(REQUIREMENT.lower())
    assert failing.is_displayed()
