#!/usr/bin/env bash
# Fetch NVIDIA's real CUDA driver library and NVRTC, as Debian 12 packages
# them in non-free, so that the GPU binding is checked against them on a
# machine WITHOUT a GPU (make test-cuda-libs): NVRTC compiles the kernels
# for every architecture, and libcuda.so.1 resolves every symbol the binding
# uses and names every error code. Nothing is installed into the system:
# apt downloads the packages through a private package list (verified
# against Debian's signed archive, as for any apt download) and dpkg-deb
# unpacks the libraries into the cache.
#
#   libnvrtc11.2 + libnvrtc-builtins11.8   NVRTC 11.8 (CUDA 11.8)
#   libcuda1                               the driver's libcuda.so.1 (535)
#
# Result: $ZEROHOP_CACHE/cuda-debian/lib/{libcuda.so.1,libnvrtc.so.11.2,libnvrtc-builtins.so.11.8}
#         (ZEROHOP_CACHE defaults to <repo>/.cache), and VERSIONS beside them.
#
# Idempotent: when the three libraries are in place nothing is fetched.
# Exit status 3 (nothing fetched, with one line saying why) where Debian's
# archive is not the right source: not Debian, or no archive keyring.
set -euo pipefail

say() { echo "cuda-libs: $*"; }
die() { echo "cuda-libs: error: $*" >&2; exit 1; }

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${ZEROHOP_CACHE:-${repo_root}/.cache}"
dest="${cache}/cuda-debian"
lib="${dest}/lib"
readonly packages=(libnvrtc11.2 libnvrtc-builtins11.8 libcuda1)
readonly wanted=(libcuda.so.1 libnvrtc.so.11.2 libnvrtc-builtins.so.11.8)

have_all() {
	local f
	for f in "${wanted[@]}"; do [[ -e "${lib}/${f}" ]] || return 1; done
}
if have_all; then
	say "already in place: ${lib} ($(tr '\n' ' ' <"${dest}/VERSIONS" 2>/dev/null))"
	exit 0
fi

keyring=/usr/share/keyrings/debian-archive-keyring.gpg
codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
if [[ "${codename}" != bookworm || ! -f "${keyring}" ]]; then
	say "not fetched: needs Debian 12 (bookworm) and ${keyring}; this is '${codename:-unknown}'"
	exit 3
fi
command -v apt-get >/dev/null || die "apt-get not found"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (Debian package: dpkg)"

mkdir -p "${dest}"
tmp="$(mktemp -d "${dest}/.fetch.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
mkdir -p "${tmp}/lists/partial" "${tmp}/cache/archives/partial" "${tmp}/parts" "${tmp}/debs" "${tmp}/root"
cat >"${tmp}/zerohop.sources" <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: non-free
Signed-By: ${keyring}
SOURCES
apt_opts=(
	-o "Dir::Etc::sourcelist=${tmp}/zerohop.sources" -o "Dir::Etc::sourceparts=${tmp}/parts"
	-o "Dir::State::Lists=${tmp}/lists" -o "Dir::Cache=${tmp}/cache"
	-o "APT::Sandbox::User=root" -o "Debug::NoLocking=1"
)
say "fetching ${packages[*]} from Debian bookworm non-free"
apt-get "${apt_opts[@]}" -qq update || die "apt-get update of the bookworm non-free list failed"
(cd "${tmp}/debs" && apt-get "${apt_opts[@]}" -qq download "${packages[@]}") || die "apt-get download ${packages[*]} failed"
: >"${tmp}/VERSIONS"
for deb in "${tmp}"/debs/*.deb; do
	dpkg-deb -x "${deb}" "${tmp}/root"
	echo "$(dpkg-deb -f "${deb}" Package)=$(dpkg-deb -f "${deb}" Version)" >>"${tmp}/VERSIONS"
done

# Flatten: the real files and the sonames that point at them.
mkdir -p "${tmp}/lib"
find "${tmp}/root" \( -name 'libcuda.so*' -o -name 'libnvrtc*.so*' \) \( -type f -o -type l \) -exec cp -P {} "${tmp}/lib/" \;
for f in "${wanted[@]}"; do
	[[ -e "${tmp}/lib/${f}" ]] || die "the packages hold no ${f} (found: $(ls "${tmp}/lib" | tr '\n' ' '))"
done
rm -rf "${lib}"
mv "${tmp}/lib" "${lib}"
mv "${tmp}/VERSIONS" "${dest}/VERSIONS"
say "in place: ${lib} ($(tr '\n' ' ' <"${dest}/VERSIONS"))"
