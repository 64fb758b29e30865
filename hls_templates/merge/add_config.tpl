struct config${index} : nnet::tessera_add_config {
    static const unsigned n_elem = ${n_elem};
    static const unsigned n_chan = ${n_chan};
};
