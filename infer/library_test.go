package infer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func touch(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not really a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFindLibrarySearchOrder(t *testing.T) {
	cacheLib := filepath.Join("ort", ORTVersion, "libonnxruntime.so.1")
	// Each case lays out files under a fresh root and says which one wins.
	cases := []struct {
		name  string
		files []string // relative to root
		set   func(root string, p *libraryPlaces)
		want  string // relative to root; "" = not found
	}{
		{"the flag wins over everything", []string{"flag/lib.so", "env/lib.so", "wd/.cache/" + cacheLib},
			func(r string, p *libraryPlaces) { p.flag = r + "/flag/lib.so"; p.env = r + "/env/lib.so" }, "flag/lib.so"},
		{"the environment variable comes next", []string{"env/lib.so", "wd/.cache/" + cacheLib},
			func(r string, p *libraryPlaces) { p.env = r + "/env/lib.so" }, "env/lib.so"},
		{"a relative flag is relative to the working directory", []string{"wd/rel/lib.so"},
			func(r string, p *libraryPlaces) { p.flag = "rel/lib.so" }, "wd/rel/lib.so"},
		{"$ZEROHOP_CACHE before the working directory's cache", []string{"zc/" + cacheLib, "wd/.cache/" + cacheLib},
			func(r string, p *libraryPlaces) { p.cache = r + "/zc" }, "zc/" + cacheLib},
		{"the working directory's cache", []string{"wd/.cache/" + cacheLib, "exe/bin/.cache/" + cacheLib},
			nil, "wd/.cache/" + cacheLib},
		{"the cache next to the executable", []string{"exe/bin/.cache/" + cacheLib, "exe/.cache/" + cacheLib},
			nil, "exe/bin/.cache/" + cacheLib},
		{"the cache above the executable (bin/agent -> repo/.cache)", []string{"exe/.cache/" + cacheLib, "ld/libonnxruntime.so.1"},
			func(r string, p *libraryPlaces) { p.ldLibraryPath = r + "/ld" }, "exe/.cache/" + cacheLib},
		{"LD_LIBRARY_PATH before system directories, .so.1 before .so",
			[]string{"ld2/libonnxruntime.so.1", "ld2/libonnxruntime.so", "sys/libonnxruntime.so.1"},
			func(r string, p *libraryPlaces) { p.ldLibraryPath = r + "/ld1:" + r + "/ld2" }, "ld2/libonnxruntime.so.1"},
		{"the unversioned name in a system directory", []string{"sys/libonnxruntime.so"}, nil, "sys/libonnxruntime.so"},
		{"a directory named like the library is not a library", []string{"wd/.cache/" + cacheLib + "/x"}, nil, ""},
		{"nothing anywhere", nil, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tc.files {
				touch(t, filepath.Join(root, f))
			}
			p := libraryPlaces{
				wd:         filepath.Join(root, "wd"),
				exe:        filepath.Join(root, "exe", "bin", "agent"),
				systemDirs: []string{filepath.Join(root, "sys")},
			}
			if tc.set != nil {
				tc.set(root, &p)
			}
			got, err := findLibrary(p)
			if tc.want == "" {
				var nf *LibraryNotFoundError
				if !errors.As(err, &nf) || !errors.Is(err, ErrLibraryNotFound) {
					t.Fatalf("got %q, %v; want a *LibraryNotFoundError", got, err)
				}
				// Every place is listed: 3 caches and 2 names in 1 system dir.
				if len(nf.Tried) != 5 {
					t.Fatalf("error lists %d places, want 5:\n%v", len(nf.Tried), err)
				}
				return
			}
			if want := filepath.Join(root, tc.want); got != want || err != nil {
				t.Fatalf("got %q, %v; want %q", got, err, want)
			}
		})
	}
}

// A library named explicitly must exist: FindLibrary must not silently load
// another build from the cache.
func TestFindLibraryExplicitPathMustExist(t *testing.T) {
	root := t.TempDir()
	touch(t, filepath.Join(root, "wd/.cache/ort", ORTVersion, "libonnxruntime.so.1"))
	for _, tc := range []struct {
		name   string
		set    func(p *libraryPlaces)
		source string
	}{
		{"flag", func(p *libraryPlaces) { p.flag = root + "/missing/flag.so" }, "-ort-lib flag"},
		{"environment", func(p *libraryPlaces) { p.env = root + "/missing/env.so" }, "$" + EnvLibrary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := libraryPlaces{wd: filepath.Join(root, "wd")}
			tc.set(&p)
			got, err := findLibrary(p)
			var nf *LibraryNotFoundError
			if !errors.As(err, &nf) {
				t.Fatalf("got %q, %v; want a *LibraryNotFoundError", got, err)
			}
			if len(nf.Tried) != 1 || nf.Tried[0].Source != tc.source || !strings.Contains(err.Error(), "missing") {
				t.Fatalf("error should name only the explicit path from %s:\n%v", tc.source, err)
			}
		})
	}
}

// FindLibrary itself reads the process environment.
func TestFindLibraryReadsEnvironment(t *testing.T) {
	root := t.TempDir()
	lib := touch(t, filepath.Join(root, "custom", "libonnxruntime.so.1"))
	t.Setenv(EnvLibrary, lib)
	if got, err := FindLibrary(""); got != lib || err != nil {
		t.Fatalf("with $%s set: got %q, %v; want %q", EnvLibrary, got, err, lib)
	}

	t.Setenv(EnvLibrary, "")
	t.Setenv(EnvCache, filepath.Join(root, "cache"))
	cached := touch(t, filepath.Join(root, "cache", "ort", ORTVersion, "libonnxruntime.so.1"))
	if got, err := FindLibrary(""); got != cached || err != nil {
		t.Fatalf("with $%s set: got %q, %v; want %q", EnvCache, got, err, cached)
	}

	t.Setenv(EnvCache, filepath.Join(root, "empty-cache"))
	t.Setenv("LD_LIBRARY_PATH", filepath.Join(root, "nowhere"))
	if got, err := FindLibrary(""); err == nil {
		// A system-wide install may exist on some machines; then it must be
		// a system path, not one of ours.
		if strings.HasPrefix(got, root) {
			t.Fatalf("found %q under the test root, which has no library there", got)
		}
	} else {
		msg := err.Error()
		for _, want := range []string{filepath.Join(root, "empty-cache"), filepath.Join(root, "nowhere"), "/usr/lib/libonnxruntime.so.1", "make ort"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error does not mention %q:\n%s", want, msg)
			}
		}
	}
}
