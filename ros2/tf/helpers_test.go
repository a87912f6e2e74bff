package tf

import (
	"fmt"
	"math"
)

const deg = math.Pi / 180

// matDiff is the largest entry-wise difference of two matrices.
func matDiff(a, b [9]float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// tfDiff is the largest difference between two transforms' rotation
// matrices and translations (q and −q are the same rotation).
func tfDiff(a, b Transform) float64 {
	d := matDiff(a.Rotation.Matrix(), b.Rotation.Matrix())
	for i := range 3 {
		d = max(d, math.Abs(a.Translation[i]-b.Translation[i]))
	}
	return d
}

// angleDiff is |a − b| modulo 2π, in [0, π].
func angleDiff(a, b float64) float64 {
	d := math.Mod(math.Abs(a-b), 2*math.Pi)
	return min(d, 2*math.Pi-d)
}

func vecDiff(a, b [3]float64) float64 {
	return max(math.Abs(a[0]-b[0]), math.Abs(a[1]-b[1]), math.Abs(a[2]-b[2]))
}

func fmtTF(t Transform) string {
	r, p, y := t.Rotation.RPY()
	return fmt.Sprintf("xyz %.6g rpy (%.6g, %.6g, %.6g)", t.Translation, r, p, y)
}

// tfAt builds the transform a static_transform_publisher with these
// arguments (x y z, roll pitch yaw) would publish.
func tfAt(x, y, z, roll, pitch, yaw float64) Transform {
	return Transform{Translation: [3]float64{x, y, z}, Rotation: FromRPY(roll, pitch, yaw)}
}

// withT is a translation; withQ a rotation as given, unnormalised.
func withT(x, y, z float64) Transform {
	return Transform{Translation: [3]float64{x, y, z}, Rotation: Quaternion{W: 1}}
}

func withQ(x, y, z, w float64) Transform { return Transform{Rotation: Quaternion{x, y, z, w}} }
