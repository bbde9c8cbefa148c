"""The viewer in a real browser: Debian's headless Chromium, driven by chromedriver through
Selenium, loads the served page (`trinity inspect --serve`, a real process) and the static
export from disk, and checks what a person sees: the runs list, the grid's cells and its
filters, an item's turns after a click with every system in sight, Back to the row left, the
evolve curves, a run under way followed and a stopped one left alone; a hostile reply shows as
text and runs nothing, and no URL makes a static export run a script of its choosing; no
request leaves this machine. Skips, saying why, without Chromium, its driver or Selenium
(.ci/run installs them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from . import viewer_home
from .conftest import stop_process

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         "--window-size=1400,1000")

pytestmark = pytest.mark.slow


def _missing() -> str | None:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        return "no chromium and chromium-driver (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    return None


def new_browser(profile: Path):
    """Headless Chromium with a fresh profile, its network requests logged."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    if why := _missing():
        pytest.skip(why)
    home = tmp_path_factory.mktemp("viewer-home")
    return home, viewer_home.build(home, tmp_path_factory.mktemp("viewer-work"))


@pytest.fixture(scope="module")
def browser(made, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    driver = new_browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def server(made) -> Iterator[str]:
    """`trinity inspect --serve` on a free port, in its own process; its URL."""
    home, _ = made
    env = {**viewer_home.environ_with_secret(), "TRINITY_HOME": str(home)}
    process = subprocess.Popen([sys.executable, "-m", "trinity_cli", "inspect", "--serve"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith("trinity inspect http://127.0.0.1:"), line + (process.stderr.read() or "")
        yield line.split()[2]
    finally:
        stop_process(process)


def wait_for(driver, script: str, timeout: float = 15.0):
    """The value of `script` (JavaScript returning something) once it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {script}")
        time.sleep(0.05)


def open_key(driver, base: str, key: str, timeout: float = 15.0) -> None:
    driver.get(f"{base}#/{key}")
    wait_for(driver, f"return document.querySelector('main').getAttribute('data-key') === {json.dumps(key)}",
             timeout)


def requested(driver) -> list[str]:
    """Every URL the browser asked for since the last call (performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def assert_local(urls: list[str]) -> None:
    """Nothing but this page's own files, its server on loopback and in-page data."""
    assert urls
    for url in urls:
        parsed = urlparse(url)
        assert parsed.scheme in ("file", "data") or (parsed.scheme == "http" and parsed.hostname == "127.0.0.1"), url


def grid_counts(driver) -> tuple[int, int]:
    """(rows, cells) of the grid on the page."""
    return tuple(driver.execute_script(
        "return [document.querySelectorAll('table.grid tr.row').length,"
        " document.querySelectorAll('table.grid td.cell').length]"))


def assert_no_page_errors(driver) -> None:
    """No error in the page's console since the last call: a script the policy blocked, a
    JavaScript exception, a file that would not load."""
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]
    assert errors == []


def check_systems_in_sight(driver) -> None:
    """An item's page: a chip per system (its name and result) on screen at the page's top,
    the columns in a pane no taller than the window (its horizontal scrollbar on screen, not
    under the longest column), and a chip's click bringing its column into sight."""
    seen = driver.execute_script("""
        const bar = document.querySelector('header').getBoundingClientRect().bottom;
        const chips = [...document.querySelectorAll('.systems .system')];
        const inside = (r) => r.top >= bar && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth;
        return {chips: chips.map((c) => c.dataset.system),
                inside: chips.every((c) => inside(c.getBoundingClientRect())),
                columns: [...document.querySelectorAll('.episode-col')].map((c) => c.dataset.system),
                pane: document.querySelector('.episodes').getBoundingClientRect().height, window: innerHeight};""")
    assert seen["chips"] == seen["columns"] and len(seen["columns"]) > 3, seen
    assert seen["inside"] and seen["pane"] <= seen["window"], seen
    last = seen["columns"][-1]
    head = f"document.querySelector('.episode-col[data-system=\"{last}\"] .col-head').getBoundingClientRect()"
    driver.find_elements("css selector", ".systems .system")[-1].click()
    wait_for(driver, f"const r = {head}; return r.left >= 0 && r.right <= innerWidth && r.top < innerHeight"
                     " && r.bottom > 0")


def check_back_keeps_the_row(driver, base: str, run: str) -> None:
    """Back from an item, by the browser's Back and by the page's "← back": the run's page as
    far down as it was left, the row of that item marked and where it was on screen (its
    charts, loaded again from disk, may move the page under it: the row is what stays)."""
    driver.get("about:blank")
    open_key(driver, base, f"run/{run}")
    last = viewer_home.ITEMS - 1
    row = f"document.querySelector('table.grid tr.row[data-i=\"{last}\"]')"
    for how in ("browser", "link"):
        y, top = driver.execute_script(f"{row}.scrollIntoView({{block: 'center'}});"
                                       f" return [window.scrollY, {row}.getBoundingClientRect().top]")
        assert y > 0  # the grid is below the window's first screen: there is a place to come back to
        driver.execute_script(f"{row}.querySelector('a').click()")
        wait_for(driver, "return document.querySelector('main').getAttribute('data-kind') === 'item'")
        assert driver.execute_script("return window.scrollY") == 0  # an item opens at its top
        if how == "browser":
            driver.back()
        else:
            driver.find_element("link text", "← back").click()
        wait_for(driver, f"return document.querySelector('main').getAttribute('data-key') === 'run/{run}'")
        time.sleep(0.3)  # the charts loaded
        placed = driver.execute_script(f"""const r = {row}.getBoundingClientRect();
            const head = document.querySelector('table.grid thead').getBoundingClientRect();
            return [window.scrollY, r.top, r.top >= head.bottom && r.bottom <= innerHeight, {row}.className];""")
        assert placed[0] > 0 and abs(placed[1] - top) <= 40 and placed[2], (how, y, top, placed)
        assert "last-seen" in placed[3]


def check_bench_and_item(driver, base: str, run: str) -> None:
    """The bench page's grid (every cell, then the disagreements, then a search), a click on
    an item, and that item's turns: the hostile reply as text, nothing run."""
    open_key(driver, base, f"run/{run}")
    assert driver.find_element("css selector", "h1").text.startswith("trinity bench")
    caption = driver.execute_script("const c = document.querySelector('.caption');"
                                    " return [c.textContent, c.querySelectorAll('code').length]")
    assert "`" not in caption[0] and caption[1] >= 2  # the pool and the tasks, as code
    assert grid_counts(driver) == (viewer_home.ITEMS, viewer_home.ITEMS * len(viewer_home.SYSTEMS))
    assert len(driver.find_elements("css selector", "table.view")) >= 2  # the report's tables
    # Only the columns m0 and m2 (both answer 84 everywhere): they never disagree; with m1's
    # (85 everywhere) beside them, every item is a disagreement.
    driver.find_element("css selector", ".gridbox details summary").click()
    boxes = {b.find_element("xpath", "..").text.strip(): b
             for b in driver.find_elements("css selector", ".columns-pick input")}
    assert list(boxes) == viewer_home.SYSTEMS
    for name in viewer_home.SYSTEMS:
        if name not in ("single:m0", "single:m2"):
            boxes[name].click()
    assert grid_counts(driver) == (viewer_home.ITEMS, 2 * viewer_home.ITEMS)
    driver.find_element("css selector", "input[name=disagree]").click()
    assert grid_counts(driver) == (0, 0)
    boxes["single:m1"].click()
    assert grid_counts(driver) == (viewer_home.ITEMS, 3 * viewer_home.ITEMS)
    driver.find_element("css selector", "input[name=disagree]").click()
    for name in viewer_home.SYSTEMS:
        if name not in ("single:m0", "single:m1", "single:m2"):
            boxes[name].click()  # every column again, for the item's page
    search = driver.find_element("css selector", "input[type=search]")
    search.send_keys("12*7")
    rows = driver.execute_script("return [...document.querySelectorAll('table.grid tr.row td.text')]"
                                 ".map(td => td.textContent)")
    assert rows and all("12*7" in text for text in rows) and len(rows) < viewer_home.ITEMS
    driver.find_element("css selector", "table.grid tr.row").click()
    wait_for(driver, "return document.querySelector('main').getAttribute('data-kind') === 'item'")
    columns = driver.find_elements("css selector", ".episode-col")
    assert [c.get_attribute("data-system") for c in columns] == viewer_home.SYSTEMS
    check_systems_in_sight(driver)
    turns = driver.find_elements("css selector", ".episode-col .turn")
    assert len(turns) >= 5 and "m0" in turns[0].find_element("css selector", ".turn-head").text
    replies = driver.execute_script("return [...document.querySelectorAll('.reply')].map(p => p.textContent)")
    assert any(viewer_home.HOSTILE in text for text in replies)  # shown as written
    assert not any(viewer_home.SECRET in text for text in replies)
    assert driver.execute_script("return window.__pwned === undefined")
    assert driver.execute_script("return document.querySelectorAll('main img, main script').length") == 0


def test_the_served_viewer(browser, server, made) -> None:
    home, ids = made
    requested(browser)  # start the log afresh
    open_key(browser, server, "runs")
    runs = browser.execute_script("return [...document.querySelectorAll('table.runs tbody tr')]"
                                  ".map(tr => [tr.dataset.run, tr.className, tr.children[2].textContent])")
    assert sorted(r[0] for r in runs) == sorted(ids.values())
    assert [r[1] for r in runs if r[0] == ids["damaged"]] == ["damaged"]
    assert {r[0]: r[2] for r in runs}[ids["evolve"]] == "evolve"

    check_bench_and_item(browser, server, ids["bench"])
    check_back_keeps_the_row(browser, server, ids["bench"])

    open_key(browser, server, f"run/{ids['evolve']}")
    charts = browser.execute_script(
        "return [...document.querySelectorAll('svg.chart')].map(svg => [svg.dataset.title,"
        " [...svg.querySelectorAll('g.series')].map(g => [g.dataset.name, g.querySelectorAll('circle').length])])")
    record = json.loads((home / "runs" / ids["evolve"] / "run.json").read_text())
    validated = sum(c["val"] is not None for c in record["curves"]) + (record.get("start_val") is not None)
    assert len(record["curves"]) == 2 and validated >= 1
    assert charts[0] == ["fitness per generation", [["best", 2], ["mean", 2], ["validation", validated]]]
    assert charts[1] == ["step size σ per generation", [["sigma", 3]]]  # the start's sigma0, then each generation
    browser.find_element("link text", "generation 1").click()
    wait_for(browser, "return document.querySelector('main').getAttribute('data-kind') === 'generation'")
    assert grid_counts(browser) == (2, 4)

    open_key(browser, server, f"compare/{ids['bench']}/{ids['bench_other']}")
    assert grid_counts(browser)[0] >= 1
    assert browser.find_elements("css selector", "td.cell.changed")
    halves = browser.execute_script("return [...document.querySelectorAll('td.cell.pair')].map((td) =>"
                                    " [...td.querySelectorAll('.half')].map((x) => x.getBoundingClientRect()))")
    assert halves and all(len(h) == 2 and h[0]["right"] < h[1]["left"] for h in halves)  # apart, not "✗✓"

    open_key(browser, server, f"compare/{ids['evolve']}/{ids['evolve_other']}")
    charts = browser.execute_script(
        "return [...document.querySelectorAll('svg.chart')].map(svg => [svg.dataset.title,"
        " [...svg.querySelectorAll('g.series')].map(g => g.dataset.name)])")
    both = [ids["evolve"], ids["evolve_other"]]
    assert [c[0] for c in charts][:3] == ["validation per generation", "best fitness per generation",
                                           "mean fitness per generation"]
    assert all(c[1] == both for c in charts[1:3])
    changed = browser.execute_script("return [...document.querySelectorAll('tr.kind-changed td:first-child')]"
                                     ".map(td => td.textContent)")
    assert {"seed", "sigma0"} <= set(changed)

    from trinity_cli.runs.store import RunLock

    copy = home / "runs" / "run-40"  # an evolve run under way: its page follows it to its end
    shutil.copytree(home / "runs" / ids["evolve"], copy)
    finished = json.loads((copy / "run.json").read_text())
    (copy / "run.json").unlink()
    try:
        with RunLock(copy):  # as the process evolving it holds it
            open_key(browser, server, "run/run-40", timeout=60)  # an unfinished run's record unpickles its checkpoint
            assert browser.find_elements("css selector", ".live-note")
            assert not browser.find_elements("css selector", ".stopped-note")
            (copy / "run.json").write_text(json.dumps({**finished, "id": "run-40"}))
            wait_for(browser, "return !document.querySelector('.live-note')"
                              " && document.querySelector('main').getAttribute('data-kind') === 'evolve'", timeout=30)
    finally:
        shutil.rmtree(copy)
    stopped = home / "runs" / "run-41"  # killed: no process holds its lock; the page says so and asks no more
    shutil.copytree(home / "runs" / ids["evolve"], stopped)
    (stopped / "run.json").unlink()
    try:
        open_key(browser, server, "run/run-41", timeout=60)
        assert browser.find_elements("css selector", ".stopped-note")
        assert not browser.find_elements("css selector", ".live-note")
        assert "trinity evolve --resume run-41" in browser.find_element("css selector", "main").text
        urls = requested(browser)
        time.sleep(6)  # past the page's five seconds between asks
        later = requested(browser)
        assert not [url for url in later if "api/" in url]
    finally:
        shutil.rmtree(stopped)
    assert_local(urls + later)
    assert_no_page_errors(browser)


def test_the_static_export_opens_from_disk(browser, made, tmp_path) -> None:
    home, ids = made
    env = {**viewer_home.environ_with_secret(), "TRINITY_HOME": str(home)}
    for run in (ids["bench"], ids["evolve"]):
        site = tmp_path / run
        subprocess.run([sys.executable, "-m", "trinity_cli", "inspect", run, "--html", str(site)], env=env,
                       check=True, capture_output=True)
        base = (site / "index.html").as_uri()
        requested(browser)
        if run == ids["bench"]:
            check_bench_and_item(browser, base, run)
            check_back_keeps_the_row(browser, base, run)
            open_key(browser, base, "runs")
            assert browser.execute_script("return document.querySelectorAll('table.runs tbody tr').length") == 1
        else:
            open_key(browser, base, f"run/{run}")
            assert len(browser.find_elements("css selector", "svg.chart g.series[data-name=sigma] circle")) == 3
            open_key(browser, base, f"run/{run}/gen/0/item/1")
            assert len(browser.find_elements("css selector", ".episode-col")) == 2
        assert_local(requested(browser))
        assert_no_page_errors(browser)

    site = tmp_path / "compared"  # two runs compared, from disk: the runs list leads to it
    subprocess.run([sys.executable, "-m", "trinity_cli", "inspect", ids["bench"], "--compare", ids["bench_other"],
                    "--html", str(site)], env=env, check=True, capture_output=True)
    open_key(browser, site.joinpath("index.html").as_uri(), "runs")
    browser.find_element("link text", "The two runs compared").click()
    wait_for(browser, "return document.querySelector('main').getAttribute('data-kind') === 'compare'")
    assert grid_counts(browser)[0] >= 1 and browser.find_elements("css selector", "td.cell.changed")
    browser.find_element("css selector", "table.grid tr.row").click()
    wait_for(browser, "return document.querySelector('main').getAttribute('data-kind') === 'item'")
    labels = [c.get_attribute("data-system") for c in browser.find_elements("css selector", ".episode-col")]
    assert labels and len(labels) % 2 == 0  # each changed system: the first run's episodes, then the second's
    assert_local(requested(browser))
    assert_no_page_errors(browser)


def test_a_static_export_runs_no_script_its_url_names(browser, made, tmp_path) -> None:
    """The page's key is the URL's #: a key the export does not list (a path out of data/, as
    written or %2F-escaped, a script planted in data/) loads nothing and says so."""
    home, ids = made
    env = {**viewer_home.environ_with_secret(), "TRINITY_HOME": str(home)}
    site = tmp_path / "out" / "site"
    subprocess.run([sys.executable, "-m", "trinity_cli", "inspect", ids["bench"], "--html", str(site)], env=env,
                   check=True, capture_output=True)
    planted = "window.__pwned = (window.__pwned || 0) + 1;\n"
    for folder in (tmp_path, tmp_path / "out", site, site / "data", site / "data" / "run"):
        (folder / "evil.js").write_text(planted)
    base = (site / "index.html").as_uri()
    for hash_ in ("/../../evil", "/..%2F..%2Fevil", "/../../../evil", "/../evil", "/evil", "/run/evil",
                  "/run/../../evil", "/runs/../evil", "%2F..%2F..%2Fevil", f"/run/{ids['bench']}/../../evil"):
        browser.get("about:blank")
        requested(browser)
        browser.get(f"{base}#{hash_}")
        wait_for(browser, "return document.querySelector('main .error')")
        assert "does not hold" in browser.find_element("css selector", "main .error").text, hash_
        assert browser.execute_script("return window.__pwned === undefined"), hash_
        assert not [url for url in requested(browser) if "evil" in url.lower()], hash_
    open_key(browser, base, f"run/{ids['bench']}/item/0")  # the keys it holds still open
    assert browser.execute_script("return window.__pwned === undefined")


RECORDED = Path(__file__).resolve().parents[1] / "recordings" / "local"


def test_the_300_item_bench_opens_served_and_exported(browser, tmp_path) -> None:
    """The README's 300-item bench (run-24: 300 items x 10 rows) imported from
    recordings/local: its page and whole grid drawn, and an item's ten columns after a click,
    served and from disk. How fast, and the server's memory: scripts/perf/viewer_open.py."""
    if not (RECORDED / "runs" / "run-24").is_dir():
        pytest.skip("recordings/local/runs is not in this checkout")
    from trinity_cli.recordings.carry import import_runs
    from trinity_cli.runs.store import RunStore

    home = tmp_path / "home"
    (tmp_path / "recording" / "runs").mkdir(parents=True)
    shutil.copytree(RECORDED / "runs" / "run-24", tmp_path / "recording" / "runs" / "run-24")
    import_runs(tmp_path / "recording", RunStore(home / "runs"))
    env = {**os.environ, "TRINITY_HOME": str(home)}
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "trinity_cli", "inspect", "run-24", "--html", str(site)], env=env,
                   check=True, capture_output=True)
    process = subprocess.Popen([sys.executable, "-m", "trinity_cli", "inspect", "--serve"], env=env,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        served = process.stderr.readline().split()[2]
        for base in (served, site.joinpath("index.html").as_uri()):
            browser.get("about:blank")
            browser.get(f"{base}#/run/run-24")
            wait_for(browser, "return document.querySelectorAll('table.grid td.cell').length === 3000", timeout=60)
            browser.find_element("css selector", "table.grid tr.row").click()
            wait_for(browser, "return document.querySelectorAll('.episode-col').length === 10")
            check_systems_in_sight(browser)  # ten columns of real replies, some thousands of pixels long
            assert_no_page_errors(browser)
    finally:
        stop_process(process)
