#!/usr/bin/env bash
# Run on the Debian development machine: copies the build dependencies that the GPU machine lacks
# (the header-only CLI11 and nlohmann-json with their CMake package files, zlib's headers and static
# library) into .deps/usr (git-ignored). Name `.deps` in the device tool's `carry`; tools/env.sh
# adds it to CMAKE_PREFIX_PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .deps && mkdir -p .deps/usr/include .deps/usr/share/cmake .deps/usr/lib
cp -r /usr/include/CLI /usr/include/nlohmann /usr/include/zlib.h /usr/include/zconf.h .deps/usr/include/
cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json .deps/usr/share/cmake/
cp /usr/lib/x86_64-linux-gnu/libz.a .deps/usr/lib/
du -sh .deps
