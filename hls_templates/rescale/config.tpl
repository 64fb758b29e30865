struct config${index} : nnet::tessera_rescale_config {
    static const unsigned n_in = ${n_in};
    static const unsigned n_chan = ${n_chan};
    static const unsigned levels = ${levels};
    static const unsigned shift = ${shift};
    static const int form = ${form_code};
    static const long long qmin = ${qmin};
    static const long long qmax = ${qmax};
    static const unsigned out_bits = ${out_bits};
    typedef ${mult_t} mult_t;
    typedef ${add_t} add_t;
    typedef ${thr_t} thr_t;
    typedef ${accum_t} prod_t;
};
