"""What the coordinator's features say about the conversation so far: can a linear head tell
who has spoken, and so play `agree`'s rotation of members?

    python scripts/analysis/turn_probe.py [RECORDING] [--dims 16,32,64,0] [--folds 5] [--seed 0]

RECORDING: a recording folder or file (default `recordings/local`); its coordinator hidden
states (cache "hidden") of the shipped head's backbone are read with the transcript text each
was computed from, so nothing is encoded and no model is loaded. Each text's turn lines
(`role (member): ...`, coordinator/policy.py) say who has spoken. Held out by task: the texts
of one question are all in one of `--folds` folds (drawn with rng(seed)), so a probe is scored
on questions it never saw. Per input size K (0: the full hidden state), with the head's own
input (coordinator/head.py: centred, scaled, K principal directions of the training fold's
turn-0 features, as `trinity evolve --input-dims K` fits it) and a ridge regression whose
strength is chosen on an inner split of the training fold:

    last speaker   accuracy of a 3-way linear read of the member who spoke last (states with
                   at least one turn); a head that rotates members as `agree` does needs this
    spoke: M       accuracy of a linear read of whether member M has spoken yet
    majority       the same when always guessing the commonest answer
    by task        the same when guessing the commonest answer of the question's task (in the
                   training fold): what a probe could get from recognising the task alone, since
                   the recorded episodes ask mostly one member per task

The states are the ones recorded episodes reached (mostly the shipped head's, which asks one
member per task), not `agree`'s: the probe says what the features hold, not how an `agree`
start would score.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from trinity_cli.coordinator import head as head_mod
from trinity_cli.evolve.input_fit import fit_input_features
from trinity_cli.recordings import fileformat
from trinity_cli.recordings.transfer import read_recording
from trinity_cli.tasks.registry import TASKS, load_items

ROOT = Path(__file__).resolve().parents[2]
TURN = re.compile(r"^(thinker|worker|verifier) \(([^)]+)\): ")
LAMBDAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def states(recording: Path, fingerprint: str) -> tuple[np.ndarray, list[list[str]], list[str]]:
    """Unit-norm features, the speakers of each text in order, and each text's task line."""
    entries, _ = read_recording(recording)
    vectors, speakers, tasks = [], [], []
    for e in entries:
        if e.cache != "hidden" or e.request.get("backbone") != fingerprint:
            continue
        lines = e.request["text"].split("\n")
        vectors.append(np.frombuffer(fileformat.vector_bytes(e.value), dtype=np.float32))
        speakers.append([m.group(2) for m in map(TURN.match, lines) if m])
        tasks.append(next((line for line in lines if line.startswith("Task: ")), ""))
    x = np.array(vectors, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True), speakers, tasks


def task_names(task_lines: list[str]) -> list[str]:
    """The built-in task each `Task: ...` line comes from ("?" for none), by its opening words."""
    def opening(text: str) -> str:
        return " ".join(text.split())[:160]

    known = {opening(item.prompt): name for name in TASKS for item in load_items(name)}
    return [known.get(opening(line[len("Task: "):]), "?") for line in task_lines]


def _ridge(x: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xm, ym = x.mean(axis=0), y.mean(axis=0)
    xc = x - xm
    w = np.linalg.solve(xc.T @ xc + lam * len(x) * np.eye(x.shape[1]), xc.T @ (y - ym))
    return w, xm, ym


def _accuracy(w: np.ndarray, xm: np.ndarray, ym: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    pred = (x - xm) @ w + ym
    if y.shape[1] == 1:
        return float(np.mean((pred[:, 0] > 0.5) == (y[:, 0] > 0.5)))
    return float(np.mean(pred.argmax(axis=1) == y.argmax(axis=1)))


def fit_and_score(x_tr: np.ndarray, y_tr: np.ndarray, g_tr: np.ndarray, x_te: np.ndarray, y_te: np.ndarray,
                  rng: np.random.Generator) -> float:
    """Held-out accuracy, the ridge strength picked on an inner task-grouped split of the training part."""
    groups = np.unique(g_tr)
    inner = np.isin(g_tr, rng.choice(groups, size=max(1, len(groups) // 5), replace=False))
    scores = [_accuracy(*_ridge(x_tr[~inner], y_tr[~inner], lam), x_tr[inner], y_tr[inner]) for lam in LAMBDAS]
    lam = LAMBDAS[int(np.argmax(scores))]
    return _accuracy(*_ridge(x_tr, y_tr, lam), x_te, y_te)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("recording", nargs="?", default=str(ROOT / "recordings" / "local"))
    parser.add_argument("--dims", default="16,32,64,0", help="head input sizes K (0: the full hidden state)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    manifest = json.loads((ROOT / "heads" / "default" / "manifest.json").read_text())
    models = list(manifest["pool"]["models"])
    x, speakers, tasks = states(Path(args.recording), manifest["backbone"]["fingerprint"])
    names = sorted(set(tasks))
    group = np.array([names.index(t) for t in tasks])
    fold = np.random.default_rng(args.seed).integers(0, args.folds, len(names))[group]
    turns = np.array([len(s) for s in speakers])
    print(f"{len(x)} states of {len(names)} questions ({manifest['backbone']['ref']}); turns before them: "
          + ", ".join(f"{n}: {int(np.sum(turns == n))}" for n in sorted(set(turns.tolist()))))

    kind = np.array(task_names(tasks))
    print("tasks: " + ", ".join(f"{t}: {int(np.sum(kind == t))}" for t in sorted(set(kind.tolist()))))
    spoke_any = turns > 0
    last = np.zeros((len(x), len(models)))
    for i, s in enumerate(speakers):
        if s and s[-1] in models:
            last[i, models.index(s[-1])] = 1.0
    targets = {"last speaker": (last, spoke_any & (last.sum(axis=1) > 0))}
    for m in models:
        targets[f"spoke: {m}"] = (np.array([[float(m in s)] for s in speakers]), np.ones(len(x), bool))

    dims = [int(k) for k in args.dims.split(",")]
    print(f"\n| read | majority | by task | {' | '.join(f'K={k}' if k else 'full' for k in dims)} |")
    print("|---|---|---|" + "---|" * len(dims))
    for name, (y, keep) in targets.items():
        yk, counts = y[keep], y[keep].sum(axis=0)
        majority = float(max(counts.max(), len(yk) - counts[0]) / len(yk)) if y.shape[1] == 1 else float(
            counts.max() / len(yk))
        by_task = []
        for f in range(args.folds):
            tr, te = keep & (fold != f), keep & (fold == f)
            guess = {t: y[tr & (kind == t)].mean(axis=0) for t in set(kind[te].tolist())}
            right = [(g[0] > 0.5) == (v[0] > 0.5) if y.shape[1] == 1 else g.argmax() == v.argmax()
                     for g, v in ((guess[t] if np.all(np.isfinite(guess[t])) else y[tr].mean(axis=0), v)
                                  for t, v in zip(kind[te], y[te], strict=True))]
            by_task.append(np.mean(right))
        cells = [f"{np.mean(by_task):.1%}"]
        for k in dims:
            rng = np.random.default_rng([args.seed, k])
            accs = []
            for f in range(args.folds):
                tr, te = keep & (fold != f), keep & (fold == f)
                turn0 = x[(fold != f) & (turns == 0)]  # the head input is fitted on turn-0 features
                fitted = fit_input_features(turn0, k)
                head = head_mod.untrained(manifest["pool"]["name"], models, manifest["backbone"], x.shape[1],
                                          dims=k).with_input(fitted["center"], fitted["scale"], fitted["items"],
                                                             fitted["basis"])
                inputs = np.array([head.inputs(v) for v in x])
                accs.append(fit_and_score(inputs[tr], y[tr], group[tr], inputs[te], y[te], rng))
            cells.append(f"{np.mean(accs):.1%}")
        print(f"| {name} | {majority:.1%} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
