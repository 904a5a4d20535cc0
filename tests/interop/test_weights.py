"""Weight names and layouts (aiayn.interop.weights): aiayn's fused projections <-> Marian's apart,
and the model dimension permuted without changing the function."""

from __future__ import annotations

import pytest
import torch
from marian_helpers import batch

from aiayn.config import ModelConfig
from aiayn.errors import AiaynError
from aiayn.interop.weights import aiayn_to_marian, concat_permutation, marian_to_aiayn, permute_model_dim
from aiayn.model.transformer import Transformer


def random_model(**overrides) -> Transformer:
    """A small model whose LayerNorms and biases are away from 1 / 0, so that every mapping matters."""
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(**(dict(vocab_size=64, d_model=32, d_ff=64, n_heads=4, n_layers=2) | overrides))
    )
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.normal_(0.0, 0.5)
    return model.eval()


def test_permutation_turns_interleaved_into_concat():
    model = random_model()
    state = permute_model_dim(model.state_dict(), concat_permutation(model.config.d_model))
    permuted = Transformer(model.config.replace(sinusoid_layout="concat")).eval()
    permuted.load_state_dict(state)
    src, tgt_in = batch(model.config)
    with torch.no_grad():
        torch.testing.assert_close(permuted(src, tgt_in), model(src, tgt_in), atol=1e-5, rtol=0)
        # without the permutation the concat layout computes something else
        model_concat = Transformer(model.config.replace(sinusoid_layout="concat")).eval()
        model_concat.load_state_dict(model.state_dict())
        assert (model_concat(src, tgt_in) - model(src, tgt_in)).abs().max() > 1e-2


def test_the_permutation_is_even_coordinates_then_odd_and_unknown_tensors_are_refused():
    assert concat_permutation(6).tolist() == [0, 2, 4, 1, 3, 5]
    with pytest.raises(AiaynError, match=r"^cannot permute the model dimension of 'extra.weight'"):
        permute_model_dim({"extra.weight": torch.zeros(2, 2)}, concat_permutation(2))


@pytest.mark.parametrize("tie", ["all", "none"])
def test_marian_s_projections_are_the_thirds_of_the_fused_one_and_convert_back(tie):
    model = random_model(tie_embeddings=tie)
    config, state = model.config, model.state_dict()
    hf = aiayn_to_marian(state, config)
    qkv, d = state["encoder.layers.1.self_attn.qkv_proj.weight"], config.d_model  # (3 d, d): [q; k; v]
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        assert torch.equal(hf[f"model.encoder.layers.1.self_attn.{name}.weight"], qkv[i * d : (i + 1) * d])
    kv = state["decoder.layers.0.cross_attn.kv_proj.bias"]
    assert torch.equal(hf["model.decoder.layers.0.encoder_attn.v_proj.bias"], kv[d:])
    embeddings = {
        "src": state["src_embed.weight"], "tgt": state["tgt_embed.weight"],
        "output": state["output_weight"], "bias": hf["final_logits_bias"],
    }  # fmt: skip
    back = marian_to_aiayn(hf, config, embeddings)
    assert torch.equal(back.pop("output_bias"), torch.zeros(config.vocab_size))  # the model has none
    for key, value in back.items():
        assert torch.equal(value, state[key].float()), key
    assert {k for k in state if "layers" in k} == {k for k in back if "layers" in k}
    del hf["model.decoder.layers.0.fc1.bias"]
    with pytest.raises(AiaynError, match=r"^weights have no tensor 'model.decoder.layers.0.fc1.bias'$"):
        marian_to_aiayn(hf, config, embeddings)
