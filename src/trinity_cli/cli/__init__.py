"""Typer commands: parse options, call one library function, render the result.

Nothing heavy is imported at module level, so `trinity --help` answers at once. The console
entry point that runs `app` (errors as one line and an exit code) is entry.py.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
import typer.core

app = typer.Typer(
    name="trinity",
    help="Turn a pool of language models into one: an evolved coordinator picks a model and a role "
    "(thinker, worker, verifier) at every turn.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

PoolOpt = Annotated[str | None, typer.Option("--pool", "-p", help="Pool file or name (default: local).")]
HeadOpt = Annotated[
    str | None, typer.Option("--head", help="Head name or directory, or 'untrained' (default: shipped head).")
]
BackboneOpt = Annotated[
    str | None,
    typer.Option(help="Coordinator backbone: smollm2-135m, qwen2.5-coder-0.5b, gguf:PATH, "
                 "or a HF id in your cache (default: the head's)."),
]
DeviceOpt = Annotated[str, typer.Option(help="Coordinator device: auto, cpu, cuda or mps.")]
ParallelOpt = Annotated[int | None, typer.Option(
    min=1, help="Episodes to play at once (default: the pool file's parallel, else 1); results do not depend on it.")]
RayOpt = Annotated[str | None, typer.Option(
    "--ray", metavar="[ADDRESS]",
    help="Play episodes on Ray actors: alone (or 'local'), a Ray instance started for this run; 'auto', the "
         "cluster this machine joined; HOST:PORT, that head node. Needs the ray extra.")]
# Options whose value may be left out, and the value they then take: Typer has no optional
# option values, so entry.main fills them in before parsing.
OPTIONAL_VALUES = {"--ray": "local"}
RayWorkersOpt = Annotated[int | None, typer.Option(
    min=1, help="With --ray: actors to start, one CPU each (default: one per node).")]
# The progress flags, the same on every command that shows progress (ask, evolve, bench):
# -q leaves stderr to errors alone; --json puts the run's JSON record on stdout instead of
# the plain result (answer, head directory, tables).
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Nothing on stderr but errors: no progress.")]
KindFromOpt = Annotated[str, typer.Option(
    help="The answer kind IFEval's and IFBench's items are played as: preset (their family's) or detect (the kind "
         "`trinity ask` reads from the prompt, so the row says what ask gives).")]
ConductorOpt = Annotated[str | None, typer.Option(
    help="Conductor mode: the model that writes workflows (default: the pool file's conductor, else its first "
         "member).")]
ConductorDepthOpt = Annotated[int, typer.Option(
    min=0, help="Conductor mode: how deep a workflow may nest by naming the conductor itself (0: never).")]


def _mode_help() -> str:
    from trinity_cli.policies.registry import policy_names, summaries

    said = summaries()
    return ("Who answers, a policy's name: " + "; ".join(f"{name}: {said.get(name, '')}".rstrip(": ")
                                                         for name in policy_names(asking=True))
            + ". Default: coordinator, or what the pool file's router names (agree).")


def _systems_help() -> str:
    from trinity_cli.policies.registry import in_bench, policy_names

    return (f"Only these rows, comma-separated policy names: {', '.join(policy_names())} (default: "
            f"{', '.join(kind.name for kind in in_bench())}; `trinity pools` says what each is).")


# Option help that lists names from the registries, made when help is shown, not when the
# command line starts (reading installed packages' entry points takes a moment).
LATE_HELP = {("ask", "mode"): _mode_help, ("bench", "systems"): _systems_help}


class LateHelp(typer.core.TyperCommand):
    """A command whose options' help in `LATE_HELP` is written when its help is shown."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for param in self.params:
            make = LATE_HELP.get((self.name or "", param.name or ""))
            if make is not None:
                param.help = make()  # type: ignore[attr-defined]  # an option (only options are named there)
        super().format_help(ctx, formatter)


@app.command(cls=LateHelp)
def ask(
    question: Annotated[str | None, typer.Argument(help="The question; read from stdin when omitted or '-'.")] = None,
    pool: PoolOpt = None,
    head: HeadOpt = None,
    max_turns: Annotated[int | None, typer.Option(
        min=1, max=50, help="Turn budget (default: the one the head was evolved with, else 5).")] = None,
    exclude: Annotated[list[str] | None, typer.Option(help="Model to route around (repeatable).")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the coordinator's sampling.")] = 0,
    greedy: Annotated[bool | None, typer.Option(
        "--greedy/--sample",
        help="Take the head's most likely model and role, or sample them from the seed (default: the mode "
             "measured best: docs/history/head-campaign.md).")] = None,
    show_work: Annotated[bool, typer.Option(
        "--show-work", help="Print the whole answering reply (working, program, output), not the answer alone."
    )] = False,
    backbone: BackboneOpt = None,
    device: DeviceOpt = "auto",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the rollout cache.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run as JSON on stdout instead of the answer.")] = (
        False
    ),
    quiet: QuietOpt = False,
    mode: Annotated[str | None, typer.Option(
        help="Who answers, a policy's name (listed here from the registry when help is shown).")] = None,
    conductor: ConductorOpt = None,
    conductor_depth: ConductorDepthOpt = 1,
    warm: Annotated[bool, typer.Option(
        "--warm/--no-warm", help="Answer through a running `trinity serve` of the same pool and head, whose "
                                 "models stay loaded (default), or always in this process.")] = True,
    keep_warm: Annotated[float | None, typer.Option(
        min=1, help="With no warm server, start one in the background that stays up this many seconds after "
                    "its last question, and answer through it.")] = None,
    kind: Annotated[str | None, typer.Option(
        help="The kind of answer wanted: freeform (a whole answer: proof, explanation, writing), short, numeric, "
             "choice, math, exact, code, or a package's (`trinity pools`). Default: what the question's "
             "wording asks for.")] = None,
    system: Annotated[str | None, typer.Option(
        "--system", "-s", help="A system prompt: free-form drafts are asked under it (other kinds show it as "
                               "earlier conversation).")] = None,
    continue_: Annotated[bool, typer.Option(
        "--continue", "-c", help="Continue the latest conversation (a chat or ask run): the earlier messages are "
                                 "the question's context, and the exchange is saved in that run.")] = False,
    conversation: Annotated[str | None, typer.Option(
        metavar="RUN", help="Continue conversation RUN (a chat or ask run) as --continue does.")] = None,
) -> None:
    """Ask the coordinated pool a question; the answer alone goes to stdout. Text piped with a question
    is asked with it (the text first)."""
    from trinity_cli.ask import AskOptions, kind_of_wording, read_piped
    from trinity_cli.render import terminal

    options = AskOptions(pool=pool, head=head, backbone=backbone, device=device, max_turns=max_turns,
                         seed=seed, exclude=exclude or [], greedy=greedy, use_cache=not no_cache, mode=mode,
                         conductor=conductor, conductor_depth=conductor_depth, kind=kind, system=system)
    question, wording = read_piped(question)
    options = kind_of_wording(options, wording)
    continuing = conversation or ("latest" if continue_ else None)
    server = None
    if warm:
        from trinity_cli.serve import warm as warm_mod

        server = warm_mod.find(options)
        if server is None and keep_warm is not None:
            server = warm_mod.start(options, keep_warm)
    with terminal.LiveTurns(quiet=quiet) as live:
        if server is not None:  # the answering code is not even imported: the warm server answers
            result = warm_mod.ask_warm(question, options, server, live, continuing)
        elif continuing is not None:
            from trinity_cli.ask.conversation import continue_conversation

            result = continue_conversation(continuing, question, options, live)
        else:
            from trinity_cli.ask.answer import ask as run_ask

            result = run_ask(question, options, live)
    terminal.ask_done(result, as_json=as_json, quiet=quiet, show_work=show_work)


@app.command()
def chat(
    pool: PoolOpt = None,
    head: HeadOpt = None,
    mode: Annotated[str | None, typer.Option(
        help="Who answers, a policy's name (`trinity ask --help` lists them; /mode changes it). "
             "Default: as ask.")] = None,
    kind: Annotated[str | None, typer.Option(
        help="The answer kind of every message (/kind changes it). Default: read from each message.")] = None,
    system: Annotated[str | None, typer.Option("--system", "-s", help="A system prompt for the conversation.")] = None,
    continue_: Annotated[bool, typer.Option(
        "--continue", "-c", help="Continue the latest conversation (a chat or ask run) instead of a new one.")] = False,
    conversation: Annotated[str | None, typer.Option(metavar="RUN", help="Continue conversation RUN.")] = None,
    max_turns: Annotated[int | None, typer.Option(min=1, max=50, help="Turn budget of each message.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the coordinator's sampling.")] = 0,
    backbone: BackboneOpt = None,
    device: DeviceOpt = "auto",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the rollout cache.")] = False,
    quiet: QuietOpt = False,
) -> None:
    """A conversation at the prompt, the models loaded once: each answer streamed, each exchange saved in one run
    (Ctrl-C stops an answer, Ctrl-D or /exit leaves, /help lists the commands)."""
    from trinity_cli.ask import AskOptions
    from trinity_cli.chat.session import ChatSession
    from trinity_cli.render import chat as render_chat

    options = AskOptions(pool=pool, head=head, backbone=backbone, device=device, max_turns=max_turns, seed=seed,
                         use_cache=not no_cache, mode=mode, kind=kind, system=system)
    with ChatSession(options, conversation or ("latest" if continue_ else None),
                     progress=render_chat.loading) as session:
        render_chat.converse(session, quiet=quiet)


@app.command()
def inspect(
    run: Annotated[str | None, typer.Argument(help="Run id (run-N or N); omit to list runs.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Export the run as JSON on stdout.")] = False,
    episode: Annotated[
        str | None, typer.Option(help="For an evolve run: replay episode K of generation GEN, as GEN/K.")
    ] = None,
    item: Annotated[str | None, typer.Option(
        metavar="ID", help="For a bench run: replay item ID (TASK/ID, or the ID alone when one task has it), every "
                           "row's episodes on it turn by turn.")] = None,
    serve: Annotated[bool, typer.Option(
        "--serve", help="Browse the runs in a web page served on this machine until Ctrl-C (at RUN's page "
                        "when given): tables, charts, every episode, runs compared.")] = False,
    port: Annotated[int, typer.Option(min=0, max=65535, help="With --serve: the TCP port (0: a free one).")] = 0,
    host: Annotated[str, typer.Option(
        help="With --serve: the address to listen on; anything but loopback lets others read every run.")] = (
        "127.0.0.1"),
    open_browser: Annotated[bool, typer.Option("--open", help="With --serve: open the page in a browser.")] = False,
    html: Annotated[str | None, typer.Option(
        metavar="DIR", help="Write RUN's pages as a folder that opens in a browser from disk, with no server "
                            "and no network.")] = None,
    compare: Annotated[str | None, typer.Option(
        metavar="RUN2", help="With RUN and --serve or --html: RUN compared with RUN2 (two bench, evolve or ask "
                             "runs): the items whose result changed, or the settings and curves.")] = None,
) -> None:
    """List runs, or replay one turn by turn; --serve browses them in a web page, --html exports one."""
    from trinity_cli.render import console, results, terminal
    from trinity_cli.runs.store import RunStore

    store = RunStore()
    if compare is not None and (run is None or not (serve or html is not None)):
        raise typer.BadParameter("the viewer draws a comparison: trinity inspect RUN --compare RUN2 --serve "
                                 "(or --html DIR)", param_hint="--compare")
    if item is not None and (serve or html is not None):
        raise typer.BadParameter("an item replays in the terminal: trinity inspect RUN --item ID (the viewer opens "
                                 "it from the run's grid)", param_hint="--item")
    if serve or html is not None:
        from pathlib import Path

        from trinity_cli.render import viewer as render_viewer

        if html is not None:
            if run is None:
                raise typer.BadParameter("name the run to export: trinity inspect RUN --html DIR", param_hint="--html")
            from trinity_cli.viewer.export import export_compare, export_run

            render_viewer.exported(export_run(run, Path(html), store) if compare is None
                                   else export_compare(run, compare, Path(html), store))
        if serve:
            from trinity_cli.viewer.web import serve as serve_viewer

            serve_viewer(host=host, port=port, run=run, store=store, progress=render_viewer.viewer_progress,
                         open_browser=open_browser, compare=compare)
        return
    if item is not None:
        if run is None:
            raise typer.BadParameter("name the bench run: trinity inspect RUN --item ID", param_hint="--item")
        found = store.bench_item(run, item)
        if as_json:
            console.out.print_json(json.dumps(found))
        else:
            terminal.replay_bench_item(found)
        return
    if run is not None and episode is not None:
        title, models, transcript, seed = store.evolve_episode(run, episode)
        if as_json:
            console.out.print_json(json.dumps(transcript))
        else:
            terminal.replay_transcript(title, models, transcript, seed)
        return
    if run is None:
        runs = store.list()
        if as_json:
            console.out.print_json(json.dumps([r.__dict__ for r in runs]))
        else:
            terminal.runs_table(runs)
        return
    record = store.load(run)
    if as_json:
        console.out.print_json(json.dumps(record))
    elif record.get("kind") == "ask":
        terminal.replay_ask(record)
    elif record.get("kind") == "chat":
        from trinity_cli.render import chat as render_chat

        render_chat.replay_chat(record)
    elif record.get("kind") == "evolve":
        results.replay_evolve(record)
    elif record.get("kind") == "bench":
        results.replay_bench(record)
    else:
        console.out.print_json(json.dumps(record))


# Long on purpose: two thirds of it are the command's option declarations (Typer reads them
# from the signature); the body is parse -> one call -> render.
from trinity_cli.cli.evolve import evolve as _evolve  # noqa: E402 - its options: evolve/settings.py

app.command(name="evolve")(_evolve)  # registered here, in order


@app.command(cls=LateHelp)
def bench(
    pool: PoolOpt = None,
    tasks: Annotated[str, typer.Option(help="Held-out mix (test splits), e.g. gsm8k:test:50,mmlu:test:100.")] = (
        "gsm8k:test:100,arc-challenge:test:100,mbpp:test:100"
    ),
    head: Annotated[list[str] | None, typer.Option(
        "--head", help="Head to benchmark, name or directory (repeatable; default: the shipped head if it fits).")
    ] = None,
    max_turns: Annotated[int | None, typer.Option(
        min=1, max=50, help="Turn budget of self-loops, random, agree and heads (default: each head's trained "
                            "max_turns; self-loops and random get the first head's, agree 4 as in ask).")] = None,
    random_seeds: Annotated[int, typer.Option(min=0, help="Seeds of random routing (0: leave it out).")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of item sampling and episodes.")] = 0,
    decisions: Annotated[str | None, typer.Option(
        help="How heads take decisions: sampled, greedy (the most likely model and role), or both (two rows "
             "per head). Default: as `trinity ask` does.")] = None,
    systems: Annotated[str | None, typer.Option(
        help="Only these rows, comma-separated policy names (listed here from the registry when help is "
             "shown).")] = None,
    sc: Annotated[list[str] | None, typer.Option(
        "--sc", help="Self-consistency rows: MEMBER@K, all@K or best@K (repeatable; default best, K = the "
                     "head's turn budget).")] = None,
    backbone: BackboneOpt = None,
    device: DeviceOpt = "auto",
    parallel: ParallelOpt = None,
    ray: RayOpt = None,
    ray_workers: RayWorkersOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print bench.json on stdout instead of the tables.")] = (
        False
    ),
    quiet: QuietOpt = False,
    conductor: ConductorOpt = None,
    conductor_depth: ConductorDepthOpt = 1,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Do not read or write the rollout cache: every call reaches the backend as its code is "
                           "now (while developing one).")] = False,
    kind_from: KindFromOpt = "preset",
) -> None:
    """Benchmark heads against each pool model alone, self-loops, self-consistency, agreement, random routing,
    mixture-of-agents, vote, best-per-task and the oracle."""
    from trinity_cli.bench.options import BenchOptions
    from trinity_cli.bench.runner import bench as run_bench
    from trinity_cli.evaluators.ray_cluster import RayOptions
    from trinity_cli.render import progress as render_progress
    from trinity_cli.render import results

    cluster = RayOptions.from_cli(ray, ray_workers)
    kinds = [k.strip() for k in systems.split(",") if k.strip()] if systems else None
    options = BenchOptions(pool=pool, tasks=tasks, heads=head, max_turns=max_turns, random_seeds=random_seeds,
                           seed=seed, decisions=decisions, backbone=backbone, device=device, systems=kinds, sc=sc,
                           conductor=conductor, conductor_depth=conductor_depth, use_cache=not no_cache,
                           kind_from=kind_from)
    with render_progress.BenchProgress(quiet=quiet) as progress:
        result = run_bench(options, progress=progress, parallel=parallel, ray=cluster)
    results.bench_done(result, as_json=as_json, quiet=quiet)


@app.command()
def matrix(
    pool: PoolOpt = None,
    tasks: Annotated[str, typer.Option(help="Tasks, comma-separated.")] = "gsm8k,arc-challenge,mbpp",
    split: Annotated[str, typer.Option(help="Split the items come from: train, val or test.")] = "test",
    n: Annotated[int, typer.Option(min=1, help="Items per task.")] = 20,
    first: Annotated[int, typer.Option(
        min=1, help="Rank of each task's first item (101 with --n 100: the items drawn after the first 100).")] = 1,
    k: Annotated[int, typer.Option(min=1, help="Replies per member and item: the greedy one and k-1 fresh.")] = 4,
    members: Annotated[str | None, typer.Option(
        help="Only these members, comma-separated, in this order (default: the pool's, in pool order).")] = None,
    budget: Annotated[int, typer.Option(min=1, help="Calls the agree procedures may make.")] = 5,
    complete_agree: Annotated[bool, typer.Option(
        help="Also the fresh attempts the pool-order agree asks for beyond k replies (at --budget calls).")] = False,
    seed: Annotated[int, typer.Option(help="Seed of item sampling (bench's default: 0).")] = 0,
    out: Annotated[str | None, typer.Option(
        help="Also write the matrix and its table to this JSON file (what evolve --init-labels reads).")] = None,
    kind_from: KindFromOpt = "preset",
    quiet: QuietOpt = False,
) -> None:
    """Ask every member for k replies to each item, then score every fixed procedure on them (no further call)."""
    from pathlib import Path

    from trinity_cli.bench import drafts, signals
    from trinity_cli.bench.matrix import MatrixOptions, sample_matrix
    from trinity_cli.bench.procedures import markdown
    from trinity_cli.render import console
    from trinity_cli.render import progress as render_progress

    chosen = tuple(m.strip() for m in members.split(",") if m.strip()) if members else ()
    options = MatrixOptions(pool=pool, tasks=tasks, split=split, n=n, first=first, k=k, members=chosen, budget=budget,
                            seed=seed, complete_agree=complete_agree, kind_from=kind_from)
    with render_progress.MatrixProgress(quiet=quiet) as progress:
        result = sample_matrix(options, out=Path(out) if out else None, progress=progress)
    if "drafts" in result:  # free-form items: votes and agreement mean nothing there
        text = drafts.markdown(result["drafts"], result["mix"])
    else:
        text = (markdown(result) + "\n\nWhat a greedy reply shows (bench/signals.py):\n\n"
                + signals.markdown(result["signals"]))
    console.out.print(text, markup=False, highlight=False, soft_wrap=True)


@app.command()
def pools(
    check: Annotated[str | None, typer.Option(
        "--check", metavar="FILE", help="Read this pool file (or pool name) as a run would: every member checked "
                                        "against its kind, its backend made (no model loads).")] = None,
) -> None:
    """List the pools and their models, then the model kinds, policies, answer kinds and task families
    installed (built in or from a package)."""
    from trinity_cli import catalog
    from trinity_cli.render import terminal

    if check is not None:
        terminal.pool_checked(catalog.check_pool(check))
    else:
        terminal.catalog_list(catalog.catalog())


@app.command()
def serve(
    pool: PoolOpt = None,
    head: HeadOpt = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free port).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to listen on; 0.0.0.0 opens it to the network.")] = "127.0.0.1",
    api_key_env: Annotated[
        str | None, typer.Option(help="Require 'Authorization: Bearer TOKEN', TOKEN read from this env variable.")
    ] = None,
    max_turns: Annotated[int | None, typer.Option(
        min=1, max=50, help="Turn budget when a request sets none (default: the head's trained one, else 5).")] = None,
    backbone: BackboneOpt = None,
    device: DeviceOpt = "auto",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the rollout cache.")] = False,
    conductor: ConductorOpt = None,
    conductor_depth: ConductorDepthOpt = 1,
    idle_exit: Annotated[float | None, typer.Option(
        min=1, help="Stop after this many seconds without a request (default: run until Ctrl-C).")] = None,
) -> None:
    """Serve the coordinated pool as one OpenAI-compatible model (/v1/chat/completions) until Ctrl-C."""
    from trinity_cli.render import terminal
    from trinity_cli.serve.run import run as run_server
    from trinity_cli.serve.service import ServeOptions

    run_server(ServeOptions(pool=pool, head=head, host=host, port=port, api_key_env=api_key_env,
                            max_turns=max_turns, backbone=backbone, device=device, use_cache=not no_cache,
                            conductor=conductor, conductor_depth=conductor_depth, idle_exit_s=idle_exit),
               terminal.serve_progress)


@app.callback()
def main(
    replay_only: Annotated[bool, typer.Option(
        "--replay-only", help="Answer every model call from the caches (imported recordings): a call they do not "
                              "hold ends the command, naming it, instead of loading a model. Also "
                              "TRINITY_REPLAY_ONLY=1.")] = False,
) -> None:
    """Options that apply to every command."""
    if replay_only:
        import os

        from trinity_cli.paths import REPLAY_ONLY_ENV

        os.environ[REPLAY_ONLY_ENV] = "1"


from trinity_cli.cli.recordings import recordings_app  # noqa: E402 - registers after `app` exists

app.add_typer(recordings_app, name="recordings")



def option_flags() -> dict[str, str]:
    """Parameter name -> the flag that sets it, over every command (`--input-dims` for
    "input_dims"): how entry.py words the `errors.option` marks of library messages."""
    flags: dict[str, str] = {}
    group = typer.main.get_command(app)
    commands = getattr(group, "commands", {}).values()
    for command in commands:
        for param in command.params:
            longs = [o for o in param.opts if o.startswith("--")]
            # By type name: Typer may bring its own copy of click.
            if getattr(param, "param_type_name", "") == "option" and longs and param.name:
                flags.setdefault(param.name, longs[0])
    return flags
