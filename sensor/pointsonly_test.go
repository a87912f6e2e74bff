package sensor

import (
	"bytes"
	"errors"
	"testing"
)

// PointsOnly hides the images and passes the clouds through unchanged.
func TestPointsOnlyHidesImagesKeepsClouds(t *testing.T) {
	src, err := NewSynthetic(SyntheticConfig{Beams: 4, AzimuthSteps: 90, ImageWidth: 32, ImageHeight: 16})
	if err != nil {
		t.Fatal(err)
	}
	if src.MaxImageBytes() == 0 {
		t.Fatal("the scene has no images to hide; fix the test")
	}
	po := PointsOnly(src)
	if n := po.MaxImageBytes(); n != 0 {
		t.Fatalf("MaxImageBytes %d, want 0", n)
	}
	if _, err := po.FillImage(0, make([]byte, src.MaxImageBytes())); !errors.Is(err, ErrNotProvided) {
		t.Fatalf("FillImage: %v, want ErrNotProvided", err)
	}
	if po.MaxPoints() != src.MaxPoints() || po.Frames() != src.Frames() {
		t.Fatalf("MaxPoints %d, Frames %d; the source's %d, %d", po.MaxPoints(), po.Frames(), src.MaxPoints(), src.Frames())
	}
	a, b := make([]byte, src.MaxPoints()*PointStep), make([]byte, src.MaxPoints()*PointStep)
	for seq := range uint64(3) {
		na, errA := src.FillPoints(seq, a)
		nb, errB := po.FillPoints(seq, b)
		if errA != nil || errB != nil || na != nb || !bytes.Equal(a[:na*PointStep], b[:nb*PointStep]) {
			t.Fatalf("frame %d: cloud of %d points (%v) through PointsOnly, %d (%v) from the source, or the bytes differ", seq, nb, errB, na, errA)
		}
	}
}
