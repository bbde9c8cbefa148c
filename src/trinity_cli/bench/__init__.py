"""`trinity bench`: the coordinator against every model of its pool, random routing and the
oracle, on held-out items, in one run.

Systems (names as they appear in every output):
    single:<model>     the model alone, one Worker turn
    selfloop:<model>   the model alone for the same turn budget: Worker, Verifier, Worker, …
                       (itself each time), stopping when its Verifier says ACCEPT
    random             uniform model and role each turn (the untrained head), over
                       `random_seeds` seeds; each item's numbers are its means over the
                       seeds. Always sampled: `greedy` does not apply to it (the argmax of
                       a uniform head is the first model and role, every time)
    head:<name>        each head given, sampling its decisions (argmax with `greedy`)
    moa                Mixture-of-Agents, one layer: every member's single answer, then the
                       strongest member (best single accuracy here, ties: pool order) writes
                       the final answer from them as a Worker (bench/moa.py). Its member
                       answers are the single runs themselves; only the aggregator's turn is
                       played. The aggregator is picked with the test labels
    vote               majority over the members' single answers (read as the task's scorer
                       reads them; code by its normalised text); a tie goes to the group holding
                       the earliest member in pool order. Free: it plays nothing new.
    best-per-task      for each task, the single member best on that task in this bench (ties:
                       pool order): what perfect task-aware routing to one member would score.
                       It picks with the test labels, so it is a reference, not a system.
    oracle             an item counts as solved if any single model solved it alone: the
                       best a per-question pick of one model for one Worker turn could do.
                       Not an upper bound: multi-turn systems (self-loops, heads, random)
                       can solve items no single model solves in one turn

Fixed routing (single, self-loop) goes through `episode.run_episode` like everything
else, with a `FixedSchedule` in place of the coordinator, so prompts, context fitting,
verdicts and the episode rules are exactly those of `trinity ask`. Every system shares one
pool and its rollout cache: the self-loop's first turn is the single run's only turn, and a
re-run (or a run resumed after Ctrl-C) makes no call that was made before.

Episode seeds are a function of (--seed, system, item), never of the item's position, so
adding items leaves the other episodes alone:
    seed = first 4 bytes (little endian) of sha256("<seed>:<stream>:<task>/<id>")
with stream "fixed" (single, self-loop: their decisions use no randomness), "random:<r>"
for random seed r, and "head" for every head (all heads see the same seeds).

Metrics of a system, overall and per task (`Metrics` below), over items: accuracy with a
95% Wilson interval, mean turns, mean pool calls, mean tokens (prompt + completion), mean pool seconds
(`mean_wall_s`) and mean cost per question. Pool seconds are what the pool calls took when
they were made (a cached or recorded reply keeps the latency measured when it was computed,
so a warm re-run or a replay reports the same); the coordinator's own seconds are not in them
(they are measured anew on every run, so a replayed table would not reproduce them: each
turn's `coordinator_s` is in episodes.jsonl). Cost is USD for priced models, None when none is priced.
The oracle and vote have no turns; their pool calls, tokens, seconds and cost are the sums
over all single runs of the item (what it takes to obtain); best-per-task's are those of the
single run it picks; moa's are its member turns (the single runs) plus its aggregator
turn. A system with several seeds (random) is first reduced to one row per item, each
number the mean over that item's seeds, so its `n` counts items and its interval
reflects how many questions were asked, not how many episodes: seeds of one item are not
independent samples. Its `correct` (the sum of the items' mean rewards) may be fractional;
the Wilson interval takes it as is, which is conservative, since a mean of rewards in
[0, 1] has at most a 0/1 reward's variance.

Paired test of each head (`paired`): against the best reported single member and the best
reported self-loop (overall accuracy, ties: pool order), on the items both answered, the
exact two-sided McNemar test (`stats.mcnemar_exact`): b items only the head got right, c
only the other; p = min(1, 2 P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2).

`systems` (`--systems`) keeps only some kinds of row; moa, vote, best-per-task and oracle
need the single runs, which are then played even when `single` itself is not listed (and
not reported). What bench does with a row (plays it, derives it from the single runs, plays
it once their best member is known, reports its gaps and selection, pairs it with which
rows) is said by the policy kind that made it (policies/kinds.py), never by its name here,
so a package's kind can be any of these rows.

A member whose calls fail (its backend raises) is a failed turn of each episode that asks it:
a warning says so at its first failure, and a row with no call that answered reads "failed"
in the tables (`"failed": true` in its Metrics), not 0.0%. A bench in which no member answered
at all ends with one error line and leaves no run. `use_cache` False (`--no-cache`) neither
reads nor writes the rollout cache.

Its run directory (bench.json, report.md, chart.png, selection.png, episodes.jsonl, run.json):
docs/files.md#bench-runs.

An episode that cannot run because the item does not fit the model's context is scored
wrong, with "error" saying so.
"""
