// Package models holds zerohop's shipped reference model, its generator
// (gen_reference.py) and its model card (MODEL_CARD.md).
//
// The reference model and its default config are embedded so that a binary
// runs without the repository next to it. Regenerate both with
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
)

// ReferenceONNX returns a fresh copy of the reference model (ONNX protobuf).
func ReferenceONNX() []byte { return []byte(referenceONNX) }

// ReferenceConfigJSON returns a fresh copy of the reference model's default
// config, in the format that infer.ParseConfig reads.
func ReferenceConfigJSON() []byte { return []byte(referenceConfig) }
