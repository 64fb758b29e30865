struct config${index} : nnet::tessera_add_config {
    static const unsigned n_elem = ${n_elem};
    static const unsigned n_chan = ${n_chan};
    static const unsigned n_k = ${n_k};
    typedef ${k1_t} k1_t;
    typedef ${k2_t} k2_t;
};
