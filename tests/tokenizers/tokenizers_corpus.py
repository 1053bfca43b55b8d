"""Tiny multilingual corpus, sentences written for these tests (no external text).

"Base" languages use Latin, Cyrillic and Arabic script; "new" languages use
Japanese, Thai and Hangul, so the two vocabularies share only bytes,
spaces and punctuation.
"""

from __future__ import annotations

import itertools

PARTS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "en": (
        ["The teacher", "My sister", "A small dog", "The old farmer", "Our neighbour"],
        ["reads", "finds", "carries", "paints", "remembers"],
        ["a green book.", "the warm bread.", "two red apples.", "the river map.", "a quiet song."],
    ),
    "es": (
        ["La maestra", "Mi hermano", "Un perro pequeño", "El viejo granjero", "Nuestra vecina"],
        ["lee", "encuentra", "lleva", "pinta", "recuerda"],
        [
            "un libro verde.",
            "el pan caliente.",
            "dos manzanas rojas.",
            "el mapa del río.",
            "una canción tranquila.",
        ],
    ),
    "ru": (
        ["Учитель", "Моя сестра", "Маленькая собака", "Старый фермер", "Наш сосед"],
        ["читает", "находит", "несёт", "рисует", "помнит"],
        ["зелёную книгу.", "тёплый хлеб.", "два красных яблока.", "карту реки.", "тихую песню."],
    ),
    "ar": (
        ["المعلم", "أختي", "كلب صغير", "المزارع العجوز", "جارنا"],
        ["يقرأ", "يجد", "يحمل", "يرسم", "يتذكر"],
        ["كتابا أخضر.", "الخبز الدافئ.", "تفاحتين حمراوين.", "خريطة النهر.", "أغنية هادئة."],
    ),
    "ja": (
        ["先生は", "私の妹は", "小さい犬は", "年を取った農家は", "となりの人は"],
        ["毎朝", "ときどき", "きのう", "いつも", "しずかに"],
        [
            "緑の本を読みます。",
            "温かいパンを食べます。",
            "赤いりんごを運びます。",
            "川の地図を描きます。",
            "静かな歌を覚えています。",
        ],
    ),
    "th": (
        ["ครูของเรา", "น้องสาวของฉัน", "สุนัขตัวเล็ก", "ชาวนาแก่", "เพื่อนบ้านของเรา"],
        ["อ่าน", "พบ", "ถือ", "วาด", "จำ"],
        ["หนังสือสีเขียว", "ขนมปังอุ่น", "แอปเปิ้ลสีแดงสองลูก", "แผนที่แม่น้ำ", "เพลงที่เงียบสงบ"],
    ),
    "ko": (
        ["선생님은", "내 여동생은", "작은 개는", "늙은 농부는", "우리 이웃은"],
        ["매일", "가끔", "어제", "항상", "조용히"],
        [
            "초록색 책을 읽습니다.",
            "따뜻한 빵을 먹습니다.",
            "빨간 사과를 나릅니다.",
            "강 지도를 그립니다.",
            "조용한 노래를 기억합니다.",
        ],
    ),
}

BASE_LANGS = ("en", "es", "ru", "ar")
NEW_LANGS = ("ja", "th", "ko")

# Held-out text of each language (recombined words, digits, emoji).
HELD_OUT: dict[str, str] = {
    "en": "The quiet farmer remembers 3 green apples 🍎.",
    "es": "La vecina pinta el río: ¡qué canción!",
    "ru": "Сосед несёт хлеб и книгу 42 раза.",
    "ar": "المعلم يرسم خريطة الخبز.",
    "ja": "農家の先生は毎朝パンを食べます🍞。",
    "th": "ครูวาดแผนที่ 7 ครั้ง",
    "ko": "이웃은 조용히 사과를 먹습니다 😀.",
}


def sentences(lang: str) -> list[str]:
    subjects, verbs, objects = PARTS[lang]
    return [" ".join(p) for p in itertools.product(subjects, verbs, objects)]
