struct config${index} : nnet::tessera_gru_config {
    static const unsigned n_steps = ${n_steps};
    static const unsigned n_in = ${n_in};
    static const unsigned n_hidden = ${n_hidden};
    static const unsigned n_out = ${n_out};
    static const bool reverse = ${reverse};
    static const bool return_sequences = ${return_sequences};
    static const int weight_kind = nnet::${weight_kind};
    static const unsigned reuse_factor = ${reuse_factor};
    static const unsigned multiplier_limit = ${multiplier_limit};
    typedef ${wx_t} wx_t;
    typedef ${wh_t} wh_t;
    typedef ${bx_t} bx_t;
    typedef ${bh_t} bh_t;
    typedef ${gate_table_t} gate_table_t;
    typedef ${thr_t} thr_t;
    typedef ${input_code_type} x_t;
${cell}
};
