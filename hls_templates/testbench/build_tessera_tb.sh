#!/bin/bash
# Builds the Tessera bit-exact testbench with g++ (no vendor tools) and runs it.
set -e
cd "$(dirname "$0")"
CXX="${CXX:-g++}"
"$CXX" -O0 -std=c++17 -Ifirmware/ap_types -Ifirmware -I. -DWEIGHTS_DIR='"firmware/weights"' tessera_tb.cpp firmware/*.cpp -o tessera_tb
./tessera_tb "$@"
