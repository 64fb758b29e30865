struct config${index} : nnet::tessera_upsample3d_config {
    static const unsigned in_depth = ${in_depth};
    static const unsigned in_height = ${in_height};
    static const unsigned in_width = ${in_width};
    static const unsigned n_chan = ${n_chan};
    static const unsigned factor_depth = ${factor_depth};
    static const unsigned factor_height = ${factor_height};
    static const unsigned factor_width = ${factor_width};
};
