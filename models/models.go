// Package models holds zerohop's shipped reference model, its LiDAR-only
// and planar-scan variants, their generator (gen_reference.py) and their
// model card (MODEL_CARD.md).
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
	//go:embed reference_scan.onnx
	referenceScanONNX string
	//go:embed reference_scan.json
	referenceScanConfig string
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

// ReferenceScanFile is the planar-scan variant's path relative to the
// repository root.
const ReferenceScanFile = "models/reference_scan.onnx"

// ReferenceScanONNX returns a fresh copy of the reference model's
// planar-scan variant: the LiDAR-only variant with every occupied BEV cell
// an obstacle whatever its height, for robots whose only sensor is a 2D
// laser scanner (every return lies in the scan plane, above the floor).
func ReferenceScanONNX() []byte { return []byte(referenceScanONNX) }

// ReferenceScanConfigJSON returns a fresh copy of that variant's config
// (the same tensors as the LiDAR-only variant's).
func ReferenceScanConfigJSON() []byte { return []byte(referenceScanConfig) }

// ReferenceConfigJSON returns a fresh copy of the reference model's default
// config, in the format that infer.ParseConfig reads.
func ReferenceConfigJSON() []byte { return []byte(referenceConfig) }
