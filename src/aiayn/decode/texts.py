"""Text conveniences on `Translator.translate_batch` (section 6.1's search): plain strings, documents.

    translate_texts(translator, ["En el principio era el Verbo."], beam_size=4)  # ['In the ...']
    translate_document(translator, text)    # paragraphs and sentences, the layout kept

Each is `translate_batch` and a few lines; line-by-line streams are aiayn.decode.stream's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiayn.config import DecodeConfig
from aiayn.decode.document import join_document, split_document

if TYPE_CHECKING:
    from aiayn.decode.translator import Translator


def translate_texts(
    translator: Translator, texts: list[str], options: DecodeConfig | None = None, **controls: Any
) -> list[str]:
    """The best translation of each text, as a string; `options` and `controls` are
    `Translator.translate_batch`'s."""
    return [found[0].text for found in translator.translate_batch(texts, options, **controls)]


def translate_document(
    translator: Translator, text: str, options: DecodeConfig | None = None, **controls: Any
) -> str:
    """A document (paragraphs at blank lines) translated sentence by sentence, its layout kept;
    `options` and `controls` are `Translator.translate_batch`'s."""
    doc = split_document(text, translator.info.get("src_lang") or "en")
    translations = translate_texts(translator, doc.sentences, options, **controls) if doc.sentences else []
    return join_document(doc, translations)
