"""Verifiable instructions about Bible verses, checked by lm-eval's IFEval checkers.

IFEval (Zhou et al. 2023; the two-phase CFT paper's first English-ability task) asks for a
response with properties a program can check ("wrap your answer in double
quotes", "no commas"). Here each instruction is about one verse, so the
correct answer is known: the verse itself, formatted as asked. Five kinds,
each checked by one IFEval checker of ``lm_eval.tasks.ifeval``:

============ ======================================= ==================================
kind         response                                IFEval instruction id
============ ======================================= ==================================
quote        ``"verse"``                             ``startend:quotation``
no_comma     the verse without any comma             ``punctuation:no_comma``
title        ``<<first words>>`` then the verse      ``detectable_format:title``
end_phrase   the verse, then ``Amen.``               ``startend:end_checker``
bullets      the verse in exactly 3 ``* `` bullets   ``detectable_format:number_bullet_lists``
============ ======================================= ==================================

The instructions are written in English and in the ten languages of
MultiAlpaca (the two-phase CFT paper's Phase 2 set) that the Bible source has: fr, ar, de,
es, id, ja, ko, pt, ru, vi (MultiAlpaca's eleventh, Thai, is not in the Bible).
The checkers are language-independent for these kinds (they look at quotes,
commas, ``<<>>``, the ending and bullet lines), so the same ids score every
language. IFEval's own checkers are used, not re-implemented:
:func:`check_following` imports them after :func:`polymnesia.instructions.punkt.ensure_punkt`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polymnesia.errors import DataError
from polymnesia.instructions.punkt import ensure_punkt

KINDS = ("quote", "no_comma", "title", "end_phrase", "bullets")
END_PHRASE = "Amen."
N_BULLETS = 3
#: characters removed from the ``no_comma`` response: ASCII, Arabic, full-width and ideographic
#: commas
COMMAS = (",", "\u060c", "\uff0c", "\u3001")

CHECKERS: dict[str, tuple[str, dict[str, Any]]] = {
    "quote": ("startend:quotation", {}),
    "no_comma": ("punctuation:no_comma", {}),
    "title": ("detectable_format:title", {}),
    "end_phrase": ("startend:end_checker", {"end_phrase": END_PHRASE}),
    "bullets": ("detectable_format:number_bullet_lists", {"num_bullets": N_BULLETS}),
}

# fmt: off
TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        "quote": 'Repeat this verse and wrap your entire answer in double quotation marks ("...").',
        "no_comma": "Repeat this verse without using any commas.",
        "title": (
            "Repeat this verse and give it a title wrapped in double angular brackets, such as "
            "<<title>>."
        ),
        "end_phrase": 'Repeat this verse and end your answer with the exact phrase "Amen."',
        "bullets": (
            "Split this verse into exactly 3 bullet points, using markdown bullets such as: * "
            "point."
        ),
    },
    "fr": {
        "quote": 'Répète ce verset et mets toute ta réponse entre guillemets doubles ("...").',
        "no_comma": "Répète ce verset sans utiliser de virgules.",
        "title": (
            "Répète ce verset et donne-lui un titre entre doubles chevrons, par exemple <<titre>>."
        ),
        "end_phrase": 'Répète ce verset et termine ta réponse par la phrase exacte "Amen."',
        "bullets": (
            "Découpe ce verset en exactement 3 puces, avec des puces markdown comme : * point."
        ),
    },
    "de": {
        "quote": (
            'Wiederhole diesen Vers und setze deine gesamte Antwort in doppelte Anführungszeichen '
            '("...").'
        ),
        "no_comma": "Wiederhole diesen Vers, ohne Kommas zu verwenden.",
        "title": (
            "Wiederhole diesen Vers und gib ihm einen Titel in doppelten spitzen Klammern, zum "
            "Beispiel <<Titel>>."
        ),
        "end_phrase": 'Wiederhole diesen Vers und beende deine Antwort mit genau dem Satz "Amen."',
        "bullets": (
            "Teile diesen Vers in genau 3 Aufzählungspunkte auf, mit Markdown-Punkten wie: * Punkt."
        ),
    },
    "es": {
        "quote": 'Repite este versículo y pon toda tu respuesta entre comillas dobles ("...").',
        "no_comma": "Repite este versículo sin usar comas.",
        "title": (
            "Repite este versículo y ponle un título entre dobles corchetes angulares, por "
            "ejemplo <<título>>."
        ),
        "end_phrase": 'Repite este versículo y termina tu respuesta con la frase exacta "Amen."',
        "bullets": (
            "Divide este versículo en exactamente 3 viñetas, con viñetas de markdown como: * punto."
        ),
    },
    "pt": {
        "quote": 'Repita este versículo e coloque toda a sua resposta entre aspas duplas ("...").',
        "no_comma": "Repita este versículo sem usar vírgulas.",
        "title": (
            "Repita este versículo e dê a ele um título entre colchetes angulares duplos, por "
            "exemplo <<título>>."
        ),
        "end_phrase": 'Repita este versículo e termine sua resposta com a frase exata "Amen."',
        "bullets": (
            "Divida este versículo em exatamente 3 marcadores, com marcadores markdown como: * "
            "item."
        ),
    },
    "id": {
        "quote": 'Ulangi ayat ini dan tulis seluruh jawabanmu di dalam tanda kutip ganda ("...").',
        "no_comma": "Ulangi ayat ini tanpa menggunakan tanda koma.",
        "title": "Ulangi ayat ini dan beri judul di dalam kurung sudut ganda, misalnya <<judul>>.",
        "end_phrase": 'Ulangi ayat ini dan akhiri jawabanmu dengan frasa persis "Amen."',
        "bullets": "Bagi ayat ini menjadi tepat 3 poin, dengan butir markdown seperti: * poin.",
    },
    "ru": {
        "quote": 'Повтори этот стих и заключи весь ответ в двойные кавычки ("...").',
        "no_comma": "Повтори этот стих, не используя запятых.",
        "title": (
            "Повтори этот стих и дай ему заголовок в двойных угловых скобках, например "
            "<<заголовок>>."
        ),
        "end_phrase": 'Повтори этот стих и закончи ответ точной фразой "Amen."',
        "bullets": (
            "Раздели этот стих ровно на 3 пункта списка в формате markdown, например: * пункт."
        ),
    },
    "vi": {
        "quote": (
            'Hãy lặp lại câu Kinh Thánh này và đặt toàn bộ câu trả lời trong dấu ngoặc kép ("...").'
        ),
        "no_comma": "Hãy lặp lại câu Kinh Thánh này mà không dùng dấu phẩy.",
        "title": (
            "Hãy lặp lại câu Kinh Thánh này và đặt cho nó một tiêu đề trong dấu ngoặc nhọn kép, "
            "ví dụ <<tiêu đề>>."
        ),
        "end_phrase": (
            'Hãy lặp lại câu Kinh Thánh này và kết thúc câu trả lời bằng đúng cụm từ "Amen."'
        ),
        "bullets": (
            "Hãy chia câu Kinh Thánh này thành đúng 3 gạch đầu dòng, dùng dấu markdown như: * ý."
        ),
    },
    "ar": {
        "quote": 'كرّر هذه الآية وضع إجابتك كاملة بين علامتي اقتباس مزدوجتين ("...").',
        "no_comma": "كرّر هذه الآية دون استخدام أي فواصل.",
        "title": "كرّر هذه الآية وأعطها عنوانًا بين قوسين زاويين مزدوجين، مثل <<العنوان>>.",
        "end_phrase": 'كرّر هذه الآية واختم إجابتك بالعبارة الحرفية "Amen."',
        "bullets": "قسّم هذه الآية إلى 3 نقاط بالضبط، باستخدام نقاط ماركداون مثل: * نقطة.",
    },
    "ja": {
        "quote": 'この節を繰り返し、回答全体を二重引用符（"..."）で囲んでください。',
        "no_comma": "この節を、読点やカンマを使わずに繰り返してください。",
        "title": (
            "この節を繰り返し、<<タイトル>> のように二重山括弧で囲んだタイトルを付けてください。"
        ),
        "end_phrase": 'この節を繰り返し、回答の最後を "Amen." という語句で終えてください。',
        "bullets": (
            "この節をちょうど3つの箇条書きに分けてください。「* "
            "項目」のようなマークダウン記法を使ってください。"
        ),
    },
    "ko": {
        "quote": '이 구절을 반복하고 답변 전체를 큰따옴표("...")로 감싸 주세요.',
        "no_comma": "이 구절을 쉼표를 사용하지 않고 반복해 주세요.",
        "title": "이 구절을 반복하고 <<제목>>처럼 이중 꺾쇠괄호로 감싼 제목을 붙여 주세요.",
        "end_phrase": '이 구절을 반복하고 답변을 정확히 "Amen."이라는 문구로 끝내 주세요.',
        "bullets": (
            "이 구절을 정확히 3개의 글머리 기호로 나누어 주세요. 마크다운 기호를 사용하세요. 예: "
            "* 항목"
        ),
    },
}
# fmt: on
#: languages with instruction templates: English, then MultiAlpaca's languages that the Bible has
INSTRUCTION_LANGUAGES: tuple[str, ...] = tuple(TEMPLATES)


@dataclass(frozen=True)
class VerifiableItem:
    """One verifiable instruction about a verse, with its correct response and IFEval check."""

    kind: str
    lang: str
    instruction: str
    input: str
    output: str
    instruction_id_list: list[str] = field(default_factory=list)
    kwargs: list[dict[str, Any]] = field(default_factory=list)


def units(text: str) -> list[str]:
    """Words of ``text``; the characters for unspaced scripts (ja, zh) with fewer than 3 words."""
    words = text.split()
    return words if len(words) >= N_BULLETS else [c for c in text if not c.isspace()]


def _join(parts: Sequence[str], spaced: bool) -> str:
    return (" " if spaced else "").join(parts)


def three_parts(text: str) -> list[str]:
    """``text`` cut into 3 consecutive, non-empty, nearly equal parts (by words or characters)."""
    u = units(text)
    if len(u) < N_BULLETS:
        raise DataError(f"verse {text!r} is too short to split into {N_BULLETS} parts")
    spaced = len(text.split()) >= N_BULLETS
    k, r = divmod(len(u), N_BULLETS)
    bounds, start = [], 0
    for i in range(N_BULLETS):
        end = start + k + (1 if i < r else 0)
        bounds.append((start, end))
        start = end
    return [_join(u[a:b], spaced) for a, b in bounds]


def response(kind: str, verse: str) -> str:
    """The correct response to instruction ``kind`` about ``verse`` (see the module table)."""
    if kind == "quote":
        return f'"{verse}"'
    if kind == "no_comma":
        out = verse
        for c in COMMAS:
            out = out.replace(c, "")
        return " ".join(out.split())
    if kind == "title":
        u = units(verse)
        spaced = len(verse.split()) >= N_BULLETS
        title = _join(u[: 3 if spaced else 6], spaced).replace("<", "").replace(">", "")
        return f"<<{title}>>\n{verse}"
    if kind == "end_phrase":
        return f"{verse}\n{END_PHRASE}"
    if kind == "bullets":
        return "\n".join(f"* {p}" for p in three_parts(verse))
    raise DataError(f"unknown instruction kind '{kind}'; accepted: {', '.join(KINDS)}")


def verifiable_item(kind: str, lang: str, verse: str) -> VerifiableItem:
    """The instruction ``kind`` in language ``lang`` about ``verse``, its response and its check."""
    if lang not in TEMPLATES:
        raise DataError(
            f"no verifiable-instruction templates in '{lang}'; accepted: "
            + ", ".join(INSTRUCTION_LANGUAGES)
        )
    if kind not in CHECKERS:
        raise DataError(f"unknown instruction kind '{kind}'; accepted: {', '.join(KINDS)}")
    checker, kwargs = CHECKERS[kind]
    return VerifiableItem(
        kind, lang, TEMPLATES[lang][kind], verse, response(kind, verse), [checker], [dict(kwargs)]
    )


def check_following(
    instruction_id_list: Sequence[str],
    kwargs: Sequence[Mapping[str, Any]],
    response_text: str,
    prompt: str = "",
) -> list[bool]:
    """IFEval's strict check of ``response_text`` against each instruction (lm-eval's checkers)."""

    ensure_punkt()
    from lm_eval.tasks.ifeval.utils import InputExample, test_instruction_following_strict

    inp = InputExample(
        key=0,
        instruction_id_list=list(instruction_id_list),
        prompt=prompt,
        kwargs=[dict(k) for k in kwargs],
    )
    return list(test_instruction_following_strict(inp, response_text).follow_instruction_list)


def item_passes(item: VerifiableItem) -> bool:
    """True when the item's own response passes its checks (items that fail are not recorded)."""
    return all(check_following(item.instruction_id_list, item.kwargs, item.output, item.input))
