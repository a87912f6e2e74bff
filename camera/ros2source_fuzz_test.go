package camera

import (
	"testing"

	"github.com/zerohop/zerohop/ros2"
)

// FuzzROS2Messages feeds the ROS 2 source any PointCloud2 and Image a
// driver could send: layouts, sizes, steps and encodings that lie about
// the data. Nothing may panic (a zero-width cloud once did, in the DDS
// reader goroutine), and whatever is published must be a valid handle
// whose payload lies in its slot.
func FuzzROS2Messages(f *testing.F) {
	f.Add(uint16(4), uint16(1), uint16(16), uint16(64), []byte{0, 0, 7, 1, 1, 4, 7, 1, 2, 8, 7, 1, 3, 12, 7, 1}, make([]byte, 64), []byte("rgb8"))
	f.Add(uint16(0), uint16(3), uint16(12), uint16(0), []byte{0, 0, 8, 1, 1, 8, 8, 1, 2, 16, 8, 1}, make([]byte, 48), []byte("mono8"))
	f.Add(uint16(5), uint16(2), uint16(15), uint16(80), []byte{0, 0, 7, 1, 1, 4, 7, 1, 2, 8, 7, 1, 3, 13, 4, 1}, make([]byte, 160), []byte("bgra8"))
	r := newROS2Rig(f, PoolSizes{Points: 64, ImageBytes: 256}, 4)
	names := [][]byte{[]byte("x"), []byte("y"), []byte("z"), []byte("intensity"), []byte("i"), []byte("rgb")}
	f.Fuzz(func(t *testing.T, width, height, step, rowStep uint16, spec, data, encoding []byte) {
		var fields []ros2.PointField
		for i := 0; i+3 < len(spec) && len(fields) < 8; i += 4 {
			fields = append(fields, ros2.PointField{Name: names[int(spec[i])%len(names)], Offset: uint32(spec[i+1]),
				Datatype: spec[i+2] % 10, Count: uint32(spec[i+3] % 3)})
		}
		r.src.OnPointCloud2(&ros2.PointCloud2View{Width: uint32(width), Height: uint32(height), PointStep: uint32(step),
			RowStep: uint32(rowStep), Fields: fields, Data: data, FrameID: encoding})
		r.src.OnImage(&ros2.ImageView{Width: uint32(width), Height: uint32(height), Step: uint32(rowStep),
			Encoding: encoding, Data: data})
		for topic := range 2 {
			l, ok := r.tr.TryLatest(topic)
			if !ok {
				continue
			}
			h := l.Handle
			err := r.val.Validate(&h)
			if err == nil {
				err = r.val.VerifyPayload(&h, l.Bytes())
			}
			l.Release()
			if err != nil {
				t.Fatalf("%s: published handle %+v: %v", TopicName(topic), h, err)
			}
		}
	})
}
