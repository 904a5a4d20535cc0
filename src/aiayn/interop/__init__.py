"""Interoperability with Hugging Face Marian / OPUS-MT models: import, export, Marian's tokenizer."""

from aiayn.interop.hf_export import export_hf, marian_incompatibilities
from aiayn.interop.marian_import import import_marian
from aiayn.interop.marian_tokenizer import MarianVocabTokenizer

__all__ = ["import_marian", "export_hf", "marian_incompatibilities", "MarianVocabTokenizer"]
