nnet::tessera_convtranspose3d_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${weight}, ${bias});
