//go:build !ros2 || !cgo

package camera

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/zerohop/zerohop/internal/sockdir"
	"github.com/zerohop/zerohop/ros2"
)

func TestRunROS2NodeWithoutROS2SupportSaysHowToBuild(t *testing.T) {
	err := RunROS2Node(context.Background(), NodeConfig{Socket: filepath.Join(sockdir.Short(t), "c.sock"), AllowGID: -1},
		ROS2NodeConfig{PointsTopics: []string{"/points"}, MaxPoints: 100})
	if !errors.Is(err, ros2.ErrNotBuilt) {
		t.Fatalf("err = %v, want ros2.ErrNotBuilt", err)
	}
}
