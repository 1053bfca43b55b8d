"""``polymnesia compare`` on folders that lm-evaluation-harness itself wrote.

Two tiny random models (seeds 0 and 1) are evaluated offline on polymnesia's local lm-eval
tasks through ``lm_eval.simple_evaluate`` and lm-eval's ``EvaluationTracker``, saved as the
``lm_eval`` command line saves them with ``--output_path DIR --log_samples``; no output is
written by hand. Tested with the installed lm-eval (0.4.13, the floor of the declared range).
"""

from __future__ import annotations

import csv
import json
import os
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from harness_helpers import make_prepared, verse

from polymnesia.cli.main import main
from polymnesia.errors import PolymnesiaError
from polymnesia.harness.docs import write_task_data
from polymnesia.harness.lm_eval_output import pair_runs, read_lm_eval
from polymnesia.metrics.uncertainty import mean_statistic, paired_bootstrap
from polymnesia.reports.lm_eval_compare import compare_lm_eval, mcnemar_exact

TASKS = ["poly_genre_en", "poly_genre_fr", "poly_continue_mc_de"]
N_DOCS = 12


def lm_eval_run(
    model: Path,
    tasks: list[str],
    docs: Path,
    out: Path,
    *,
    log_samples: bool = True,
    limit: int | None = None,
    num_fewshot: int | None = None,
) -> Path:
    """``lm_eval --model hf --model_args pretrained=MODEL --output_path OUT [--log_samples]``,
    as lm-eval's command line runs it (simple_evaluate, then the tracker saves the results and
    each task's samples)."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tracker = EvaluationTracker(output_path=str(out))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DISABLE_MULTIPROC", "1")  # lm-eval's bootstrap in process (harness/run.py)
        tm = TaskManager(
            include_path=str(docs), include_defaults=False, metadata={"polymnesia_data": str(docs)}
        )
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={model},dtype=float32",
            tasks=tasks,
            device="cpu",
            batch_size=8,
            limit=limit,
            num_fewshot=num_fewshot,
            task_manager=tm,
            log_samples=log_samples,
            evaluation_tracker=tracker,
            bootstrap_iters=0,
        )
    assert results is not None
    samples = results.pop("samples", None)
    tracker.save_results_aggregated(results=results, samples=samples)
    if log_samples:
        for task in results["configs"]:
            tracker.save_results_samples(task_name=task, samples=samples[task])
    return out.parent if out.suffix == ".json" else out  # NAME.json: NAME_DATE.json beside


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from polymnesia.testing import tiny_bpe, tiny_model

    root = tmp_path_factory.mktemp("lm_eval_compare")
    prep = make_prepared(root / "prep", ("en", "fr", "de"), n_test=N_DOCS)
    docs = root / "docs"
    write_task_data(prep, docs, [*TASKS, "poly_genre_de"], n=N_DOCS, n_fewshot=2)
    texts = [verse(lang, i) for lang in ("en", "fr", "de") for i in range(60)]
    tok = tiny_bpe(texts + ["law history wisdom prophets gospels acts pauline"], 300, repeat=30)
    models = {}
    for name, seed in (("model-a", 0), ("model-b", 1)):
        model: Any = tiny_model("mistral", len(tok), pad_token_id=tok.pad_token_id, seed=seed)
        models[name] = root / name
        model.save_pretrained(models[name])
        tok.save_pretrained(models[name])
    a, b = models["model-a"], models["model-b"]
    return {
        "a": lm_eval_run(a, TASKS, docs, root / "run-a"),
        "b": lm_eval_run(b, TASKS, docs, root / "run-b"),
        # --output_path ending in .json: lm-eval writes run-b-limit/b_DATE.json, samples beside
        "b_limit": lm_eval_run(b, TASKS[:1], docs, root / "run-b-limit" / "b.json", limit=8),
        "b_fewshot": lm_eval_run(b, TASKS[:1], docs, root / "run-b-1shot", limit=4, num_fewshot=1),
        "b_other": lm_eval_run(b, ["poly_genre_de"], docs, root / "run-b-de", limit=2),
        "a_again": lm_eval_run(a, TASKS[:1], docs, root / "run-a-twice", limit=2),
        # the same folder again, the newer run without --log_samples
        "a_bare": lm_eval_run(a, TASKS[:1], docs, root / "run-a-twice", limit=2, log_samples=False),
    }


def test_reads_lm_eval_layout(runs: dict[str, Path]) -> None:
    run = read_lm_eval(runs["a"])
    # lm-eval's own layout: OUT/MODEL_SANITIZED/results_DATE.json beside samples_TASK_DATE.jsonl
    assert run.results_file.parent.parent == runs["a"]
    assert run.results_file.name.startswith("results_")
    assert sorted(run.docs) == sorted(TASKS)
    assert all(len(run.docs[t]) == N_DOCS for t in TASKS)
    assert run.version == version("lm_eval") and run.model.endswith("model-a")


def test_reads_output_path_ending_in_json(runs: dict[str, Path]) -> None:
    run = read_lm_eval(runs["b_limit"])
    assert run.results_file.parent == runs["b_limit"] and run.results_file.name.startswith("b_")
    assert list(run.docs) == TASKS[:1] and len(run.docs[TASKS[0]]) == 8


def test_pairing_and_tests_match_the_logged_samples(runs: dict[str, Path]) -> None:
    a, b = read_lm_eval(runs["a"]), read_lm_eval(runs["b"])
    pairing = pair_runs(a, b, ("run-a", "run-b"))
    assert [(t.task, t.paired, t.unpaired) for t in pairing.tasks] == [
        (t, N_DOCS, 0) for t in sorted(TASKS)
    ]
    metrics = {(pm.task, pm.metric): pm for pm in pairing.metrics}
    assert set(metrics) == {(t, "acc") for t in TASKS} | {("poly_continue_mc_de", "acc_norm")}
    for (task, metric), pm in metrics.items():
        for run, values in ((a, pm.ref), (b, pm.other)):
            # the per-document values average to the score lm-eval reported
            assert values.mean() == pytest.approx(run.results["results"][task][f"{metric},none"])
            assert pm.binary
    rep, tables = compare_lm_eval([runs["a"], runs["b"]], margin=0.1)
    by_task = {(r[0], r[2]): r for r in tables[1].rows}
    pm = metrics[("poly_genre_en", "acc")]
    row = by_task[("poly_genre_en", "acc")]
    want = paired_bootstrap(mean_statistic(pm.other), mean_statistic(pm.ref))
    assert row[6].value == pytest.approx(want.effect) and row[6].low == pytest.approx(want.low)
    assert row[7] == pytest.approx(want.p_value)
    p, b_, c_ = mcnemar_exact(pm.ref.tolist(), pm.other.tolist())
    assert row[9] == pytest.approx(p) and b_ + c_ == int(np.sum(pm.ref != pm.other))
    holm = [r[8] for r in tables[1].rows]
    assert all(q >= r[7] - 1e-12 for q, r in zip(holm, tables[1].rows, strict=True))
    titles = [t.title for t in tables]
    assert titles[2:] == [
        "Paired differences by language",
        "Paired differences by family",
        "Paired differences by script",
        "Paired differences by resource level",
    ]
    langs = {r[0] for r in tables[2].rows}
    assert langs == {"English (en)", "French (fr)", "German (de)"}
    family = [r for r in tables[3].rows if r[2] == "acc"]
    assert family[0][0] == "Indo-European" and family[0][1] == 3 and family[0][9] == 3 * N_DOCS
    # the family's interval: the paired bootstrap stratified by task
    strata = [metrics[(t, "acc")] for t in sorted(TASKS)]
    want = paired_bootstrap(
        [mean_statistic(s.other) for s in strata], [mean_statistic(s.ref) for s in strata]
    )
    assert family[0][6].low == pytest.approx(want.low)
    assert family[0][6].high == pytest.approx(want.high)


def test_mcnemar_exact_by_hand() -> None:
    # 2 documents right in the first run only, 8 in the second only: 2 * P(X <= 2), X ~ B(10, .5)
    ref = [1, 1] + [0] * 8 + [1] * 5
    other = [0, 0] + [1] * 8 + [1] * 5
    p, b, c = mcnemar_exact(ref, other)
    assert (b, c) == (2, 8) and p == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert mcnemar_exact([1, 0], [1, 0]) == (1.0, 0, 0)


def test_cli_writes_markdown_html_csv(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    assert (
        main(["compare", str(runs["a"]), str(runs["b"]), "--out", str(out), "--margin", "0.1"]) == 0
    )
    printed = capsys.readouterr().out
    assert "## Paired differences by task" in printed and "Non-inferior (margin 0.1)" in printed
    assert (out / "compare.md").is_file() and "<table" in (out / "compare.html").read_text()
    with open(out / "compare_tasks.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and {"Difference_ci_low", "McNemar p (Holm)", "p (Holm)"} <= set(rows[0])
    names = sorted(p.name for p in out.glob("*.csv"))
    assert names == sorted(
        f"compare_{n}.csv"
        for n in ("pairing", "tasks", "by_language", "by_family", "by_script", "by_resource")
    )


def test_documents_that_do_not_pair_are_counted(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = runs["a"].parent / "cmp-limit"
    assert main(["compare", str(runs["a"]), str(runs["b_limit"]), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert (
        "[polymnesia] not paired: poly_genre_en: 8 documents paired, 4 not: 4 in one run only "
        "(different --limit); only paired documents are compared"
    ) in err


def test_bad_input_one_line_each(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    def error(*args: Path | str) -> str:
        assert main(["compare", *map(str, args), "--out", str(runs["a"].parent / "x")]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1, lines
        return lines[0]

    # the folder's newest run is the one without samples (an older one has them)
    (model_dir,) = runs["a_bare"].iterdir()
    assert len(list(model_dir.glob("results_*.json"))) == 2
    assert len({p.name.rsplit("_", 1)[1] for p in model_dir.glob("samples_*.jsonl")}) == 1
    assert "no samples_TASK_" in error(runs["a"], runs["a_bare"])
    assert "--log_samples" in error(runs["a_bare"], runs["a"])
    line = error(runs["a"], runs["b_other"])
    assert "have no task in common" in line and "poly_genre_de" in line
    line = error(runs["a"], runs["b_fewshot"])
    assert "poly_genre_en: 0 documents paired, 12 not: 8 in one run only" in line
    assert "4 with another prompt (few-shot seed or count)" in line
    polymnesia_run = runs["a"].parent / "not-lm-eval"
    polymnesia_run.mkdir()
    assert "cannot compare lm-eval output with polymnesia runs" in error(runs["a"], polymnesia_run)
    margin = error(polymnesia_run, polymnesia_run, "--margin", "0.1")
    assert "--margin applies to lm-eval output folders only" in margin
    assert "--tables selects tables of polymnesia runs" in error(
        runs["a"], runs["b"], "--tables", "x"
    )
    with pytest.raises(PolymnesiaError, match="--margin must be a positive number"):
        compare_lm_eval([runs["a"], runs["b"]], margin=-1)


def test_several_models_in_one_output_folder_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    both = tmp_path / "both"  # two models' runs under one --output_path
    both.mkdir()
    for key in ("a", "b"):
        (model_dir,) = runs[key].iterdir()
        os.symlink(model_dir, both / model_dir.name)
    with pytest.raises(PolymnesiaError, match="holds lm-eval results of 2 models"):
        read_lm_eval(both)
    assert json.loads(read_lm_eval(runs["a"]).results_file.read_text())["model_source"] == "hf"
