"""Language identification for the LibreTranslate-compatible endpoints (`POST /detect`, `source:
"auto"`), by py3langid (the identifier `aiayn prepare --clean` uses; its model ships in the wheel,
nothing is downloaded): each text's most probable languages with their probability, normalised
over the 97 languages the identifier knows."""

from __future__ import annotations

import functools
from typing import Any

from aiayn.errors import AiaynError

TOP = 3  # candidates `POST /detect` answers per text


@functools.cache
def _identifier() -> Any:
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        raise AiaynError("language detection needs the py3langid package (pip install py3langid)") from None
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify(texts: list[str], top: int = TOP) -> list[list[tuple[str, float]]]:
    """Per text, its `top` most probable languages (ISO 639-1 codes) and their probabilities (0-1),
    best first; an empty text gets []. For a worker thread: a few milliseconds per text."""
    identifier = _identifier()
    out = []
    for text in texts:
        ranked = identifier.rank(text) if text.strip() else []
        out.append([(str(lang), float(p)) for lang, p in ranked[:top]])
    return out


def probability(text: str, language: str) -> float:
    """How probable (0-1) the identifier finds it that `text` is in `language` (0 when it does not know
    the language, or the text is empty)."""
    if not text.strip():
        return 0.0
    return dict(_identifier().rank(text)).get(language.split("-")[0].split("_")[0].lower(), 0.0)
