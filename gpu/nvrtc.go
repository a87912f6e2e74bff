package gpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// NVRTCSonames are tried in order by OpenNVRTC: the newest ABI first, then
// the unversioned development link. NVRTC's soname carries the major version
// (CUDA 12+: libnvrtc.so.12) or major.minor (CUDA 11.2+ shares
// libnvrtc.so.11.2; 11.0/11.1 had their own).
var NVRTCSonames = []string{
	"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0", "libnvrtc.so",
}

// ErrNoNVRTC: no NVRTC library could be loaded; use precompiled kernels or
// the CPU path.
var ErrNoNVRTC = errors.New("gpu: NVRTC library not available")

// NVRTCResult is an nvrtcResult code.
type NVRTCResult int32

// nvrtcBuiltinOperationFailure is what nvrtcCompileProgram returns when it
// cannot load libnvrtc-builtins.
const nvrtcBuiltinOperationFailure NVRTCResult = 7

func builtinsNote(s string) string {
	if s == "" {
		return "NVRTC came from the linker's path, so should they"
	}
	return s
}

// nvrtcNames: enum nvrtcResult from nvrtc.h (CUDA 12.x and 13.0), NVRTC API
// reference (https://docs.nvidia.com/cuda/nvrtc/index.html#error-handling).
var nvrtcNames = map[NVRTCResult]string{
	0:  "NVRTC_SUCCESS",
	1:  "NVRTC_ERROR_OUT_OF_MEMORY",
	2:  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3:  "NVRTC_ERROR_INVALID_INPUT",
	4:  "NVRTC_ERROR_INVALID_PROGRAM",
	5:  "NVRTC_ERROR_INVALID_OPTION",
	6:  "NVRTC_ERROR_COMPILATION",
	7:  "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8:  "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	9:  "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	11: "NVRTC_ERROR_INTERNAL_ERROR",
	12: "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
	13: "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED", // 12.4+
	14: "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
	15: "NVRTC_ERROR_PCH_CREATE",
	16: "NVRTC_ERROR_CANCELLED",
	17: "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED", // 12.8+
}

// Name is the nvrtc.h name, or NVRTC_ERROR_<code> for an unknown code.
func (r NVRTCResult) Name() string {
	if n, ok := nvrtcNames[r]; ok {
		return n
	}
	return fmt.Sprintf("NVRTC_ERROR_%d", int32(r))
}

// Error makes NVRTCResult usable as a sentinel (ErrCompilation).
func (r NVRTCResult) Error() string { return fmt.Sprintf("%s (%d)", r.Name(), int32(r)) }

// ErrCompilation matches an NVRTCError for source that did not compile; the
// error's Log holds the compiler's messages.
var ErrCompilation error = NVRTCResult(6)

// NVRTCError is a failed NVRTC call.
type NVRTCError struct {
	Op   string
	Code NVRTCResult
	Log  string // program log, for compilation failures
}

func (e *NVRTCError) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Op, e.Code.Name(), int32(e.Code))
	if e.Log != "" {
		s += ":\n" + strings.TrimSpace(e.Log)
	}
	return s
}

// Is matches an NVRTCResult sentinel with the same code.
func (e *NVRTCError) Is(target error) bool {
	r, ok := target.(NVRTCResult)
	return ok && r == e.Code
}

func checkNVRTC(op string, r NVRTCResult) error {
	if r == 0 {
		return nil
	}
	return &NVRTCError{Op: op, Code: r}
}

// NVRTC is a loaded NVRTC library. Programs are independent, so it is safe
// for concurrent use; it needs no CUDA context.
type NVRTC struct {
	lib          *dlNVRTC
	soname       string
	major, minor int
	builtins     string // what preloadBuiltins did, for error messages
}

// EnvNVRTC names an NVRTC library (a path) for OpenNVRTC to try first, or
// is NVRTCNone.
const EnvNVRTC = "ZEROHOP_NVRTC"

// NVRTCNone as $ZEROHOP_NVRTC makes OpenNVRTC without arguments find no
// NVRTC (ErrNoNVRTC), whatever is installed: the agent then runs the
// embedded PTX.
const NVRTCNone = "none"

// OpenNVRTC loads the first of sonames that loads and exports every symbol.
// With none given it tries $ZEROHOP_NVRTC (NVRTCNone: none), then NVRTCSonames on the
// dynamic linker's path, then those sonames in the usual CUDA toolkit
// folders ($CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda*/lib64 and
// targets/*/lib), which a CUDA install does not always put on that path.
func OpenNVRTC(sonames ...string) (*NVRTC, error) {
	return openNVRTC(0, sonames)
}

// OpenNVRTC is the package's OpenNVRTC, skipping any NVRTC of a newer CUDA
// major version than the driver's: what it compiles the driver could not
// load (a CUDA 13 cubin on a CUDA 12 driver), so an older NVRTC further
// down the list is the one to use.
func (d *Driver) OpenNVRTC(sonames ...string) (*NVRTC, error) {
	return openNVRTC(int(d.version/1000), sonames)
}

// openNVRTC loads the first candidate whose major version is at most
// maxMajor (0: any).
func openNVRTC(maxMajor int, sonames []string) (*NVRTC, error) {
	if len(sonames) == 0 && os.Getenv(EnvNVRTC) == NVRTCNone {
		return nil, fmt.Errorf("%w: $%s=%s", ErrNoNVRTC, EnvNVRTC, NVRTCNone)
	}
	if len(sonames) == 0 {
		sonames = nvrtcCandidates(os.Getenv, filepath.Glob, fileExists)
	}
	var reasons []string
	for _, name := range sonames {
		lib := &dlNVRTC{}
		h, err := loadLibrary(name, lib.symbols())
		if err != nil {
			reasons = append(reasons, err.Error())
			continue
		}
		lib.bindOptional(h)
		major, minor, r := lib.version()
		if err := checkNVRTC("nvrtcVersion", r); err != nil {
			return nil, fmt.Errorf("gpu: %q: %w", name, err)
		}
		if maxMajor > 0 && major > maxMajor {
			// Left loaded: dlclose of a library is not worth its risks here.
			reasons = append(reasons, fmt.Sprintf("%q is NVRTC %d.%d, newer than the driver's CUDA %d", name, major, minor, maxMajor))
			continue
		}
		return &NVRTC{lib: lib, soname: name, major: major, minor: minor,
			builtins: preloadBuiltins(name, major, minor, filepath.Glob, preloadLibrary)}, nil
	}
	return nil, fmt.Errorf("%w: tried %s", ErrNoNVRTC, strings.Join(reasons, "; "))
}

// preloadBuiltins loads libnvrtc-builtins from the folder of an NVRTC
// loaded by path. NVRTC dlopens libnvrtc-builtins.so.MAJOR.MINOR by soname
// when it compiles; outside the dynamic linker's path (a toolkit folder
// that ldconfig does not know, pip's nvidia-cuda-nvrtc wheel) that fails
// with NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, unless a library of that
// soname is loaded already. It returns what it did, for error messages.
func preloadBuiltins(nvrtc string, major, minor int, glob func(string) ([]string, error), load func(string) error) string {
	if !strings.Contains(nvrtc, "/") {
		return "" // found on the linker's path: so are its builtins
	}
	dir := filepath.Dir(nvrtc)
	want := fmt.Sprintf("libnvrtc-builtins.so.%d.%d", major, minor)
	found, _ := glob(filepath.Join(dir, want+"*"))
	if len(found) == 0 {
		found, _ = glob(filepath.Join(dir, "libnvrtc-builtins.so*"))
	}
	if len(found) == 0 {
		return fmt.Sprintf("no %s beside %s", want, nvrtc)
	}
	slices.Sort(found) // the shortest name: the soname link, not the versioned file
	if err := load(found[0]); err != nil {
		return err.Error()
	}
	return "preloaded " + found[0]
}

// nvrtcCandidates is OpenNVRTC's default search list, without duplicates.
func nvrtcCandidates(getenv func(string) string, glob func(string) ([]string, error), exists func(string) bool) []string {
	var out []string
	seen := map[string]bool{}
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	add(getenv(EnvNVRTC))
	for _, s := range NVRTCSonames {
		add(s)
	}
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if root := getenv(env); root != "" {
			dirs = append(dirs, filepath.Join(root, "lib64"), filepath.Join(root, "lib"))
		}
	}
	roots := []string{"/usr/local/cuda"}
	if more, err := glob("/usr/local/cuda-*"); err == nil {
		roots = append(roots, more...)
	}
	for _, root := range roots {
		dirs = append(dirs, filepath.Join(root, "lib64"))
		for _, target := range []string{"x86_64-linux", "sbsa-linux", "aarch64-linux"} {
			dirs = append(dirs, filepath.Join(root, "targets", target, "lib"))
		}
	}
	// Newest soname first across every folder: a machine with CUDA 11.8 and
	// 12.8 side by side must get 12.8's NVRTC, which knows newer GPUs.
	for _, s := range NVRTCSonames {
		for _, dir := range dirs {
			if p := filepath.Join(dir, s); exists(p) {
				add(p)
			}
		}
	}
	return out
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// SupportedArchs lists the real GPU architectures this NVRTC compiles for,
// as compute capability × 10 (75, 80, 86, 89, 90, ...), ascending. It
// wraps ErrNotSupported for an NVRTC older than 11.2, which cannot say.
func (n *NVRTC) SupportedArchs() ([]int, error) {
	archs, ok, r := n.lib.supportedArchs()
	if !ok {
		return nil, fmt.Errorf("gpu: %s has no nvrtcGetSupportedArchs (NVRTC before 11.2): %w", n.soname, ErrNotSupported)
	}
	if err := checkNVRTC("nvrtcGetSupportedArchs", r); err != nil {
		return nil, err
	}
	if len(archs) == 0 {
		return nil, fmt.Errorf("gpu: %s lists no supported architecture", n.soname)
	}
	slices.Sort(archs)
	return archs, nil
}

// Version is NVRTC's CUDA version (major, minor).
func (n *NVRTC) Version() (major, minor int) { return n.major, n.minor }

// Soname is the library that was loaded.
func (n *NVRTC) Soname() string { return n.soname }

// Compiled is the output of one compilation.
type Compiled struct {
	CUBIN []byte // empty when compiled for a virtual architecture (compute_XX)
	PTX   []byte
	Log   string // warnings, when any
}

// Compile compiles CUDA C source named name (for messages) with options,
// e.g. "--gpu-architecture=sm_87" (CUBIN and PTX) or
// "--gpu-architecture=compute_87" (PTX only). A compile error wraps
// ErrCompilation and carries the program log.
func (n *NVRTC) Compile(source, name string, options ...string) (Compiled, error) {
	prog, r := n.lib.createProgram(source, name)
	if err := checkNVRTC("nvrtcCreateProgram", r); err != nil {
		return Compiled{}, fmt.Errorf("gpu: compile %s: %w", name, err)
	}
	defer n.lib.destroyProgram(prog)

	compileResult := n.lib.compileProgram(prog, options)
	log, r := n.lib.programLog(prog)
	if err := checkNVRTC("nvrtcGetProgramLog", r); err != nil {
		return Compiled{}, fmt.Errorf("gpu: compile %s: %w", name, err)
	}
	if compileResult != 0 {
		err := fmt.Errorf("gpu: compile %s with %q: %w", name, options,
			&NVRTCError{Op: "nvrtcCompileProgram", Code: compileResult, Log: log})
		if compileResult == nvrtcBuiltinOperationFailure {
			err = fmt.Errorf("%w (NVRTC could not load libnvrtc-builtins.so.%d.%d: put its folder on LD_LIBRARY_PATH; builtins: %s)",
				err, n.major, n.minor, builtinsNote(n.builtins))
		}
		return Compiled{}, err
	}
	out := Compiled{Log: log}
	if out.PTX, r = n.lib.ptx(prog); r != 0 {
		return Compiled{}, fmt.Errorf("gpu: compile %s: %w", name, checkNVRTC("nvrtcGetPTX", r))
	}
	// For a virtual architecture (compute_XX) there is no cubin: nvrtc.h
	// says its size is 0, and some versions fail with INVALID_INPUT.
	if cubin, r := n.lib.cubin(prog); r == 0 {
		out.CUBIN = cubin
	}
	return out, nil
}
