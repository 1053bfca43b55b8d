"""Benchmark BPE training and the vocabulary merge at paper-000 sizes (a script, not a test).

Paper 000, appendix A: a 32,000-token base vocabulary merged with 16,000 new
tokens (48,000). No real corpus ships with polymnesia, so the text is
synthetic: per "language", words built from random syllables of its own
Unicode block (Latin, Cyrillic, Arabic for the base; Hiragana, Thai, Hangul
for the new languages). Prints training and merge times, the merge report and
the fertility table before/after the merge.

Run: ``python benchmarks/tokenizer_merge.py [--quick]`` (quick: 4,000 + 2,000).
"""

from __future__ import annotations

import argparse
import random
import time

from polymnesia.tokenizers.bpe import train_bpe
from polymnesia.tokenizers.fertility import fertility_table
from polymnesia.tokenizers.merge import merge_tokenizers

BLOCKS = {  # first code point and size of a range of letters
    "latin": (0x61, 26),
    "cyrillic": (0x430, 32),
    "arabic": (0x628, 20),
    "hiragana": (0x3042, 80),
    "thai": (0x0E01, 46),
    "hangul": (0xAC00, 400),
}
BASE, NEW = ("latin", "cyrillic", "arabic"), ("hiragana", "thai", "hangul")


def synthetic_texts(block: str, n_texts: int, seed: int) -> list[str]:
    """Sentences of Zipf-distributed words made of 1-4 syllables of ``block``."""
    rng = random.Random(seed)
    start, size = BLOCKS[block]
    letters = [chr(start + i) for i in range(size)]
    lexicon = ["".join(rng.choices(letters, k=rng.randint(2, 8))) for _ in range(20000)]
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    return [" ".join(rng.choices(lexicon, weights=weights, k=20)) + "." for _ in range(n_texts)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4,000 + 2,000 tokens, less text")
    args = parser.parse_args()
    base_size, new_size, n_texts = (4000, 2000, 3000) if args.quick else (32000, 16000, 20000)
    corpus = {b: synthetic_texts(b, n_texts, seed=i) for i, b in enumerate(BLOCKS)}
    t0 = time.perf_counter()
    base = train_bpe([t for b in BASE for t in corpus[b]], base_size)
    t1 = time.perf_counter()
    new = train_bpe([t for b in NEW for t in corpus[b]], new_size)
    t2 = time.perf_counter()
    merged, report = merge_tokenizers(base, new)
    t3 = time.perf_counter()
    print(f"train base {len(base)}: {t1 - t0:.1f} s; train new {len(new)}: {t2 - t1:.1f} s")
    print(f"merge: {t3 - t2:.2f} s; {report}")
    held_out = {b: corpus[b][:200] for b in BLOCKS}
    print(f"{'script':10s} {'tokenizer':9s} {'tok/word':>8s} {'tok/byte':>8s}")
    for row in fertility_table({"base": base, "merged": merged}, held_out):
        print(
            f"{row['lang']:10s} {row['tokenizer']:9s} "
            f"{row['tokens_per_word']:8.3f} {row['tokens_per_byte']:8.3f}"
        )


if __name__ == "__main__":
    main()
