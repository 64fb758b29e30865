struct config${index} : nnet::tessera_concat_config {
    static const unsigned n_pos = ${n_pos};
    static const unsigned n_chan1 = ${n_chan1};
    static const unsigned n_chan2 = ${n_chan2};
};
