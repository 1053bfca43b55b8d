"""Byte-level BPE tokenizers: training, documents, saving and loading.

Aggarwal et al. 2024, section 3: the base model has a vocabulary V
learned on the pretraining languages; adaptation learns a new vocabulary V^L on
the adapting languages and merges it into V (see :mod:`.merge`). Both are
byte-level BPE here, so any text (every script, emoji) is encodable without an
unknown token.

Conventions (shared by every tokenizer polymnesia makes):

* Special tokens take the first ids, in the order of :data:`SPECIAL_TOKENS`:
  ``<unk>``=0, ``<s>``=1, ``</s>``=2, ``<pad>``=3, ``<|im_start|>``=4,
  ``<|im_end|>``=5 (the Llama/Mistral layout for 0-2, then padding and the
  ChatML markers). ``<unk>`` is never produced by byte-level BPE; it is there
  so the id layout matches the Mistral-style base of the paper.
* Special tokens are never split and never normalised.
* Text is NFC-normalised, so ``decode(encode(x)) == x`` holds for NFC text
  (for other text it returns the NFC form of ``x``).
* The tokenizer does NOT add BOS/EOS by itself (no post-processor): plain
  ``tokenizer(text)`` returns the content tokens only. Documents for language
  modelling go through :func:`encode_document`, chat examples through
  :func:`polymnesia.tokenizers.chat.build_sft_example`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from polymnesia.data.sampling import sample_mixture
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.hub import hub_reachable
from polymnesia.io import atomic_dir
from polymnesia.tokenizers.special import (
    BOS,
    CHATML_TEMPLATE,
    EOS,
    IM_END,
    IM_START,
    PAD,
    SPECIAL_TOKENS,
    UNK,
)
from polymnesia.trust import remote_code

DEFAULT_MAX_LENGTH = 2048
_N_BYTES = 256


def train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    *,
    min_frequency: int = 2,
    show_progress: bool = False,
    model_max_length: int = DEFAULT_MAX_LENGTH,
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE with ``vocab_size`` entries (special tokens included).

    The 256 byte symbols are always in the vocabulary (initial alphabet), so
    ``vocab_size`` must be at least 256 + len(SPECIAL_TOKENS); the trainer may
    stop below ``vocab_size`` when the corpus runs out of pairs seen
    ``min_frequency`` times. The ChatML ``chat_template`` is set (see
    :mod:`.chat`).
    """
    if isinstance(texts, str):
        raise ConfigError("train_bpe needs an iterable of texts, got one string")
    floor = _N_BYTES + len(SPECIAL_TOKENS)
    if vocab_size < floor:
        raise ConfigError(
            f"vocab_size {vocab_size} is too small: byte-level BPE needs at least {floor} "
            f"(256 bytes + {len(SPECIAL_TOKENS)} special tokens)"
        )
    if min_frequency < 1:
        raise ConfigError(f"min_frequency must be >= 1, got {min_frequency}")
    backend = _empty_byte_level_bpe()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    backend.train_from_iterator(texts, trainer)
    return wrap_backend(backend, model_max_length=model_max_length)


def train_bpe_mixture(
    texts_by_lang: Mapping[str, Sequence[str]],
    vocab_size: int,
    *,
    temperature: float,
    total: int,
    seed: int,
    min_frequency: int = 2,
    show_progress: bool = False,
    model_max_length: int = DEFAULT_MAX_LENGTH,
) -> PreTrainedTokenizerFast:
    """Train :func:`train_bpe` on ``total`` texts drawn by temperature sampling.

    Languages are drawn with q_l proportional to p_l^(1/T)
    (:func:`polymnesia.data.sampling.sample_mixture`), so a larger
    ``temperature`` gives small languages more of the vocabulary. Same inputs
    and ``seed`` give the same tokenizer.
    """
    if total < 1:
        raise ConfigError(f"total must be >= 1 texts for tokenizer training, got {total}")
    mixture = sample_mixture(texts_by_lang, temperature, total, seed)
    return train_bpe(
        (text for _, text in mixture),
        vocab_size,
        min_frequency=min_frequency,
        show_progress=show_progress,
        model_max_length=model_max_length,
    )


def _empty_byte_level_bpe() -> Tokenizer:
    backend = Tokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    return backend


def wrap_backend(
    backend: Tokenizer,
    *,
    model_max_length: int = DEFAULT_MAX_LENGTH,
) -> PreTrainedTokenizerFast:
    """Wrap a ``tokenizers.Tokenizer`` holding :data:`SPECIAL_TOKENS` as a transformers
    tokenizer.
    """

    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token=UNK,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        extra_special_tokens=[IM_START, IM_END],
        model_max_length=model_max_length,
    )
    tok.chat_template = CHATML_TEMPLATE
    for i, token in enumerate(SPECIAL_TOKENS):
        if tok.convert_tokens_to_ids(token) != i:
            raise PolymnesiaError(
                f"special token {token!r} did not get id {i}; tokenizer is broken"
            )
    return tok


def encode_document(
    tokenizer: PreTrainedTokenizerFast, text: str, add_bos: bool = True, add_eos: bool = True
) -> list[int]:
    """Token ids of one document: ``[BOS] + tokens(text) + [EOS]`` (each optional).

    This is the only place BOS/EOS are added for language modelling; the
    tokenizer itself adds nothing.
    """
    ids: list[int] = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if add_bos:
        ids.insert(0, _required_id(tokenizer, "bos"))
    if add_eos:
        ids.append(_required_id(tokenizer, "eos"))
    return ids


def _required_id(tokenizer: PreTrainedTokenizerFast, which: str) -> int:
    token_id = getattr(tokenizer, f"{which}_token_id", None)
    if token_id is None:
        raise ConfigError(
            f"tokenizer has no {which} token; set {which}_token or pass add_{which}=False"
        )
    return int(token_id)


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, path: str | os.PathLike[str]) -> Path:
    """``save_pretrained`` into a temporary sibling folder, then rename it to ``path``."""
    target = Path(path)
    with atomic_dir(target) as tmp:
        tokenizer.save_pretrained(str(tmp))
    return target


def load_tokenizer(
    path_or_hub_id: str, *, trust_remote_code: bool = False
) -> PreTrainedTokenizerFast:
    """Load a fast tokenizer from a local folder (offline) or a Hugging Face Hub id.

    An unreachable Hub (offline machine, ``HF_HUB_OFFLINE=1``) gives one line
    saying so, after trying the local Hub cache; without a proxy, reachability
    is probed first with a short socket connect so an offline machine does not
    sit through the Hub client's retries.
    """
    if _looks_local(path_or_hub_id):
        folder = Path(path_or_hub_id).expanduser()
        if not folder.is_dir():
            raise PolymnesiaError(
                f"tokenizer folder '{path_or_hub_id}' does not exist; pass a folder written by "
                "save_tokenizer/save_pretrained or a Hub id such as 'org/name'"
            )
        try:
            tok = _from_pretrained(str(folder), trust_remote_code, local_only=True)
        except (OSError, ValueError) as err:
            raise PolymnesiaError(
                f"folder '{path_or_hub_id}' holds no loadable tokenizer ({_first_line(err)}); "
                "expected tokenizer.json and tokenizer_config.json from save_tokenizer"
            ) from None
        return _as_fast(tok, folder)
    return _load_from_hub(path_or_hub_id, trust_remote_code)


def _looks_local(name: str) -> bool:
    if Path(name).expanduser().exists():
        return True
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name


def _load_from_hub(hub_id: str, trust_remote_code: bool) -> PreTrainedTokenizerFast:
    import huggingface_hub.constants as hub_constants

    unreachable = PolymnesiaError(
        f"cannot load tokenizer '{hub_id}': no such local folder, and the Hugging Face Hub is "
        "unreachable (offline or HF_HUB_OFFLINE set) with nothing cached; local tokenizer "
        "folders load offline"
    )
    offline = bool(hub_constants.HF_HUB_OFFLINE) or not hub_reachable(hub_constants.ENDPOINT)
    try:
        tok = _from_pretrained(hub_id, trust_remote_code, local_only=offline)
    except (OSError, ValueError) as err:
        if offline or "couldn't connect" in str(err).lower():
            raise unreachable from None
        raise PolymnesiaError(
            f"cannot load tokenizer '{hub_id}' from the Hub: {_first_line(err)}"
        ) from None
    return _as_fast(tok, hub_id)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _from_pretrained(name: str, trust_remote_code: bool, *, local_only: bool) -> object:
    trust = remote_code(trust_remote_code, f"tokenizer '{name}'")
    return AutoTokenizer.from_pretrained(name, trust_remote_code=trust, local_files_only=local_only)


def _as_fast(tok: object, where: object) -> PreTrainedTokenizerFast:
    """The tokenizer, checked to be fast; one without a pad token (Llama, Mistral) pads with EOS.

    Padding positions are masked out of attention and labels everywhere, so the
    pad id's value never reaches a loss or a score; EOS is the usual choice.
    """
    if not isinstance(tok, PreTrainedTokenizerFast):
        raise PolymnesiaError(
            f"tokenizer at '{where}' is {type(tok).__name__}, not a fast (tokenizers-backed) "
            "tokenizer; polymnesia needs tokenizer.json"
        )
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    return tok
