#!/usr/bin/python3
"""Generate the small ONNX models infer's tests use (deterministic; python3-onnx):

  dynamic_batch.onnx  inputs bev [N,3,128,128] and image [N,3,144,256] with a
                      symbolic batch dim, outputs sector_scores [N,9] and
                      clearance [N,9]: mean of each input channel mixed by a
                      fixed matrix. Tests that dynamic dims match the config
                      and that NaN inputs reach the outputs.
  double_input.onnx   like the reference's interface but bev is float64: a
                      wrong element type.
  any_bev_size.onnx   like dynamic_batch.onnx with batch 1 and bev
                      [1,3,H,W], H and W symbolic: a model for any BEV
                      raster (the agent's tests of a config's bev shape
                      and cell_m).
  corrupt.onnx        the first 4096 bytes of ../../models/reference.onnx:
                      a truncated protobuf.

    /usr/bin/python3 infer/testdata/gen_testdata.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def save(model, name):
    onnx.checker.check_model(model)
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(model.SerializeToString())


def io_model(bev_type, batch, bev_hw=(128, 128)):
    mix = numpy_helper.from_array(
        (np.arange(6 * 9, dtype=np.float32).reshape(6, 9) / 54.0), "mix")
    shape2 = numpy_helper.from_array(np.array([-1, 3], dtype=np.int64), "shape2")
    nodes = []
    bev = "bev"
    if bev_type != TensorProto.FLOAT:
        nodes.append(helper.make_node("Cast", ["bev"], ["bev_f"], to=TensorProto.FLOAT))
        bev = "bev_f"
    nodes += [
        helper.make_node("GlobalAveragePool", [bev], ["bev_mean"]),
        helper.make_node("GlobalAveragePool", ["image"], ["img_mean"]),
        helper.make_node("Reshape", ["bev_mean", "shape2"], ["bev_flat"]),
        helper.make_node("Reshape", ["img_mean", "shape2"], ["img_flat"]),
        helper.make_node("Concat", ["bev_flat", "img_flat"], ["feat"], axis=1),
        helper.make_node("MatMul", ["feat", "mix"], ["sector_scores"]),
        helper.make_node("Neg", ["sector_scores"], ["clearance"]),
    ]
    graph = helper.make_graph(
        nodes, "infer_testdata",
        inputs=[
            helper.make_tensor_value_info("bev", bev_type, [batch, 3, *bev_hw]),
            helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 3, 144, 256]),
        ],
        outputs=[
            helper.make_tensor_value_info("sector_scores", TensorProto.FLOAT, [batch, 9]),
            helper.make_tensor_value_info("clearance", TensorProto.FLOAT, [batch, 9]),
        ],
        initializer=[mix, shape2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="zerohop/infer/testdata/gen_testdata.py")
    model.ir_version = 7
    return model


def main():
    save(io_model(TensorProto.FLOAT, "N"), "dynamic_batch.onnx")
    save(io_model(TensorProto.DOUBLE, 1), "double_input.onnx")
    save(io_model(TensorProto.FLOAT, 1, ("H", "W")), "any_bev_size.onnx")
    with open(os.path.join(HERE, "..", "..", "models", "reference.onnx"), "rb") as f:
        data = f.read(4096)
    with open(os.path.join(HERE, "corrupt.onnx"), "wb") as f:
        f.write(data)
    print("gen_testdata: wrote dynamic_batch.onnx, double_input.onnx, any_bev_size.onnx, corrupt.onnx in", HERE)


if __name__ == "__main__":
    main()
