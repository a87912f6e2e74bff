//go:build !ros2 || !cgo

package ros2

import "github.com/zerohop/zerohop/handles"

// MirrorWriter republishes camera frames (see the ros2-tagged build).
type MirrorWriter struct{}

// NewImageMirror returns ErrNotBuilt.
func (*Participant) NewImageMirror(string, QoS) (*MirrorWriter, error) { return nil, ErrNotBuilt }

// NewPointCloud2Mirror returns ErrNotBuilt.
func (*Participant) NewPointCloud2Mirror(string, QoS) (*MirrorWriter, error) { return nil, ErrNotBuilt }

func (*MirrorWriter) Publish(*handles.Handle, []byte) error { return ErrNotBuilt }
func (*MirrorWriter) Matched() int                          { return 0 }
func (*MirrorWriter) Close() error                          { return nil }
