struct config${index} : nnet::tessera_globalavgpool_config {
    static const unsigned n_pixels = ${n_pixels};
    static const unsigned n_filt = ${n_filt};
    static const unsigned num_shift = ${num_shift};
    static const unsigned den_shift = ${den_shift};
    static const int rounding = nnet::${rounding};
    static const long long qmin = ${qmin};
    static const long long qmax = ${qmax};
    static const unsigned sum_bits = ${sum_bits};
    static const unsigned out_bits = ${out_bits};
    static const long long mult = ${mult};
    static const long long add = ${add};
    static const unsigned shift = ${shift};
    static const int form = ${form_code};
    typedef ${accum_t} accum_t;
    typedef ${prod_t} prod_t;
    typedef ${mult_t} mult_t;
    typedef ${add_t} add_t;
};
