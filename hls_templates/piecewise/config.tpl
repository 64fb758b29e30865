struct config${index} : nnet::tessera_piecewise_config {
    static const unsigned n_in = ${n_in};
    static const unsigned n_chan = ${n_chan};
    static const unsigned n_seg = ${n_seg};
    static const unsigned shift = ${shift};
    static const int rounding = nnet::${rounding};
    static const long long qmin = ${qmin};
    static const long long qmax = ${qmax};
    static const unsigned out_bits = ${out_bits};
    typedef ${start_t} start_t;
    typedef ${mult_t} mult_t;
    typedef ${add_t} add_t;
    typedef ${accum_t} prod_t;
};
