nnet::tessera_lstm_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${wx}, ${wh}, ${b}, ${gate_table}, ${cell_table});
