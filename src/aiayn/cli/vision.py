"""`aiayn vision-train` and `aiayn vision-attention`: the Vision Transformer's commands."""

from __future__ import annotations

import argparse

from aiayn.cli.options import add_device_option, add_set_option, counting_number
from aiayn.errors import AiaynError


def add_vision_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "vision-train",
        help="train a Vision Transformer (aiayn's encoder over image patches) on Fashion-MNIST",
        description="Beyond translation (section 7): a ViT made of aiayn's Encoder; resumes a run.",
    )
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory (checkpoints, model/ ...)")
    p.add_argument("--minutes", type=float, help="time budget of the run, final test evaluation included")
    p.add_argument("--epochs", type=int, help="at most this many epochs (default 20, or none with --minutes)")
    add_set_option(p, "any VisionConfig / VisionTrainConfig field, e.g. --set patch_size=4 (repeatable)")
    p.add_argument(
        "--limit", type=counting_number, help="use only the first N images of each split (smoke runs)"
    )
    p.add_argument("--data-dir", metavar="DIR", help="Fashion-MNIST's IDX files (default: Debian's)")
    p.add_argument("--seed", type=int, help="random seed (weights, batch order, augmentation)")
    p.add_argument("--threads", type=counting_number, help="CPU threads for torch (default: torch's choice)")
    add_device_option(p, default="cpu")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(handler=_run_vision_train)


def _run_vision_train(args: argparse.Namespace) -> None:
    import torch

    from aiayn.overrides import apply_overrides
    from aiayn.vision import VisionConfig, VisionTrainConfig, fashion_mnist_splits, train_vision
    from aiayn.vision.data import FASHION_MNIST_DIR

    if args.threads:
        torch.set_num_threads(args.threads)
    direct = {"minutes": args.minutes, "epochs": args.epochs, "seed": args.seed}
    train_config = VisionTrainConfig().replace(**{k: v for k, v in direct.items() if v is not None})
    model_config, train_config = apply_overrides([VisionConfig(), train_config], args.overrides)
    splits = fashion_mnist_splits(
        train_config.valid_size, args.limit, train_config.seed, args.data_dir or FASHION_MNIST_DIR
    )
    r = train_vision(args.out, splits, model_config, train_config, not args.no_progress, args.device)
    accuracy = "-" if r.test_accuracy is None else f"{r.test_accuracy:.2%}"
    print(
        f"stopped after {r.epochs:.2f} epochs, step {r.step} ({r.stop_reason}), {r.seconds / 60:.1f} min, "
        f"{r.n_parameters:,} parameters; test accuracy {accuracy}; model: {r.model_dir}"
    )


def add_vision_attention(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "vision-attention",
        help="draw where an image model looks (attention rollout or class-token attention) as a PNG",
        description="Attention over the patches of a Fashion-MNIST test image (or an image file), over it.",
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a model directory written by `aiayn vision-train`")
    p.add_argument("--out", required=True, metavar="F.png", help="the PNG file to write")
    p.add_argument("--index", type=int, default=0, help="which Fashion-MNIST test image (default 0)")
    p.add_argument("--image", metavar="FILE", help="an image file instead (grey, resized; light on dark)")
    p.add_argument("--method", choices=["rollout", "cls"], default="rollout", help="rollout, or one layer's")
    p.add_argument("--layer", type=int, help="with --method cls: layer number, 1 = first (default: the last)")
    p.set_defaults(handler=_run_vision_attention)


def _run_vision_attention(args: argparse.Namespace) -> None:
    from aiayn.apps.viz import png_path
    from aiayn.vision.plots import plot_attention

    png_path(args.out)
    if args.layer is not None and args.layer < 1:
        raise AiaynError(f"--layer counts from 1, got {args.layer}")
    layer = -1 if args.layer is None else args.layer - 1
    out, predicted, p = plot_attention(args.model_dir, args.out, args.index, args.image, args.method, layer)
    print(f"predicted {predicted} ({p:.1%})")
    print(f"wrote {out}")
