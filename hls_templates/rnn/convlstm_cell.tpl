    struct ${name} {
        static const bool has_input = ${has_input};
        static const int wkind = nnet::${wkind};
        typedef ${wx_t} wx_t;
        typedef ${name}_wh_t wh_t;
        typedef ${name}_b_t b_t;
        typedef ${name}_gate_table_t table_t;
        typedef ${name}_cell_table_t ctable_t;
${body}
    };
