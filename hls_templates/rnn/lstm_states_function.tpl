nnet::tessera_lstm_states_${form}<${input1_t}, ${input2_t}, ${input3_t}, ${output_t}, ${config}>(${input1}, ${input2}, ${input3}, ${output}, ${wx}, ${wh}, ${b}, ${gate_table}, ${cell_table});
