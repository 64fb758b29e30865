nnet::tessera_staircase_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${sign}, ${base}, ${thr});
