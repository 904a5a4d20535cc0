"""Beyond translation (the paper's section 7): a Vision Transformer built from aiayn's encoder.
In Python:

from aiayn.vision import VisionConfig, VisionTrainConfig, fashion_mnist_splits, train_vision
result = train_vision("runs/vit", fashion_mnist_splits(), VisionConfig(), VisionTrainConfig(minutes=15))
model, info = load_vision_model("runs/vit/model")     # model(images (batch, 1, 28, 28) in [0, 1])
"""

from aiayn.vision.data import fashion_mnist_splits, load_fashion_mnist
from aiayn.vision.io import load_vision_model, save_vision_model
from aiayn.vision.model import VisionConfig, VisionTransformer
from aiayn.vision.train import VisionTrainConfig, train_vision

__all__ = [
    "VisionConfig",
    "VisionTrainConfig",
    "VisionTransformer",
    "fashion_mnist_splits",
    "load_fashion_mnist",
    "load_vision_model",
    "save_vision_model",
    "train_vision",
]
