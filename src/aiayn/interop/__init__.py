"""Interoperability: Hugging Face Marian / OPUS-MT import and export, Marian's tokenizer, ONNX export."""

from aiayn.interop.hf_export import export_hf, marian_incompatibilities
from aiayn.interop.marian_import import import_marian
from aiayn.interop.marian_tokenizer import MarianVocabTokenizer
from aiayn.interop.onnx_export import export_onnx

__all__ = ["import_marian", "export_hf", "export_onnx", "marian_incompatibilities", "MarianVocabTokenizer"]
