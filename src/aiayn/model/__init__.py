"""The model of section 3."""

from aiayn.model.transformer import Decoder, DecoderState, Encoder, Transformer

__all__ = ["Transformer", "Encoder", "Decoder", "DecoderState"]
