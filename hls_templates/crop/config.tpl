struct config${index} : nnet::tessera_crop3d_config {
    static const unsigned in_depth = ${in_depth};
    static const unsigned in_height = ${in_height};
    static const unsigned in_width = ${in_width};
    static const unsigned n_chan = ${n_chan};
    static const unsigned start_chan = ${start_chan};
    static const unsigned out_chan = ${out_chan};
    static const unsigned step_chan = ${step_chan};
    static const unsigned start_depth = ${start_depth};
    static const unsigned start_height = ${start_height};
    static const unsigned start_width = ${start_width};
    static const unsigned out_depth = ${out_depth};
    static const unsigned out_height = ${out_height};
    static const unsigned out_width = ${out_width};
    static const unsigned step_depth = ${step_depth};
    static const unsigned step_height = ${step_height};
    static const unsigned step_width = ${step_width};
};
