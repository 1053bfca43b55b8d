"""Hand-checkable tests of polymnesia.tasks.classification and the TaskConfig section."""

from __future__ import annotations

import logging

import pytest
import torch
from tasks_helpers import record  # type: ignore[import-not-found]

from polymnesia import runtime
from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.tasks.classification import (
    ClassificationData,
    build_sequence_examples,
    evaluate_by_language,
    load_classifier,
    predict,
)
from polymnesia.tasks.config import TaskConfig, infer_num_labels
from polymnesia.tasks.load_report import head_report
from polymnesia.testing import ARCHITECTURES


def test_sequence_examples_prepend_bos_truncate_and_skip_unlabelled(tiny_tok) -> None:  # type: ignore[no-untyped-def]
    recs = [record(1, "en", "the earth", 3), record(2, "en", "no label", None)]
    ex = build_sequence_examples(recs, tiny_tok, max_length=64)
    ids = tiny_tok("the earth", add_special_tokens=False)["input_ids"]
    assert ex == [
        {"input_ids": [tiny_tok.bos_token_id, *ids], "labels": 3, "lang": "en", "id": "1.1.1"}
    ]
    short = build_sequence_examples(recs, tiny_tok, max_length=2)
    assert short[0]["input_ids"] == [tiny_tok.bos_token_id, ids[0]]
    with pytest.raises(PolymnesiaError, match="max_length"):
        build_sequence_examples(recs, tiny_tok, max_length=1)


def test_classification_data_right_pads() -> None:
    data = ClassificationData(
        [{"input_ids": [1, 5, 6], "labels": 2}, {"input_ids": [1, 7], "labels": 0}], pad_id=3
    )
    b = data.collate([1, 0])
    assert len(data) == 2
    assert b["input_ids"].tolist() == [[1, 7, 3], [1, 5, 6]]
    assert b["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    assert b["labels"].tolist() == [0, 2]
    tok = ClassificationData([{"input_ids": [1, 5], "labels": [-100, 4]}], pad_id=0).collate([0, 0])
    assert tok["labels"].tolist() == [[-100, 4], [-100, 4]]
    with pytest.raises(DataError):
        ClassificationData([], pad_id=0)


def test_load_classifier_says_the_new_head_in_one_line(lm_folder, capfd, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(runtime, "_SAID", set())
    load_classifier(lm_folder, num_labels=3, kind="token")
    load_classifier(lm_folder, num_labels=3, kind="token")  # (each arm of a run loads it again)
    err = capfd.readouterr().err
    assert "LOAD REPORT" not in err  # transformers' warning table is replaced
    lines = [x for x in err.splitlines() if x.startswith("[polymnesia]")]
    assert lines == [
        f"[polymnesia] MistralForTokenClassification from {lm_folder / 'model'}: new head "
        "score.bias, score.weight (seed 1234); not used from the checkpoint: lm_head.weight"
    ]
    assert "not sharded" not in err  # (what transformers logs when its logger's level is raised)
    assert not logging.getLogger("transformers.modeling_utils").filters  # restored


def test_head_report_warns_about_body_weights_the_checkpoint_lacks(lm_folder) -> None:  # type: ignore[no-untyped-def]
    model, _ = load_classifier(lm_folder, num_labels=3)
    body = [f"model.layers.{i}.mlp.up_proj.weight" for i in range(6)]
    info = {"missing_keys": ["score.weight", *body], "unexpected_keys": []}
    lines = head_report(model, {"score.weight"}, info, "ckpt", seed=5)
    assert lines == [
        "MistralForSequenceClassification from ckpt: new head score.weight (seed 5)",
        "warning: 6 weight(s) of the model body are not in ckpt and start untrained: "
        + ", ".join(sorted(body)[:4])
        + " and 2 more",
    ]


def test_load_classifier_head_seed_and_pad(lm_folder, tiny_tok) -> None:  # type: ignore[no-untyped-def]
    m1, tok = load_classifier(lm_folder, num_labels=9)
    torch.manual_seed(99)  # the global RNG must not matter
    m2, _ = load_classifier(lm_folder / "model", num_labels=9)
    assert m1.config.pad_token_id == tok.pad_token_id == tiny_tok.pad_token_id
    assert torch.equal(m1.score.weight, m2.score.weight)
    assert m1.score.weight.shape[0] == 9 and float(m1.score.weight.detach().std()) > 0
    m3, _ = load_classifier(lm_folder, num_labels=9, seed=7)
    assert not torch.equal(m1.score.weight, m3.score.weight)
    from polymnesia.models.build import load_model

    lm = load_model(lm_folder / "model")
    assert torch.equal(lm.model.embed_tokens.weight, m1.model.embed_tokens.weight)  # body kept
    with pytest.raises(PolymnesiaError, match="not found"):
        load_classifier("/nonexistent/folder", num_labels=2)


def test_predict_matches_unbatched_logits(lm_folder, tiny_tok) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=3)
    recs = [
        record(i, "en", t, i % 3)
        for i, t in enumerate(["the earth", "God created the heavens and the earth", "void"])
    ]
    ex = build_sequence_examples(recs, tok, 32)
    got = predict(model, ex, batch_size=2)
    want = [int(model(input_ids=torch.tensor([e["input_ids"]])).logits.argmax()) for e in ex]
    assert got == want


def test_predict_scores_its_shard_under_the_runtime_precision(lm_folder) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import dataclass

    from polymnesia.runtime import Runtime

    @dataclass(frozen=True)
    class SecondOfTwo(Runtime):
        """Rank 1 of 2: gathers its own predictions only (the other rank's slots stay None)."""

        def gather(self, local, n):  # type: ignore[no-untyped-def]
            out = [None] * n
            out[self.rank :: self.world] = local
            return out

    model, tok = load_classifier(lm_folder, num_labels=3)
    texts = ["the earth", "God created the heavens", "void", "and the deep", "light"]
    ex = build_sequence_examples([record(i, "en", t, i % 3) for i, t in enumerate(texts)], tok, 32)
    seen: list[tuple[int, bool, bool]] = []

    def hook(module, args, kwargs):  # type: ignore[no-untyped-def]
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(
            (ids.shape[0], torch.is_autocast_enabled("cpu"), torch.is_inference_mode_enabled())
        )

    model.register_forward_pre_hook(hook, with_kwargs=True)
    alone = predict(model, ex, batch_size=8)
    seen.clear()
    rt = SecondOfTwo(device=torch.device("cpu"), rank=1, world=2, precision="bf16")
    half = predict(model, ex, batch_size=8, runtime=rt)
    assert seen == [(2, True, True)]  # examples 1 and 3, in one autocast batch
    assert half[0::2] == [None, None, None]
    assert len(half) == 5 and all(isinstance(p, int) for p in half[1::2])
    assert predict(model, ex, batch_size=8) == alone  # float32 again outside the runtime


def test_evaluate_by_language_equals_per_language_accuracy(lm_folder) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=2)
    en = build_sequence_examples(
        [record(i, "en", "the earth and the deep", i % 2) for i in range(4)], tok, 32
    )
    de = build_sequence_examples([record(i, "de", "die Erde", 1) for i in range(3)], tok, 32)
    scores = evaluate_by_language(model, {"en": en, "de": de, "fr": []})
    assert set(scores) == {"en", "de"}
    p_en, p_de = predict(model, en), predict(model, de)
    assert scores["en"] == pytest.approx(
        sum(int(p == e["labels"]) for p, e in zip(p_en, en, strict=True)) / 4
    )
    assert scores["de"] == pytest.approx(sum(int(p == 1) for p in p_de) / 3)
    assert scores["en"] == 0.5  # identical texts -> one prediction, half the labels
    with pytest.raises(PolymnesiaError, match="accepted"):
        evaluate_by_language(model, {"en": en}, metric="span_f1")


def test_task_config_and_num_labels() -> None:
    assert TaskConfig().kind == "sequence"
    with pytest.raises(ValueError, match="accepted"):
        TaskConfig(kind="sequence", metric="span_f1")
    assert infer_num_labels([record(1, "en", "a", 8), record(2, "en", "b", None)]) == 9
    assert infer_num_labels([record(1, "en", "a b", None, tags=[0, 3])], kind="token") == 4
    with pytest.raises(DataError):
        infer_num_labels([record(1, "en", "a", None)])
    for context in ("echo", "bidirectional"):
        with pytest.raises(ValueError, match=f"context '{context}' is for token and span tasks"):
            TaskConfig(context=context)
        assert TaskConfig(kind="token", metric="span_f1", context=context).context == context


@pytest.mark.parametrize("kind", ["token", "span"])
def test_a_bidirectional_classifier_sees_the_whole_text_and_keeps_it_when_saved(  # type: ignore[no-untyped-def]
    lm_folder, tmp_path, kind
) -> None:
    import transformers

    from polymnesia.tasks.classification import load_classifier

    ids = torch.tensor([[1, 5, 6, 7, 8]])
    other = ids.clone()
    other[0, -1] = 9  # the last token differs

    def first(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out = model(input_ids=x)
        return out.start_logits[0, 0] if kind == "span" else out.logits[0, 0]

    causal, _ = load_classifier(lm_folder, 3, kind, seed=0)
    assert torch.equal(first(causal.eval(), ids), first(causal, other))  # left context only
    both, _ = load_classifier(lm_folder, 3, kind, seed=0, bidirectional=True)
    assert not torch.equal(first(both.eval(), ids), first(both, other))
    # the last position sees the same text either way
    with torch.no_grad():
        a = causal(input_ids=ids)
        b = both(input_ids=ids)
    last = (lambda o: o.start_logits[0, -1]) if kind == "span" else (lambda o: o.logits[0, -1])
    assert torch.allclose(last(a), last(b), atol=1e-6)
    # padding keys stay masked: a right-padded row scores its real tokens as the row alone
    mask = torch.tensor([[1, 1, 1, 0, 0]])
    with torch.no_grad():
        padded = both(input_ids=ids, attention_mask=mask)
        alone = both(input_ids=ids[:, :3])
    got = padded.start_logits[0, :3] if kind == "span" else padded.logits[0, :3]
    want = alone.start_logits[0] if kind == "span" else alone.logits[0]
    assert torch.allclose(got, want, atol=1e-5)
    both.save_pretrained(tmp_path / "saved")
    auto = (
        transformers.AutoModelForQuestionAnswering
        if kind == "span"
        else transformers.AutoModelForTokenClassification
    )
    again = auto.from_pretrained(tmp_path / "saved").eval()
    assert again.config.is_causal is False
    assert not torch.equal(first(again, ids), first(again, other))


@pytest.mark.parametrize(
    ("kind", "metric", "context", "need"),
    [
        ("span", "squad_f1", "left", 4),
        ("span", "squad_f1", "echo", 6),
        ("token", "span_f1", "echo", 4),
    ],
)
def test_a_max_length_the_inputs_cannot_fit_in_is_refused_when_read(
    kind: str, metric: str, context: str, need: int
) -> None:
    with pytest.raises(ValueError, match=f"it needs at least {need}"):
        TaskConfig(kind=kind, metric=metric, context=context, max_length=need - 1)
    assert TaskConfig(kind=kind, metric=metric, context=context, max_length=need).max_length == need


def test_echo_reaches_the_examples_of_token_and_span_tasks(tiny_tok) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.tasks.kinds import build_examples

    tagged = [record(1, "en", "earth zqxj", None, tags=[1, 2])]
    for echo in (False, True):
        task = TaskConfig(
            name="t", kind="token", metric="span_f1", context="echo" if echo else "left"
        )
        (ex,) = build_examples(tagged, task, tiny_tok, train=True)
        assert ex["input_ids"].count(tiny_tok.eos_token_id) == int(echo)
    qa = [
        record(
            1, "en", "In God", None, question="who", answers={"text": ["God"], "answer_start": [3]}
        )
    ]
    for echo in (False, True):
        task = TaskConfig(
            name="q", kind="span", metric="squad_f1", context="echo" if echo else "left"
        )
        (ex,) = build_examples(qa, task, tiny_tok, train=True)
        assert ex["input_ids"].count(tiny_tok.eos_token_id) == 1 + int(echo)


def test_a_configured_label_count_the_data_does_not_fit_is_refused_in_one_line() -> None:
    from polymnesia.tasks.kinds import label_space

    recs = [record(1, "en", "a", 8), record(2, "en", "b", 2)]
    task = TaskConfig(name="genre", num_labels=3)
    with pytest.raises(
        DataError,
        match=r"^task 'genre': task.num_labels is 3 but its training "
        r"data has labels up to 8 \(9 labels\); set it to at least 9, or to null",
    ):
        label_space(task, recs)
    assert label_space(TaskConfig(name="genre", num_labels=9), recs) == (9, None)
    assert label_space(TaskConfig(name="genre", num_labels=12), recs) == (12, None)
    assert label_space(TaskConfig(name="genre"), recs) == (9, None)
    tags = [record(1, "en", "a b", None, tags=[0, 2])]
    token = TaskConfig(name="ner", kind="token", metric="span_f1", tag_names=["O", "B-X"])
    with pytest.raises(DataError, match="the number of tag_names is 2 but its training data has "):
        label_space(token, tags)


def test_the_lifelong_label_count_is_checked_against_the_data(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.continual.examples import num_labels
    from polymnesia.io import write_jsonl_atomic

    for lang in ("en", "fr"):
        write_jsonl_atomic(
            tmp_path / lang / "train.jsonl",
            [{"id": "1", "lang": lang, "text": "a", "label": 4, "meta": {}}],
        )
    assert num_labels(TaskConfig(name="g", num_labels=5), tmp_path, ["en", "fr"]) == 5
    with pytest.raises(
        DataError, match="task.num_labels is 4 but its training data has labels up to 4"
    ):
        num_labels(TaskConfig(name="g", num_labels=4), tmp_path, ["en", "fr"])


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_tested_architecture_can_drop_its_causal_mask(arch: str) -> None:
    from polymnesia.tasks.classification import make_bidirectional
    from polymnesia.testing import tiny_model

    model = tiny_model(arch, head="token", num_labels=3).eval()
    ids = torch.tensor([[1, 5, 6, 7, 8]])
    other = ids.clone()
    other[0, -1] = 9
    with torch.no_grad():
        sees_right = not torch.equal(
            model(input_ids=ids).logits[0, 0], model(input_ids=other).logits[0, 0]
        )
    assert sees_right == (ARCHITECTURES[arch][1] == "encoder")
    make_bidirectional(model)
    with torch.no_grad():
        assert not torch.equal(
            model(input_ids=ids).logits[0, 0], model(input_ids=other).logits[0, 0]
        )
