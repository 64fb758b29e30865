nnet::tessera_avgpool3d_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${mult}, ${add});
