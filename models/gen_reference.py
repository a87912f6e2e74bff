#!/usr/bin/python3
"""Generate zerohop's reference steering models: models/reference.onnx (LiDAR
and camera) with its default config models/reference.json; its LiDAR-only
variant models/reference_lidar.onnx with models/reference_lidar.json (the
same BEV branch without the image branch: score = clearance / 8); and its
planar-scan variant models/reference_scan.onnx with models/reference_scan.json
(the LiDAR-only variant with the obstacle test on occupancy alone, for a 2D
laser scanner whose every return lies in the scan plane above the floor).

The weights are set analytically from the sensor geometry below; nothing is
trained. See MODEL_CARD.md for what the model computes and why.

Reproducible: no randomness, no timestamps; running it twice on the same
platform writes byte-identical files. Needs only python3-onnx (Debian package,
onnx >= 1.12) and numpy:

    /usr/bin/python3 models/gen_reference.py            # writes next to this file
    /usr/bin/python3 models/gen_reference.py --out DIR
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
MODEL_VERSION = 1

# --- sectors -----------------------------------------------------------------
# Index k steers at heading HEADINGS_DEG[k]; positive = left (ROS yaw), so
# index 0 is the rightmost sector and the last index the leftmost.
HEADINGS_DEG = [-40.0, -30.0, -20.0, -10.0, 0.0, 10.0, 20.0, 30.0, 40.0]
SECTOR_HALF_WIDTH_DEG = 5.0
# A sector also holds every point within this lateral distance of its centre
# ray (ahead of the robot): the corridor the robot body sweeps on that heading.
ROBOT_HALF_WIDTH_M = 0.35
NEAR_FIELD_M = 8.0  # clearance is capped here; obstacles beyond are ignored

# --- BEV raster ----------------------------------------------------------------
# Input "bev" [1,3,128,128]: channel 0 occupancy (0/1), 1 max height above
# ground (m), 2 mean intensity (unused). Cell (r, c) has its centre at
#   x = (GRID - 0.5 - r) * CELL   (forward; row 0 farthest, last row at the robot)
#   y = (GRID/2 - 0.5 - c) * CELL (left;    c grows right; y = 0 is the border of
#                                  columns 63 and 64, as voxel.BEV.CellCenter)
GRID = 128
CELL_M = 0.2
OCCUPIED_ABOVE = 0.5
OBSTACLE_HEIGHT_M = 0.2  # a cell is an obstacle if occupied and taller than this
# (the planar-scan variant ignores the height: every occupied cell is one)

# --- camera ------------------------------------------------------------------
# Input "image" [1,3,H,W]: RGB in [0,1], CHW. Pinhole, square pixels, no roll,
# optical centre at the image centre, mounted CAM_HEIGHT_M above the ground
# looking along +x and pitched CAM_PITCH_DEG down.
IMG_H, IMG_W = 144, 256
CAM_HFOV_DEG = 90.0
CAM_HEIGHT_M = 0.8
CAM_PITCH_DEG = 10.0
POOL = 4  # hazard map is averaged over POOL x POOL pixel blocks
# Hazard ("orangeness") per pixel: clip(GAIN * (R - G - B - OFFSET), 0, 1).
# Orange-red paint (255, 80, 0) scores 1; grey, white, black, skin and brown
# score 0.
HAZARD_GAIN = 3.0
HAZARD_OFFSET = 0.3
# A sector's hazard penalty is the largest pooled hazard on its ground
# pixels, each weighted by closeness: 1 up to HAZARD_FULL_M, falling linearly
# to 0 at NEAR_FIELD_M. Like the BEV branch, the nearest hazard counts.
HAZARD_FULL_M = 2.0


def sector_membership(x, y):
    """Boolean array [S, ...]: ground point (x, y) lies in sector k."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    d = np.hypot(x, y)
    bearing = np.arctan2(y, x)
    out = []
    for h in HEADINGS_DEG:
        t = math.radians(h)
        angular = np.abs(bearing - t) <= math.radians(SECTOR_HALF_WIDTH_DEG)
        along = x * math.cos(t) + y * math.sin(t)
        across = np.abs(-x * math.sin(t) + y * math.cos(t))
        corridor = (along >= 0) & (across <= ROBOT_HALF_WIDTH_M)
        out.append((x > 0) & (d < NEAR_FIELD_M) & (angular | corridor))
    return np.stack(out)


def bev_weights():
    """[S, GRID, GRID] weights: NEAR_FIELD_M - distance inside each sector."""
    r = np.arange(GRID, dtype=np.float64)[:, None]
    c = np.arange(GRID, dtype=np.float64)[None, :]
    x = np.broadcast_to((GRID - 0.5 - r) * CELL_M, (GRID, GRID))
    y = np.broadcast_to((GRID / 2 - 0.5 - c) * CELL_M, (GRID, GRID))
    member = sector_membership(x, y)
    return np.where(member, NEAR_FIELD_M - np.hypot(x, y), 0.0)


def image_weights():
    """[S, IMG_H/POOL, IMG_W/POOL]: closeness of each pooled pixel's ground
    point inside each sector, 0 outside (or above the horizon)."""
    f = (IMG_W / 2) / math.tan(math.radians(CAM_HFOV_DEG / 2))
    cx, cy = IMG_W / 2, IMG_H / 2
    ph, pw = IMG_H // POOL, IMG_W // POOL
    v = (np.arange(ph, dtype=np.float64) * POOL + POOL / 2)[:, None]
    u = (np.arange(pw, dtype=np.float64) * POOL + POOL / 2)[None, :]
    xr = np.broadcast_to((u - cx) / f, (ph, pw))  # right in the image
    yr = np.broadcast_to((v - cy) / f, (ph, pw))  # down in the image
    p = math.radians(CAM_PITCH_DEG)
    # Ray in the robot frame (x forward, y left, z up) for the camera pitched
    # down by p: forward*(cos p, 0, -sin p) + right*(0, -1, 0) + down*(-sin p, 0, -cos p).
    down = math.sin(p) + yr * math.cos(p)
    below_horizon = down > 1e-6
    t = np.where(below_horizon, CAM_HEIGHT_M / np.where(below_horizon, down, 1.0), 0.0)
    gx = t * (math.cos(p) - yr * math.sin(p))
    gy = -t * xr
    d = np.hypot(gx, gy)
    closeness = np.clip((NEAR_FIELD_M - d) / (NEAR_FIELD_M - HAZARD_FULL_M), 0.0, 1.0)
    member = sector_membership(gx, gy) & below_horizon
    w = np.where(member, closeness, 0.0)
    best = w.reshape(len(HEADINGS_DEG), -1).max(axis=1)
    if np.any(best < 1):
        sys.exit("gen_reference: a sector does not see ground within %g m: %s" % (HAZARD_FULL_M, best))
    return w


def check_mirror(w, axis_flip, name):
    """Left/right sectors must mirror each other so that a symmetric scene
    scores symmetrically."""
    mirrored = np.flip(w, axis=0)
    if not np.array_equal(w, mirrored if axis_flip is None else axis_flip(mirrored)):
        sys.exit("gen_reference: %s weights are not left/right mirror images" % name)


# Variants: the file stem each is written to, and what it is.
#   camera: BEV + image, score = clearance / 8 - hazard penalty
#   lidar:  the BEV branch alone (no image input), score = clearance / 8
#   scan:   the lidar variant with every occupied cell an obstacle, whatever
#           its height (a planar scan's returns all lie in the scan plane)
VARIANTS = (("reference", "camera"), ("reference_lidar", "lidar"), ("reference_scan", "scan"))


def build(variant="camera"):
    """The reference model (variant "camera"); "lidar": its LiDAR-only
    variant, the BEV branch alone (no image input, no hazard penalty);
    "scan": the LiDAR-only variant whose obstacle test is occupancy alone
    (the height channel is not read)."""
    if variant not in ("camera", "lidar", "scan"):
        sys.exit("gen_reference: unknown variant %r" % variant)
    with_image = variant == "camera"
    heights = variant != "scan"
    S = len(HEADINGS_DEG)
    wb = bev_weights()
    # Columns c and 127 - c are mirror images, as in the raster.
    check_mirror(wb, lambda m: np.flip(m, axis=2), "BEV")
    rows = np.nonzero(wb.any(axis=(0, 2)))[0]
    cols = np.nonzero(wb.any(axis=(0, 1)))[0]
    r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    crop = wb[:, r0:r1, c0:c1].reshape(S, -1).astype(np.float32)
    n_bev = crop.shape[1]

    wi = image_weights()
    check_mirror(wi, lambda m: np.flip(m, axis=2), "image")
    n_img = wi.shape[1] * wi.shape[2]
    wi_flat = wi.reshape(S, n_img).astype(np.float32)

    def const(name, value, dtype=np.float32):
        return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)

    inits = [
        const("bev_occ_starts", [0, r0, c0], np.int64),
        const("bev_occ_ends", [1, r1, c1], np.int64),
    ]
    if heights:
        inits += [
            const("bev_hgt_starts", [1, r0, c0], np.int64),
            const("bev_hgt_ends", [2, r1, c1], np.int64),
        ]
    inits += [const("bev_axes", [1, 2, 3], np.int64), const("occupied_above", OCCUPIED_ABOVE)]
    if heights:
        inits.append(const("obstacle_height", OBSTACLE_HEIGHT_M))
    inits += [
        const("bev_flat_shape", [1, n_bev], np.int64),
        const("bev_sector_weights", crop),
        const("sector_row_shape", [1, S], np.int64),
        const("near_field", NEAR_FIELD_M),
        const("inv_near_field", 1.0 / NEAR_FIELD_M),
    ]
    image_inits = [
        const("hazard_w", np.array([1, -1, -1], np.float32).reshape(1, 3, 1, 1) * HAZARD_GAIN),
        const("hazard_b", [-HAZARD_OFFSET * HAZARD_GAIN]),
        const("zero", 0.0),
        const("one", 1.0),
        const("img_flat_shape", [1, n_img], np.int64),
        const("image_sector_weights", wi_flat),
    ]
    N = helper.make_node
    if heights:
        nodes = [
            # (a) BEV: nearest obstacle per sector within the near field.
            N("Slice", ["bev", "bev_occ_starts", "bev_occ_ends", "bev_axes"], ["occ"]),
            N("Slice", ["bev", "bev_hgt_starts", "bev_hgt_ends", "bev_axes"], ["hgt"]),
            N("Greater", ["occ", "occupied_above"], ["is_occ"]),
            N("Greater", ["hgt", "obstacle_height"], ["is_tall"]),
            N("And", ["is_occ", "is_tall"], ["is_obstacle"]),
            N("Cast", ["is_obstacle"], ["obstacle"], to=TensorProto.FLOAT),
        ]
    else:
        nodes = [
            # (a) BEV of a planar scan: every occupied cell is an obstacle.
            N("Slice", ["bev", "bev_occ_starts", "bev_occ_ends", "bev_axes"], ["occ"]),
            N("Greater", ["occ", "occupied_above"], ["is_occ"]),
            N("Cast", ["is_occ"], ["obstacle"], to=TensorProto.FLOAT),
        ]
    nodes += [
        N("Reshape", ["obstacle", "bev_flat_shape"], ["obstacle_flat"]),
        N("Mul", ["obstacle_flat", "bev_sector_weights"], ["nearness_cells"]),
        N("ReduceMax", ["nearness_cells"], ["nearness"], axes=[1], keepdims=0),
        N("Reshape", ["nearness", "sector_row_shape"], ["nearness_row"]),
        N("Sub", ["near_field", "nearness_row"], ["clearance"]),
    ]
    image_nodes = [
        # (b) image: orange-red ground hazard per sector, closer weighs more.
        N("Conv", ["image", "hazard_w", "hazard_b"], ["orangeness"]),
        N("Clip", ["orangeness", "zero", "one"], ["hazard"]),
        N("AveragePool", ["hazard"], ["hazard_pooled"], kernel_shape=[POOL, POOL], strides=[POOL, POOL]),
        N("Reshape", ["hazard_pooled", "img_flat_shape"], ["hazard_flat"]),
        N("Mul", ["hazard_flat", "image_sector_weights"], ["hazard_cells"]),
        N("ReduceMax", ["hazard_cells"], ["penalty_flat"], axes=[1], keepdims=0),
        N("Reshape", ["penalty_flat", "sector_row_shape"], ["penalty"]),
        # score = clearance term - hazard penalty
        N("Mul", ["clearance", "inv_near_field"], ["clearance_term"]),
        N("Sub", ["clearance_term", "penalty"], ["sector_scores"]),
    ]
    inputs = [helper.make_tensor_value_info("bev", TensorProto.FLOAT, [1, 3, GRID, GRID])]
    name = "zerohop_reference"
    if with_image:
        inits += image_inits
        nodes += image_nodes
        inputs.append(helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, IMG_H, IMG_W]))
    else:
        # score = clearance term alone
        nodes.append(N("Mul", ["clearance", "inv_near_field"], ["sector_scores"]))
        name = "zerohop_reference_" + variant
    graph = helper.make_graph(
        nodes,
        name,
        inputs=inputs,
        outputs=[
            helper.make_tensor_value_info("sector_scores", TensorProto.FLOAT, [1, S]),
            helper.make_tensor_value_info("clearance", TensorProto.FLOAT, [1, S]),
        ],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="zerohop/models/gen_reference.py",
        model_version=MODEL_VERSION,
        doc_string=("zerohop reference steering model" +
                    {"camera": "", "lidar": ", LiDAR only", "scan": ", planar scan (every occupied cell an obstacle)"}[variant] +
                    ": analytic weights, not trained. See models/MODEL_CARD.md."),
    )
    # IR 7 is what opset 13 shipped with; old and new runtimes both load it.
    model.ir_version = 7
    helper.set_model_props(model, {
        "zerohop.sector_headings_deg": ",".join("%g" % h for h in HEADINGS_DEG),
        "zerohop.bev_cell_m": "%g" % CELL_M,
    })
    onnx.checker.check_model(model, full_check=True)
    return model


def config(variant="camera"):
    """The default model config that infer.ReferenceConfig embeds (variant
    "lidar": infer.ReferenceLidarConfig's; "scan": infer.ReferenceScanConfig's,
    the same tensors as the lidar variant's)."""
    with_image = variant == "camera"
    inputs = [{"name": "bev", "tensor": "bev", "shape": [1, 3, GRID, GRID], "cell_m": CELL_M}]
    if with_image:
        inputs.append({"name": "image", "tensor": "image", "shape": [1, 3, IMG_H, IMG_W], "color": "rgb",
                       "mean": [0, 0, 0], "std": [1, 1, 1]})
    return {
        "inputs": inputs,
        "outputs": [
            {"name": "sector_scores", "role": "sector_scores", "shape": [1, len(HEADINGS_DEG)]},
            {"name": "clearance", "role": "clearance", "shape": [1, len(HEADINGS_DEG)]},
        ],
        "sector_headings_deg": HEADINGS_DEG,
    }


def format_config(cfg):
    """JSON with one tensor per line, so that diffs stay readable."""
    def block(key):
        items = ",\n".join("    " + json.dumps(t) for t in cfg[key])
        return '  "%s": [\n%s\n  ]' % (key, items)
    return "{\n%s,\n%s,\n  \"sector_headings_deg\": %s\n}\n" % (
        block("inputs"), block("outputs"), json.dumps(cfg["sector_headings_deg"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output folder (default: this script's folder)")
    args = ap.parse_args()
    for stem, variant in VARIANTS:
        model = build(variant)
        onnx_path = os.path.join(args.out, stem + ".onnx")
        json_path = os.path.join(args.out, stem + ".json")
        with open(onnx_path, "wb") as f:
            f.write(model.SerializeToString())
        with open(json_path, "w") as f:
            f.write(format_config(config(variant)))
        print("gen_reference: wrote %s (%d bytes), %s" % (onnx_path, os.path.getsize(onnx_path), json_path))


if __name__ == "__main__":
    main()
