package infer

import (
	"os"
	"path/filepath"
	"runtime"
)

const (
	// ORTVersion is the ONNX Runtime release scripts/ort/fetch.sh pins.
	ORTVersion = "1.30.0"
	// EnvLibrary names the environment variable holding an explicit path to
	// libonnxruntime.
	EnvLibrary = "ZEROHOP_ORT_LIB"
	// EnvCache names the environment variable that moves the download cache
	// (default: .cache in the repository).
	EnvCache = "ZEROHOP_CACHE"
)

// libraryNames are tried in each directory, in order: the SONAME first.
var libraryNames = [...]string{"libonnxruntime.so.1", "libonnxruntime.so"}

// LibraryCandidate is one place FindLibrary looks, and why it looks there.
type LibraryCandidate struct {
	Path   string
	Source string // e.g. "-ort-lib flag", "$ZEROHOP_ORT_LIB", "cache next to the executable"
	// explicit candidates were named by the user: if missing, the search
	// stops there instead of silently loading some other build.
	explicit bool
}

// libraryPlaces is everything the search depends on, gathered once so that
// tests can drive it without touching the process environment.
type libraryPlaces struct {
	flag, env, cache string
	wd, exe          string // working directory, resolved executable path ("" if unknown)
	ldLibraryPath    string
	systemDirs       []string
}

// FindLibrary returns the path of the ONNX Runtime shared library to load.
// It looks, in order, at:
//
//  1. flagPath (a command-line flag), if not empty;
//  2. $ZEROHOP_ORT_LIB, if set;
//  3. the fetch cache, <cache>/ort/1.30.0/libonnxruntime.so.1, where <cache> is
//     $ZEROHOP_CACHE, then .cache relative to the working directory, to the
//     executable's directory and to that directory's parent (bin/agent →
//     repo/.cache);
//  4. the dynamic loader's places: each $LD_LIBRARY_PATH directory, then
//     /usr/lib, /usr/local/lib and /usr/lib/<multiarch triplet>, each for
//     libonnxruntime.so.1 then libonnxruntime.so.
//
// A path given by the flag or the environment variable must exist: if it
// does not, FindLibrary fails there rather than fall back to another build.
// On failure the error is a *LibraryNotFoundError listing every place looked
// at. Returned paths are absolute.
func FindLibrary(flagPath string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	exe, err := os.Executable()
	if err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
	} else {
		exe = ""
	}
	return findLibrary(libraryPlaces{
		flag:          flagPath,
		env:           os.Getenv(EnvLibrary),
		cache:         os.Getenv(EnvCache),
		wd:            wd,
		exe:           exe,
		ldLibraryPath: os.Getenv("LD_LIBRARY_PATH"),
		systemDirs:    systemLibraryDirs(runtime.GOARCH),
	})
}

func findLibrary(p libraryPlaces) (string, error) {
	var tried []LibraryCandidate
	for _, c := range p.candidates() {
		tried = append(tried, c)
		if st, err := os.Stat(c.Path); err == nil && st.Mode().IsRegular() {
			return c.Path, nil
		}
		if c.explicit {
			return "", &LibraryNotFoundError{Tried: tried}
		}
	}
	return "", &LibraryNotFoundError{Tried: tried}
}

// candidates lists the places to look, in order, without duplicates.
func (p libraryPlaces) candidates() []LibraryCandidate {
	var out []LibraryCandidate
	seen := map[string]bool{}
	add := func(path, source string, explicit bool) {
		if path == "" {
			return
		}
		if !filepath.IsAbs(path) {
			if p.wd == "" {
				return
			}
			path = filepath.Join(p.wd, path)
		}
		path = filepath.Clean(path)
		if seen[path] {
			return
		}
		seen[path] = true
		out = append(out, LibraryCandidate{Path: path, Source: source, explicit: explicit})
	}
	add(p.flag, "-ort-lib flag", true)
	add(p.env, "$"+EnvLibrary, true)

	cacheLib := filepath.Join("ort", ORTVersion, libraryNames[0])
	if p.cache != "" {
		add(filepath.Join(p.cache, cacheLib), "$"+EnvCache+" cache", false)
	}
	add(filepath.Join(".cache", cacheLib), "cache in the working directory", false)
	if p.exe != "" {
		dir := filepath.Dir(p.exe)
		add(filepath.Join(dir, ".cache", cacheLib), "cache next to the executable", false)
		add(filepath.Join(filepath.Dir(dir), ".cache", cacheLib), "cache above the executable", false)
	}

	var dirs []LibraryCandidate
	for _, d := range filepath.SplitList(p.ldLibraryPath) {
		if d != "" {
			dirs = append(dirs, LibraryCandidate{Path: d, Source: "$LD_LIBRARY_PATH"})
		}
	}
	for _, d := range p.systemDirs {
		dirs = append(dirs, LibraryCandidate{Path: d, Source: "system library directory"})
	}
	for _, d := range dirs {
		for _, name := range libraryNames {
			add(filepath.Join(d.Path, name), d.Source, false)
		}
	}
	return out
}

// systemLibraryDirs are the loader's default directories FindLibrary
// searches, with Debian's multiarch directory for goarch.
func systemLibraryDirs(goarch string) []string {
	dirs := []string{"/usr/lib", "/usr/local/lib"}
	switch goarch {
	case "amd64":
		dirs = append(dirs, "/usr/lib/x86_64-linux-gnu")
	case "arm64":
		dirs = append(dirs, "/usr/lib/aarch64-linux-gnu")
	}
	return dirs
}
