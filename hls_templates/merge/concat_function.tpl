nnet::tessera_concat_${form}<${input1_t}, ${input2_t}, ${output_t}, ${config}>(${input1}, ${input2}, ${output});
