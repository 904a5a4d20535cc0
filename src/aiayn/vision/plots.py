"""Pictures of the image model as PNG files (matplotlib, no display): training curves of a run
(loss, accuracy, learning rate) and where the model looks, drawn over the image
(`aiayn vision-attention`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from aiayn.apps.viz import plot_curve, read_metrics
from aiayn.errors import AiaynError
from aiayn.vision.attention import attention_rollout, class_token_attention, patch_map
from aiayn.vision.data import load_fashion_mnist
from aiayn.vision.io import load_vision_model


def plot_vision_curves(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """loss.png (train and dev), accuracy.png (train, dev), lr.png into `out_dir` (RUN_DIR/plots)."""
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    train, dev = rows.get("train", []), rows.get("dev", [])
    out = Path(out_dir) if out_dir is not None else run_dir / "plots"
    out.mkdir(parents=True, exist_ok=True)
    return [
        plot_curve(
            out / "loss.png",
            "Loss",
            "loss",
            {"train (smoothed)": ("loss", train), "dev (nll)": ("valid_loss", dev)},
        ),
        plot_curve(
            out / "accuracy.png",
            "Accuracy",
            "accuracy",
            {"train": ("accuracy", train), "dev": ("valid_accuracy", dev)},
        ),
        plot_curve(out / "lr.png", "Learning rate", "lr", {"lr": ("lr", train)}),
    ]


def draw_attention(image: np.ndarray, heat: np.ndarray, out: str | Path, title: str, caption: str) -> Path:
    """image (H, W) in [0, 1] and heat (H, W) in [0, 1] -> a PNG: the image, and the map over it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 3.6), dpi=120)
    left.imshow(image, cmap="gray", vmin=0, vmax=1)
    left.set_title("image")
    right.imshow(image, cmap="gray", vmin=0, vmax=1)
    shown = right.imshow(heat, cmap="inferno", alpha=0.6, vmin=0, vmax=1)
    right.set_title(caption)
    for ax in (left, right):
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(shown, ax=right, fraction=0.046, pad=0.04)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return Path(out)


def load_image(path: str | Path, size: int) -> np.ndarray:
    """An image file -> (size, size) grey values in [0, 1] (resized; Fashion-MNIST is light on dark)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            grey = img.convert("L").resize((size, size), Image.Resampling.BILINEAR)
    except (OSError, UnidentifiedImageError) as err:
        raise AiaynError(f"{path}: cannot read the image: {err}") from None
    return np.asarray(grey, dtype=np.float32) / 255.0


def plot_attention(
    model_dir: str | Path,
    out: str | Path,
    index: int = 0,
    image_file: str | Path | None = None,
    method: str = "rollout",
    layer: int = -1,
) -> tuple[Path, str, float]:
    """Draw where the model looks on test image `index` (or `image_file`) -> (png, class, probability)."""
    model, info = load_vision_model(model_dir)
    c, classes = model.config, info["classes"]
    if image_file is not None:
        image, truth = load_image(image_file, c.image_size), None
    else:
        images, labels = load_fashion_mnist("test")
        if not 0 <= index < len(images):
            raise AiaynError(f"--index {index} is out of range: the test split has {len(images)} images")
        image, truth = images[index] / 255.0, classes[int(labels[index])]
    with torch.no_grad():
        logits, weights = model.attention_maps(torch.as_tensor(image, dtype=torch.float32)[None, None])
    probs = logits.softmax(-1)[0]  # (n_classes,)
    scores = attention_rollout(weights) if method == "rollout" else class_token_attention(weights, layer)
    heat = patch_map(scores, c.grid, c.image_size)[0].numpy()  # (H, W)
    predicted, p = classes[int(probs.argmax())], float(probs.max())
    title = f"predicted {predicted} ({p:.0%})" + (f", true {truth}" if truth is not None else "")
    shown_layer = layer % c.n_layers + 1  # 1-based, as on the command line
    caption = "attention rollout" if method == "rollout" else f"class-token attention, layer {shown_layer}"
    return draw_attention(image, heat, out, title, caption), predicted, p
