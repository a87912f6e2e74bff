#!/usr/bin/env bash
# Fetch NVIDIA's real CUDA driver library and NVRTC, as Debian packages them
# in non-free, so that the GPU binding is checked against them on a machine
# WITHOUT a GPU (make test-cuda-libs): NVRTC compiles the kernels for every
# architecture, and libcuda.so.1 resolves every symbol the binding uses and
# names every error code. Two releases, one folder each:
#
#   bookworm  libnvrtc11.2 + libnvrtc-builtins11.8, libcuda1   NVRTC 11.8, driver 535 (CUDA 12.2)
#   trixie    libnvrtc12 + libnvrtc-builtins12.4, libcuda1     NVRTC 12.4, driver 550 (CUDA 12.4)
#
# These are NVIDIA's own binaries, repackaged, so trixie's load on Debian 12.
# Nothing is installed into the system: apt downloads the packages through a
# private package list (verified against Debian's signed archive, as for any
# apt download) and dpkg-deb unpacks the libraries into the cache.
#
# Result: $ZEROHOP_CACHE/cuda-debian/<release>/lib/{libcuda.so.1,libnvrtc.so.*,libnvrtc-builtins.so.*}
#         (ZEROHOP_CACHE defaults to <repo>/.cache), and VERSIONS beside each lib/.
#
# Idempotent: a release whose libraries are in place is not fetched again.
# Exit status 3 (nothing fetched, with one line saying why) where Debian's
# archive is not the right source: not Debian 12, or no archive keyring.
set -euo pipefail

say() { echo "cuda-libs: $*"; }
die() { echo "cuda-libs: error: $*" >&2; exit 1; }

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${ZEROHOP_CACHE:-${repo_root}/.cache}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

# fetch RELEASE NVRTC-SONAME BUILTINS-SONAME PACKAGE...
fetch() {
	local release=$1 nvrtc=$2 builtins=$3
	shift 3
	local packages=("$@")
	local dest="${cache}/cuda-debian/${release}"
	local lib="${dest}/lib"
	local wanted=(libcuda.so.1 "${nvrtc}" "${builtins}")
	local f missing=0
	for f in "${wanted[@]}"; do [[ -e "${lib}/${f}" ]] || missing=1; done
	# The libraries as unpacked, by their sums: a damaged cache (a disk
	# error, a hand-edited file) is fetched again rather than crash a test.
	if ((!missing)) && ! (cd "${lib}" && sha256sum --quiet --status -c ../SHA256SUMS 2>/dev/null); then
		say "${release}: ${lib} has no SHA256SUMS or does not match it; fetching again"
		missing=1
	fi
	if ((!missing)); then
		say "${release}: already in place: ${lib} ($(tr '\n' ' ' <"${dest}/VERSIONS" 2>/dev/null))"
		return 0
	fi
	mkdir -p "${dest}"
	local tmp
	tmp="$(mktemp -d "${dest}/.fetch.XXXXXX")"
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '${tmp}'" EXIT
	mkdir -p "${tmp}/lists/partial" "${tmp}/cache/archives/partial" "${tmp}/parts" "${tmp}/debs" "${tmp}/root" "${tmp}/lib"
	cat >"${tmp}/zerohop.sources" <<SOURCES
Types: deb
URIs: http://deb.debian.org/debian
Suites: ${release}
Components: non-free
Signed-By: ${keyring}
SOURCES
	local apt_opts=(
		-o "Dir::Etc::sourcelist=${tmp}/zerohop.sources" -o "Dir::Etc::sourceparts=${tmp}/parts"
		-o "Dir::State::Lists=${tmp}/lists" -o "Dir::Cache=${tmp}/cache"
		-o "APT::Sandbox::User=root" -o "Debug::NoLocking=1"
	)
	say "${release}: fetching ${packages[*]} from Debian ${release} non-free"
	apt-get "${apt_opts[@]}" -qq update || die "apt-get update of the ${release} non-free list failed"
	(cd "${tmp}/debs" && apt-get "${apt_opts[@]}" -qq download "${packages[@]}") || die "apt-get download ${packages[*]} (${release}) failed"
	: >"${tmp}/VERSIONS"
	local deb
	for deb in "${tmp}"/debs/*.deb; do
		dpkg-deb -x "${deb}" "${tmp}/root"
		echo "$(dpkg-deb -f "${deb}" Package)=$(dpkg-deb -f "${deb}" Version)" >>"${tmp}/VERSIONS"
	done
	# Flatten: the real files and the sonames that point at them.
	find "${tmp}/root" \( -name 'libcuda.so*' -o -name 'libnvrtc*.so*' \) \( -type f -o -type l \) -exec cp -P {} "${tmp}/lib/" \;
	for f in "${wanted[@]}"; do
		[[ -e "${tmp}/lib/${f}" ]] || die "${release}: the packages hold no ${f} (found: $(ls "${tmp}/lib" | tr '\n' ' '))"
	done
	(cd "${tmp}/lib" && sha256sum -- *) >"${tmp}/SHA256SUMS"
	rm -rf "${lib}"
	mv "${tmp}/lib" "${lib}"
	mv "${tmp}/VERSIONS" "${dest}/VERSIONS"
	mv "${tmp}/SHA256SUMS" "${dest}/SHA256SUMS"
	rm -rf "${tmp}"
	trap - EXIT
	say "${release}: in place: ${lib} ($(tr '\n' ' ' <"${dest}/VERSIONS"))"
}

codename="$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")"
if [[ "${codename}" != bookworm || ! -f "${keyring}" ]]; then
	say "not fetched: needs Debian 12 (bookworm) and ${keyring}; this is '${codename:-unknown}'"
	exit 3
fi
command -v apt-get >/dev/null || die "apt-get not found"
command -v dpkg-deb >/dev/null || die "dpkg-deb not found (Debian package: dpkg)"

fetch bookworm libnvrtc.so.11.2 libnvrtc-builtins.so.11.8 libnvrtc11.2 libnvrtc-builtins11.8 libcuda1
fetch trixie libnvrtc.so.12 libnvrtc-builtins.so.12.4 libnvrtc12 libnvrtc-builtins12.4 libcuda1
