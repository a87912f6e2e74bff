// Package infer runs the steering model with ONNX Runtime (through
// github.com/yalue/onnxruntime_go) on tensors that wrap preallocated
// buffers, choosing the execution provider from an ordered preference
// (TensorRT, then CUDA, then CPU).
//
// Start-up, once per process:
//
//	lib, err := infer.FindLibrary(*ortLibFlag)  // flag, $ZEROHOP_ORT_LIB, .cache, system dirs
//	rt, err := infer.OpenRuntime(lib)           // loads libonnxruntime; Close at exit
//	cfg := infer.ReferenceConfig()              // or infer.LoadConfig(path) for a user model
//	s, err := infer.NewSession(rt, modelPath, cfg, infer.SessionOptions{})
//	pp, _ := cfg.PreprocessParams()
//	prep, err := infer.NewPreprocessor(pp, 0)   // persistent row workers; Close at exit
//
// Per frame (no Go heap allocation):
//
//	copy BEV into s.BEV()                       // or hand the session your own buffer
//	prep.Run(s.Image(), infer.ImageView{...})   // straight from the leased slot
//	latency, err := s.Run()                     // s.Scores(), s.Clearance() now hold results
//
// ONNX Runtime's C environment is process-global; Runtime is the one owner
// of it, and sessions keep it open until they are closed.
package infer
