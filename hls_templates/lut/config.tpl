struct config${index} : nnet::tessera_lut_config {
    static const unsigned n_in = ${n_in};
    static const unsigned n_table = ${n_table};
    static const unsigned in_width = ${in_width};
    static const int table_lo = ${table_lo};
    static const bool in_signed = ${in_signed};
    typedef ${table_t} table_t;
};
