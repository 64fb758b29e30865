struct config${index} : nnet::tessera_convlstm_config {
    static const unsigned n_steps = ${n_steps};
    static const unsigned n_in = ${n_in};
    static const unsigned n_hidden = ${n_hidden};
    static const unsigned height = ${height};
    static const unsigned width = ${width};
    static const unsigned kernel = ${kernel};
    static const unsigned steps_out = ${steps_out};
    static const unsigned reuse_factor = ${reuse_factor};
    static const unsigned enc_multiplier_limit = ${enc_multiplier_limit};
    typedef ${enc_wx_t} enc_wx_t;
    typedef ${enc_wh_t} enc_wh_t;
    typedef ${enc_b_t} enc_b_t;
    typedef ${enc_gate_table_t} enc_gate_table_t;
    typedef ${enc_cell_table_t} enc_cell_table_t;
    typedef ${input_code_type} x_t;
${cells}
};
