nnet::tessera_add_${form}<${input1_t}, ${input2_t}, ${output_t}, ${config}>(${input1}, ${input2}, ${output}, ${k1}, ${k2});
