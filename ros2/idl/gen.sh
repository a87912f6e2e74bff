#!/usr/bin/env bash
# Regenerates the C types of ros2/ from ros2/idl/*.idl with Cyclone DDS's
# idlc (Debian cyclonedds-tools 0.10.2): `make ros2-gen` or `go generate`
# in ros2/. -t leaves XTypes type information out of the topic descriptors,
# as rmw_cyclonedds does; -x final makes every struct @final (XCDR1).
# Each .c file gets the build constraint that keeps it out of the default,
# pure-Go build. The output is committed; TestGeneratedCodeIsFresh checks it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(cd "${1:-$here/..}" && pwd)"
command -v idlc >/dev/null || { echo "ros2-gen: idlc not found (apt-get install -y cyclonedds-tools)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$here"/*.idl "$tmp"/
# Run idlc in the output folder without -o: its include guards and "File
# name" lines are derived from the output path.
cd "$tmp"
for name in builtin_interfaces rosgraph_msgs std_msgs geometry_msgs tf2_msgs sensor_msgs diagnostic_msgs zerohop_msgs rmw_dds_common rmw_dds_common_humble rcl_interfaces; do
  idlc -t -x final "$name.idl"
  # Absolute paths would make the output depend on the checkout.
  sed -i -e "s|Source: .*/$name.idl|Source: ros2/idl/$name.idl|" -e "s|File name: .*/|File name: |" "$tmp/$name.c" "$tmp/$name.h"
  if [ "$name" = rmw_dds_common_humble ]; then
    # Humble nodes match the 24-byte form by the one type name there is.
    sed -i 's|\.m_typename = "rmw_dds_common_humble::msg::dds_::ParticipantEntitiesInfo_"|.m_typename = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_"|' "$tmp/$name.c"
  fi
  { printf '//go:build ros2 && cgo\n\n'; cat "$tmp/$name.c"; } >"$out/$name.c"
  cp "$tmp/$name.h" "$out/$name.h"
done
