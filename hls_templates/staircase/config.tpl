struct config${index} : nnet::tessera_staircase_config {
    static const unsigned n_in = ${n_in};
    static const unsigned n_chan = ${n_chan};
    static const unsigned n_thr = ${n_thr};
    static const unsigned out_bits = ${out_bits};
    typedef ${sign_t} sign_t;
    typedef ${code_t} code_t;
    typedef ${thr_t} thr_t;
    typedef ${base_t} base_t;
};
