nnet::tessera_interpolate3d_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${index}, ${weight});
