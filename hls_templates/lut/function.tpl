nnet::tessera_lut_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${table});
