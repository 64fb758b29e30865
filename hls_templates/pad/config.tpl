struct config${index} : nnet::tessera_pad_config {
    static const unsigned in_depth = ${in_depth};
    static const unsigned in_height = ${in_height};
    static const unsigned in_width = ${in_width};
    static const unsigned n_chan = ${n_chan};
    static const unsigned out_depth = ${out_depth};
    static const unsigned out_height = ${out_height};
    static const unsigned out_width = ${out_width};
    static const unsigned pad_front = ${pad_front};
    static const unsigned pad_top = ${pad_top};
    static const unsigned pad_left = ${pad_left};
    static const int mode = nnet::${mode};
    static const unsigned ring_planes = ${ring_planes};
};
