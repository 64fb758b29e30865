// The project's firmware as Vitis HLS compiles it (rendered from
// tessera/hls_templates/sim/tessera_synthesis_view.cpp.tpl for `tessera check`): the
// open-source ap_types #error on __SYNTHESIS__, so they and hls_stream.h are included
// first; their include guards keep them when the firmware includes them again, and every
// other header (hls4ml's nnet_utils, Tessera's kernels, the generated code) is compiled
// with __SYNTHESIS__ defined, its synthesis branch only.  The weights file declares the
// largest weight arrays of a large project with their first values (their headers are then
// skipped); tessera/compiler/hlscheck/weights.py reads every value of every header.
#include "ap_fixed.h"
#include "ap_int.h"
#include "hls_stream.h"
#define __SYNTHESIS__
#include "${weights}"
#include "firmware/${project}.cpp"
