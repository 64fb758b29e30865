nnet::tessera_crop3d_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output});
