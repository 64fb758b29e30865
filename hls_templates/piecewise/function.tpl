nnet::tessera_piecewise_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${start}, ${mult}, ${add});
