module github.com/zerohop/zerohop

go 1.26.0

require (
	github.com/mattn/go-isatty v0.0.24
	github.com/yalue/onnxruntime_go v1.27.0
	go.uber.org/zap v1.28.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/stretchr/testify v1.11.1 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
