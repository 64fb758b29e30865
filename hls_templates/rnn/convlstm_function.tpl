nnet::tessera_convlstm_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${enc_wx}, ${enc_wh}, ${enc_b}, ${enc_gate_table}, ${enc_cell_table});
