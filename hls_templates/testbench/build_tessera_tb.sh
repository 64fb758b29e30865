#!/bin/bash
# Builds the Tessera bit-exact testbench with g++ (no vendor tools) and runs it.
set -e
cd "$(dirname "$0")"
CXX="${CXX:-g++}"
"$CXX" -O2 -std=c++17 -Ifirmware/ap_types -Ifirmware -I. -DWEIGHTS_DIR='"firmware/weights"' tessera_tb.cpp firmware/*.cpp -o tessera_tb
# io_parallel designs keep whole feature maps in local arrays: give the C-simulation a large
# stack (as Vitis HLS's csim does), falling back to the current limit where that is refused.
ulimit -s unlimited 2>/dev/null || ulimit -s 1048576 2>/dev/null || true
./tessera_tb "$@"
