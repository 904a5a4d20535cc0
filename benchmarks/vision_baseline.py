"""Baselines for the Vision Transformer on Fashion-MNIST: scikit-learn on the same raw pixels.

Trained on the same 58,000 training images as `aiayn vision-train` (the same seeded 2,000-image
hold-out is left out) and scored on the 10,000 test images; pixels scaled to [0, 1], no
augmentation. Reported: test accuracy, wall-clock minutes of fit + predict, parameter count.

    logreg   multinomial logistic regression (lbfgs, C=1, stopped at 300 iterations;
             784 x 10 weights + 10 biases)
    mlp      one hidden layer of 256 ReLU units, Adam, early stopping on 10% of the training images

    python benchmarks/vision_baseline.py [--model logreg|mlp|both] [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings


def fit_and_score(name: str, seed: int) -> dict:
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    from aiayn.vision.data import fashion_mnist_splits

    splits = fashion_mnist_splits(valid_size=2000, seed=1)
    (x, y), (test_x, test_y) = splits.train, splits.test
    x, test_x = x.reshape(len(x), -1) / 255.0, test_x.reshape(len(test_x), -1) / 255.0
    if name == "logreg":
        model = LogisticRegression(C=1.0, max_iter=300, random_state=seed)
    else:
        model = MLPClassifier(hidden_layer_sizes=(256,), early_stopping=True, max_iter=60, random_state=seed)
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the iteration caps above are deliberate
        model.fit(x, y)
    accuracy = float(np.mean(model.predict(test_x) == test_y))
    seconds = time.perf_counter() - began
    weights = [model.coef_, model.intercept_] if name == "logreg" else [*model.coefs_, *model.intercepts_]
    return {
        "model": name,
        "test_accuracy": accuracy,
        "minutes": seconds / 60,
        "parameters": int(sum(w.size for w in weights)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["logreg", "mlp", "both"], default="both")
    parser.add_argument("--threads", type=int, default=2, help="BLAS / OpenMP threads")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", metavar="F", help="also write the results here")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    from threadpoolctl import threadpool_limits

    results = []
    with threadpool_limits(args.threads):
        for name in ("logreg", "mlp") if args.model == "both" else (args.model,):
            r = fit_and_score(name, args.seed)
            results.append(r)
            accuracy, minutes, params = r["test_accuracy"], r["minutes"], r["parameters"]
            print(f"{name:7s} test accuracy {accuracy:.2%}  {minutes:.1f} min  {params:,} parameters")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
