package gpu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The voxel kernels are compiled at run time with NVRTC for the device's
// own architecture (no CUDA toolkit at build time, and one binary serves
// every GPU), and the cubin is cached on disk so that only the first start
// on a machine pays for the compile. The key covers everything that changes
// the cubin: the source, the architecture, the NVRTC version and the
// options.

// DefaultCubinCacheDir is $XDG_CACHE_HOME/zerohop/cubin (or
// $HOME/.cache/zerohop/cubin), else .cache/cubin under the working
// directory when no cache directory is known.
func DefaultCubinCacheDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "zerohop", "cubin")
	}
	return filepath.Join(".cache", "cubin")
}

// cubinCacheKey is the hex sha256 of the compilation's inputs. Fields are
// length-prefixed so that no two input lists share a key.
func cubinCacheKey(source, arch string, nvrtcMajor, nvrtcMinor int, options []string) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(source)
	field(arch)
	field(fmt.Sprintf("nvrtc %d.%d", nvrtcMajor, nvrtcMinor))
	for _, o := range options {
		field(o)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// compileFunc compiles source with options into a cubin (NVRTC.Compile in
// production; tests pass a stand-in to check the cache, never a GPU).
type compileFunc func(source, name string, options ...string) (Compiled, error)

// cachedCubin returns the module image for key from dir (a cubin, or PTX
// when options name a virtual architecture), or compiles it and stores
// it there (written to a temporary file and renamed, so a reader never sees
// a partial cubin). A cache that cannot be written is not an error: the
// cubin is still returned. hit reports whether it came from the cache.
func cachedCubin(dir, key string, compile compileFunc, source, name string, options []string) (cubin []byte, hit bool, err error) {
	path := filepath.Join(dir, key+".cubin")
	// A missing, empty or unreadable entry is compiled anew and replaced.
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return b, true, nil
	}
	out, err := compile(source, name, options...)
	if err != nil {
		return nil, false, err
	}
	image := out.CUBIN
	if len(image) == 0 && slices.ContainsFunc(options, func(o string) bool { return strings.HasPrefix(o, "--gpu-architecture=compute_") }) {
		image = out.PTX // a virtual architecture: the driver JIT-compiles the PTX
	}
	if len(image) == 0 {
		return nil, false, fmt.Errorf("gpu: compile %s with %s: NVRTC returned no cubin", name, strings.Join(options, " "))
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if tmp, err := os.CreateTemp(dir, key+".*.tmp"); err == nil {
			_, werr := tmp.Write(image)
			cerr := tmp.Close()
			if werr == nil && cerr == nil {
				werr = os.Rename(tmp.Name(), path)
			}
			if werr != nil || cerr != nil {
				os.Remove(tmp.Name())
			}
		}
	}
	return image, false, nil
}

// dropCachedCubin removes dir's entry for key (one the driver refused),
// so that cachedCubin compiles and stores it anew.
func dropCachedCubin(dir, key string) {
	os.Remove(filepath.Join(dir, key+".cubin"))
}
