"""Two decoder graphs -> decoder_model_merged.onnx: one graph whose `use_cache_branch` input picks one.

transformers.js (and Optimum's ORTModelForSeq2SeqLM) run a seq2seq decoder as one ONNX session: an
`If` on the boolean `use_cache_branch` runs the first step (no past; the cross-attention keys and
values are projected from the encoder output) or a later step (the past keys and values come in).
Both branches read the same weights, so every initializer is stored once, in the outer graph,
whichever branch it came from (found equal by content). The past inputs exist in both cases; the
first step is fed empty ones (batch, heads, 0, d_k), which its branch does not read. The later
step's present.*.encoder.* outputs are its inputs passed through: callers keep the first step's.
"""

from __future__ import annotations

import hashlib

import onnx
from onnx import TensorProto, helper, numpy_helper


class _Weights:
    """The outer graph's initializers, one per distinct tensor."""

    def __init__(self) -> None:
        self.names: dict[bytes, str] = {}
        self.tensors: list[TensorProto] = []

    def add(self, tensor: TensorProto) -> str:
        array = numpy_helper.to_array(tensor)
        key = hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes()).digest()
        if key not in self.names:
            self.names[key] = f"w{len(self.names)}"
            self.tensors.append(numpy_helper.from_array(array, self.names[key]))
        return self.names[key]


def _branch(graph: onnx.GraphProto, tag: str, weights: _Weights) -> onnx.GraphProto:
    """`graph` as an If branch: no inputs (the outer graph's, by name), weights lifted to `weights`,
    every value it makes renamed `tag/...` so that the two branches and the outer graph never clash."""
    rename = {t.name: weights.add(t) for t in graph.initializer}
    for node in graph.node:
        rename.update({o: f"{tag}/{o}" for o in node.output if o})
    nodes = []
    for node in graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [rename.get(i, i) for i in node.input]
        copy.output[:] = [rename.get(o, o) for o in node.output]
        nodes.append(copy)
    outputs = []
    for value in graph.output:
        name = rename.get(value.name, value.name)
        if not name.startswith(f"{tag}/"):  # an input or a weight handed straight out: give it a node
            nodes.append(helper.make_node("Identity", [name], [f"{tag}/out/{value.name}"]))
            name = f"{tag}/out/{value.name}"
        outputs.append(helper.make_tensor_value_info(name, value.type.tensor_type.elem_type, None))
    return helper.make_graph(nodes, tag, [], outputs)


def merge_decoders(first: onnx.ModelProto, later: onnx.ModelProto) -> onnx.ModelProto:
    """decoder_model (`first`: no past inputs) + decoder_with_past_model (`later`) -> the merged model.

    Both must return the same outputs in the same order (logits, present.*); the merged model takes
    `later`'s inputs plus use_cache_branch (bool, shape [1]) and returns their outputs.
    """
    first_outputs = [o.name for o in first.graph.output]
    later_outputs = [o.name for o in later.graph.output]
    if first_outputs != later_outputs:
        raise ValueError(f"the decoders' outputs differ: {first_outputs} vs {later_outputs}")
    weights = _Weights()
    then_branch = _branch(later.graph, "with_past", weights)
    else_branch = _branch(first.graph, "first", weights)
    cache_input = helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])
    node = helper.make_node(
        "If", ["use_cache_branch"], first_outputs, then_branch=then_branch, else_branch=else_branch
    )
    graph = helper.make_graph(
        [node], "decoder_model_merged", [*later.graph.input, cache_input], list(later.graph.output),
        initializer=weights.tensors,
    )  # fmt: skip
    functions = {(f.domain, f.name): f for f in [*first.functions, *later.functions]}
    opsets = {o.domain: o.version for o in [*first.opset_import, *later.opset_import]}
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()],
        functions=list(functions.values()),
        producer_name="aiayn export-onnx",
    )
    model.ir_version = max(first.ir_version, later.ir_version)
    return model
