nnet::tessera_globalavgpool_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output});
