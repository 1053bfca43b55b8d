"""Overrides that shrink the quickstart to a seconds-long run on the packaged UDHR."""

SMOKE = [
    "data.source=udhr",
    "groups.pretraining=[en,ru,ar,zh]",
    "groups.adapting=[fr,ja]",
    "groups.other=[de,hi]",
    "data.max_train_per_lang=200",
    "data.max_eval_per_lang=40",
    "tokenizer.vocab_size=400",
    "tokenizer.sample_texts=400",
    "model.preset=nano",
    "train.steps=6",
    "train.batch_size=4",
    "train.block_size=32",
    "train.log_every=1",
    "train.checkpoint_every=3",
    "train.eval_every=null",
    "train.progress_bar=false",
    "evaluate.max_texts_per_lang=20",
]
