// A FAKE of NVRTC (libnvrtc.so), for zerohop's plumbing tests without a
// GPU: it compiles nothing. It checks the calls as NVRTC's C API declares
// them (nvrtc.h) and that zerohop asks for what the kernels need, and
// returns a "cubin" that only the fake driver (fakecuda.cpp) accepts.
// Built by gpu/fakecuda_test.go.
#include <cstdlib>
#include <cstring>
#include <string>

typedef int nvrtcResult;
enum : nvrtcResult {
	NVRTC_SUCCESS = 0,
	NVRTC_ERROR_INVALID_INPUT = 3,
	NVRTC_ERROR_INVALID_PROGRAM = 4,
	NVRTC_ERROR_INVALID_OPTION = 5,
	NVRTC_ERROR_COMPILATION = 6,
};

namespace {
struct Program {
	std::string source, name, log, cubin;
	bool compiled = false;
};
int compiles = 0;
} // namespace

extern "C" {

nvrtcResult nvrtcVersion(int* major, int* minor) {
	*major = 12;
	*minor = 9;
	return NVRTC_SUCCESS;
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
	// The fake driver's device is sm_90, and the voxel kernels'
	// bit-exactness needs contraction off.
	if (arch != "sm_90") {
		prog->log = "fake NVRTC: want --gpu-architecture=sm_90 (the fake device), got '" + arch + "'";
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
	prog->cubin = std::string("ZHFAKECUBIN1") + '\0' + arch + '\0';
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

static const std::string kPTX = "// fake PTX\n.version 8.0\n";
nvrtcResult nvrtcGetPTXSize(Program* p, size_t* n) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	return size(p, kPTX, n, true);
}
nvrtcResult nvrtcGetPTX(Program* p, char* out) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	return get(p, kPTX, out, true);
}
nvrtcResult nvrtcGetCUBINSize(Program* p, size_t* n) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	return size(p, p ? p->cubin : "", n, false);
}
nvrtcResult nvrtcGetCUBIN(Program* p, char* out) {
	if (p && !p->compiled) return NVRTC_ERROR_INVALID_PROGRAM;
	return get(p, p ? p->cubin : "", out, false);
}

// Not NVRTC: how many programs were compiled (the cubin cache test).
int zhfake_nvrtc_compiles(void) { return compiles; }

} // extern "C"
