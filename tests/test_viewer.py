"""The viewer's pages without a browser: run directories -> page dicts (viewer/pages.py), the
static export, the served app's routes and headers, the scrub, and `inspect`'s terminal
tables when redirected. tests/test_viewer_browser.py draws the same pages in Chromium."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from trinity_cli import listening, paths
from trinity_cli.errors import ConfigError, NotFound
from trinity_cli.runs.store import RunLock, RunStore
from trinity_cli.viewer import export, pages, shape

from . import viewer_home
from .conftest import run_main

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "src" / "trinity_cli" / "viewer" / "assets"


@contextlib.contextmanager
def _copy_of(store, source: str, name: str) -> Iterator[Path]:
    """A copy of run `source` named `name` in `store`, removed afterwards."""
    copy = store.root / name
    shutil.copytree(store.root / source, copy)
    try:
        yield copy
    finally:
        shutil.rmtree(copy)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    home = tmp_path_factory.mktemp("viewer-home")
    return home, viewer_home.build(home, tmp_path_factory.mktemp("viewer-work"))


@pytest.fixture
def store(made, monkeypatch) -> RunStore:
    home, _ = made
    monkeypatch.setenv("TRINITY_HOME", str(home))
    monkeypatch.setenv(viewer_home.SECRET_ENV, viewer_home.SECRET)
    return RunStore(home / "runs")


def _page(store: RunStore, key: str) -> dict:
    return pages.page(key, store)


def test_the_runs_list_has_every_run_with_its_kind_and_the_damaged_one_as_damaged(store, made) -> None:
    _, ids = made
    runs = {r["id"]: r for r in _page(store, "runs")["runs"]}
    assert sorted(runs) == sorted(ids.values())
    assert runs[ids["bench"]]["kind"] == "bench" and runs[ids["bench"]]["items"] == str(viewer_home.ITEMS)
    assert runs[ids["bench"]]["pool"] == "scripted" and "agree" in runs[ids["bench"]]["headline"]
    assert runs[ids["evolve"]]["kind"] == "evolve" and "best validation" in runs[ids["evolve"]]["headline"]
    assert runs[ids["ask"]]["kind"] == "ask" and runs[ids["ask"]]["headline"] == "84"
    assert runs[ids["damaged"]]["status"] == "damaged" and "not valid JSON" in runs[ids["damaged"]]["headline"]


def test_a_bench_page_has_its_tables_charts_and_an_items_by_systems_grid(store, made) -> None:
    _, ids = made
    page = _page(store, f"run/{ids['bench']}")
    assert page["kind"] == "bench"
    titles = [t["title"] for t in page["tables"]]
    accuracy = page["tables"][0]
    assert accuracy["header"][:3] == ["system", "accuracy", "95% CI"] and "tokens" in accuracy["header"]
    assert "pool s" in accuracy["header"] and len(titles) >= 2
    assert [c["name"] for c in page["charts"]] == ["chart.png", "cost.png"]
    grid = page["grid"]
    assert [c["name"] for c in grid["columns"]] == viewer_home.SYSTEMS
    assert len(grid["rows"]) == viewer_home.ITEMS
    summary = store.load(ids["bench"])["summary"]
    for row in grid["rows"]:
        key = f"{row['task']}/{row['id']}"
        assert row["cells"] == [summary["per_item"][s].get(key) for s in viewer_home.SYSTEMS]
        assert re.match(r"Q\d+: what is", row["text"])
    # m0 is right on even items (84), m1 (85) on odd ones: the grid holds both outcomes per column.
    m0 = [row["cells"][0] for row in grid["rows"]]
    m1 = [row["cells"][1] for row in grid["rows"]]
    assert set(m0) == {0.0, 1.0} and [1 - x for x in m0] == m1


def test_a_bench_summary_the_report_cannot_read_shows_report_md_and_still_its_grid(store, made) -> None:
    _, ids = made
    with _copy_of(store, ids["bench"], "run-31") as copy:
        record = json.loads((copy / "run.json").read_text())
        del record["summary"]["results"]  # as a summary older than the report's fields would lack them
        (copy / "run.json").write_text(json.dumps({**record, "id": "run-31"}))
        page = _page(store, "run/run-31")
        assert page["tables"] == [] and page["report"] == (copy / "report.md").read_text()
        assert page["report"].startswith("# trinity bench") and len(page["grid"]["rows"]) == viewer_home.ITEMS


def test_an_item_page_has_every_systems_episode_turn_by_turn(store, made) -> None:
    _, ids = made
    page = _page(store, f"run/{ids['bench']}/item/0")
    assert page["kind"] == "item" and page["question"].startswith("Q") and page["models"] == ["m0", "m1", "m2"]
    columns = {c["name"]: c for c in page["columns"]}
    assert list(columns) == viewer_home.SYSTEMS
    single = columns["single:m0"]["episodes"]
    assert len(single) == 1 and single[0]["transcript"]["turns"][0]["model"] == "m0"
    turn = single[0]["transcript"]["turns"][0]
    assert {"role", "messages", "reply", "prompt_tokens", "completion_tokens", "latency_s"} <= set(turn)
    assert "logprob_stats" not in turn
    assert columns["random"]["episodes"][0]["transcript"]["turns"][0]["model_probs"]
    assert columns["oracle"]["episodes"] == [] and "plays nothing" in columns["oracle"]["note"]
    assert page["next"] == f"run/{ids['bench']}/item/1" and page["prev"] is None


def test_an_evolve_page_has_curves_with_sigma_and_each_generation_opens_as_a_grid(store, made) -> None:
    _, ids = made
    page = _page(store, f"run/{ids['evolve']}")
    assert page["kind"] == "evolve"
    points = page["curves"]["points"]
    assert [p["generation"] for p in points] == [0, 1]
    assert all(p["sigma"] > 0 and p["best"] >= p["mean"] for p in points)
    assert page["curves"]["sigma0"] == store.load(ids["evolve"])["options"]["sigma0"]
    assert page["tables"][0]["header"][:5] == ["gen", "episodes", "best fit", "mean fit", "val"]
    assert [g["generation"] for g in page["generations"]] == [0, 1]
    gen = _page(store, page["generations"][1]["key"])
    assert [c["name"].split(" (")[0] for c in gen["grid"]["columns"]] == ["candidate 0", "candidate 1"]
    assert len(gen["grid"]["rows"]) == 2  # the minibatch
    item = _page(store, gen["grid"]["item"] + "0")
    assert [c["name"] for c in item["columns"]] == ["candidate 0", "candidate 1"]
    assert all(c["episodes"][0]["transcript"]["turns"] for c in item["columns"])


def test_an_ask_page_replays_its_transcript(store, made) -> None:
    _, ids = made
    page = _page(store, f"run/{ids['ask']}")
    assert page["kind"] == "ask" and page["question"] == "What is 12*7?" and page["answer"] == "84"
    assert ["answered by", "agree procedure"] in page["facts"]
    turns = page["columns"][0]["episodes"][0]["transcript"]["turns"]
    assert [t["model"] for t in turns] == ["m0", "m1"] or turns[0]["model"] == "m0"


def test_two_bench_runs_compared_show_exactly_the_items_whose_result_changed(store, made) -> None:
    _, ids = made
    a, b = ids["bench"], ids["bench_other"]
    page = _page(store, f"compare/{a}/{b}")
    assert page["kind"] == "compare" and page["systems"] == viewer_home.SYSTEMS
    per_a = store.load(a)["summary"]["per_item"]
    per_b = store.load(b)["summary"]["per_item"]
    changed = {key for key in per_a["single:m1"] if any(per_a[s][key] != per_b[s][key] for s in page["systems"])}
    assert changed and {f"{r['task']}/{r['id']}" for r in page["grid"]["rows"]} == changed
    item = _page(store, page["grid"]["item"] + str(page["grid"]["rows"][0]["i"]))
    labels = [c["label"] for c in item["columns"]]
    assert f"single:m1 · {a}" in labels and f"single:m1 · {b}" in labels
    assert "single:m0 · " + a not in labels  # unchanged systems are left out
    both = _page(store, f"compare/{ids['ask']}/{ids['ask']}")
    assert len(both["columns"]) == 2
    with pytest.raises(NotFound, match="cannot be compared"):
        _page(store, f"compare/{a}/{ids['ask']}")


def test_two_evolve_runs_compared_show_the_settings_that_differ_and_both_curves(store, made) -> None:
    _, ids = made
    a, b = ids["evolve"], ids["evolve_other"]
    page = _page(store, f"compare/{a}/{b}")
    assert page["kind"] == "evolve-compare" and page["a"]["key"] == f"run/{a}" and page["b"]["id"] == b
    assert {row[0]: row[1:] for row in page["changed"]} == {"seed": ["0", "1"], "sigma0": [
        str(store.load(a)["options"]["sigma0"]), "0.3"]}
    for side, run_id in (("a", a), ("b", b)):
        curves = store.load(run_id)["curves"]
        points = page["curves"][side]["points"]
        assert [p["generation"] for p in points] == [c["generation"] for c in curves] and len(points) == 2
        assert [p["best"] for p in points] == [c["best_fitness"] for c in curves]
    assert page["curves"]["b"]["sigma0"] == 0.3
    facts = {row[0]: row[1:] for row in page["facts"]}
    assert facts["seed"] == ["0", "1"] and facts["pool"][0] == facts["pool"][1]
    with pytest.raises(NotFound, match="cannot be compared"):
        _page(store, f"compare/{a}/{ids['bench']}")


@pytest.mark.parametrize("key", ["run/../../etc", "run/run-1/item/x", "run/run-99", "runs/x", "compare/run-1",
                                 "run/run-1/gen/0", "run/run-2/item/0", "run/run-1/item/999", "run/run-2/gen/7"])
def test_keys_that_name_nothing_are_not_found(store, key: str) -> None:
    with pytest.raises(NotFound):
        _page(store, key)


def test_the_scrub_takes_secrets_and_home_directories_out_of_every_page(store, made, monkeypatch) -> None:
    home, ids = made
    raw = json.dumps(_page(store, f"run/{ids['bench']}/item/0"))
    assert viewer_home.SECRET in raw  # m2 wrote it in its reply: the scrub has something to do
    pairs = shape.scrub_pairs()
    clean = json.dumps(shape.scrub(_page(store, f"run/{ids['bench']}/item/0"), pairs))
    assert viewer_home.SECRET not in clean and shape.REDACTED in clean
    page = shape.scrub({"path": f"{home}/heads/x", "other": "/home/someone/x", str(home): 1}, pairs)
    assert page == {"path": "TRINITY_HOME/heads/x", "other": "/home/someone/x", "TRINITY_HOME": 1}
    monkeypatch.setenv("HOME", "/home/someone")
    assert shape.scrub("/home/someone/x", shape.scrub_pairs()) == "~/x"
    assert shape.scrub_pairs({"PATH": "/usr/bin", "MY_TOKEN": "abcdef", "HOME": "/"}, Path("/h")) == [
        ("abcdef", shape.REDACTED), ("/h", "TRINITY_HOME")]


def test_shown_path_makes_an_imported_runs_paths_relative(tmp_path) -> None:
    home = tmp_path / "home"
    assert paths.shown_path(str(home / "heads" / "x"), home) == "TRINITY_HOME/heads/x"
    assert paths.shown_path("/work/th/recipe/local-recipe/search", home) == "TRINITY_HOME/recipe/local-recipe/search"
    assert paths.shown_path("/src/trinity/recordings/local/heads/a", home) == "recordings/local/heads/a"
    assert paths.shown_path("heads/default", home) == "heads/default"
    assert paths.shown_path("/opt/elsewhere/head", home) == "/opt/elsewhere/head"
    assert paths.shown_path(str(tmp_path), home, keep_existing=True) == str(tmp_path)


def test_the_static_export_holds_one_file_per_page_and_refuses_a_folder_of_other_files(store, made, tmp_path) -> None:
    _, ids = made
    out = tmp_path / "site"
    done = export.export_run(ids["bench"], out, store)
    assert done.items == viewer_home.ITEMS and (out / "index.html").is_file()
    assert '<meta name="trinity-mode" content="static">' in (out / "index.html").read_text()
    data = sorted(p.relative_to(out / "data").as_posix() for p in (out / "data").rglob("*.js"))
    assert data == sorted(["runs.js", f"run/{ids['bench']}.js",
                           *[f"run/{ids['bench']}/item/{i}.js" for i in range(viewer_home.ITEMS)]])
    script = (out / "data" / "run" / ids["bench"] / "item" / "0.js").read_text()
    key, body = re.fullmatch(r'TRINITY_PUT\("([^"]+)",(.*)\);\n', script, re.S).groups()
    assert key == f"run/{ids['bench']}/item/0" and json.loads(body)["kind"] == "item"
    assert viewer_home.SECRET not in script and shape.REDACTED in script
    listed = json.loads((out / "data" / "runs.js").read_text()[len('TRINITY_PUT("runs",'):-3])
    assert [r["id"] for r in listed["runs"]] == [ids["bench"]]
    assert sorted(f"{k}.js" for k in listed["pages"]) == data  # what the page may load: these keys alone
    assert (out / "files" / ids["bench"] / "chart.png").is_file()
    assert sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) == done.bytes

    manifest = json.loads((out / export.MANIFEST).read_text())
    assert sorted(manifest["files"]) == sorted(p.relative_to(out).as_posix() for p in out.rglob("*")
                                               if p.is_file() and p.name != export.MANIFEST)

    (out / "notes.txt").write_text("mine")  # what a user adds to an export is theirs
    (out / "drafts" / "deep").mkdir(parents=True)
    (out / "drafts" / "deep" / "a.md").write_text("mine too")
    (out / "data" / "run" / ids["bench"] / "mine.txt").write_text("in a folder of the export")
    again = export.export_run(ids["evolve"], out, store)  # the earlier export's files replaced, no other
    assert again.items == 4 and not (out / "data" / "run" / ids["bench"] / "item").exists()
    assert not (out / "data" / "run" / f"{ids['bench']}.js").exists()
    assert (out / "data" / "run" / ids["evolve"] / "gen" / "1" / "item" / "1.js").is_file()
    assert (out / "notes.txt").read_text() == "mine" and (out / "drafts" / "deep" / "a.md").read_text() == "mine too"
    assert (out / "data" / "run" / ids["bench"] / "mine.txt").is_file()
    owned = (out / export.MANIFEST).read_text()
    assert ids["bench"] not in owned and "notes.txt" not in owned and "drafts" not in owned
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left beside it

    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (out / "data" / "run" / f"{ids['bench']}.js").write_text("a user's file where the export writes")
    in_the_way = f"data/run/{ids['bench']}.js is in the way, and the earlier export did not write it"
    with pytest.raises(ConfigError, match=in_the_way):
        export.export_run(ids["bench"], out, store)
    assert {p: p.read_bytes() for p in before} == before
    (out / "data" / "run" / f"{ids['bench']}.js").unlink()
    (out / export.MANIFEST).write_text(json.dumps({"format": 1, "files": ["index.html", "../notes-elsewhere"]}))
    for outside in (True, False):  # a manifest naming a path outside the folder; then no manifest
        if not outside:
            (out / export.MANIFEST).unlink()
        with pytest.raises(ConfigError, match="holds other files and no export-manifest.json"):
            export.export_run(ids["bench"], out, store)
        assert (out / "notes.txt").read_text() == "mine" and (out / "index.html").is_file()

    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="holds other files"):
        export.export_run(ids["bench"], other, store)
    assert (other / "notes.txt").read_text() == "keep me"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export.export_run(ids["bench"], empty, store).items == viewer_home.ITEMS and (empty / "index.html").is_file()


def test_inspect_html_on_the_command_line(made, monkeypatch, capsys, tmp_path) -> None:
    home, ids = made
    monkeypatch.setenv("TRINITY_HOME", str(home))
    code, out, err = run_main(["inspect", ids["ask"], "--html", str(tmp_path / "site")], monkeypatch, capsys)
    assert code == 0, err
    assert out.strip() == str(tmp_path / "site" / "index.html") and "no server" in err
    code, out, err = run_main(["inspect", "--html", str(tmp_path / "x")], monkeypatch, capsys)
    assert code == 2 and "name the run to export" in err
    code, out, err = run_main(["inspect", "run-77", "--html", str(tmp_path / "y")], monkeypatch, capsys)
    assert code != 0 and "no run 'run-77'" in err and not (tmp_path / "y").exists()
    (tmp_path / "site" / export.MANIFEST).unlink()  # no longer an export: refused, nothing deleted
    (tmp_path / "site" / "notes.txt").write_text("mine")
    code, out, err = run_main(["inspect", ids["ask"], "--html", str(tmp_path / "site")], monkeypatch, capsys)
    assert code == 2 and err.strip().count("\n") == 0 and "holds other files" in err and "Traceback" not in err
    assert (tmp_path / "site" / "notes.txt").read_text() == "mine" and (tmp_path / "site" / "index.html").is_file()


def test_the_page_never_parses_text_as_html_and_fetches_nothing_from_elsewhere() -> None:
    """What keeps model text inert and the page offline, read in the shipped assets (the
    browser test shows the same on a hostile reply)."""
    script = (ASSETS / "viewer.js").read_text()
    for construct in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                      "setAttribute(\"on", "srcdoc"):
        assert construct not in script, construct
    assert "createTextNode" in script
    for name in ("viewer.js", "viewer.css", "index.html"):
        urls = set(re.findall(r"(?:https?:)?//[\w.-]+", (ASSETS / name).read_text()))
        assert urls <= {"http://www.w3.org"}, (name, urls)  # the SVG namespace, never fetched


@pytest.fixture
def client(store):
    from fastapi.testclient import TestClient

    from trinity_cli.viewer import web

    return TestClient(web.create_app(store, ["testserver", "127.0.0.1"]))


def test_the_served_app_answers_pages_and_charts_with_a_strict_policy(client, made) -> None:
    _, ids = made
    index = client.get("/")
    assert index.status_code == 200 and 'content="served"' in index.text
    assert "default-src 'none'" in index.headers["content-security-policy"]
    assert client.get("/viewer.js").headers["content-type"].startswith("text/javascript")
    page = client.get(f"/api/run/{ids['bench']}/item/0")
    assert page.status_code == 200 and viewer_home.SECRET not in page.text and page.json()["kind"] == "item"
    missing = client.get("/api/run/run-99")
    assert missing.status_code == 404 and "no run 'run-99'" in missing.json()["error"]
    assert client.get(f"/files/{ids['bench']}/chart.png").headers["content-type"] == "image/png"
    assert client.get(f"/files/{ids['bench']}/run.json").status_code == 404
    assert client.get("/files/..%2F..%2Fetc/chart.png").status_code == 404
    assert client.get("/", headers={"host": "evil.example"}).status_code == 400


def test_the_served_app_answers_head_as_get(client, made) -> None:
    """A HEAD request (link checkers, `curl -I`) gets GET's status and headers, never 405."""
    _, ids = made
    for url in ("/", "/viewer.js", "/viewer.css", "/api/runs", f"/api/run/{ids['bench']}/item/0",
                f"/files/{ids['bench']}/chart.png", "/api/run/run-99"):
        get, head = client.get(url), client.head(url)
        assert head.status_code == get.status_code != 405, url
        for name in ("content-type", "content-security-policy", "x-content-type-options"):
            assert head.headers[name] == get.headers[name], (url, name)
    assert client.post("/api/runs").status_code == 405


def test_the_served_app_sees_a_run_that_finishes_and_a_run_whose_files_change(client, made, store) -> None:
    home, ids = made
    before = {r["id"] for r in client.get("/api/runs").json()["runs"]}
    with _copy_of(store, ids["ask"], "run-30") as copy:
        record = {**json.loads((copy / "run.json").read_text()), "id": "run-30"}
        (copy / "run.json").write_text(json.dumps(record))
        assert {r["id"] for r in client.get("/api/runs").json()["runs"]} == before | {"run-30"}
        assert client.get("/api/run/run-30").json()["answer"] == "84"
        (copy / "run.json").write_text(json.dumps({**record, "answer": "85"}))
        assert client.get("/api/run/run-30").json()["answer"] == "85"


def test_an_evolve_run_under_way_is_a_live_page_until_it_finishes(client, made, store) -> None:
    home, ids = made
    copy = store.root / "run-31"
    shutil.copytree(store.root / ids["evolve"], copy)
    finished = json.loads((copy / "run.json").read_text())
    (copy / "run.json").unlink()  # what an evolve run looks like between its checkpoints and its end
    writer = RunLock(copy).__enter__()  # held as the process evolving it holds it
    try:
        page = client.get("/api/run/run-31").json()
        assert page["kind"] == "evolve" and page["live"] is True and page["state"] == "under way"
        assert ["status", "unfinished (under way)"] in page["facts"]
        assert page["resume"] == "trinity evolve --resume run-31"
        entry = next(r for r in client.get("/api/runs").json()["runs"] if r["id"] == "run-31")
        assert entry["status"] == "unfinished (under way)"
        from trinity_cli.viewer.opened import OpenedRun

        signature = OpenedRun(store, "run-31").signature()
        with open(copy / "calls.log", "a") as journal:  # grows with every call: no reason to reopen the run
            journal.write("0123abcd\n")
        assert OpenedRun(store, "run-31").signature() == signature
        (copy / "run.json").write_text(json.dumps({**finished, "id": "run-31"}))
        assert client.get("/api/run/run-31").json()["live"] is False
        assert client.get(f"/api/run/{ids['evolve']}").json()["live"] is False
    finally:
        writer.__exit__()
        shutil.rmtree(copy)


def test_an_unfinished_run_no_process_writes_is_stopped_not_live(client, made, store) -> None:
    """Killed (its lock file names a dead process, or a live one that holds no lock) or
    imported (no lock file): "stopped", the page not followed, the way to finish it shown."""
    home, ids = made
    copy = store.root / "run-32"
    shutil.copytree(store.root / ids["evolve"], copy)
    (copy / "run.json").unlink()
    try:
        for lock in ("none", "dead", "unheld"):
            (copy / RunLock.FILE).unlink(missing_ok=True)
            if lock == "dead":
                (copy / RunLock.FILE).write_text("999999999")  # past any pid_max
            elif lock == "unheld":
                (copy / RunLock.FILE).write_text(str(__import__("os").getpid()))  # alive, holding nothing
            assert not RunLock.held(copy), lock
            page = client.get("/api/run/run-32").json()
            assert page["live"] is False and page["state"] == "stopped", lock
            assert ["status", "unfinished (stopped)"] in page["facts"]
            assert page["resume"] == "trinity evolve --resume run-32"
            entry = next(r for r in client.get("/api/runs").json()["runs"] if r["id"] == "run-32")
            assert entry["status"] == "unfinished (stopped)" and entry["headline"].startswith("stopped: ")
        with RunLock(copy):
            assert RunLock.held(copy)
        assert not RunLock.held(copy)  # and the probe left no lock behind: it can be taken again
        with RunLock(copy):
            pass
    finally:
        shutil.rmtree(copy)


def test_the_best_found_at_the_start_says_start_not_generation_minus_one(store, made) -> None:
    _, ids = made
    with _copy_of(store, ids["evolve"], "run-33") as copy:
        record = json.loads((copy / "run.json").read_text())
        (copy / "run.json").write_text(json.dumps({**record, "id": "run-33", "best_val": 0.604,
                                                   "best_generation": -1}))
        facts = dict(_page(store, "run/run-33")["facts"])
        assert facts["best validation"] == "0.604 (start)"
        (copy / "run.json").write_text(json.dumps({**record, "id": "run-33", "best_val": 0.61, "best_generation": 1}))
        assert dict(_page(store, "run/run-33")["facts"])["best validation"] == "0.610 (generation 1)"


@pytest.mark.slow
def test_inspect_serve_prints_its_url_answers_and_stops_quietly_on_ctrl_c(made) -> None:
    import signal
    import subprocess
    import sys

    import httpx

    home, ids = made
    env = {**viewer_home.environ_with_secret(), "TRINITY_HOME": str(home)}
    process = subprocess.Popen([sys.executable, "-m", "trinity_cli", "inspect", ids["bench"], "--serve"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        url = line.split()[2]
        assert re.fullmatch(rf"http://127\.0\.0\.1:\d+/#/run/{ids['bench']}", url), line
        runs = httpx.get(url.split("#")[0] + "api/runs", timeout=30).json()["runs"]
        assert sorted(r["id"] for r in runs) == sorted(ids.values())
        get, head = (httpx.request(method, url.split("#")[0], timeout=30) for method in ("GET", "HEAD"))
        assert head.status_code == 200 and head.content == b""  # uvicorn sends a HEAD no body
        assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content))
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0 and err == "" and out == ""


def test_a_comparison_exports_both_runs_pages_and_the_changed_items(store, made, tmp_path, monkeypatch,
                                                                   capsys) -> None:
    home, ids = made
    a, b = ids["bench"], ids["bench_other"]
    out = tmp_path / "compared"
    code, stdout, err = run_main(["inspect", a, "--compare", b, "--html", str(out)], monkeypatch, capsys)
    assert code == 0, err
    assert stdout.strip() == str(out / "index.html") and f"{a} against {b}" in err
    changed = pages.page(f"compare/{a}/{b}", store)["grid"]["rows"]
    data = sorted(p.relative_to(out / "data").as_posix() for p in (out / "data").rglob("*.js"))
    assert data == sorted(["runs.js", f"run/{a}.js", f"run/{b}.js", f"compare/{a}/{b}.js",
                           *[f"compare/{a}/{b}/item/{row['i']}.js" for row in changed]])
    listed = json.loads((out / "data" / "runs.js").read_text()[len('TRINITY_PUT("runs",'):-3])
    assert [r["id"] for r in listed["runs"]] == [a, b] and listed["compare"] == f"compare/{a}/{b}"
    assert sorted(f"{k}.js" for k in listed["pages"]) == data
    assert (out / "files" / a / "chart.png").is_file() and (out / "files" / b / "chart.png").is_file()
    evolved = tmp_path / "evolved"
    done = export.export_compare(ids["evolve"], ids["evolve_other"], evolved, store)
    assert done.items == 0 and (evolved / "data" / "compare" / ids["evolve"] / f"{ids['evolve_other']}.js").is_file()
    for args, says in (([a, "--compare", ids["evolve"], "--html", str(tmp_path / "no")], "cannot be compared"),
                       ([a, "--compare", b], "--compare"), (["--compare", b, "--serve"], "--compare")):
        code, stdout, err = run_main(["inspect", *args], monkeypatch, capsys)
        assert code != 0 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "no").exists()


def test_serve_refuses_an_unknown_run_and_a_taken_port_before_listening(store) -> None:
    import socket

    from trinity_cli.viewer import web

    with pytest.raises(NotFound):
        web.serve(run="run-99", store=store)
    with pytest.raises(NotFound, match="cannot be compared"):
        web.serve(run="run-1", compare="run-3", store=store)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(ConfigError, match="pick another"):
            web.serve(port=taken.getsockname()[1], store=store)
    assert listening.is_loopback("127.0.0.1") and listening.is_loopback("::1") and not listening.is_loopback("0.0.0.0")


def test_inspect_lists_runs_as_markdown_when_redirected(made, monkeypatch, capsys) -> None:
    home, ids = made
    monkeypatch.setenv("TRINITY_HOME", str(home))
    code, out, _ = run_main(["inspect"], monkeypatch, capsys)
    assert code == 0 and out.startswith("| run | kind | when | status | title |")
    assert f"| {ids['damaged']} | ? |" in out and "| damaged |" in out


RECORDED = ROOT / "recordings" / "local" / "runs"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> RunStore:
    """This home with the runs of recordings/local imported (runs only: no call is read)."""
    if not (RECORDED / "run-75").is_dir():
        pytest.skip("recordings/local/runs is not in this checkout")
    from trinity_cli.recordings.carry import import_runs

    store = RunStore(tmp_path_factory.mktemp("recorded-home") / "runs")
    import_runs(RECORDED.parent, store)
    return store


@pytest.mark.slow
def test_the_readme_runs_open_after_an_import(recorded, monkeypatch) -> None:
    """run-75 (the design card's evolve: curves, sigma from its checkpoints, noise, the
    verdict, the cost foretold and made) and run-111 (its validation bench), as imported."""
    monkeypatch.setenv("TRINITY_HOME", str(recorded.root.parent))
    page = pages.page("run/run-75", recorded)
    assert [p["generation"] for p in page["curves"]["points"]] == [0, 1]
    assert all(p["sigma"] for p in page["curves"]["points"])  # from the two checkpoints
    titles = [t["title"] for t in page["tables"]]
    assert any(t.startswith("verdict: head:local-recipe-reader") for t in titles)
    assert any(t.startswith("fitness noise") for t in titles)
    cost = next(t for t in page["tables"] if t["title"].startswith("cost foretold"))
    assert cost["rows"][1][:3] == ["search", "7,039", "6,915"] and cost["rows"][2][:3] == ["validate", "3,352",
                                                                                            "3,746"]
    head = dict(page["facts"])["head"]
    assert head == "TRINITY_HOME/recipe/local-recipe/search"
    assert page["verdict"]["validate"] == "run-111"
    bench = pages.page("run/run-111", recorded)
    assert len(bench["grid"]["rows"]) == 294 and len(bench["grid"]["columns"]) == 7
    item = pages.page("run/run-111/item/0", recorded)
    assert all(c["episodes"][0]["transcript"]["turns"] for c in item["columns"])


@pytest.mark.slow
def test_a_300_item_bench_exports_within_20_mb(recorded, tmp_path, monkeypatch) -> None:
    """The README's 300-item bench with the most rows (run-24: 10 rows, 7 that play) as a
    static folder: each item a file of its own, the whole well within the issue's 20 MB."""
    monkeypatch.setenv("TRINITY_HOME", str(recorded.root.parent))
    done = export.export_run("run-24", tmp_path / "site", recorded)
    assert done.items == 300 and done.bytes <= 20_000_000
    first = (tmp_path / "site" / "data" / "run" / "run-24.js").stat().st_size
    assert first <= 1_500_000  # what opening the page reads: the grid, not the episodes


def test_inspect_of_an_imported_evolve_run_draws_every_table_as_markdown_when_redirected(
        monkeypatch, capsys, tmp_path) -> None:
    """The design card's run-75, redirected: its verdict is a Markdown table (not a Rich table
    cut at 80 columns) and its head's path, another machine's, is shown relative to that
    home."""
    if not (RECORDED / "run-75").is_dir():
        pytest.skip("recordings/local/runs is not in this checkout")
    from trinity_cli.recordings.carry import import_runs

    home = tmp_path / "home"
    shutil.copytree(RECORDED / "run-75", tmp_path / "recording" / "runs" / "run-75")
    import_runs(tmp_path / "recording", RunStore(home / "runs"))
    record = json.loads((home / "runs" / "run-75" / "run.json").read_text())
    record["head"] = "/gone/machine/home/recipe/local-recipe/search"  # surely not on this machine
    (home / "runs" / "run-75" / "run.json").write_text(json.dumps(record))
    monkeypatch.setenv("TRINITY_HOME", str(home))
    code, out, _ = run_main(["inspect", "run-75"], monkeypatch, capsys)
    assert code == 0
    assert "## verdict: head:local-recipe-reader validates best" in out
    assert "| head:local-recipe-reader * | 61.6% | 181/294 | 556 | 0.588 | 5/9 p=0.42 | 22/4 p=0.00 |" in out
    assert "…" not in out and "/gone/machine" not in out
    assert "head: TRINITY_HOME/recipe/local-recipe/search (not here" in out


# -- `trinity inspect` in the terminal: a bench item turn by turn, the list's order and dates ----
def test_inspect_item_replays_every_rows_episodes_on_one_bench_item(made, store, monkeypatch, capsys) -> None:
    home, ids = made
    summary = store.load(ids["bench"])["summary"]
    task, item = summary["items"][0]["task"], summary["items"][0]["id"]
    code, out, err = run_main(["inspect", ids["bench"], "--item", item], monkeypatch, capsys)
    assert code == 0, err
    assert out.startswith(f"{ids['bench']}  ·  {task}/{item}")
    assert [line for line in out.splitlines() if line.startswith("Task: ")] == [f"Task: {summary_question(out)}"]
    heads = [line[3:].rsplit(" ", 1)[0] for line in out.splitlines() if line.startswith("── ")]
    assert heads == viewer_home.SYSTEMS  # every row, in the run's order
    assert "turn 1 · m0 · worker" in out and viewer_home.HOSTILE in out  # the reply, as written
    assert out.count("plays nothing") == 3  # vote, best-per-task, oracle
    code, same, _ = run_main(["inspect", ids["bench"], "--item", f"{task}/{item}"], monkeypatch, capsys)
    assert code == 0 and same == out
    code, raw, _ = run_main(["inspect", ids["bench"], "--item", item, "--json"], monkeypatch, capsys)
    found = json.loads(raw)
    assert code == 0 and [s["name"] for s in found["systems"]] == viewer_home.SYSTEMS
    episodes = {s["name"]: s["episodes"] for s in found["systems"]}
    assert len(episodes["single:m0"]) == 1 and episodes["oracle"] == []
    assert episodes["single:m0"][0]["transcript"]["turns"][0]["model"] == "m0"


@pytest.mark.parametrize(("args", "says"), [
    (["{bench}", "--item", "nope"], "{bench} has no item 'nope'"),
    (["{bench}", "--item", "q"], "did you mean"),
    (["{evolve}", "--item", "q0"], "is not a bench run"),
    (["--item", "q0"], "name the bench run"),
    (["{bench}", "--item", "q0", "--html", "out"], "an item replays in the terminal"),
])
def test_inspect_item_refuses_what_names_no_item_in_one_line(made, monkeypatch, capsys, args, says) -> None:
    home, ids = made
    monkeypatch.setenv("TRINITY_HOME", str(home))
    code, out, err = run_main(["inspect", *[a.format(**ids) for a in args]], monkeypatch, capsys)
    assert code == 2 and out == "" and says.format(**ids) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if "no item" in says:
        assert f"trinity inspect {ids['bench']} --serve" in err  # where every id is seen


def summary_question(out: str) -> str:
    """The question `inspect --item` shows first (the line after its title)."""
    return out.splitlines()[1].removeprefix("Task: ")


def _unfinished(root: Path, n: int, meta: dict) -> Path:
    run = root / f"run-{n}"
    run.mkdir(parents=True)
    (run / "evolve.json").write_text(json.dumps(meta))
    return run


def test_the_list_dates_an_unfinished_run_by_what_it_records_never_by_its_copy(tmp_path, monkeypatch,
                                                                                capsys) -> None:
    """An evolve run stopped before its end has no run.json: its date is the "created" its
    evolve.json records, or, for a run made here (its lock file), when evolve.json was
    written; an imported one without a recorded time is undated, not dated at its import."""
    import os

    meta = {"format": "x", "options": {"tasks": "gsm8k:train:4", "budget": 8}, "manifest": {"pool": "p", "models": []}}
    store = RunStore(tmp_path / "home" / "runs")
    _unfinished(store.root, 2, {**meta, "created": 1_700_000_000.0})
    here = _unfinished(store.root, 10, meta)
    (here / RunLock.FILE).write_text("")
    os.utime(here / "evolve.json", (1_600_000_000, 1_600_000_000))
    _unfinished(store.root, 9, meta)  # imported: no lock file, no recorded time
    listed = {r.id: r for r in store.list()}
    assert [r for r in listed] == ["run-2", "run-9", "run-10"]
    assert listed["run-2"].created == 1_700_000_000.0 and listed["run-10"].created == 1_600_000_000
    assert listed["run-9"].created == 0.0 and store.load("run-2")["created"] == 1_700_000_000.0
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home"))
    code, out, _ = run_main(["inspect"], monkeypatch, capsys)
    assert code == 0 and "| run-9 | evolve | — | unfinished |" in out
