struct config${index} : nnet::tessera_depth_to_space_config {
    static const unsigned in_height = ${in_height};
    static const unsigned in_width = ${in_width};
    static const unsigned n_chan = ${n_chan};
    static const unsigned block = ${block};
    static const bool crd = ${crd};
};
