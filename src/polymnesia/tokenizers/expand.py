"""Vocabulary expansion of a real model's tokenizer, in its own family (Aggarwal et al. 2024,
section 3).

Aggarwal et al. 2024 learns a vocabulary V^L on the adapting languages and merges it
into the base vocabulary V. With a real model the new vocabulary must be
learned *as the base one was*, and the merged tokenizer must behave like the
base on the base languages. :func:`expand_tokenizer` does this for the three
families of current models (:func:`tokenizer_family`):

* ``byte_bpe`` -- byte-level BPE with merge rules: polymnesia's own, GPT-2,
  and tiktoken-style ones such as Llama-3's (a split regex before the
  byte-level step, ``ignore_merges``). V^L is trained by ``tokenizers`` with
  the base's normaliser, pre-tokeniser, decoder and model options; tokens and
  merges are appended by :func:`polymnesia.tokenizers.merge.merge_tokenizer_json`.
* ``sp_bpe`` -- SentencePiece BPE with byte fallback (Llama-2, Mistral,
  Gemma). V^L is trained by ``sentencepiece`` with the base proto's trainer
  settings (:func:`polymnesia.tokenizers.spm.spec_settings`) when the
  ``tokenizer.model`` is given, else with BPE + byte fallback. New pieces are
  appended with scores below every base piece (SentencePiece BPE merges the
  highest-scoring piece first, so base merges keep their priority), and the
  ``tokenizer.json`` merges that produce them (every split of a new piece into
  two vocabulary pieces, and every split of a base piece that uses a new
  piece) are appended ordered by the result's id, which is score order.
* ``unigram`` -- SentencePiece Unigram (XLM-R, T5). New pieces are appended
  with their log-probabilities from V^L.

Every old id and special token keeps its id. Base tokenization: with
``keep_base_tokenization`` (default) every new token that appears in the
merged tokenization of a base-language text that now tokenizes differently
is removed and the merge redone, until the ``base_texts`` tokenize exactly as
before (with Unigram this is exact: a Viterbi path using only base pieces
scores as before; with BPE, appended merges that rebuild a base token along a
new path are removed too). The report says how many base texts changed, and
how many new tokens were given up for it. With ``keep_base_tokenization:
false`` nothing is removed and the count says how many texts differ.

When the base's SentencePiece ``tokenizer.model`` is given, the same pieces
are appended to it too (:attr:`Expansion.sp_model`), so the saved folder's
``tokenizer.model`` (what the ``sentencepiece`` library and tools that read it
use) and ``tokenizer.json`` agree; tests compare the two on real text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.io import atomic_dir
from polymnesia.tokenizers import spm
from polymnesia.tokenizers.merge import _rebuild_like, merge_tokenizer_json

Family = Literal["byte_bpe", "sp_bpe", "unigram"]
FAMILIES: tuple[Family, ...] = ("byte_bpe", "sp_bpe", "unigram")
_MAX_ROUNDS = 20


@dataclass(frozen=True)
class ExpansionReport:
    """What an expansion did (sizes are ``len()`` of each tokenizer)."""

    family: str
    base_size: int
    new_size: int
    added: int
    merged_size: int
    first_new_id: int
    merges_added: int
    dropped_for_base: int
    base_texts: int
    base_texts_changed: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Expansion:
    tokenizer: Any
    report: ExpansionReport
    sp_model: bytes | None = None

    def save(self, folder: str | Path) -> Path:
        """``save_pretrained`` plus the expanded ``tokenizer.model`` when there is one."""

        target = Path(folder)
        with atomic_dir(target) as tmp:
            self.tokenizer.save_pretrained(str(tmp))
            if self.sp_model is not None:
                (Path(tmp) / "tokenizer.model").write_bytes(self.sp_model)
        return target


def tokenizer_family(tokenizer: Any) -> Family:
    """``byte_bpe``, ``sp_bpe`` or ``unigram`` from the tokenizer's ``tokenizer.json``."""
    data = _json(tokenizer)
    model = data.get("model", {})
    kind = model.get("type")
    if kind == "Unigram":
        return "unigram"
    if kind == "BPE" and "ByteLevel" in json.dumps(data.get("pre_tokenizer")):
        return "byte_bpe"
    if kind == "BPE" and model.get("byte_fallback"):
        return "sp_bpe"
    raise PolymnesiaError(
        f"vocabulary expansion supports byte-level BPE, SentencePiece BPE with byte fallback and "
        f"Unigram tokenizers; this one is {kind} (byte_fallback={model.get('byte_fallback')}) with "
        f"pre-tokenizer {(data.get('pre_tokenizer') or {}).get('type')}"
    )


def _json(tokenizer: Any) -> dict[str, Any]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise PolymnesiaError(
            f"{type(tokenizer).__name__} is not a fast tokenizer; expansion needs tokenizer.json"
        )
    return json.loads(backend.to_str())


def _specials(data: dict[str, Any]) -> list[str]:
    return [t["content"] for t in data.get("added_tokens", [])]


def train_byte_bpe_like(
    base: dict[str, Any], texts: Sequence[str], vocab_size: int, min_frequency: int = 2
) -> dict[str, Any]:
    """A byte-level BPE trained on ``texts`` with the base's pipeline and model options."""
    from tokenizers import Tokenizer, pre_tokenizers, trainers

    blank = json.loads(json.dumps(base))
    blank["model"]["vocab"], blank["model"]["merges"] = {}, []
    blank["added_tokens"], blank["post_processor"] = [], None
    backend = Tokenizer.from_str(json.dumps(blank))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=_specials(base),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(list(texts), trainer)
    return json.loads(backend.to_str())


def train_sentencepiece_like(
    family: Family, texts: Sequence[str], vocab_size: int, sp_model: bytes | None
) -> list[tuple[str, float]]:
    """Normal pieces ``(piece, score)`` of a SentencePiece model trained on ``texts``, in id
    order.
    """
    kind: spm.ModelType = "bpe" if family == "sp_bpe" else "unigram"
    if sp_model is not None:
        settings = spm.spec_settings(sp_model)
        if settings.get("model_type", "unigram") != kind:
            raise PolymnesiaError(
                f"the tokenizer.model given is {settings.get('model_type')} but tokenizer.json is "
                f"{family}"
            )
        settings.pop("model_type", None)
    else:
        settings = {"byte_fallback": True} if kind == "bpe" else {}
    model = spm.train_sentencepiece(texts, vocab_size, kind, **settings)
    return [(p, s) for p, s, t in spm.pieces(model) if t == "NORMAL"]


def _next_id(data: dict[str, Any]) -> int:
    vocab = data["model"]["vocab"]
    ids = list(vocab.values()) if isinstance(vocab, dict) else [len(vocab) - 1]
    return max(ids + [t["id"] for t in data.get("added_tokens", [])], default=-1) + 1


def _append_sp_bpe(
    base: dict[str, Any], new: list[tuple[str, float]], exclude: set[str], cap: int | None
) -> tuple[dict[str, Any], list[str], int]:
    merged = json.loads(json.dumps(base))
    vocab: dict[str, int] = merged["model"]["vocab"]
    first = _next_id(base)
    special = set(_specials(base))
    added = [p for p, _ in new if p not in vocab and p not in special and p not in exclude]
    added = added[:cap] if cap is not None else added
    vocab.update({p: first + i for i, p in enumerate(added)})
    new_set = set(added)
    have = {
        tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in base["model"]["merges"]
    }
    extra: set[tuple[str, str]] = set()
    for piece in vocab:
        if piece in special or len(piece) < 2:
            continue
        for i in range(1, len(piece)):
            a, b = piece[:i], piece[i:]
            if a in vocab and b in vocab and (piece in new_set or a in new_set or b in new_set):
                extra.add((a, b))
    ordered = sorted(extra - have, key=lambda m: (vocab[m[0] + m[1]], vocab[m[0]], vocab[m[1]]))
    merged["model"]["merges"] = list(base["model"]["merges"]) + [list(m) for m in ordered]
    return merged, added, len(ordered)


def _append_unigram(
    base: dict[str, Any], new: list[tuple[str, float]], exclude: set[str], cap: int | None
) -> tuple[dict[str, Any], list[str], int]:
    merged = json.loads(json.dumps(base))
    vocab: list[list[Any]] = merged["model"]["vocab"]
    first = _next_id(base)
    by_id = {t["id"]: t["content"] for t in base.get("added_tokens", [])}
    floor = min(float(s) for _, s in vocab) if vocab else 0.0
    while len(vocab) < first:  # ids taken by added tokens beyond the list (XLM-R's <mask>)
        vocab.append([by_id.get(len(vocab), f"<unused{len(vocab)}>"), floor])
    known = {p for p, _ in vocab} | set(by_id.values())
    added = [p for p, _ in new if p not in known and p not in exclude]
    added = added[:cap] if cap is not None else added
    scores = dict(new)
    vocab.extend([p, float(scores[p])] for p in added)
    return merged, added, 0


def _assemble(
    family: Family,
    base: dict[str, Any],
    new: Any,
    exclude: set[str],
    cap: int | None,
    no_base_results: bool,
) -> tuple[dict[str, Any], list[str], int]:
    if family == "sp_bpe":
        return _append_sp_bpe(base, new, exclude, cap)
    if family == "unigram":
        return _append_unigram(base, new, exclude, cap)
    trimmed = json.loads(json.dumps(new))
    trimmed["model"]["vocab"] = {t: i for t, i in new["model"]["vocab"].items() if t not in exclude}
    merged, n_added, _, n_merges, first = merge_tokenizer_json(base, trimmed, cap)
    inverse = {i: t for t, i in merged["model"]["vocab"].items()}
    added = [inverse[first + i] for i in range(n_added)]
    if no_base_results:
        n_base = len(base["model"]["merges"])
        base_vocab = base["model"]["vocab"]
        tail = [m for m in merged["model"]["merges"][n_base:] if "".join(m) not in base_vocab]
        merged["model"]["merges"] = merged["model"]["merges"][:n_base] + tail
        n_merges = len(tail)
    return merged, added, n_merges


def expand_tokenizer(
    base: Any,
    new_texts: Sequence[str],
    new_vocab_size: int,
    *,
    base_texts: Sequence[str] = (),
    keep_base_tokenization: bool = True,
    max_new_tokens: int | None = None,
    sp_model: bytes | None = None,
    min_frequency: int = 2,
) -> Expansion:
    """Learn ``new_vocab_size`` pieces on ``new_texts`` as the base was learned, and append them.

    ``base_texts``: base-language texts whose tokenization is checked (and kept,
    with ``keep_base_tokenization``). ``sp_model``: the base's SentencePiece
    ``tokenizer.model`` bytes, for its trainer settings and an expanded copy.
    """
    if isinstance(new_texts, str) or not new_texts:
        raise ConfigError("expand_tokenizer needs a non-empty list of new-language texts")
    if max_new_tokens is not None and max_new_tokens < 0:
        raise ConfigError(f"max_new_tokens must be >= 0 or None, got {max_new_tokens}")
    family = tokenizer_family(base)
    base_json = _json(base)
    if family == "byte_bpe":
        new: Any = train_byte_bpe_like(base_json, new_texts, new_vocab_size, min_frequency)
        new_size = len(new["model"]["vocab"]) + len(new.get("added_tokens", []))
    else:
        new = train_sentencepiece_like(family, new_texts, new_vocab_size, sp_model)
        new_size = len(new)
    merged, added, n_merges, dropped, changed = _keep_base(
        family, base_json, new, base_texts, keep_base_tokenization, max_new_tokens
    )
    tokenizer = _rebuild_like(base, merged)
    first = _next_id(base_json)
    report = ExpansionReport(
        family=family,
        base_size=len(base),
        new_size=new_size,
        added=len(added),
        merged_size=len(tokenizer),
        first_new_id=first,
        merges_added=n_merges,
        dropped_for_base=dropped,
        base_texts=len(base_texts),
        base_texts_changed=changed,
    )
    expanded_sp = _expand_proto(family, sp_model, added, new) if sp_model is not None else None
    return Expansion(tokenizer, report, expanded_sp)


def _keep_base(
    family: Family,
    base_json: dict[str, Any],
    new: Any,
    base_texts: Sequence[str],
    keep: bool,
    cap: int | None,
) -> tuple[dict[str, Any], list[str], int, int, int]:
    """Merge, then drop new tokens that change base texts (see module docstring)."""
    from tokenizers import Tokenizer

    reference = Tokenizer.from_str(json.dumps(base_json))
    before = [e.ids for e in reference.encode_batch(list(base_texts), add_special_tokens=False)]
    first = _next_id(base_json)
    exclude: set[str] = set()
    no_base_results = False
    for _ in range(_MAX_ROUNDS):
        merged, added, n_merges = _assemble(family, base_json, new, exclude, cap, no_base_results)
        backend = Tokenizer.from_str(json.dumps(merged))
        after = [e.ids for e in backend.encode_batch(list(base_texts), add_special_tokens=False)]
        changed = [a for a, b in zip(after, before, strict=True) if a != b]
        if not changed or not keep:
            return merged, added, n_merges, len(exclude), len(changed)
        culprits = {backend.id_to_token(i) for ids in changed for i in ids if i >= first}
        if not culprits and no_base_results:
            break
        no_base_results = no_base_results or not culprits
        exclude |= {c for c in culprits if c is not None}
    raise PolymnesiaError(
        f"could not keep the base tokenization of {len(changed)} base texts after "
        f"{_MAX_ROUNDS} rounds; set keep_base_tokenization: false to accept the change"
    )


def _expand_proto(family: Family, sp_model: bytes, added: list[str], new: Any) -> bytes:
    """The base ``tokenizer.model`` with the same pieces appended (scores: module docstring)."""
    if family == "byte_bpe":
        raise PolymnesiaError("a byte-level BPE has no SentencePiece tokenizer.model to expand")
    if family == "sp_bpe":
        floor = min((s for _, s, t in spm.pieces(sp_model) if t == "NORMAL"), default=0.0)
        scored = [(p, floor - 1.0 - i) for i, p in enumerate(added)]
    else:
        scores = dict(new)
        scored = [(p, scores[p]) for p in added]
    return spm.append_pieces(sp_model, scored)
