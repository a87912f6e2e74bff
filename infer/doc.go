// Package infer runs neural-network inference with ONNX Runtime on tensors
// that wrap preallocated buffers, choosing the execution provider from an
// ordered preference (TensorRT, then CUDA, then CPU).
package infer
