"""The offline tasks in the evaluated model's chat format: its template's prompts, answer
tails and stop marker; a ChatML tokenizer (every model polymnesia builds) gets the documents
and tasks polymnesia always wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness_helpers import make_prepared, verse

from polymnesia import testing
from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.generation import chat_prompt
from polymnesia.harness.docs import halves, write_task_data
from polymnesia.harness.tasks import CHATML_STOP, TASK_DIR, model_task_yamls
from polymnesia.instructions.records import CONTINUE_INSTRUCTION, genre_instruction, genre_name
from polymnesia.io import read_jsonl
from polymnesia.tokenizers.chat import SYSTEM_PROMPT, render_chatml, sft_messages
from polymnesia.tokenizers.special import IM_END

TASKS = ["poly_genre_en", "poly_continue_mc_fr", "poly_continue_gen_en", "poly_ifeval_en"]
TEXTS = [verse(lang, i) for lang in ("en", "fr") for i in range(60)] + testing.corpus(("en",))


def chatml() -> Any:
    return testing.tiny_bpe(TEXTS, 400)


def llama3() -> Any:
    return testing.tiny_tiktoken_bpe(TEXTS, 400)


def gemma() -> Any:
    tok, _ = testing.tiny_sentencepiece(TEXTS, 400, "bpe", chat_template=testing.GEMMA_TEMPLATE)
    tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    return tok


#: tokenizer, the text a document's prompt starts with (the template's BOS taken off), after
#: the generation prompt, and after an answer (written out here, not computed by the code
#: under test)
TEMPLATES = {
    "llama3": (
        llama3,
        "<|start_header_id|>system<|end_header_id|>\n\n",
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
        "<|eot_id|>",
    ),
    "gemma": (gemma, "<start_of_turn>user\n", "<start_of_turn>model\n", "<end_of_turn>"),
}


def lm_eval_config(path: Path) -> dict[str, Any]:
    """A task YAML as lm-eval's loader reads it (includes merged, functions unresolved)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(path, resolve_func=False)


@pytest.fixture(scope="module")
def prep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_prepared(tmp_path_factory.mktemp("chat_format") / "prep", n_test=20)


def write(prep: Path, folder: Path, tokenizer: Any = None) -> Path:
    write_task_data(prep, folder, TASKS, n=6, n_fewshot=2, tokenizer=tokenizer)
    return folder


def test_chatml_tokenizer_writes_the_chatml_documents(prep: Path, tmp_path: Path) -> None:
    """Byte for byte what the ChatML documents were before templates (no tokenizer), and the
    prompt is the old function's: ChatML system + user turns + ``<|im_start|>assistant``."""
    old, new = write(prep, tmp_path / "none"), write(prep, tmp_path / "chatml", chatml())
    files = sorted(p.name for p in old.iterdir())
    assert files == sorted(p.name for p in new.iterdir()) and len(files) == 4 * 3
    for name in files:
        assert (old / name).read_bytes() == (new / name).read_bytes(), name
    for d in read_jsonl(new / "poly_genre_en.test.jsonl"):
        text = verse("en", int(d["id"].split(".")[2]))
        messages = sft_messages(genre_instruction(BIBLE_GENRES), text, SYSTEM_PROMPT)
        assert d["prompt"] == render_chatml(messages, add_generation_prompt=True)
        assert d["choices"] == [genre_name(g) + "<|im_end|>" for g in BIBLE_GENRES]
    for task in ("poly_continue_gen_en", "poly_ifeval_en", "poly_genre_en"):
        ours, shipped = (
            lm_eval_config(new / f"{task}.yaml"),
            lm_eval_config(TASK_DIR / f"{task}.yaml"),
        )
        assert ours == shipped
    assert lm_eval_config(new / "poly_ifeval_en.yaml")["generation_kwargs"]["until"] == [
        "<|im_end|>"
    ]


@pytest.mark.parametrize("name", list(TEMPLATES))
def test_template_documents_and_stop_marker(name: str, prep: Path, tmp_path: Path) -> None:
    make, head, generation_prompt, end = TEMPLATES[name]
    tok = make()
    folder, chatml_docs = write(prep, tmp_path / name, tok), write(prep, tmp_path / "chatml")
    for d in read_jsonl(folder / "poly_genre_en.test.jsonl"):
        text = verse("en", int(d["id"].split(".")[2]))
        # the template writes BOS; the document leaves it to lm-eval (once per context)
        assert tok.bos_token + d["prompt"] == chat_prompt(
            genre_instruction(BIBLE_GENRES), text, tok
        )
        assert d["prompt"].startswith(head) and d["prompt"].endswith(generation_prompt)
        assert text in d["prompt"] and "<|im_start|>" not in d["prompt"]
        assert d["choices"] == [genre_name(g) + end for g in BIBLE_GENRES]
    for d in read_jsonl(folder / "poly_continue_mc_fr.test.jsonl"):
        first, second = halves(verse("fr", int(d["id"].split(".")[2])))  # type: ignore[misc]
        assert tok.bos_token + d["prompt"] == chat_prompt(CONTINUE_INSTRUCTION, first, tok)
        assert d["choices"][d["gold"]] == second + end
    for task in TASKS:  # same verses, labels and targets; only the format differs
        for split in ("test", "validation"):
            ours = read_jsonl(folder / f"{task}.{split}.jsonl")
            theirs = read_jsonl(chatml_docs / f"{task}.{split}.jsonl")
            strip = ("prompt", "choices")
            assert [{k: v for k, v in d.items() if k not in strip} for d in ours] == [
                {k: v for k, v in d.items() if k not in strip} for d in theirs
            ]
    gen = lm_eval_config(folder / "poly_continue_gen_en.yaml")
    assert gen["task"] == "poly_continue_gen_en" and "poly_ea" in gen["tag"]
    assert gen["generation_kwargs"] == {"until": [end], "do_sample": False, "max_gen_toks": 64}
    assert lm_eval_config(folder / "poly_ifeval_en.yaml")["generation_kwargs"]["until"] == [end]
    genre = lm_eval_config(folder / "poly_genre_en.yaml")
    assert genre == lm_eval_config(TASK_DIR / "poly_genre_en.yaml")  # choices carry the marker


def test_shipped_tasks_stop_at_chatml_end() -> None:
    assert CHATML_STOP == IM_END
    config = lm_eval_config(TASK_DIR / "poly_continue_gen_fr.yaml")
    assert config["generation_kwargs"]["until"] == [IM_END]


def test_model_task_yamls_expand_tags_and_quote_markers() -> None:
    files = model_task_yamls(["poly_ea"], 'a"b')
    assert sorted(files) == [
        "poly_continue_gen_en.yaml",
        "poly_continue_mc_en.yaml",
        "poly_genre_en.yaml",
        "poly_ifeval_en.yaml",
        "poly_quote_en.yaml",
        "poly_reference_en.yaml",
        "poly_title_en.yaml",
    ]
    assert 'until: ["a\\"b"]' in files["poly_continue_gen_en.yaml"]
    assert "until: []" in model_task_yamls(["poly_ifeval_en"], "")["poly_ifeval_en.yaml"]


def test_run_lm_eval_needs_the_task_yaml(prep: Path, tmp_path: Path) -> None:
    from polymnesia.harness.run import run_lm_eval

    folder = write(prep, tmp_path / "docs")
    (folder / "poly_genre_en.yaml").unlink()
    with pytest.raises(PolymnesiaError, match=r"has no task YAML for poly_genre_en; write"):
        run_lm_eval(tmp_path / "no_model", ["poly_genre_en"], tmp_path / "out", task_data=folder)


def llama3_model(folder: Path) -> Path:
    size = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1}
    size |= {"num_attention_heads": 2, "num_key_value_heads": 1}
    return testing.save_tiny(folder, "llama", llama3(), **size)


def run_stage(folder: Path, prep: Path, out: Path, tasks: list[str], **kw: Any) -> list[Any]:
    from polymnesia.pipeline.stage import StageContext, StageSpec
    from polymnesia.stages.evaluate_harness import EvaluateHarness, EvaluateHarnessParams

    p = EvaluateHarnessParams(
        label="L3",
        tasks=tasks,
        docs_per_task=4,
        fewshot_docs=2,
        batch_size=2,
        device="cpu",
        dtype="float32",
        offline=True,
        max_gen_toks=4,
        **kw,
    )
    ctx = StageContext(
        StageSpec("eval", "evaluate_harness", p), out, {"model": folder.parent, "data": prep}
    )
    return list(EvaluateHarness().run(ctx))


def bos_count_as_lm_eval_encodes(folder: Path, context: str) -> tuple[int, int]:
    """BOS ids in ``context`` as lm-eval tokenizes it (``add_bos_token=True``), and the first id."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), add_bos_token=True)
    ids = tok.encode(context)
    return ids.count(tok.bos_token_id), ids[0] == tok.bos_token_id


def test_stage_on_a_model_with_its_own_template(prep: Path, tmp_path: Path) -> None:
    """A tiny Llama with the Llama-3 template: lm-eval sees its prompts (one BOS, which it
    adds), stops at ``<|eot_id|>``, and its multiple-choice scores are polymnesia's own
    scorer's."""
    from polymnesia.evaluation.generation import answer_logprobs
    from polymnesia.models.io import load_model_and_tokenizer

    folder = llama3_model(tmp_path / "stage" / "model")
    out = tmp_path / "out"
    runs = run_stage(folder, prep, out, ["poly_genre_en", "poly_continue_gen_en"])
    scores = {(s.task, s.metric): s for s in runs}
    assert {("poly_genre_en", "acc"), ("poly_continue_gen_en", "chrf")} <= set(scores)
    for s in read_jsonl(out / "lm_eval" / "samples_poly_continue_gen_en.jsonl"):
        context, kwargs = s["arguments"][0]
        assert (
            context.startswith("<|start_header_id|>system") and "<|begin_of_text|>" not in context
        )
        assert bos_count_as_lm_eval_encodes(folder, context) == (1, True)
        assert context.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
        assert "<|eot_id|>" in kwargs["until"] and "<|im_end|>" not in kwargs["until"]
    model, tok = load_model_and_tokenizer(folder)
    docs = read_jsonl(out / "task_data" / "poly_genre_en.test.jsonl")
    samples = read_jsonl(out / "lm_eval" / "samples_poly_genre_en.jsonl")
    assert len(samples) == len(docs) == 4
    for s in samples:
        d = docs[s["doc_id"]]
        assert all(c.endswith("<|eot_id|>") for _, c in s["arguments"])
        ours = answer_logprobs(model, tok, d["prompt"], [genre_name(g) for g in BIBLE_GENRES])
        theirs = [float(r[0]) for r in s["filtered_resps"]]
        # lm-eval moves the prompt's trailing "\n\n" into every continuation: one shared term
        diffs = [a - b for a, b in zip(theirs, ours, strict=True)]
        assert diffs == pytest.approx([diffs[0]] * len(diffs), abs=1e-3)


def test_few_shot_context_holds_one_bos(prep: Path, tmp_path: Path) -> None:
    """With few-shot examples the context is several conversations in the model's template;
    the template's BOS is at its head once, not once per conversation."""
    folder = llama3_model(tmp_path / "stage" / "model")
    out = tmp_path / "out"
    run_stage(folder, prep, out, ["poly_continue_gen_en"], num_fewshot=2)
    samples = read_jsonl(out / "lm_eval" / "samples_poly_continue_gen_en.jsonl")
    assert samples
    for s in samples:
        context, _ = s["arguments"][0]
        assert context.count("<|start_header_id|>system<|end_header_id|>") == 3
        assert bos_count_as_lm_eval_encodes(folder, context) == (1, True)
