package gpu

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/zerohop/zerohop/voxel"
)

func samePoints(t *testing.T, what string, got, want []voxel.Point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d voxels, CPU has %d", what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g.X) != math.Float32bits(w.X) || math.Float32bits(g.Y) != math.Float32bits(w.Y) ||
			math.Float32bits(g.Z) != math.Float32bits(w.Z) || math.Float32bits(g.I) != math.Float32bits(w.I) {
			if bad < 5 {
				t.Errorf("%s: voxel %d = %+v, CPU %+v", what, i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d voxels differ from the CPU's", what, bad, len(want))
	}
}

func sameBEV(t *testing.T, what string, got []byte, want []float32) {
	t.Helper()
	bad := 0
	for i, w := range want {
		g := binary.LittleEndian.Uint32(got[4*i:])
		if g != math.Float32bits(w) {
			if bad < 5 {
				t.Errorf("%s: BEV element %d = %g, CPU %g", what, i, math.Float32frombits(g), w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d BEV elements differ from the CPU's", what, bad, len(want))
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
