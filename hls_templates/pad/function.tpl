nnet::tessera_pad_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output});
