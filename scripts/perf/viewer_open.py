"""How long the README's 300-item bench (run-24 of recordings/local: 300 items x 10 rows) takes
to open in the viewer, served and from its static export, and the server's memory after it,
against issue 77's targets (<= 2 s each way, <= 300 MB). "Open" is from asking the browser for
the run's page to the grid's 3,000 cells drawn, in headless Chromium with a fresh profile.

    python scripts/perf/viewer_open.py [--repeats 3] [--run run-24]

Needs chromium, chromium-driver and selenium (the test extra), as tests/test_viewer_browser.py.
Prints one line per opening and a summary; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from trinity_cli.recordings.carry import import_runs
from trinity_cli.runs.store import RunStore

REPO = Path(__file__).resolve().parents[2]
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage")
SECONDS, MEGABYTES = 2.0, 300


def browser(profile: Path) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    return webdriver.Chrome(service=service, options=options)


def opened(driver: webdriver.Chrome, url: str, cells: int) -> float:
    """Seconds from asking for `url` to `cells` grid cells drawn."""
    driver.get("about:blank")
    started = time.monotonic()
    driver.get(url)
    while driver.execute_script("return document.querySelectorAll('table.grid td.cell').length") != cells:
        if time.monotonic() - started > 60:
            raise SystemExit(f"{url}: the grid was not drawn within 60 s")
        time.sleep(0.02)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--run", default="run-24", help="a bench run of recordings/local/runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "recording" / "runs").mkdir(parents=True)
        shutil.copytree(REPO / "recordings" / "local" / "runs" / args.run, tmp / "recording" / "runs" / args.run)
        store = RunStore(tmp / "home" / "runs")
        import_runs(tmp / "recording", store)
        summary = store.load(args.run)["summary"]
        cells = len(summary["items"]) * len(summary["systems"])
        env = {**os.environ, "TRINITY_HOME": str(tmp / "home")}
        site = tmp / "site"
        subprocess.run([sys.executable, "-m", "trinity_cli", "inspect", args.run, "--html", str(site)], env=env,
                       check=True, capture_output=True)
        size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file())
        print(f"{args.run}: {len(summary['items'])} items x {len(summary['systems'])} rows; "
              f"export {size / 1e6:.1f} MB in {sum(1 for f in site.rglob('*') if f.is_file())} files")
        server = subprocess.Popen([sys.executable, "-m", "trinity_cli", "inspect", "--serve"], env=env,
                                  stderr=subprocess.PIPE, text=True)
        driver = browser(tmp / "profile")
        try:
            assert server.stderr is not None
            served = server.stderr.readline().split()[2]
            seconds: dict[str, list[float]] = {"served": [], "from disk": []}
            for _ in range(args.repeats):
                for way, base in (("served", served), ("from disk", site.joinpath("index.html").as_uri())):
                    took = opened(driver, f"{base}#/run/{args.run}", cells)
                    seconds[way].append(took)
                    print(f"  {way}: {took:.2f} s")
            status = Path(f"/proc/{server.pid}/status").read_text().splitlines()
            rss = int(next(line.split()[1] for line in status if line.startswith("VmRSS:"))) / 1024
        finally:
            driver.quit()
            server.terminate()
            server.wait(timeout=30)
    missed = []
    for way, values in seconds.items():
        print(f"{way}: median {statistics.median(values):.2f} s, worst {max(values):.2f} s (target {SECONDS} s)")
        if statistics.median(values) > SECONDS:
            missed.append(way)
    print(f"server memory after it: {rss:.0f} MB (target {MEGABYTES} MB)")
    if rss > MEGABYTES:
        missed.append("memory")
    if missed:
        print("missed: " + ", ".join(missed))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
