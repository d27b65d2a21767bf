#!/usr/bin/env bash
# Builds sppark-bench (bench.cu beside this file) from sppark's and blst's public sources:
#   ops/bench/sppark/build.sh SPPARK_DIR BLST_DIR OUT
# SPPARK_DIR: a checkout of github.com/supranational/sppark at the tag measured (v0.1.15);
# BLST_DIR: one of github.com/supranational/blst (sppark's host-side field types come from it).
# nvcc from $NVCC or the PATH (CUDA 12 or 13; the pip wheels nvidia-cuda-nvcc, -runtime, -crt,
# -cccl and nvidia-nvvm of one version serve, with $CUDA_LIB naming their lib folder).
# The binary is for sm_90 (H100, H200); $SPPARK_ARCH overrides it.
set -euo pipefail
sppark=$1 blst=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-nvcc}
arch=${SPPARK_ARCH:-sm_90}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# blst's portable C build: the host side only adds up a few hundred points per MSM.
gcc -O2 -fPIC -D__BLST_PORTABLE__ -c "$blst/src/server.c" -o "$work/server.o"
gcc -O2 -fPIC -D__BLST_PORTABLE__ -c "$blst/build/assembly.S" -o "$work/assembly.o"
ar rcs "$work/libblst.a" "$work/server.o" "$work/assembly.o"
libs=()
[ -n "${CUDA_LIB:-}" ] && libs+=(-L"$CUDA_LIB")
"$nvcc" -O2 -std=c++17 -arch="$arch" -DFEATURE_BLS12_381 -D__BLST_PORTABLE__ \
  -I"$sppark" -I"$blst/bindings" -I"$blst/src" \
  "$here/bench.cu" "$sppark/util/all_gpus.cpp" "$work/libblst.a" "${libs[@]}" -o "$out"
echo "built $out"
