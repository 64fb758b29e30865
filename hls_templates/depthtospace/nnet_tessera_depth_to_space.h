// Tessera DepthToSpace / PixelShuffle (ONNX DepthToSpace), channels-last.
// Output pixel (h * block + i, w * block + j), channel c is input pixel (h, w), channel
// (i * block + j) * n_chan + c (DCR) or c * block * block + i * block + j (CRD).
// Output codes are copies of input codes: exact by construction.
#ifndef NNET_TESSERA_DEPTH_TO_SPACE_H_
#define NNET_TESSERA_DEPTH_TO_SPACE_H_

#include "hls_stream.h"
#include "nnet_common.h"

namespace nnet {

struct tessera_depth_to_space_config {
    static const unsigned in_height = 1, in_width = 1, n_chan = 1, block = 1;
    static const bool crd = false;
};

template <typename CONFIG_T> inline int tessera_d2s_channel(int i, int j, int c) {
    return CONFIG_T::crd ? (c * (int)CONFIG_T::block + i) * (int)CONFIG_T::block + j
                         : (i * (int)CONFIG_T::block + j) * (int)CONFIG_T::n_chan + c;
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_depth_to_space_cl(
    data_T data[CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan * CONFIG_T::block * CONFIG_T::block],
    res_T res[CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan * CONFIG_T::block * CONFIG_T::block]) {
    const int B = CONFIG_T::block, C = CONFIG_T::n_chan, CI = C * B * B;
    const int OH = CONFIG_T::in_height * B, OW = CONFIG_T::in_width * B;
    for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
            #pragma HLS PIPELINE
            const int src = ((oh / B) * (int)CONFIG_T::in_width + ow / B) * CI;
            for (int c = 0; c < C; c++)
                res[(oh * OW + ow) * C + c] = (res_T)data[src + tessera_d2s_channel<CONFIG_T>(oh % B, ow % B, c)];
        }
}

// io_stream, row-buffered: one input row (in_width words of n_chan * block^2 codes) is kept
// and written as block output rows of in_width * block words of n_chan codes.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_depth_to_space_stream(hls::stream<data_T> &data, hls::stream<res_T> &res) {
    const int B = CONFIG_T::block, W = CONFIG_T::in_width;
    data_T row[CONFIG_T::in_width];
InRows:
    for (int h = 0; h < (int)CONFIG_T::in_height; h++) {
        for (int w = 0; w < W; w++)
            row[w] = data.read();
        for (int i = 0; i < B; i++)
            for (int ow = 0; ow < W * B; ow++) {
                #pragma HLS PIPELINE
                const data_T &word = row[ow / B];
                res_T out;
                for (int c = 0; c < (int)CONFIG_T::n_chan; c++)
                    out[c] = (typename res_T::value_type)word[tessera_d2s_channel<CONFIG_T>(i, ow % B, c)];
                res.write(out);
            }
    }
}

} // namespace nnet

#endif
