// The top function's translation unit of Tessera's C-simulation build (rendered from
// tessera/hls_templates/sim/tessera_csim_top.cpp.tpl): the project's firmware/${project}.cpp
// as written, with hls4ml's generated straight-line code (nnet_code_gen.h: an io_parallel
// convolution's fill_buffer, one statement per buffered element) compiled at -O${codegen_opt}.
// At the build's -O2 that code takes most of the compile time and runs no faster
// (docs/results/emulation.md); the kernels themselves keep -O2.
#pragma GCC push_options
#pragma GCC optimize("O${codegen_opt}")
#include "nnet_utils/nnet_code_gen.h"
#pragma GCC pop_options
#include "firmware/${project}.cpp"
