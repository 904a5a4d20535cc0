"""decoder_model_merged.onnx from two decoder graphs (aiayn.interop.onnx_merge), on two hand-built
graphs run by ONNX Runtime: `use_cache_branch` picks the graph, shared weights are stored once."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from aiayn.interop.onnx_merge import merge_decoders  # noqa: E402

W = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
B = np.array([[10.0, 20.0]], dtype=np.float32)


def vector(name: str):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 2])


def model(nodes, inputs, outputs, weights) -> onnx.ModelProto:
    initializers = [numpy_helper.from_array(array, name) for name, array in weights.items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def decoders() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """first: logits = x W; later: logits = x W + past; both hand their weight B straight out."""
    matmul = helper.make_node("MatMul", ["x", "W"], ["xw"])
    first = model(
        [matmul, helper.make_node("Identity", ["xw"], ["logits"])],
        [vector("x")], [vector("logits"), vector("B")], {"W": W, "B": B},
    )  # fmt: skip
    later = model(
        [matmul, helper.make_node("Add", ["xw", "past"], ["logits"])],
        [vector("x"), vector("past")], [vector("logits"), vector("B")], {"W": W.copy(), "B": B.copy()},
    )  # fmt: skip
    return first, later


def test_the_flag_picks_the_graph_and_equal_weights_are_stored_once():
    merged = merge_decoders(*decoders())
    onnx.checker.check_model(merged)
    assert [t.name for t in merged.graph.input] == ["x", "past", "use_cache_branch"]
    assert len(merged.graph.initializer) == 2  # each graph's W and B, stored once
    session = ort.InferenceSession(merged.SerializeToString(), providers=["CPUExecutionProvider"])
    x, past = np.array([[1.0, -1.0]], dtype=np.float32), np.array([[0.5, 0.25]], dtype=np.float32)
    feeds = {"x": x, "past": past}
    logits, weight = session.run(None, feeds | {"use_cache_branch": np.array([False])})
    np.testing.assert_allclose(logits, x @ W)
    np.testing.assert_array_equal(weight, B)
    logits, weight = session.run(None, feeds | {"use_cache_branch": np.array([True])})
    np.testing.assert_allclose(logits, x @ W + past)
    np.testing.assert_array_equal(weight, B)


def test_decoders_with_other_outputs_are_refused():
    first, later = decoders()
    later.graph.output[1].name = "other"
    with pytest.raises(ValueError, match=r"^the decoders' outputs differ: \['logits', 'B'\] vs"):
        merge_decoders(first, later)
