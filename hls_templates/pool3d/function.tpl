nnet::tessera_maxpool3d_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output});
