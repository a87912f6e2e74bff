// A FAKE of libnvrtc-builtins.so.12.9, which the real NVRTC dlopens by
// soname when it compiles. fakenvrtc.cpp does the same, so that the tests
// see what a real NVRTC loaded by path needs: its builtins loaded, or on
// the linker's path. Built by gpu/fakecuda (Build).
extern "C" int zhfake_nvrtc_builtins = 1;
