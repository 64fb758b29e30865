struct config${index} : nnet::tessera_interpolate3d_config {
    static const unsigned in_depth = ${in_depth};
    static const unsigned in_height = ${in_height};
    static const unsigned in_width = ${in_width};
    static const unsigned out_depth = ${out_depth};
    static const unsigned out_height = ${out_height};
    static const unsigned out_width = ${out_width};
    static const unsigned n_chan = ${n_chan};
    static const unsigned out_bits = ${out_bits};
    typedef ${accum_t} accum_t;
    typedef ${index_t} index_t;
    typedef ${weight_t} weight_t;
};
