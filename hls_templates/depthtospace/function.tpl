nnet::tessera_depth_to_space_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output});
