package models

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
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
		{"reference_lidar.onnx", ReferenceLidarONNX},
		{"reference_lidar.json", ReferenceLidarConfigJSON},
		{"reference_scan.onnx", ReferenceScanONNX},
		{"reference_scan.json", ReferenceScanConfigJSON},
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
	for file, onnx := range map[string][]byte{ReferenceFile: ReferenceONNX(), ReferenceLidarFile: ReferenceLidarONNX(), ReferenceScanFile: ReferenceScanONNX()} {
		if n := len(onnx); n == 0 || n > 1<<20 {
			t.Errorf("%s is %d bytes, want 1..%d", file, n, 1<<20)
		}
	}
}

// The model card states the file's size and sha256; regenerating the model
// without updating the card fails here.
func TestModelCardNamesTheFile(t *testing.T) {
	card, err := os.ReadFile("MODEL_CARD.md")
	if err != nil {
		t.Fatal(err)
	}
	for file, onnx := range map[string][]byte{ReferenceFile: ReferenceONNX(), ReferenceLidarFile: ReferenceLidarONNX(), ReferenceScanFile: ReferenceScanONNX()} {
		sum := sha256.Sum256(onnx)
		size := strconv.Itoa(len(onnx))
		spaced := size[:len(size)-3] + " " + size[len(size)-3:] // "165 626", as the card writes it
		for _, want := range []string{hex.EncodeToString(sum[:]), "`" + file + "`, " + spaced + " bytes"} {
			if !bytes.Contains(card, []byte(want)) {
				t.Errorf("MODEL_CARD.md does not state %q for %s", want, file)
			}
		}
	}
}
