"""The viewer's screenshots in docs/viewer.md: the runs of recordings/local imported into a
temporary TRINITY_HOME (run directories only, no call), `trinity inspect --serve` on them,
and Debian's headless Chromium (through chromedriver and selenium) photographing the runs list,
the 300-item bench's grid where the shipped head and `agree` disagree, one such item side by
side, run-75's curves and verdict, and run-4 compared with run-75 (two evolve runs' curves).

    python scripts/viewer_screenshots.py [--out docs/img]

Needs chromium, chromium-driver and selenium (the test extra), as tests/test_viewer_browser.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from trinity_cli.recordings.carry import import_runs
from trinity_cli.runs.store import RunStore

REPO = Path(__file__).resolve().parents[1]
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars")


def wait_for(driver: webdriver.Chrome, script: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not driver.execute_script(script):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for: {script}")
        time.sleep(0.1)


def show(driver: webdriver.Chrome, base: str, key: str) -> None:
    driver.get(f"{base}#/{key}")
    wait_for(driver, f"return document.querySelector('main').getAttribute('data-key') === '{key}'")


def keep_columns(driver: webdriver.Chrome, names: tuple[str, ...]) -> None:
    """Leave only `names` in the grid (its "columns shown"), then only their disagreements."""
    driver.find_element("css selector", ".gridbox details summary").click()
    for box in driver.find_elements("css selector", ".columns-pick input"):
        if box.find_element("xpath", "..").text.strip() not in names:
            box.click()
    driver.find_element("css selector", ".gridbox details summary").click()
    driver.find_element("css selector", "input[name=disagree]").click()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    parser.add_argument("--recording", type=Path, default=REPO / "recordings" / "local")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        home = Path(work) / "home"
        import_runs(args.recording, RunStore(home / "runs"))
        server = subprocess.Popen([sys.executable, "-m", "trinity_cli", "inspect", "--serve"],
                                  env={**os.environ, "TRINITY_HOME": str(home)},
                                  stderr=subprocess.PIPE, text=True)
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in (*FLAGS, f"--user-data-dir={work}/profile", "--window-size=1280,900"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
        try:
            assert server.stderr is not None
            base = server.stderr.readline().split()[2]
            args.out.mkdir(parents=True, exist_ok=True)
            show(driver, base, "runs")
            driver.save_screenshot(str(args.out / "viewer-runs.png"))

            show(driver, base, "run/run-24")
            keep_columns(driver, ("agree", "head:default"))
            grid = driver.find_element("css selector", ".gridbox")
            driver.execute_script("arguments[0].scrollIntoView()", grid)
            driver.save_screenshot(str(args.out / "viewer-grid.png"))

            driver.find_element("css selector", "table.grid tr.row").click()
            wait_for(driver, "return document.querySelector('main').getAttribute('data-kind') === 'item'")
            driver.execute_script("document.querySelectorAll('.episode-col details.decision')"
                                  ".forEach(d => d.open = true)")
            driver.save_screenshot(str(args.out / "viewer-item.png"))

            show(driver, base, "run/run-75")
            driver.save_screenshot(str(args.out / "viewer-evolve.png"))

            show(driver, base, "compare/run-4/run-75")
            charts = driver.find_element("css selector", ".svgcharts")
            driver.execute_script("arguments[0].scrollIntoView()", charts)
            driver.save_screenshot(str(args.out / "viewer-evolve-compare.png"))
        finally:
            driver.quit()
            server.terminate()
            server.wait(timeout=20)
    for name in ("viewer-runs", "viewer-grid", "viewer-item", "viewer-evolve", "viewer-evolve-compare"):
        path = args.out / f"{name}.png"
        print(f"{path}: {path.stat().st_size / 1024:.0f} kB")


if __name__ == "__main__":
    main()
