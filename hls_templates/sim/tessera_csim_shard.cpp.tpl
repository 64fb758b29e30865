// Shard ${shard} of ${shards} of the top function's unit in Tessera's C-simulation build (rendered
// from tessera/hls_templates/sim/tessera_csim_shard.cpp.tpl by tessera.compiler.sim.shard): the
// project's firmware/<project>.cpp with some layers' calls compiled in another shard, through
// tessera_csim_layer_<k>, which calls the same kernel with the same template arguments on the
// same (forwarded) arguments.  Shard 0 defines the top function; shard s > 0 defines its
// layers' tessera_csim_layer_<k> (instantiated by an unused copy of the top function, so with
// exactly shard 0's argument types), and its object's copies of what the project's headers
// define (the weight arrays...) are made weak: shard 0's stand.
#pragma GCC push_options
#pragma GCC optimize("O${codegen_opt}")
#include "nnet_utils/nnet_code_gen.h"
#pragma GCC pop_options
${bridge}
${declarations}
${head}
${definitions}
${top}
