// Tessera's C-simulation prelude (rendered from tessera/hls_templates/sim/tessera_csim_pch.h.tpl).
//
// Included first by every translation unit of a project's C-simulation build, and compiled
// once into a precompiled header shared by every project whose headers are the same
// (tessera.compiler.sim.build): ap_types and the static hls4ml / Tessera headers the
// project's parameters.h includes.  Their include guards make the project's own #includes
// of them no-ops; the generated nnet_code_gen.h is never part of it.
#ifndef TESSERA_CSIM_PCH_H_
#define TESSERA_CSIM_PCH_H_

// The C-simulation reads the weights from the project's firmware/weights at run time
// (hls4ml's load_weights_from_txt): the folder is found beside the loaded library or
// testbench (tessera_csim_rt.cpp), so no path is compiled into any object.
__attribute__((visibility("hidden"))) const char *tessera_weights_dir();

#include "ap_fixed.h"
#include "ap_int.h"
#include "hls_stream.h"

// hls4ml's weight loaders (nnet_helpers.h: each layer's weights read from text once per
// process, before the first sample) are declared again here, copied from the project's own
// header, with an optimisation level of their own (-O${loader_opt}): at the build's level their
// inlined text parsing is a large part of a small model's top unit, for code that runs once
// (docs/results/emulation.md).  The kernels, the bridge's conversions and everything else
// keep the build's level.
#include <cstddef>
namespace nnet {
${loaders}
} // namespace nnet

${includes}
#endif
