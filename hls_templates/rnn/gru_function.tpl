nnet::tessera_gru_${form}<${input_t}, ${output_t}, ${config}>(${input}, ${output}, ${wx}, ${wh}, ${bx}, ${bh}, ${gate_table}, ${thr});
