// Tessera's packed entry point (rendered from tessera/hls_templates/sim/tessera_ports.cpp.tpl).
//
// One sample's inputs lie side by side in x and its outputs side by side in y, each port in
// hls4ml's order, port after port in the model's order: the C-simulation runtime and the
// exact testbench pass samples so.  This splits them into the bridge's arguments.
extern "C" void ${project}_double(${parameters});

extern "C" void tessera_packed_double(double *x, double *y) { ${project}_double(${arguments}); }
