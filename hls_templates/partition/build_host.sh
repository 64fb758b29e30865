#!/bin/bash
# Builds every block kernel's and the tail's C-simulation library, then the partitioned
# host, and runs it on the reference samples in tb_data/.
cd "$(dirname "$0")"
for prj in kernels/* tail; do
    if [ -f "$prj/build_lib.sh" ] && ! ls "$prj"/firmware/*.so >/dev/null 2>&1; then
        (cd "$prj" && bash build_lib.sh >/dev/null) || { echo "tessera-host: building $prj failed"; exit 2; }
    fi
done
CXX="${CXX:-g++}"
"$CXX" -O2 -std=c++17 partition_host.cpp -o partition_host -ldl || { echo "tessera-host: g++ failed"; exit 2; }
ulimit -s unlimited 2>/dev/null || ulimit -s 1048576 2>/dev/null || true
./partition_host "$@"
