"""lm-eval runs on a local model folder: same accuracy as polymnesia's scorer; Score records; the
stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness_helpers import make_prepared, verse

from polymnesia.errors import PolymnesiaError
from polymnesia.harness.docs import write_task_data
from polymnesia.harness.run import results_to_scores, run_lm_eval, task_lang
from polymnesia.io import read_jsonl
from polymnesia.results import Score, score_from_dict
from polymnesia.tokenizers.bpe import IM_END


def test_results_to_scores_by_hand() -> None:
    results = {
        "results": {
            "poly_genre_fr": {"alias": "poly_genre_fr", "acc,none": 0.5, "acc_stderr,none": 0.1},
            "xquad_de": {"f1,none": 40.0, "f1_stderr,none": "N/A", "exact,strict": 30.0},
        },
        "n-samples": {"poly_genre_fr": {"original": 12, "effective": 10}},
        "n-shot": {"poly_genre_fr": 0},
        "config": {"lm_eval_version": "0.4.13"},
    }
    got = results_to_scores(results, "P2", size="tiny")
    assert got == [
        Score(
            "P2",
            "fr",
            "acc",
            0.5,
            task="poly_genre_fr",
            size="tiny",
            stderr=0.1,
            extra={
                "filter": "none",
                "n_samples": 10,
                "num_fewshot": 0,
                "lm_eval_version": "0.4.13",
            },
        ),
        Score(
            "P2",
            "de",
            "f1",
            40.0,
            task="xquad_de",
            size="tiny",
            extra={"filter": "none", "lm_eval_version": "0.4.13"},
        ),
        Score(
            "P2",
            "de",
            "exact/strict",
            30.0,
            task="xquad_de",
            size="tiny",
            extra={"filter": "strict", "lm_eval_version": "0.4.13"},
        ),
    ]
    assert score_from_dict(got[0].to_dict()) == got[0]


def test_score_stderr_field() -> None:
    with pytest.raises(PolymnesiaError, match="'stderr' must be a number"):
        score_from_dict({"model": "a", "lang": "en", "metric": "acc", "value": 1, "stderr": "N/A"})


def test_task_lang() -> None:
    assert task_lang("poly_ifeval_ja") == "ja"
    assert task_lang("mmlu_anatomy") == "en" and task_lang("hellaswag") == "en"
    assert task_lang("xquad_de") == "de" and task_lang("mlqa_en_en") == "en"
    assert task_lang("xlsum_amharic_prompt_1") == "am" and task_lang("foo_bar") == "und"
    assert task_lang("xlsum_amharic_prompt_1", {"xlsum_amharic_prompt_1": "ha"}) == "ha"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, make_tok_model: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("harness_run")
    prep = make_prepared(root / "prep", ("en", "fr"), n_test=24)
    docs = root / "docs"
    write_task_data(prep, docs, ["poly_genre_en", "poly_continue_mc_fr"], n=24, n_fewshot=2)
    texts = [verse(lang, i) for lang in ("en", "fr") for i in range(60)]
    tok, model = make_tok_model(texts + ["law history wisdom prophets gospels acts pauline"])
    folder = root / "model"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return {"root": root, "prep": prep, "docs": docs, "tok": tok, "model": model, "folder": folder}


def test_lm_eval_accuracy_equals_polymnesia_scorer(setup: dict[str, Any], capfd) -> None:  # type: ignore[no-untyped-def]
    """Same items, same model: lm-eval's acc and per-item log-likelihoods = answer_logprobs."""
    from polymnesia.evaluation.generation import answer_logprobs

    tasks = ["poly_genre_en", "poly_continue_mc_fr"]
    res = run_lm_eval(
        setup["folder"],
        tasks,
        setup["root"] / "out",
        task_data=setup["docs"],
        batch_size=4,
        device="cpu",
        dtype="float32",
    )
    err = capfd.readouterr().err  # output to a file: no request progress bars, no expected warnings
    assert "Running loglikelihood requests" not in err and "Tokenizing inputs" not in err
    assert "Custom kwargs" not in err
    assert (setup["root"] / "out" / "results.json").exists()
    for task in tasks:
        docs = read_jsonl(setup["docs"] / f"{task}.test.jsonl")
        ours = [
            answer_logprobs(
                setup["model"],
                setup["tok"],
                d["prompt"],
                [c.removesuffix(IM_END) for c in d["choices"]],
            )
            for d in docs
        ]
        pred = [max(range(len(lp)), key=lp.__getitem__) for lp in ours]
        acc = sum(p == d["gold"] for p, d in zip(pred, docs, strict=True)) / len(docs)
        assert res["results"][task]["acc,none"] == pytest.approx(acc, abs=1e-12)
        for s in res["samples"][task]:
            # lm-eval moves the prompt's trailing "\n" into the continuation, so its sums add
            # log p("\n" | prompt) -- the same number for every choice of a document
            theirs = [float(r[0]) for r in s["filtered_resps"]]
            diffs = [a - b for a, b in zip(theirs, ours[s["doc_id"]], strict=True)]
            assert diffs == pytest.approx([diffs[0]] * len(diffs), abs=1e-3)
            assert diffs[0] < 0
        assert (setup["root"] / "out" / f"samples_{task}.jsonl").exists()
    assert len({p for p in pred}) > 1 or acc > 0  # the model does not answer one constant


def test_stage_evaluate_harness(setup: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    from polymnesia.pipeline.stage import StageContext, StageSpec
    from polymnesia.stages.evaluate_harness import EvaluateHarness, EvaluateHarnessParams

    stage_dir = tmp_path / "stage_model"
    shutil.copytree(setup["folder"], stage_dir / "model")
    p = EvaluateHarnessParams(
        label="P1",
        tasks=["poly_genre_fr", "poly_ifeval_en"],
        limit=3,
        docs_per_task=6,
        fewshot_docs=1,
        batch_size=2,
        device="cpu",
        dtype="float32",
        offline=True,
        max_gen_toks=8,
    )
    out = tmp_path / "out"
    ctx = StageContext(
        StageSpec("eval", "evaluate_harness", p), out, {"model": stage_dir, "data": setup["prep"]}
    )
    scores = EvaluateHarness().run(ctx)
    by = {(s.task, s.metric): s for s in scores}
    assert by[("poly_genre_fr", "acc")].lang == "fr"
    assert by[("poly_genre_fr", "acc")].stderr is not None
    assert by[("poly_genre_fr", "acc")].extra["n_samples"] == 3
    assert by[("poly_ifeval_en", "prompt_level_strict_acc")].lang == "en"
    assert 0.0 <= by[("poly_ifeval_en", "inst_level_loose_acc")].value <= 1.0
    assert (out / "lm_eval" / "results.json").exists()
    # per-document evidence: an interval for each score that is the mean over documents
    # (IFEval's instruction-level accuracy is pooled over instructions: none)
    from polymnesia.items import read_items

    sets = {s.task: s for s in read_items(out / "items.jsonl")}
    assert sets["poly_genre_fr"].kind == "docs" and sets["poly_genre_fr"].n == 3
    acc = by[("poly_genre_fr", "acc")]
    assert acc.ci_low is not None and acc.ci_low <= acc.value <= acc.ci_high
    assert "prompt_level_strict_acc" in sets["poly_ifeval_en"].columns
    assert by[("poly_ifeval_en", "inst_level_loose_acc")].ci_low is None
    assert len(read_jsonl(out / "task_data" / "poly_ifeval_en.test.jsonl")) == 6
    for line in read_jsonl(out / "lm_eval" / "samples_poly_ifeval_en.jsonl"):
        assert line["arguments"][0][1]["max_gen_toks"] == 8


def test_stage_params_refuse_online_task_offline() -> None:
    from polymnesia.stages.evaluate_harness import EvaluateHarnessParams

    with pytest.raises(PolymnesiaError, match="mmlu need the Hugging Face Hub, which is offline"):
        EvaluateHarnessParams(label="x", tasks=["mmlu", "poly_genre_en"], offline=True)
    ok = EvaluateHarnessParams(label="x", tasks=["mmlu"], offline=False)
    assert ok.tasks == ["mmlu"]


def test_lm_eval_warnings_are_prefixed_lines_without_the_expected_ones() -> None:
    import io
    import logging

    from polymnesia.harness.run import lm_eval_log

    out, logger = io.StringIO(), logging.getLogger("lm_eval.api.task")
    root = logging.getLogger("lm_eval")
    with lm_eval_log(out) as handler:
        assert handler is not None and not root.propagate
        logger.warning("poly_genre_en: Custom kwargs can be passed to `--metadata` in console")
        logging.getLogger("lm_eval.evaluator").warning(
            "Overwriting default num_fewshot of %s from %s to %s", "t", None, 0
        )
        logger.warning("task %s has no test split", "xnli_sw")
        logger.info("building contexts")
    assert out.getvalue() == "[lm-eval] warning: task xnli_sw has no test split\n"
    assert not root.handlers and root.propagate  # restored
    theirs = logging.StreamHandler(io.StringIO())
    root.addHandler(theirs)
    try:
        with lm_eval_log(out) as handler:  # lm-eval's own logging set up: left alone
            assert handler is None and root.handlers == [theirs]
    finally:
        root.removeHandler(theirs)
