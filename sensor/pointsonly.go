package sensor

import "fmt"

// PointsOnly returns src without its images: MaxImageBytes is 0 and
// FillImage fails with ErrNotProvided, as a source that has none. For a
// LiDAR-only robot replaying a recording that has images: no image pool is
// made, and no image read into one.
func PointsOnly(src Source) Source { return pointsOnly{src} }

type pointsOnly struct{ Source }

func (pointsOnly) MaxImageBytes() int { return 0 }

func (pointsOnly) FillImage(uint64, []byte) (ImageInfo, error) {
	return ImageInfo{}, fmt.Errorf("points only: FillImage: %w", ErrNotProvided)
}
