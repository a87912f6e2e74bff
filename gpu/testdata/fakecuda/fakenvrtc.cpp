// A FAKE of NVRTC (libnvrtc.so), for zerohop's plumbing tests without a
// GPU: it compiles nothing. It checks the calls as NVRTC's C API declares
// them (nvrtc.h) and that zerohop asks for what the kernels need, and
// returns a "cubin" that only the fake driver (fakecuda.cpp) accepts.
// Built by gpu/fakecuda_test.go.
#include <algorithm>
#include <dlfcn.h>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

typedef int nvrtcResult;
enum : nvrtcResult {
	NVRTC_SUCCESS = 0,
	NVRTC_ERROR_INVALID_INPUT = 3,
	NVRTC_ERROR_INVALID_PROGRAM = 4,
	NVRTC_ERROR_INVALID_OPTION = 5,
	NVRTC_ERROR_COMPILATION = 6,
	NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
};

namespace {
struct Program {
	std::string source, name, log, cubin, ptx;
	bool compiled = false;
};
int compiles = 0;
// What nvrtcGetSupportedArchs reports (CUDA 12.9's list by default);
// zhfake_nvrtc_set_archs changes it, to play an NVRTC older than the GPU.
std::vector<int> archs = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 120, 121};
bool supported(int a) { return std::find(archs.begin(), archs.end(), a) != archs.end(); }
} // namespace

extern "C" {

int versionMajor = 12, versionMinor = 9;

nvrtcResult nvrtcVersion(int* major, int* minor) {
	*major = versionMajor;
	*minor = versionMinor;
	return NVRTC_SUCCESS;
}

// Not NVRTC: the version nvrtcVersion reports (default 12.9).
void zhfake_nvrtc_set_version(int major, int minor) {
	versionMajor = major;
	versionMinor = minor;
}

nvrtcResult nvrtcCreateProgram(Program** prog, const char* src, const char* name, int numHeaders,
                               const char* const* headers, const char* const* includeNames) {
	if (!prog || !src || numHeaders < 0 || (numHeaders > 0 && (!headers || !includeNames))) return NVRTC_ERROR_INVALID_INPUT;
	*prog = new Program{src, name ? name : "default_program"};
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(Program** prog) {
	if (!prog || !*prog) return NVRTC_ERROR_INVALID_PROGRAM;
	delete *prog;
	*prog = nullptr;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(Program* prog, int numOptions, const char* const* options) {
	if (!prog) return NVRTC_ERROR_INVALID_PROGRAM;
	if (numOptions < 0 || (numOptions > 0 && !options)) return NVRTC_ERROR_INVALID_INPUT;
	// As the real NVRTC: its builtins by soname, loaded already or on the
	// linker's path.
	std::string builtins = "libnvrtc-builtins.so." + std::to_string(versionMajor) + "." + std::to_string(versionMinor);
	if (!dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL)) {
		prog->log = "fake NVRTC: failed to open " + builtins;
		return NVRTC_ERROR_BUILTIN_OPERATION_FAILURE;
	}
	std::string arch;
	bool noFMA = false;
	for (int i = 0; i < numOptions; i++) {
		std::string o = options[i];
		if (o.rfind("--gpu-architecture=", 0) == 0) arch = o.substr(19);
		else if (o == "--fmad=false") noFMA = true;
		else if (o.rfind("--std=", 0) != 0) {
			prog->log = "fake NVRTC: unknown option " + o;
			return NVRTC_ERROR_INVALID_OPTION;
		}
	}
	// Real architectures this NVRTC lacks are refused as NVRTC does. The
	// fake driver's device is sm_90: a cubin must be for it; PTX may be for
	// any virtual architecture it can run (the driver JIT-compiles it).
	bool virt = arch.rfind("compute_", 0) == 0;
	int num = atoi(arch.c_str() + (virt ? 8 : arch.rfind("sm_", 0) == 0 ? 3 : arch.size()));
	if (!supported(num)) {
		prog->log = "nvrtc: error: invalid value for --gpu-architecture (-arch): " + arch;
		return NVRTC_ERROR_INVALID_OPTION;
	}
	if (virt ? num > 90 : arch != "sm_90") {
		prog->log = "fake NVRTC: want sm_90 or compute_XX up to 90 (the fake device), got '" + arch + "'";
		return NVRTC_ERROR_COMPILATION;
	}
	if (prog->source.find("zh_keys") != std::string::npos && !noFMA) {
		prog->log = "fake NVRTC: the voxel kernels need --fmad=false";
		return NVRTC_ERROR_COMPILATION;
	}
	if (prog->source.find("extern \"C\" __global__") == std::string::npos) {
		prog->log = prog->name + ": fake NVRTC: no extern \"C\" __global__ kernel in the source";
		return NVRTC_ERROR_COMPILATION;
	}
	compiles++;
	prog->compiled = true;
	prog->log = "fake NVRTC: nothing was compiled";
	prog->ptx = "// ZHFAKEPTX1 " + arch + "\n.version 8.0\n";
	if (!virt) prog->cubin = std::string("ZHFAKECUBIN1") + '\0' + arch + '\0';
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetNumSupportedArchs(int* n) {
	if (!n) return NVRTC_ERROR_INVALID_INPUT;
	*n = (int)archs.size();
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int* out) {
	if (!out) return NVRTC_ERROR_INVALID_INPUT;
	std::copy(archs.begin(), archs.end(), out);
	return NVRTC_SUCCESS;
}

static nvrtcResult size(Program* p, const std::string& s, size_t* n, bool nul) {
	if (!p || !n) return NVRTC_ERROR_INVALID_INPUT;
	*n = s.size() + (nul ? 1 : 0);
	return NVRTC_SUCCESS;
}

static nvrtcResult get(Program* p, const std::string& s, char* out, bool nul) {
	if (!p || !out) return NVRTC_ERROR_INVALID_INPUT;
	memcpy(out, s.data(), s.size());
	if (nul) out[s.size()] = 0;
	return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(Program* p, size_t* n) { return size(p, p ? p->log : "", n, true); }
nvrtcResult nvrtcGetProgramLog(Program* p, char* out) { return get(p, p ? p->log : "", out, true); }

nvrtcResult nvrtcGetPTXSize(Program* p, size_t* n) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	return size(p, p ? p->ptx : "", n, true);
}
nvrtcResult nvrtcGetPTX(Program* p, char* out) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	return get(p, p ? p->ptx : "", out, true);
}
// As NVRTC: no cubin for a virtual architecture (INVALID_INPUT).
nvrtcResult nvrtcGetCUBINSize(Program* p, size_t* n) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	if (p && p->cubin.empty()) return NVRTC_ERROR_INVALID_INPUT;
	return size(p, p ? p->cubin : "", n, false);
}
nvrtcResult nvrtcGetCUBIN(Program* p, char* out) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	if (p && p->cubin.empty()) return NVRTC_ERROR_INVALID_INPUT;
	return get(p, p ? p->cubin : "", out, false);
}

// Not NVRTC: how many programs were compiled (the cubin cache test).
int zhfake_nvrtc_compiles(void) { return compiles; }

// Not NVRTC: sets the supported-architecture list to the first n (≤ 8)
// of a0..a7; n = 0 restores CUDA 12.9's. Plain integers, so that Go calls
// it without handing over memory.
void zhfake_nvrtc_set_archs(int n, int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7) {
	static const std::vector<int> dflt = archs;
	const int a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
	archs = n > 0 ? std::vector<int>(a, a + std::min(n, 8)) : dflt;
}

} // extern "C"
