package models

import (
	"bytes"
	"os"
	"testing"
)

// The embedded copies must be the committed files, and callers must not be
// able to change what the next caller gets.
func TestEmbeddedFilesMatchCommittedFiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		get  func() []byte
	}{
		{"reference.onnx", ReferenceONNX},
		{"reference.json", ReferenceConfigJSON},
	} {
		want, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		got := tc.get()
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: embedded copy (%d bytes) differs from the file (%d bytes)", tc.file, len(got), len(want))
		}
		got[0] ^= 0xff
		if again := tc.get(); !bytes.Equal(again, want) {
			t.Fatalf("%s: modifying a returned copy changed the next one", tc.file)
		}
	}
}

func TestReferenceModelIsSmall(t *testing.T) {
	if n := len(ReferenceONNX()); n == 0 || n > 1<<20 {
		t.Fatalf("reference.onnx is %d bytes, want 1..%d", n, 1<<20)
	}
}
