"""Built-in stage kinds; importing this package registers them (``polymnesia ls stages``)."""

from polymnesia.stages import data, evaluate_lm, pretrain, tokenizer  # noqa: F401
