"""Labelled tasks on top of a pretrained model: sequence and token classification, extractive QA.

``polymnesia.tasks`` turns prepared records (``prepare_data``'s ``LANG/SPLIT.jsonl``)
into model inputs, loads a classifier (or a span predictor) from a causal-LM
folder written by a model stage (or a Hub id), predicts and scores per language:

>>> from polymnesia.tasks.classification import build_sequence_examples, load_classifier
>>> from polymnesia.tasks.classification import evaluate_by_language
>>> model, tok = load_classifier(run / "model", num_labels=9)          # doctest: +SKIP
>>> ex = build_sequence_examples(records, tok, max_length=64)          # doctest: +SKIP
>>> evaluate_by_language(model, {"en": ex}, metric="accuracy")         # doctest: +SKIP

The offline task is the genre of a Bible verse (9 labels, ``record["label"]``);
:mod:`polymnesia.tasks.constructed` builds honestly *constructed* tagging and
extractive-QA tasks from labelled verses (genre segments, genre questions),
:func:`~polymnesia.tasks.tagging.language_id_tagging` a code-switched
language-ID tagging set from aligned verses of two languages;
:mod:`polymnesia.tasks.kinds` runs any kind with one set of calls. Each module is imported
by name: the package imports none, so a task section (:mod:`polymnesia.tasks.config`) is
read without torch.
"""
