// Package models holds zerohop's shipped reference model and its LiDAR-only
// variant, their generator (gen_reference.py) and their model card
// (MODEL_CARD.md).
//
// The models and their default configs are embedded so that a binary
// runs without the repository next to it. Regenerate them with
// `/usr/bin/python3 models/gen_reference.py` (make models); the files are
// committed.
package models

import _ "embed"

// ReferenceFile is the reference model's path relative to the repository
// root; it names the embedded model in errors.
const ReferenceFile = "models/reference.onnx"

// Embedded as strings so that no caller can modify the shared bytes.
var (
	//go:embed reference.onnx
	referenceONNX string
	//go:embed reference.json
	referenceConfig string
	//go:embed reference_lidar.onnx
	referenceLidarONNX string
	//go:embed reference_lidar.json
	referenceLidarConfig string
)

// ReferenceONNX returns a fresh copy of the reference model (ONNX protobuf).
func ReferenceONNX() []byte { return []byte(referenceONNX) }

// ReferenceLidarFile is the LiDAR-only variant's path relative to the
// repository root.
const ReferenceLidarFile = "models/reference_lidar.onnx"

// ReferenceLidarONNX returns a fresh copy of the reference model's
// LiDAR-only variant: its BEV branch without the image input, for robots
// without a camera.
func ReferenceLidarONNX() []byte { return []byte(referenceLidarONNX) }

// ReferenceLidarConfigJSON returns a fresh copy of that variant's config.
func ReferenceLidarConfigJSON() []byte { return []byte(referenceLidarConfig) }

// ReferenceConfigJSON returns a fresh copy of the reference model's default
// config, in the format that infer.ParseConfig reads.
func ReferenceConfigJSON() []byte { return []byte(referenceConfig) }
