nnet::tessera_upsample3d_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output});
