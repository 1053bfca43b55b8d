"""Time ``isotropy_report`` on N and 4N synthetic tokens; the ratio should stay <= 4.5 (linear).

Run: ``python benchmarks/isotropy.py [--n 50000] [--d 128]``. Words follow a
Zipf-like law over a vocabulary that grows with N (as in real text), sentences
hold 25 tokens. BLAS runs on one thread unless the environment says otherwise:
on a small shared machine, threaded BLAS contention makes timings erratic.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from polymnesia.metrics.isotropy import isotropy_report  # noqa: E402


def synthetic(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(n, d)).astype(np.float32) + 0.3
    vocab = max(100, n // 10)
    word_ids = np.minimum(rng.zipf(1.3, size=n), vocab) - 1
    sent_ids = np.arange(n) // 25
    return H, word_ids, sent_ids


def best_times(sizes: list[int], d: int, repeats: int = 5) -> list[float]:
    """Best of ``repeats`` timings per size, the sizes interleaved so load drifts hit all alike."""
    data = [synthetic(n, d) for n in sizes]
    isotropy_report(*(x[:1000] for x in data[0]))  # warm-up
    best = [float("inf")] * len(sizes)
    for _ in range(repeats):
        for k, (H, words, sents) in enumerate(data):
            start = time.perf_counter()
            isotropy_report(H, words, sents)
            best[k] = min(best[k], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--d", type=int, default=128)
    args = parser.parse_args()
    t1, t4 = best_times([args.n, 4 * args.n], args.d)
    print(f"N={args.n:>8} d={args.d}: {t1:.3f} s")
    print(f"N={4 * args.n:>8} d={args.d}: {t4:.3f} s")
    print(f"ratio 4N/N = {t4 / t1:.2f} (goal <= 4.5)")


if __name__ == "__main__":
    main()
