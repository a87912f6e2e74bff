package gpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
)

// ringScan writes a deterministic LiDAR-like scan of rings × columns
// points (XYZI, 16 bytes each) into dst: a ground plane, two walls, boxes,
// range noise, and a few NaN/Inf points so that rejection is exercised.
func ringScan(dst []byte, rings, columns int, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	n := 0
	for r := range rings {
		elev := (-25 + 40*float64(r)/float64(rings-1)) * math.Pi / 180
		for c := range columns {
			az := 2 * math.Pi * float64(c) / float64(columns)
			dx, dy, dz := math.Cos(elev)*math.Cos(az), math.Cos(elev)*math.Sin(az), math.Sin(elev)
			rng0 := 80.0
			if dz < 0 { // ground at z = -1.7
				rng0 = min(rng0, -1.7/dz)
			}
			if dy != 0 { // walls at y = ±9
				if t := 9 / math.Abs(dy); t > 0 {
					rng0 = min(rng0, t)
				}
			}
			// A car-sized box ahead and a pole to the left.
			if t := 6 / dx; dx > 0 && math.Abs(t*dy) < 1 && t*dz > -1.7 && t*dz < 0 {
				rng0 = min(rng0, t)
			}
			if t := 4 / dy; dy > 0 && math.Abs(t*dx-3) < 0.15 {
				rng0 = min(rng0, t)
			}
			rng0 += rng.NormFloat64() * 0.02
			x, y, z := float32(rng0*dx), float32(rng0*dy), float32(rng0*dz)
			in := float32(rng.Float64())
			switch rng.IntN(5000) {
			case 0:
				x = float32(math.NaN())
			case 1:
				in = float32(math.Inf(1))
			case 2:
				z = float32(math.Inf(-1))
			}
			p := dst[16*n:]
			binary.LittleEndian.PutUint32(p[0:], math.Float32bits(x))
			binary.LittleEndian.PutUint32(p[4:], math.Float32bits(y))
			binary.LittleEndian.PutUint32(p[8:], math.Float32bits(z))
			binary.LittleEndian.PutUint32(p[12:], math.Float32bits(in))
			n++
		}
	}
	return n
}
