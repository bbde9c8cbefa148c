"""Every page of the viewer, by key: `page(key, ...)` answers the served app's /api/KEY and
is what the static export writes as data/KEY.js; both scrub it (shape.scrub) on the way out.

Keys (run ids as `run-N`; i and g whole numbers):
    runs                         every run: kind, date, status, pool, head, items, headline
    run/RUN                      a run's page, by kind: bench (tables, charts, grid), evolve
                                 (facts, curves, tables, generations), ask (the transcript)
    run/RUN/item/i               a bench run's item i: every system's episodes
    run/RUN/gen/g                an evolve run's generation g: items x candidates
    run/RUN/gen/g/item/i         item i of generation g: every candidate's episode
    compare/A/B                  two bench runs: the items whose result changed; two evolve
                                 runs: their settings, facts and curves together; two ask
                                 runs: their transcripts side by side
    compare/A/B/item/i           item i of A in both (bench) runs, episodes side by side
Every page is a dict of plain JSON values with a "kind" (runs, bench, evolve, ask, item,
generation, compare, evolve-compare, run); viewer/assets/viewer.js draws each kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from trinity_cli.errors import DamagedState, NotFound
from trinity_cli.runs.run_files import EvolveRun, RunSummary
from trinity_cli.runs.store import RunLock, RunStore
from trinity_cli.viewer import bench_page, evolve_page, shape
from trinity_cli.viewer.opened import OpenedRun

Opener = Callable[[str], OpenedRun]
RUN_ID = re.compile(r"^run-\d+$")
_NUMBER = re.compile(r"^\d{1,9}$")
REFERENCES = ("oracle", "best-per-task", "vote")  # bench rows that are not systems


def page(key: str, store: RunStore, open_run: Opener | None = None) -> dict[str, Any]:
    """The page at `key` (module docstring), unscrubbed; NotFound for a key that names
    nothing. `open_run` opens a run (a server passes one that keeps a few open)."""
    opener: Opener = open_run or (lambda run_id: OpenedRun(store, run_id))
    parts = key.strip("/").split("/")
    if parts == ["runs"]:
        return runs_page(store)
    if len(parts) >= 2 and parts[0] == "run" and RUN_ID.match(parts[1]):
        rest = parts[2:]
        if not rest:
            return run_page(opener(parts[1]))
        if len(rest) == 2 and rest[0] == "item" and _NUMBER.match(rest[1]):
            return bench_page.item_page(_bench(opener(parts[1])), int(rest[1]))
        if len(rest) in (2, 4) and rest[0] == "gen" and _NUMBER.match(rest[1]):
            run = _evolve(opener(parts[1]))
            if len(rest) == 2:
                return evolve_page.generation_page(run, int(rest[1]))
            if rest[2] == "item" and _NUMBER.match(rest[3]):
                return evolve_page.generation_item(run, int(rest[1]), int(rest[3]))
    if len(parts) in (3, 5) and parts[0] == "compare" and RUN_ID.match(parts[1]) and RUN_ID.match(parts[2]):
        a, b = opener(parts[1]), opener(parts[2])
        if len(parts) == 3:
            return compare_page(a, b)
        if parts[3] == "item" and _NUMBER.match(parts[4]):
            return bench_page.compare_item(_bench(a), _bench(b), int(parts[4]))
    raise NotFound(f"no page {key!r}", "start from the runs list")


def _bench(run: OpenedRun) -> OpenedRun:
    if run.kind != "bench":
        raise NotFound(f"{run.id} is a {run.kind} run, not a bench run")
    return run


def _evolve(run: OpenedRun) -> OpenedRun:
    if not run.evolve.meta_file.is_file():
        raise NotFound(f"{run.id} is not an evolve run")
    return run


# -- the runs list ---------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def bench_headline(summary: Mapping[str, Any]) -> str:
    """A bench run in a few words: each head's accuracy and agree's; without a head, the
    best system's."""
    results = summary.get("results") or {}
    systems = summary.get("systems") or []
    shown = [s["name"] for s in systems if s["kind"] in ("head", "conductor", "agree")]
    if not shown:
        rows = [s["name"] for s in systems if s["kind"] not in REFERENCES and s["name"] in results]
        shown = sorted(rows, key=lambda n: -(results[n]["overall"].get("accuracy") or 0))[:1]
    return " · ".join(f"{n} {_pct(results[n]['overall'].get('accuracy'))}" for n in shown if n in results)


def _entry(summary: RunSummary, store: RunStore) -> dict[str, Any]:
    """One line of the runs list (runs_page)."""
    entry: dict[str, Any] = {"id": summary.id, "kind": summary.kind, "created": summary.created,
                             "status": summary.status, "title": summary.title, "pool": "", "head": "", "items": "",
                             "headline": "", "key": f"run/{summary.id}"}
    if summary.status == "damaged":
        entry["headline"] = summary.title
        return entry
    if summary.status == "unfinished":  # an evolve run not done: its record would read every generation
        meta = EvolveRun(store.root / summary.id).meta() or {}
        state = "under way" if RunLock.held(store.root / summary.id) else "stopped"
        entry.update(pool=(meta.get("manifest") or {}).get("pool", ""), status=f"unfinished ({state})",
                     headline=f"{state}: {summary.title}")
        return entry
    try:
        record = store.load(summary.id)
    except DamagedState as exc:
        entry.update(status="damaged", headline=exc.message)
        return entry
    kind = record.get("kind")
    if kind == "bench":
        s = record.get("summary") or {}
        entry.update(pool=(s.get("pool") or {}).get("name", ""), items=str(len(s.get("items") or [])),
                     head=", ".join(sys["head"]["name"] for sys in s.get("systems") or [] if sys.get("head")),
                     headline=bench_headline(s))
    elif kind == "evolve":
        o = record.get("options") or {}
        best = record.get("best_val")
        winner = (record.get("recipe") or {}).get("winner")
        meta = EvolveRun(store.root / summary.id).meta() or {}
        pool = (meta.get("manifest") or {}).get("pool") or o.get("pool") or "local"
        entry.update(pool=str(pool), head=str(shape.shown(record.get("head") or "")),
                     items=f"{record.get('spent')} episodes",
                     headline=("—" if best is None else f"best validation {best:.3f}")
                     + (f" · verdict: {winner}" if winner else ""))
    elif kind == "ask":
        mode = record.get("mode") or "coordinator"
        entry.update(kind="conductor" if mode == "conductor" else "ask",
                     pool=(record.get("pool") or {}).get("name", ""),
                     head=(record.get("head") or {}).get("name") or mode, items="1",
                     headline=str(record.get("answer") or "")[:120])
    elif kind == "chat":
        exchanges = record.get("exchanges") or []
        entry.update(pool=(record.get("pool") or {}).get("name", ""), items=f"{len(exchanges)} messages",
                     head=str((exchanges[-1].get("mode") if exchanges else "") or ""),
                     headline=str(exchanges[-1].get("answer") or "")[:120] if exchanges else "")
    return entry


def runs_page(store: RunStore) -> dict[str, Any]:
    """Every run, oldest first (RunStore.list): damaged ones listed as damaged."""
    return {"kind": "runs", "runs": [_entry(s, store) for s in store.list()]}


# -- one run -------------------------------------------------------------------------------
def run_page(run: OpenedRun) -> dict[str, Any]:
    """A run's page, by its kind; a kind the viewer has no page for shows its record."""
    kind = run.kind
    if kind == "bench":
        return bench_page.bench_page(run)
    if kind == "evolve":
        return evolve_page.evolve_page(run)
    if kind == "ask":
        return ask_page(run)
    if kind == "chat":
        return chat_page(run)
    return {"kind": "run", "id": run.id, "title": run.record.get("title", ""), "record": run.record}


def ask_page(run: OpenedRun) -> dict[str, Any]:
    """An ask run as `trinity inspect RUN` replays it: who answered, every turn, the answer."""
    r = run.record
    mode = r.get("mode") or "coordinator"
    who = {"conductor": f"conductor {r.get('conductor')}", "agree": "agree procedure"}.get(
        mode, f"head {(r.get('head') or {}).get('name')}")
    seed = f"{r.get('seed')}" + (f" (episode {r['episode_seed']})" if r.get("episode_seed") is not None else "")
    facts = [["pool", (r.get("pool") or {}).get("name", "")], ["answered by", who], ["seed", seed],
             ["seconds", f"{float(r.get('wall_s') or 0):.1f}"],
             ["pool calls", f"{r.get('pool_calls')} ({r.get('cache_hits')} from the cache)"]]
    transcript = shape.transcript(r.get("transcript") or {})
    column = {"name": who, "kind": mode, "run": run.id, "label": who, "models": list((r.get("pool") or {}).get("models")
                                                                                   or []),
              "reward": None, "note": "", "episodes": [{"seed": r.get("episode_seed"), "reward": None, "error": None,
                                                        "transcript": transcript}]}
    return {"kind": "ask", "id": run.id, "title": r.get("title", ""), "created": r.get("created"),
            "question": r.get("question") or transcript.get("task", ""), "facts": facts,
            "answer": r.get("answer") if r.get("answer") is not None else transcript.get("answer"),
            "models": column["models"], "roles": shape.ROLE_NAMES, "columns": [column]}


COMPARABLE = ("bench", "evolve", "ask")  # the kinds two runs of which compare


def check_comparable(a: OpenedRun, b: OpenedRun) -> None:
    """NotFound unless `a` and `b` are two runs of one kind in COMPARABLE."""
    if a.kind != b.kind or a.kind not in COMPARABLE:
        raise NotFound(f"{a.id} ({a.kind}) and {b.id} ({b.kind}) cannot be compared",
                       "compare two runs of one kind: bench, evolve or ask")


def compare_page(a: OpenedRun, b: OpenedRun) -> dict[str, Any]:
    """Two bench runs' changed items (bench_page.compare_page), two evolve runs' settings and
    curves (evolve_page.compare_page), or two ask runs side by side."""
    check_comparable(a, b)
    if a.kind == "bench" and b.kind == "bench":
        return bench_page.compare_page(a, b)
    if a.kind == "evolve" and b.kind == "evolve":
        return evolve_page.compare_page(a, b)
    left, right = ask_page(a), ask_page(b)
    for side, run in ((left, a), (right, b)):
        side["columns"][0]["label"] = f"{run.id}: {side['columns'][0]['label']}"
    return {**left, "kind": "item", "title": f"{a.id} against {b.id}", "back": "runs", "prev": None, "next": None,
            "task": "", "id": "", "columns": left["columns"] + right["columns"]}


def chat_page(run: OpenedRun) -> dict[str, Any]:
    """A conversation run (ask/conversation.py) as an ask page whose columns are its messages,
    in order: each message, who answered it, its turns and its answer."""
    r = run.record
    exchanges = r.get("exchanges") or []
    columns = []
    for i, exchange in enumerate(exchanges, 1):
        transcript = shape.transcript(exchange.get("transcript") or {})
        mode = exchange.get("mode") or "coordinator"
        first = (str(exchange.get("question") or "").splitlines() or [""])[0]
        label = f"message {i}: {first[:60]}"
        columns.append({"name": label, "kind": mode, "run": run.id, "label": label,
                        "models": list((exchange.get("pool") or {}).get("models") or []), "reward": None,
                        "note": f"answer: {str(exchange.get('answer') or '')[:200]}",
                        "episodes": [{"seed": exchange.get("episode_seed"), "reward": None, "error": None,
                                      "transcript": transcript}]})
    facts = [["pool", (r.get("pool") or {}).get("name", "")], ["messages", str(len(exchanges))],
             ["system prompt", str(r.get("system") or "none")],
             ["seconds", f"{float(r.get('wall_s') or 0):.1f}"]]
    last = exchanges[-1] if exchanges else {}
    return {"kind": "ask", "id": run.id, "title": r.get("title", ""), "created": r.get("created"),
            "question": "\n\n".join(f"[{i}] {e.get('question', '')}" for i, e in enumerate(exchanges, 1)),
            "facts": facts, "answer": last.get("answer"),
            "models": columns[0]["models"] if columns else [], "roles": shape.ROLE_NAMES, "columns": columns}
