"""The target languages of a model and the tag that chooses one (Johnson et al., 2017): a model
prepared from a recipe with `tags: true` (aiayn.data.recipe) read `>>de<<` (OPUS-MT's form, one
SentencePiece piece) at the start of every training source, and its model directory lists the
languages (config.json's "target_languages", with the tag's form in "target_tag"). Translating
into one of them puts the same tag at the start of every source the model reads.

    target_languages(info)                       # ["de", "es", "fr"]; [] for a model without tags
    chosen_target(info, "de", "--to")            # ">>de<<", checked: one line for a language it lacks
    requested_target(info, None, "--to")         # one line when the model has several to choose from
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiayn.errors import AiaynError, TextError

TAG_FORM = ">>{lang}<<"  # what aiayn prepare writes (aiayn.data.recipe.Recipe.tag)


def target_languages(info: dict[str, Any]) -> list[str]:
    """The languages a model directory's config.json says its tags choose ([] for a model without)."""
    languages = info.get("target_languages")
    return [str(lang) for lang in languages] if isinstance(languages, list) else []


def languages_text(info: dict[str, Any]) -> str:
    """The model's target languages for a message: "de, es, fr"."""
    return ", ".join(target_languages(info))


def chosen_target(info: dict[str, Any], language: str | None, what: str) -> str | None:
    """The tag (">>de<<") that makes the model translate into `language`, or None for no tag: a
    model without tags asked for its own target language (or for none), or a multilingual model
    asked for none (the texts carry their tags, as a prepared data directory's test sources do).
    A one-line AiaynError naming `what` (--to, target) for a language the model does not have."""
    languages, own = target_languages(info), info.get("tgt_lang")
    if language is None:
        return None
    if not isinstance(language, str) or not language:
        raise AiaynError(f"{what}: a language code such as 'de', not {language!r}")
    if not languages:
        if language == own:
            return None
        into = f"translates into {own} only" if own else "has no target-language tags"
        raise AiaynError(f"{what} {language}: this model {into}; it was not prepared with tags")
    if language not in languages:
        raise AiaynError(
            f"{what} {language}: the model does not translate into it; it has {languages_text(info)}"
        )
    return str(info.get("target_tag") or TAG_FORM).format(lang=language)


def required_target(info: dict[str, Any], language: str | None, what: str) -> str | None:
    """`language`, or the model's one target language; a one-line AiaynError when a model of
    several target languages is given none (a user-facing command has no tagged input)."""
    languages = target_languages(info)
    if language is not None or not languages:
        return language
    if len(languages) == 1:
        return languages[0]
    raise AiaynError(f"the model translates into {languages_text(info)}: choose one with {what}")


def requested_target(info: dict[str, Any], language: str | None, what: str) -> str | None:
    """What a command (--to) or a request (target) asks for, checked: `required_target`, then
    `chosen_target`'s errors."""
    language = required_target(info, language, what)
    chosen_target(info, language, what)
    return language


def text_tags(
    info: dict[str, Any], language: str | Sequence[str | None] | None, count: int
) -> list[str | None]:
    """`Translator.translate_batch(target_language=...)`, one language for every text or one per
    text (None: no tag), as each text's tag; errors name the text."""
    if language is None or isinstance(language, str):
        return [chosen_target(info, language, "target_language")] * count
    if len(language) != count:
        raise AiaynError(f"target_language: {len(language)} entries for {count} texts (one per text)")
    tags = []
    for i, one in enumerate(language):
        try:
            tags.append(chosen_target(info, one, "target_language"))
        except AiaynError as err:
            raise TextError(i, str(err)) from None
    return tags
