package handles_test

import (
	"errors"
	"fmt"

	"github.com/zerohop/zerohop/handles"
)

func Example() {
	// Announced at connect.
	pool := handles.Geometry{PoolID: 1, SlotCount: 4, SlotCapacity: 640 * 480 * 3, Kind: handles.KindImage}

	// Camera: slot 2 holds a 640×480 rgb8 image.
	frame, err := handles.NewFrameID("camera")
	if err != nil {
		panic(err)
	}
	h := handles.Handle{
		Kind: handles.KindImage, PoolID: 1, Slot: 2, Generation: 5, Seq: 17,
		Length: 640 * 480 * 3, FrameID: frame,
		Image: handles.ImageFormat{Width: 640, Height: 480, RowStep: 640 * 3, Encoding: handles.EncodingRGB8},
	}
	var datagram [handles.Size]byte
	h.MarshalTo(&datagram)

	// Agent: decode and validate against the announced pool.
	v, err := handles.NewValidator(pool)
	if err != nil {
		panic(err)
	}
	var got handles.Handle
	if err := v.Decode(&got, datagram[:]); err != nil {
		panic(err)
	}
	fmt.Println(got.Kind, got.Slot, got.Generation, got.Image.Encoding, got.FrameID)

	// A forged slot index is rejected and counted.
	datagram[12] = 9
	err = v.Decode(&got, datagram[:])
	fmt.Println(errors.Is(err, handles.ErrIndexRange), err)
	s := v.Stats()
	fmt.Println("accepted", s.Handles, "index errors", s.IndexRange)
	// Output:
	// image 2 5 rgb8 camera
	// true handle slot = 9, want < 4: handles: slot index out of range
	// accepted 1 index errors 1
}
