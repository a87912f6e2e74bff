#!/usr/bin/env bash
# Fetch the CPU build of ONNX Runtime that zerohop's infer package loads at run
# time: libonnxruntime.so.1, taken from the onnxruntime-node npm package (which
# ships Linux x64 and arm64 binaries), version and checksums pinned below.
#
# Result: $ZEROHOP_CACHE/ort/1.30.0/libonnxruntime.so.1
#         (ZEROHOP_CACHE defaults to <repo>/.cache; infer.FindLibrary looks there)
#
# Idempotent: if the library is already in place with the pinned checksum,
# nothing is downloaded or written. The npm tarball is kept in the cache so a
# damaged library can be re-extracted without the network.
set -euo pipefail

readonly ORT_VERSION=1.30.0
readonly NPM_PACKAGE="onnxruntime-node@${ORT_VERSION}"
readonly TARBALL_NAME="onnxruntime-node-${ORT_VERSION}.tgz"
# sha256 of the tarball; it matches the registry's dist.integrity
# sha512-twhs1C2C/BFkz1yc5OY0KIU2GUq6DURO7hD4bx5Q2Qy3nAMJwRXW8xU3NVczE29VA9lolLOYepoD8fjTGOfIqw==
readonly TARBALL_SHA256=6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75
# sha256 of package/bin/napi-v6/linux/<arch>/libonnxruntime.so.1 inside it.
readonly LIB_SHA256_x64=ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23
readonly LIB_SHA256_arm64=1f549d46250b005580b597f4164984aaf75b3bcb9f3aeb07c7f8a8fe60b23c76

say() { echo "ort: $*"; }
die() { echo "ort: error: $*" >&2; exit 1; }

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cache="${ZEROHOP_CACHE:-${repo_root}/.cache}"
ort_dir="${cache}/ort"
lib_dir="${ort_dir}/${ORT_VERSION}"
lib="${lib_dir}/libonnxruntime.so.1"
tarball="${ort_dir}/${TARBALL_NAME}"

case "$(uname -m)" in
	x86_64 | amd64) arch=x64; lib_sha256="${LIB_SHA256_x64}" ;;
	aarch64 | arm64) arch=arm64; lib_sha256="${LIB_SHA256_arm64}" ;;
	*) die "unsupported machine '$(uname -m)': onnxruntime-node ships Linux x64 and arm64 only" ;;
esac
readonly member="package/bin/napi-v6/linux/${arch}/libonnxruntime.so.1"

command -v sha256sum >/dev/null || die "sha256sum not found (Debian package: coreutils)"
command -v tar >/dev/null || die "tar not found (Debian package: tar)"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

if [[ -f "${lib}" ]]; then
	got="$(sha256_of "${lib}")"
	if [[ "${got}" == "${lib_sha256}" ]]; then
		say "ONNX Runtime ${ORT_VERSION} (linux-${arch}) already in place, checksum ok: ${lib}"
		exit 0
	fi
	say "${lib} has sha256 ${got}, want ${lib_sha256}: replacing it"
fi

mkdir -p "${ort_dir}" "${lib_dir}"
tmp="$(mktemp -d "${ort_dir}/.fetch.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT

if [[ -f "${tarball}" && "$(sha256_of "${tarball}")" == "${TARBALL_SHA256}" ]]; then
	say "using cached ${tarball}"
else
	if [[ -f "${tarball}" ]]; then
		say "cached ${tarball} has the wrong checksum: downloading it again"
	fi
	command -v npm >/dev/null ||
		die "npm not found; it is needed to download ${NPM_PACKAGE}. Install it with 'apt-get install -y npm' (Debian/Ubuntu package npm; NodeSource's nodejs package also bundles it)"
	say "downloading ${NPM_PACKAGE} with npm pack (about 110 MB)"
	# npm pack writes into the current directory; run it in the temp folder so
	# a half-written tarball never lands in the cache. Its own cache goes
	# there too: ~/.npm may be unwritable (HOME unset, a read-only home).
	(cd "${tmp}" && npm pack --loglevel=error --cache "${tmp}/npm-cache" "${NPM_PACKAGE}" >/dev/null) ||
		die "npm pack ${NPM_PACKAGE} failed (npm's message is above; is the npm registry reachable?)"
	[[ -f "${tmp}/${TARBALL_NAME}" ]] || die "npm pack did not produce ${TARBALL_NAME}"
	got="$(sha256_of "${tmp}/${TARBALL_NAME}")"
	[[ "${got}" == "${TARBALL_SHA256}" ]] ||
		die "${TARBALL_NAME}: sha256 ${got}, want ${TARBALL_SHA256}; refusing to use it"
	mv -f "${tmp}/${TARBALL_NAME}" "${tarball}"
	say "saved ${tarball} (sha256 ok)"
fi

tar -xzf "${tarball}" -C "${tmp}" "${member}" ||
	die "${tarball} has no ${member}"
got="$(sha256_of "${tmp}/${member}")"
[[ "${got}" == "${lib_sha256}" ]] ||
	die "${member}: sha256 ${got}, want ${lib_sha256}"
chmod 0644 "${tmp}/${member}"
mv -f "${tmp}/${member}" "${lib}"
say "extracted ${member} -> ${lib} (sha256 ok)"
