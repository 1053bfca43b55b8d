"""Labelled tasks on top of a pretrained model: sequence and token classification, extractive QA.

``polymnesia.tasks`` turns prepared records (``prepare_data``'s ``LANG/SPLIT.jsonl``)
into model inputs, loads a classifier (or a span predictor) from a causal-LM
folder written by a model stage (or a Hub id), predicts and scores per language:

>>> from polymnesia.tasks import build_sequence_examples, load_classifier, evaluate_by_language
>>> model, tok = load_classifier(run / "model", num_labels=9)          # doctest: +SKIP
>>> ex = build_sequence_examples(records, tok, max_length=64)          # doctest: +SKIP
>>> evaluate_by_language(model, {"en": ex}, metric="accuracy")         # doctest: +SKIP

The offline task is the genre of a Bible verse (9 labels, ``record["label"]``);
:mod:`polymnesia.tasks.constructed` builds honestly *constructed* tagging and
extractive-QA tasks from labelled verses (genre segments, genre questions),
:func:`~polymnesia.tasks.tagging.language_id_tagging` a code-switched
language-ID tagging set from aligned verses of two languages;
:mod:`polymnesia.tasks.kinds` runs any kind with one set of calls.
"""

from polymnesia.tasks.classification import (
    ClassificationData,
    build_sequence_examples,
    evaluate_by_language,
    load_classifier,
    make_bidirectional,
    predict,
)
from polymnesia.tasks.config import TaskConfig, infer_num_labels
from polymnesia.tasks.constructed import genre_question, genre_segments
from polymnesia.tasks.qa import SpanData, build_span_examples, predict_answers
from polymnesia.tasks.tagging import build_token_examples, language_id_tagging

__all__ = [
    "ClassificationData",
    "SpanData",
    "TaskConfig",
    "build_sequence_examples",
    "build_span_examples",
    "build_token_examples",
    "evaluate_by_language",
    "genre_question",
    "genre_segments",
    "infer_num_labels",
    "language_id_tagging",
    "load_classifier",
    "make_bidirectional",
    "predict",
    "predict_answers",
]
