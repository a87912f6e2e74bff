package camera

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/zerohop/zerohop/ros2"
)

// The intensity comes from the field --ros2-intensity-field names, times
// --ros2-intensity-scale; it came only from a field named "intensity", as
// is, so a Livox cloud (reflectivity, uint8) had intensity 0 everywhere.
// The single copy is taken only for a packed XYZI float32 layout whose
// float32 at offset 12 is the named field, not scaled.
func TestROS2IntensityFromTheNamedField(t *testing.T) {
	xyz := []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}
	with := func(extra ...ros2.PointField) []ros2.PointField {
		return append(append([]ros2.PointField{}, xyz...), extra...)
	}
	scaled := func(conv func(float64) float64, scale float64) func(float64) float32 {
		return func(v float64) float32 { return float32(conv(v) * scale) }
	}
	u8 := func(v float64) float64 { return float64(uint8(v)) }
	u16 := func(v float64) float64 { return float64(uint16(v)) }
	f32 := func(v float64) float64 { return float64(float32(v)) }
	livox := cloudSpec{fields: with(pf("reflectivity", 12, 2), pf("tag", 13, 2), pf("line", 14, 2)),
		width: 40, height: 1, pointStep: 18, iField: "reflectivity"}
	packed := cloudSpec{fields: with(pf("intensity", 12, 7)), width: 40, height: 1, pointStep: 16}
	for _, tc := range []struct {
		name      string
		spec      cloudSpec
		intensity ROS2Intensity
		conv      func(float64) float32 // nil: intensity 0
		fast      bool                  // the single copy
		warn      bool                  // the missing-field warning
	}{
		{"Livox reflectivity (uint8) with --ros2-intensity-field reflectivity", livox,
			ROS2Intensity{Field: "reflectivity"}, scaled(u8, 1), false, false},
		{"Livox reflectivity scaled by 1/255", livox,
			ROS2Intensity{Field: "reflectivity", Scale: 1.0 / 255}, scaled(u8, 1.0/255), false, false},
		{"a cloud with intensity and reflectivity: the named field, not intensity", cloudSpec{
			fields: with(pf("intensity", 12, 7), pf("reflectivity", 16, 4)), width: 40, height: 1, pointStep: 20, iField: "reflectivity"},
			ROS2Intensity{Field: "reflectivity"}, scaled(u16, 1), false, false},
		{"Ouster signal (uint16) at an odd offset, organized with row padding, scaled by 0.01", cloudSpec{
			fields: with(pf("signal", 13, 4)), width: 8, height: 5, pointStep: 15, rowPad: 3, iField: "signal"},
			ROS2Intensity{Field: "signal", Scale: 0.01}, scaled(u16, 0.01), false, false},
		{"packed XYZI float32 scaled by 0.5: converted, not copied", packed,
			ROS2Intensity{Scale: 0.5}, scaled(f32, 0.5), false, false},
		{"packed XYZI float32 with another field named: intensity 0, not copied", packed,
			ROS2Intensity{Field: "reflectivity"}, nil, false, true},
		{"packed XYZ and the named field as float32 at offset 12: copied", cloudSpec{
			fields: with(pf("reflectivity", 12, 7)), width: 40, height: 1, pointStep: 16, iField: "reflectivity"},
			ROS2Intensity{Field: "reflectivity"}, scaled(f32, 1), true, false},
		{"packed XYZI float32, scale 1 given: copied", packed,
			ROS2Intensity{Field: "intensity", Scale: 1}, scaled(f32, 1), true, false},
		{`--ros2-intensity-field "": intensity 0 without a warning`, packed,
			ROS2Intensity{None: true}, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2RigWith(t, PoolSizes{Points: 1000, ImageBytes: 64}, 4, ROS2SourceConfig{Intensity: tc.intensity})
			pts := testPoints(int(tc.spec.width * tc.spec.height))
			v := tc.spec.build(pts)
			lay, err := parseCloudLayout(v, r.src.iField, r.src.iScale)
			if err != nil {
				t.Fatal(err)
			}
			if lay.fast != tc.fast {
				t.Errorf("single copy %v, want %v", lay.fast, tc.fast)
			}
			r.src.OnPointCloud2(v)
			h, got := r.take(t, TopicPoints)
			want := packXYZI(pts, tc.conv != nil, tc.conv)
			if !bytes.Equal(got[:h.Length], want) {
				t.Errorf("slot bytes differ\n got %x\nwant %x", got[:h.Length], want)
			}
			if n := r.logs.FilterMessageSnippet("no field named").Len(); (n == 1) != tc.warn || n > 1 {
				t.Errorf("%d missing-field warnings, want warned %v; logs:\n%s", n, tc.warn, allLogText(r))
			}
		})
	}
}

// A cloud without the named field is said once, naming the field looked
// for, the flag that names it and the fields the cloud has: it said only
// that there was no "intensity", with no way out.
func TestROS2MissingIntensityFieldNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		spec        cloudSpec
		fields      string
	}{
		{"Livox cloud, default field", "", cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7),
			pf("reflectivity", 12, 2), pf("tag", 13, 2), pf("line", 14, 2)}, width: 10, height: 1, pointStep: 18}, "x, y, z, reflectivity, tag, line"},
		{"Velodyne cloud, reflectivity named", "reflectivity", cloudSpec{fields: []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7),
			pf("intensity", 12, 7), pf("ring", 16, 4)}, width: 10, height: 1, pointStep: 22}, "x, y, z, intensity, ring"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2RigWith(t, PoolSizes{Points: 100, ImageBytes: 64}, 4, ROS2SourceConfig{Intensity: ROS2Intensity{Field: tc.field}})
			v := tc.spec.build(testPoints(10))
			for range 3 {
				r.src.OnPointCloud2(v)
				h, got := r.take(t, TopicPoints)
				if h.Points.Count != 10 || !bytes.Equal(got[12:16], []byte{0, 0, 0, 0}) {
					t.Fatalf("published %d points, first intensity %x; want 10 points, intensity 0", h.Points.Count, got[12:16])
				}
			}
			want := tc.field
			if want == "" {
				want = "intensity"
			}
			warned := r.logs.FilterMessageSnippet("no field named").All()
			if len(warned) != 1 {
				t.Fatalf("%d warnings for 3 clouds, want 1; logs:\n%s", len(warned), allLogText(r))
			}
			w := warned[0]
			for _, s := range []string{`"` + want + `"`, "--ros2-intensity-field"} {
				if !strings.Contains(w.Message, s) {
					t.Errorf("warning %q does not name %s", w.Message, s)
				}
			}
			if got := w.ContextMap()["fields"]; got != tc.fields {
				t.Errorf("warning lists fields %q, want %q", got, tc.fields)
			}
		})
	}
}

// The settings the flags give: "" is no intensity, 0 is refused (in
// ROS2Intensity it means 1, so it cannot come from the flag), and x, y, z
// or a scale that is not finite and > 0 are refused naming the flag and
// the value, by ParseROS2Intensity and by NewROS2Source.
func TestROS2IntensitySettings(t *testing.T) {
	for _, tc := range []struct {
		field string
		scale float64
		want  ROS2Intensity
	}{
		{"intensity", 1, ROS2Intensity{Field: "intensity", Scale: 1}},
		{"reflectivity", 1.0 / 255, ROS2Intensity{Field: "reflectivity", Scale: 1.0 / 255}},
		{"", 1, ROS2Intensity{None: true, Scale: 1}},
	} {
		got, err := ParseROS2Intensity(tc.field, tc.scale)
		if err != nil || got != tc.want {
			t.Errorf("ParseROS2Intensity(%q, %v) = %+v, %v; want %+v", tc.field, tc.scale, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		field string
		scale float64
		want  []string
	}{
		{"x", 1, []string{"--ros2-intensity-field", `"x"`, "position"}},
		{"y", 1, []string{"--ros2-intensity-field", `"y"`}},
		{"z", 1, []string{"--ros2-intensity-field", `"z"`}},
		{"reflectivity", math.NaN(), []string{"--ros2-intensity-scale", "NaN", "finite"}},
		{"reflectivity", math.Inf(1), []string{"--ros2-intensity-scale", "+Inf", "finite"}},
		{"reflectivity", math.Inf(-1), []string{"--ros2-intensity-scale", "-Inf"}},
		{"reflectivity", -1, []string{"--ros2-intensity-scale", "-1", "> 0"}},
		{"reflectivity", 0, []string{"--ros2-intensity-scale", "0", `--ros2-intensity-field ""`}},
	} {
		_, err := ParseROS2Intensity(tc.field, tc.scale)
		if err == nil {
			t.Errorf("ParseROS2Intensity(%q, %v) accepted", tc.field, tc.scale)
			continue
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ParseROS2Intensity(%q, %v): error %q does not say %s", tc.field, tc.scale, err, s)
			}
		}
		if tc.scale == 0 {
			continue // the zero value's default in a config, not an error there
		}
		cam, err := New(Config{Source: PoolSizes{Points: 10, ImageBytes: 10}, Slots: 4})
		if err != nil {
			t.Fatal(err)
		}
		src, err := NewROS2Source(nil, cam, discardPublisher{cam}, ROS2SourceConfig{Intensity: ROS2Intensity{Field: tc.field, Scale: tc.scale}})
		if err == nil {
			src.Close()
			t.Errorf("NewROS2Source with field %q scale %v accepted", tc.field, tc.scale)
		} else if !strings.Contains(err.Error(), tc.want[0]) {
			t.Errorf("NewROS2Source with field %q scale %v: error %q does not name %s", tc.field, tc.scale, err, tc.want[0])
		}
		cam.Close()
	}
}

// A valid return whose intensity is NaN or ±Inf keeps its position with
// intensity 0, on the single copy and the converted path alike: the voxel
// filter drops a point with a non-finite intensity, so the obstacle it
// hit was not seen. The cloud spans several copy chunks and ends inside
// one, so every chunk boundary is crossed.
func TestROS2NonFiniteIntensityBecomesZero(t *testing.T) {
	xyz := []ros2.PointField{pf("x", 0, 7), pf("y", 4, 7), pf("z", 8, 7)}
	n := 3*copyChunk/16 + 7
	for _, tc := range []struct {
		name string
		spec cloudSpec
		fast bool
	}{
		{"packed XYZI float32 (single copy)", cloudSpec{fields: append(xyz[:3:3], pf("intensity", 12, 7)), width: uint32(n), height: 1, pointStep: 16}, true},
		{"float64 intensity (converted)", cloudSpec{fields: append(xyz[:3:3], pf("intensity", 16, 8)), width: uint32(n), height: 1, pointStep: 24}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newROS2RigWith(t, PoolSizes{Points: n, ImageBytes: 64}, 4, ROS2SourceConfig{})
			pts := testPoints(n)
			per := copyChunk / 16 // points per chunk
			bad := map[int]float64{0: math.NaN(), per - 1: math.Inf(1), per: math.Inf(-1), 2 * per: math.NaN(), n - 1: math.NaN()}
			for k, v := range bad {
				pts[k].i = v
			}
			v := tc.spec.build(pts)
			lay, err := parseCloudLayout(v, r.src.iField, r.src.iScale)
			if err != nil {
				t.Fatal(err)
			}
			if lay.fast != tc.fast {
				t.Fatalf("single copy %v, want %v", lay.fast, tc.fast)
			}
			r.src.OnPointCloud2(v)
			h, got := r.take(t, TopicPoints)
			if h.Points.Count != uint32(n) {
				t.Fatalf("%d points published, want %d", h.Points.Count, n)
			}
			for k := range bad {
				pts[k].i = 0
			}
			if want := packXYZI(pts, true, func(v float64) float32 { return float32(v) }); !bytes.Equal(got[:h.Length], want) {
				for k := 0; k < n; k++ {
					if !bytes.Equal(got[k*16:k*16+16], want[k*16:k*16+16]) {
						t.Fatalf("point %d is %x, want %x", k, got[k*16:k*16+16], want[k*16:k*16+16])
					}
				}
			}
		})
	}
}
