// Command voxelfilter runs zerohop's voxel-grid filter on a KITTI velodyne
// .bin file and writes the result as a KITTI .bin file, so that it can be
// compared with pcl::VoxelGrid<pcl::PointXYZI> on the same input. It only
// parses flags and wires package voxel to files.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/zerohop/zerohop/voxel"
)

const usage = `voxelfilter: downsample a KITTI point cloud with zerohop's voxel-grid filter.

Usage:
  voxelfilter --in IN.bin --out OUT.bin [--leaf L | --leaf LX,LY,LZ] [--min-points N]
              [--crop XMIN,YMIN,ZMIN,XMAX,YMAX,ZMAX] [--workers N]

Files are KITTI velodyne .bin: packed little-endian float32 x, y, z,
reflectance per point (16 bytes), metres. "-" reads stdin or writes stdout.

The filter has pcl::VoxelGrid<PointXYZI> semantics: voxel index per axis is
floor(coordinate / leaf) with the grid anchored at the origin (computed as
PCL does, in float32 with 1/leaf); each voxel with at least --min-points
points yields the mean of their x, y, z and intensity; points with NaN or Inf
are skipped; the crop box (inclusive, as pcl::CropBox) is applied first.
Output is ordered by voxel (z, then y, then x), PCL's order. Unlike PCL, a
leaf too small for the cloud's extent is an error, never a pass-through.

To compare with PCL, build voxel/testdata/pcl/voxelgrid.cpp and run both on
the same file:
  voxelfilter --in scan.bin --out zerohop.bin --leaf 0.2
  voxelgrid scan.bin pcl.bin 0.2 0.2 0.2 1

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main with its inputs and outputs passed in; it returns the exit
// status: 0 done, 1 failed, 2 bad usage.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("voxelfilter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "input KITTI .bin file (required; - for stdin)")
	out := fs.String("out", "", "output KITTI .bin file (required; - for stdout)")
	leafFlag := fs.String("leaf", "0.2", "voxel edge in metres: one value, or x,y,z")
	minPoints := fs.Int("min-points", 1, "fewest points a voxel needs to yield a point")
	cropFlag := fs.String("crop", "", "crop box xmin,ymin,zmin,xmax,ymax,zmax in metres, applied first (default none)")
	workers := fs.Int("workers", 0, "goroutines sharing the work (default min(GOMAXPROCS, 2))")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // flag has printed the problem and the usage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "voxelfilter: "+format+"\n", a...)
		return code
	}
	switch {
	case fs.NArg() > 0:
		return fail(2, "unexpected argument %q (flags only; see --help)", fs.Arg(0))
	case *in == "":
		return fail(2, "--in is required (see --help)")
	case *out == "":
		return fail(2, "--out is required (see --help)")
	}
	cfg := voxel.Config{MinPoints: *minPoints, Workers: *workers}
	leaf, err := parseFloats(*leafFlag, 1, 3)
	if err != nil {
		return fail(2, "--leaf %q: %v", *leafFlag, err)
	}
	if len(leaf) == 1 {
		leaf = []float32{leaf[0], leaf[0], leaf[0]}
	}
	copy(cfg.Leaf[:], leaf)
	if *cropFlag != "" {
		c, err := parseFloats(*cropFlag, 6, 6)
		if err != nil {
			return fail(2, "--crop %q: %v", *cropFlag, err)
		}
		cfg.Crop = &voxel.Box{Min: [3]float32{c[0], c[1], c[2]}, Max: [3]float32{c[3], c[4], c[5]}}
	}

	data, err := readInput(*in, stdin)
	if err != nil {
		return fail(1, "%v", err)
	}
	cloud, err := voxel.KITTI(data)
	if err != nil {
		return fail(1, "read %q: %v", *in, err)
	}
	filter, err := voxel.NewFilter(cfg, max(cloud.Count, 1))
	if err != nil {
		return fail(2, "%v", err)
	}
	defer filter.Close()
	points := voxel.NewPoints(cloud.Count)
	start := time.Now()
	if err := filter.Run(cloud, points); err != nil {
		return fail(1, "filter %q: %v", *in, err)
	}
	took := time.Since(start)
	if err := writeOutput(*out, stdout, points.AppendKITTI(make([]byte, 0, len(points.P)*voxel.XYZIStep))); err != nil {
		return fail(1, "%v", err)
	}
	c := filter.Config()
	fmt.Fprintf(stderr, "voxelfilter: %d points from %s -> %d points to %s (leaf %g,%g,%g m, min points %d) in %.2f ms\n",
		cloud.Count, *in, len(points.P), *out, c.Leaf[0], c.Leaf[1], c.Leaf[2], c.MinPoints, float64(took.Microseconds())/1000)
	return 0
}

// parseFloats parses a comma-separated list of either one or n numbers
// (one is n when one == n).
func parseFloats(s string, one, n int) ([]float32, error) {
	parts := strings.Split(s, ",")
	if len(parts) != one && len(parts) != n {
		if one == n {
			return nil, fmt.Errorf("want %d comma-separated numbers, got %d", n, len(parts))
		}
		return nil, fmt.Errorf("want one number or %d comma-separated numbers, got %d", n, len(parts))
	}
	v := make([]float32, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", p)
		}
		v[i] = float32(f)
	}
	return v, nil
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	return b, nil
}

func writeOutput(path string, stdout io.Writer, b []byte) error {
	if path == "-" {
		if _, err := stdout.Write(b); err != nil {
			return fmt.Errorf("write stdout: %w", err)
		}
		return nil
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}
