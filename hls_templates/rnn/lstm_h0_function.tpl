nnet::tessera_lstm_h0_${form}<${input1_t}, ${input2_t}, ${output_t}, ${config}>(${input1}, ${input2}, ${output}, ${wx}, ${wh}, ${b}, ${gate_table}, ${cell_table});
