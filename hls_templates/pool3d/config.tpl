struct config${index} : nnet::tessera_maxpool3d_config {
    static const unsigned in_depth = ${in_depth};
    static const unsigned in_height = ${in_height};
    static const unsigned in_width = ${in_width};
    static const unsigned n_filt = ${n_filt};
    static const unsigned out_depth = ${out_depth};
    static const unsigned out_height = ${out_height};
    static const unsigned out_width = ${out_width};
    static const unsigned pool_depth = ${pool_depth};
    static const unsigned pool_height = ${pool_height};
    static const unsigned pool_width = ${pool_width};
    static const unsigned stride_depth = ${stride_depth};
    static const unsigned stride_height = ${stride_height};
    static const unsigned stride_width = ${stride_width};
    static const unsigned pad_depth = ${pad_depth};
    static const unsigned pad_height = ${pad_height};
    static const unsigned pad_width = ${pad_width};
    static const unsigned reuse_factor = ${reuse_factor};
};
