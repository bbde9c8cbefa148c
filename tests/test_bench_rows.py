"""What bench does with a row is the policy kind's to say (policies/kinds.py): a package's kind
is a row derived from the single runs, a row played by their best member, or a routed row
paired with the baselines through the same attributes the built-in kinds declare; bench/
itself reads no policy name (checked on its source)."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from trinity_cli.bench.runner import bench
from trinity_cli.messages import Role
from trinity_cli.policies.base import Policy
from trinity_cli.policies.bench_rows import BuiltOnSingles
from trinity_cli.policies.fixed import schedule_policy
from trinity_cli.policies.kinds import (
    BASELINES,
    BenchPlan,
    Derived,
    PolicyKind,
    Row,
    Run,
)
from trinity_cli.policies.registry import POLICIES, policy_names
from trinity_cli.pool.pool import Pool
from trinity_cli.tasks.items import TaskItem

from .test_bench import options, setup_files

BENCH = Path(__file__).resolve().parents[1] / "src" / "trinity_cli" / "bench"
# The modules that decide what a bench row is (matrix.py and procedures.py name the sample
# matrix's procedures, which are no policy's rows).
ROW_MODULES = ("__init__.py", "options.py", "systems.py", "moa.py", "stats.py", "runner.py")


@pytest.fixture
def register() -> Iterator[object]:
    """Register kinds under names, as a package's entry point would make them; forgotten after."""
    names: list[str] = []

    def add(name: str, kind: PolicyKind) -> None:
        POLICIES.register(name, kind)
        names.append(name)

    yield add
    for name in names:  # Registry has no unregister: a test's names must not leak into the next
        POLICIES._targets.pop(name, None)
        POLICIES._loaded.pop(name, None)


class MeanOfSingles(BuiltOnSingles):
    """Each item scores the mean reward of the members' single runs (a package's derived row)."""

    def derive(self, row: Row, items: Sequence[TaskItem],
               singles: Mapping[str, Sequence[Run]]) -> list[Derived[Run]]:
        out = []
        for item in items:
            runs = tuple(r for rs in singles.values() for r in rs if r.key == item.key)
            out.append(Derived(item.task, item.key, sum(r.reward for r in runs) / len(runs), runs))
        return out


class BestAlone(PolicyKind):
    """The best single member asked once more (a row that waits for the single runs)."""

    name = "best-alone"
    asks = False

    def rows(self, plan: BenchPlan) -> list[Row]:
        return [Row(self.name, self.name, by_best_single=True, stream="fixed")]

    def played_by(self, row: Row, member: str, models: Sequence[str]) -> Policy:
        return schedule_policy(models, member, (Role.WORKER,))


class AlwaysFirst(PolicyKind):
    """The pool's first member as a Worker, as a system under test: routed and paired."""

    name = "always-first"
    routes = True
    paired_against = BASELINES

    def make(self, pool: Pool) -> Policy:
        return schedule_policy(pool.names, pool.names[0], (Role.WORKER,))


def test_a_package_kind_can_be_a_row_derived_from_the_single_runs(tmp_path: Path, register) -> None:
    register("mean-of-singles", MeanOfSingles("mean-of-singles", "the mean single reward"))
    pool, tasks = setup_files(tmp_path)
    data = bench(options(pool, tasks, random_seeds=0, systems=["mean-of-singles", "oracle"])).data
    assert [s["name"] for s in data["systems"]] == ["oracle", "mean-of-singles"]  # the registry's order
    # m0 is right on A and B, m1 on C, m2 never: a third on every item. It costs every single run.
    mean = data["results"]["mean-of-singles"]["overall"]
    assert mean["accuracy"] == pytest.approx(1 / 3) and mean["n"] == 8
    assert mean["mean_turns"] is None and mean["mean_pool_calls"] == 3.0
    assert data["results"]["oracle"]["overall"]["accuracy"] == 1.0
    assert "single:m0" not in data["results"]  # played for the derived rows, not reported
    assert {e["system"] for e in data["episodes"]} == {"single:m0", "single:m1", "single:m2"}


def test_a_package_kind_can_be_played_by_the_best_single_member(tmp_path: Path, register) -> None:
    register("best-alone", BestAlone())
    pool, tasks = setup_files(tmp_path)
    data = bench(options(pool, tasks, random_seeds=0, systems=["best-alone"])).data
    (row,) = data["systems"]
    assert row["name"] == "best-alone" and row["model"] == "m0"  # m0: 5/8, the best single
    assert data["results"]["best-alone"]["overall"]["accuracy"] == 5 / 8
    mine = [e for e in data["episodes"] if e["system"] == "best-alone"]
    assert len(mine) == 8 and all(e["cached"] for e in mine)  # the single run's own calls


def test_a_package_kind_can_be_a_routed_row_paired_with_the_baselines(tmp_path: Path, register) -> None:
    register("always-first", AlwaysFirst())
    pool, tasks = setup_files(tmp_path)
    data = bench(options(pool, tasks, random_seeds=0, systems=["single", "always-first", "oracle"])).data
    gap = data["gaps"]["always-first"]["overall"]
    assert gap == {"best_single": "single:m0", "vs_best_single": 0.0, "vs_oracle": pytest.approx(5 / 8 - 1)}
    assert sum(data["selection"]["always-first"]["overall"]["models"].values()) == pytest.approx(1.0)
    paired = data["paired"]["always-first"]
    assert list(paired) == ["vs_best_single", "vs_best_selfloop", "vs_agree", "vs_best_sc"]
    assert paired["vs_best_single"] == {"other": "single:m0", "n": 8, "b": 0, "c": 0, "p_value": 1.0}
    assert paired["vs_best_selfloop"] is None and paired["vs_agree"] is None  # not benched here
    assert "oracle" not in data["paired"] and "oracle" not in data["gaps"]


def test_the_built_in_kinds_declare_what_their_rows_are() -> None:
    from trinity_cli.policies import bench_rows as rows
    from trinity_cli.policies import kinds

    assert [k.name for k in (rows.SINGLE, rows.SELFLOOP, rows.SC, kinds.AGREE) if k.single_runs] == ["single"]
    assert {k.name for k in (kinds.COORDINATOR, rows.RANDOM, kinds.CONDUCTOR) if k.routes} == {
        "coordinator", "random", "conductor"}
    assert kinds.CONDUCTOR.plays_workflows and rows.MOA.aggregates_singles
    assert all(k.needs_singles for k in (rows.MOA, rows.VOTE, rows.BEST_PER_TASK, rows.ORACLE))
    # Answering kinds in kinds.py, bench's own rows in bench_rows.py: each name where its kind says.
    assert all(k.asks for k in (kinds.COORDINATOR, kinds.AGREE, kinds.CONDUCTOR))
    assert not any(k.asks for k in (rows.SINGLE, rows.SELFLOOP, rows.SC, rows.RANDOM, rows.MOA, rows.VOTE,
                                    rows.BEST_PER_TASK, rows.ORACLE))
    row = Row("random", "random", seeds=2, stream="random", stream_per_seed=True)
    assert [row.seed_stream(r) for r in range(2)] == ["random:0", "random:1"]
    assert Row("single:m0", "single").seed_stream(3) == "fixed"


def _literals(path: Path) -> Iterator[tuple[int, str]]:
    """The string constants of a module's code, f-strings' parts included; docstrings and the
    names of options (`option("sc")`: a flag, not a row) left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node.body[0].value) for node in ast.walk(tree)
               if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
               and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    skipped |= {id(arg) for node in ast.walk(tree) if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name) and node.func.id == "option" for arg in node.args}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            yield node.lineno, node.value


def test_bench_reads_no_policy_name() -> None:
    """A row is what its kind says (`Row.owner`), never what its name is: no policy name (nor a
    row name built from one, `single:` ...) is a string in the code of bench's row modules."""
    names = set(policy_names(built_in=True)) | {"head"}
    found = [f"{module}:{line}: {text!r}" for module in ROW_MODULES for line, text in _literals(BENCH / module)
             if text in names or any(text.startswith(f"{name}:") for name in names)]
    assert found == []


def test_the_source_check_finds_a_policy_name(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Rows: single, vote."""\n\n\ndef f(s):\n'
                      '    return option("sc") if s.kind == "vote" else f"single:{s}"\n')
    assert sorted(text for _, text in _literals(module)) == ["single:", "vote"]
