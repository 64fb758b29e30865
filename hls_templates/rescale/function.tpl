nnet::tessera_rescale_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${mult}, ${add}, ${thr});
