    struct ${name} {
        static const bool has_input = ${has_input};
        static const int weight_kind = nnet::${weight_kind};
        static const unsigned multiplier_limit = ${name}_multiplier_limit; // ALLOCATION of its weight products
        typedef ${wx_t} wx_t;
        typedef ${name}_wh_t wh_t;
        typedef ${name}_b_t b_t;
        typedef ${name}_gate_table_t gate_table_t;
        typedef ${name}_cell_table_t cell_table_t;
${cell}
    };
