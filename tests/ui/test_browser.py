"""`logbook ui` in headless Chromium (Debian's), through Selenium.

Run by scripts/ui-browser.sh against the demo warehouse. Checks what an
operator does: open the calendar, hover a stale date to read why, follow
the lineage to the input partition, watch a date turn stale without a
reload while someone rewrites an input, and read every page at a desktop
and a phone width without horizontal overflow. Screenshots go to
--screenshots.
"""
import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

RANGE = "from=2026-01-01&to=2026-03-31"


def browser(width: int) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={width},900")
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_window_size(width, 900)
    return driver


def rewrite(args, date: str) -> None:
    """Replace the demo's orders of `date` with the same rows (a new
    version): every revenue date that read it is now stale (input)."""
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "orders.csv"
        out = subprocess.run(
            [args.logbook, "--warehouse", args.warehouse, "sql", "--format", "csv",
             f"SELECT * FROM orders WHERE date = DATE '{date}'"],
            check=True, capture_output=True, text=True).stdout
        csv.write_text(out)
        subprocess.run(
            [args.logbook, "--warehouse", args.warehouse, "write", "orders", "--date", date,
             str(csv), "--run-id", f"rewrite-{date}"],
            check=True, capture_output=True)


def no_overflow(driver, what: str, width: int) -> None:
    wide = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    # The window really is about that wide (scroll bars take a few pixels).
    assert width - 40 <= wide[1] <= width, f"{what}: the viewport is {wide[1]}px, not about {width}px"
    assert wide[0] <= wide[1], f"{what}: the page is {wide[0]}px wide in a {wide[1]}px viewport"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--logbook", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--screenshots", required=True)
    args = p.parse_args()
    shots = Path(args.screenshots)
    rewrite(args, "2026-01-05")

    d = browser(1280)
    try:
        d.get(f"{args.url}/tables/revenue_by_region?{RANGE}")
        stale = d.find_element(By.CSS_SELECTOR, '.cell.s-stale[data-date="2026-01-05"]')
        ActionChains(d).move_to_element(stale).perform()
        reasons = stale.get_attribute("title")
        assert "stale" in reasons and "input: orders 2026-01-05" in reasons, reasons
        listed = d.find_element(By.CSS_SELECTOR, "ul.reasons").text
        assert "2026-01-05" in listed and "input: orders 2026-01-05" in listed, listed
        d.save_screenshot(str(shots / "calendar-1280.png"))

        # Lineage: the stale date's run, then the input partition it read.
        stale.click()
        assert d.current_url.endswith("/tables/revenue_by_region/partitions/2026-01-05"), d.current_url
        assert "Why it is stale" in d.page_source
        d.find_element(By.CSS_SELECTOR, 'a[href="/tables/orders/partitions/2026-01-05"]').click()
        assert d.current_url.endswith("/tables/orders/partitions/2026-01-05"), d.current_url
        assert "rewrite-2026-01-05" in d.page_source
        d.save_screenshot(str(shots / "input-partition-1280.png"))

        # A rewrite while the page is open shows up without a reload.
        d.get(f"{args.url}/tables/revenue_by_region?{RANGE}")
        cell = '.cell[data-date="2026-02-10"]'
        assert "s-complete" in d.find_element(By.CSS_SELECTOR, cell).get_attribute("class")
        d.execute_script("window.__same_page = true")
        rewrite(args, "2026-02-10")
        deadline = time.time() + 15
        while "s-stale" not in d.find_element(By.CSS_SELECTOR, cell).get_attribute("class"):
            assert time.time() < deadline, "the calendar did not refresh within 15 s"
            time.sleep(0.5)
        assert d.execute_script("return window.__same_page === true"), "the page was reloaded"
        assert "input:" in d.find_element(By.CSS_SELECTOR, cell).get_attribute("title")
    finally:
        d.quit()

    # Each page with an element only that page has, so an error page fails.
    pages = [("/", "table.list"), (f"/tables/revenue_by_region?{RANGE}", ".calendar"),
             ("/tables/revenue_by_region/partitions/2026-01-05", "pre"),
             ("/tables/customers", "dl"), (f"/tables/orders?{RANGE}", "svg.chart")]
    for width in (1280, 390):
        d = browser(width)
        try:
            for i, (page, marker) in enumerate(pages):
                d.get(args.url + page)
                assert not d.find_elements(By.CSS_SELECTOR, "p.error"), f"{page}: {d.page_source[:500]}"
                assert d.find_elements(By.CSS_SELECTOR, marker), f"{page}: no {marker}"
                no_overflow(d, f"{page} at {width}px", width)
                d.save_screenshot(str(shots / f"page{i}-{width}.png"))
        finally:
            d.quit()
    print(f"browser checks passed; screenshots in {shots}")


if __name__ == "__main__":
    sys.exit(main())
