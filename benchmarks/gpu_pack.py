"""Bring a model directory back from a lent GPU machine, whose returned files are few and small
(device tool: at most 8 files of 16 MiB, 64 MiB in all): the base model's float32 weights (48M
parameters with the Bible's 8k vocabulary, 193 MB) do not fit, its int8 weights do.

    round  MODEL              every matrix's weights replaced by their int8 round trip (one scale
                              per output row, symmetric, |q| <= 127), in place: the model that is
                              evaluated and distilled there is then the very one that comes back
    pack   MODEL OUT/NAME     OUT/NAME.partK (safetensors, each under --part-mib); the first one's
                              metadata holds config.json, spm.model and MODEL's other small files
    unpack OUT/NAME MODEL     the model directory again, float32: the round trip's values exactly

Matrices travel as int8 rows and float32 scales, everything else (biases, layer norm) as float32.
`round` first and `pack` after loses nothing more: a rounded matrix packs to the same int8 rows
(q = round(w / s) of w = q s gives q back: s is the row's largest |w| / 127, taken again equal).

    python benchmarks/gpu_pack.py round runs/teacher/model
    python benchmarks/gpu_pack.py pack runs/teacher/model $OUT/teacher
    python benchmarks/gpu_pack.py unpack /work/.device/.../teacher runs/teacher/model

The base teacher's int8 matrices are 46 MiB: four parts of 15 MiB.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

WEIGHTS = "model.safetensors"
SCALE = ".int8_scale"  # the float32 scales of matrix NAME travel as NAME + SCALE


def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, cols) float -> int8 (rows, cols), float32 scales (rows,): w ~ q * scale."""
    w = w.float()
    scale = w.abs().amax(dim=1) / 127
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # (rows,): all-zero rows stay 0
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale[:, None]  # (rows, cols) float32


def round_model(model: Path) -> int:
    """Replace MODEL's matrices by their int8 round trip; -> how many were replaced."""
    weights = load_file(str(model / WEIGHTS))
    rounded = {n: dequantize(*quantize(w)) if w.dim() == 2 else w for n, w in weights.items()}
    save_file(rounded, str(model / WEIGHTS), metadata={"format": "pt"})
    return sum(w.dim() == 2 for w in weights.values())


def pack(model: Path, out: Path, part_mib: float) -> list[Path]:
    """MODEL -> OUT.part0, OUT.part1, ...; -> the files written."""
    tensors: dict[str, torch.Tensor] = {}
    for name, w in load_file(str(model / WEIGHTS)).items():
        if w.dim() == 2:
            tensors[name], tensors[name + SCALE] = quantize(w)
        else:
            tensors[name] = w.float()
    parts, part, size = [], {}, 0
    for name, t in tensors.items():
        nbytes = t.numel() * t.element_size()
        if part and size + nbytes > part_mib * 2**20:
            parts.append(part)
            part, size = {}, 0
        part[name], size = t.contiguous(), size + nbytes
    parts.append(part)
    out.parent.mkdir(parents=True, exist_ok=True)
    others = [f for f in sorted(model.iterdir()) if f.is_file() and f.name != WEIGHTS]
    small = {f.name: f.read_bytes().hex() for f in others}
    listing = {"parts": str(len(parts)), "files": json.dumps(small)}
    written = []
    for k, p in enumerate(parts):
        path = out.with_name(f"{out.name}.part{k}")
        save_file(p, str(path), metadata=listing if k == 0 else None)
        written.append(path)
    return written


def unpack(packed: Path, model: Path) -> Path:
    """OUT.part* -> MODEL (float32 weights, the small files as they were)."""
    with safe_open(str(packed.with_name(f"{packed.name}.part0")), "pt") as first:
        listing = first.metadata()
    tensors: dict[str, torch.Tensor] = {}
    for k in range(int(listing["parts"])):
        tensors.update(load_file(str(packed.with_name(f"{packed.name}.part{k}"))))
    weights = {
        n: dequantize(t, tensors[n + SCALE]) if n + SCALE in tensors else t
        for n, t in tensors.items()
        if not n.endswith(SCALE)
    }
    if model.exists():
        shutil.rmtree(model)
    model.mkdir(parents=True)
    save_file(weights, str(model / WEIGHTS), metadata={"format": "pt"})
    for name, data in json.loads(listing["files"]).items():
        (model / name).write_bytes(bytes.fromhex(data))
    return model


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("round").add_argument("model", type=Path)
    packer = sub.add_parser("pack")
    packer.add_argument("model", type=Path)
    packer.add_argument("out", type=Path)
    packer.add_argument("--part-mib", type=float, default=15.0)
    unpacker = sub.add_parser("unpack")
    unpacker.add_argument("packed", type=Path)
    unpacker.add_argument("model", type=Path)
    args = p.parse_args()
    if args.command == "round":
        print(f"{args.model}: {round_model(args.model)} matrices rounded to int8 values")
    elif args.command == "pack":
        for path in pack(args.model, args.out, args.part_mib):
            print(f"{path} {path.stat().st_size / 2**20:.1f} MiB")
    else:
        print(unpack(args.packed, args.model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
