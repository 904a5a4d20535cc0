"""Attention heatmaps: viz.plot_attention and save_attention_png (the paper's section 7 figures)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from aiayn.apps.viz import attention_axes, plot_attention, save_attention_png
from aiayn.errors import AiaynError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fake_attention(n_layers=2, n_heads=4, n_src=5, n_tgt=3, seed=0) -> dict:
    """What Translator.attention returns, with random row-stochastic weights."""
    g = torch.Generator().manual_seed(seed)

    def maps(q, k):
        return [torch.rand(n_heads, q, k, generator=g).softmax(-1) for _ in range(n_layers)]

    return {
        "translation": "the dog",
        "src_tokens": ["▁el", "▁per", "ro", "▁.", "</s>"][:n_src],
        "tgt_tokens": ["▁the", "▁dog", "</s>"][:n_tgt],
        "encoder": maps(n_src, n_src),
        "decoder": maps(n_tgt, n_tgt),
        "cross": maps(n_tgt, n_src),
    }


def _heatmaps(fig):
    return [ax for ax in fig.axes if ax.images and ax.get_title().startswith("head")]


@pytest.mark.parametrize(("kind", "rows", "cols"), [("cross", 3, 5), ("encoder", 5, 5), ("decoder", 3, 3)])
def test_grid_of_heads_shows_each_heads_weights(kind, rows, cols):
    attn = fake_attention()
    fig = plot_attention(attn, kind, layer=1)
    panels = _heatmaps(fig)
    assert [ax.get_title() for ax in panels] == ["head 1", "head 2", "head 3", "head 4"]
    queries, keys = attention_axes(attn, kind)
    for h, ax in enumerate(panels):
        np.testing.assert_array_equal(ax.images[0].get_array(), attn[kind][0][h].numpy())
        assert ax.images[0].get_clim() == (0.0, 1.0)
        assert [t.get_text() for t in ax.get_xticklabels()] == keys
        assert [t.get_text() for t in ax.get_yticklabels()] == queries
    assert (len(queries), len(keys)) == (rows, cols)
    assert "layer 1 of 2" in fig._suptitle.get_text()
    assert any(ax.get_ylabel() == "attention weight" for ax in fig.axes)  # the colorbar


def test_axes_of_each_kind():
    attn = fake_attention()
    assert attention_axes(attn, "cross") == (attn["tgt_tokens"], attn["src_tokens"])
    assert attention_axes(attn, "encoder") == (attn["src_tokens"], attn["src_tokens"])
    assert attention_axes(attn, "decoder") == (["<s>", "▁the", "▁dog"], ["<s>", "▁the", "▁dog"])


def test_one_head_and_default_last_layer():
    attn = fake_attention()
    (panel,) = _heatmaps(plot_attention(attn, "cross", head=3))
    np.testing.assert_array_equal(panel.images[0].get_array(), attn["cross"][-1][2].numpy())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layer": 3}, "layer 3 is out of range: the cross attention has 2"),
        ({"layer": 0}, "layer 0 is out of range"),
        ({"head": 5}, "head 5 is out of range: a layer has 4"),
        ({"kind": "self"}, "attention kind 'self' is not one of cross, encoder, decoder"),
    ],
)
def test_bad_layer_head_kind(kwargs, message):
    with pytest.raises(AiaynError, match=message):
        plot_attention(fake_attention(), **kwargs)


def test_png_written(tmp_path):
    out = save_attention_png(fake_attention(), tmp_path / "a.png", "encoder")
    assert out.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(AiaynError, match="does not exist"):
        save_attention_png(fake_attention(), tmp_path / "no" / "a.png")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a.txt", "--out .*a.txt: the file name must end in .png"),
        ("adir", "--out .*adir: the file name must end in .png"),
        ("folder.png", "--out .*folder.png: is a folder, not a file"),
    ],
)
def test_only_a_png_file_is_written(tmp_path, name, message):
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(AiaynError, match=message):
        save_attention_png(fake_attention(), tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.png"]  # nothing written


def test_png_suffix_in_any_case(tmp_path):
    out = save_attention_png(fake_attention(), tmp_path / "A.PNG")
    assert out == tmp_path / "A.PNG" and out.read_bytes()[:8] == PNG_MAGIC
