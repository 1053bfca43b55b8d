"""polymnesia.tokenizers: BPE training, vocabulary merge and expansion, chat examples, fertility.

Paper 000 section 3 (vocabulary expansion) and appendix C (ChatML prompts).
"""

from polymnesia.tokenizers.bpe import (
    SPECIAL_TOKENS,
    encode_document,
    load_tokenizer,
    save_tokenizer,
    train_bpe,
    train_bpe_mixture,
)
from polymnesia.tokenizers.chat import (
    IGNORE_INDEX,
    SYSTEM_PROMPT,
    build_sft_example,
    render_chatml,
)
from polymnesia.tokenizers.expand import (
    Expansion,
    ExpansionReport,
    expand_tokenizer,
    tokenizer_family,
)
from polymnesia.tokenizers.fertility import count_words, fertility, fertility_table
from polymnesia.tokenizers.merge import MergeReport, merge_tokenizers, new_token_ids
from polymnesia.tokenizers.special import CHATML_TEMPLATE

__all__ = [
    "CHATML_TEMPLATE",
    "Expansion",
    "ExpansionReport",
    "IGNORE_INDEX",
    "SPECIAL_TOKENS",
    "SYSTEM_PROMPT",
    "MergeReport",
    "build_sft_example",
    "count_words",
    "encode_document",
    "expand_tokenizer",
    "fertility",
    "fertility_table",
    "load_tokenizer",
    "merge_tokenizers",
    "new_token_ids",
    "render_chatml",
    "save_tokenizer",
    "tokenizer_family",
    "train_bpe",
    "train_bpe_mixture",
]
