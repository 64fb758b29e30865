// Tessera nearest-neighbour upsampling by integer factors (channels-last, 2D as depth 1).
// Output codes are copies of input codes: exact by construction.
#ifndef NNET_TESSERA_UPSAMPLE_H_
#define NNET_TESSERA_UPSAMPLE_H_

#include "hls_stream.h"
#include "nnet_common.h"

namespace nnet {

struct tessera_upsample3d_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1, n_chan = 1;
    static const unsigned factor_depth = 1, factor_height = 1, factor_width = 1;
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_upsample3d_cl(data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan],
                           res_T res[CONFIG_T::in_depth * CONFIG_T::factor_depth * CONFIG_T::in_height *
                                     CONFIG_T::factor_height * CONFIG_T::in_width * CONFIG_T::factor_width *
                                     CONFIG_T::n_chan]) {
    const int OD = CONFIG_T::in_depth * CONFIG_T::factor_depth, OH = CONFIG_T::in_height * CONFIG_T::factor_height;
    const int OW = CONFIG_T::in_width * CONFIG_T::factor_width, C = CONFIG_T::n_chan;
    for (int d = 0; d < OD; d++)
        for (int h = 0; h < OH; h++)
            for (int w = 0; w < OW; w++) {
                #pragma HLS PIPELINE
                const int src = ((d / CONFIG_T::factor_depth * CONFIG_T::in_height + h / CONFIG_T::factor_height) *
                                     CONFIG_T::in_width + w / CONFIG_T::factor_width) * C;
                for (int c = 0; c < C; c++)
                    res[((d * OH + h) * OW + w) * C + c] = (res_T)data[src + c];
            }
}

// io_stream, plane-buffered: one input plane (H x W words) is kept and written
// factor_depth times, each row factor_height times, each word factor_width times.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_upsample3d_stream(hls::stream<data_T> &data, hls::stream<res_T> &res) {
    const int HW = CONFIG_T::in_height * CONFIG_T::in_width;
    const int OH = CONFIG_T::in_height * CONFIG_T::factor_height, OW = CONFIG_T::in_width * CONFIG_T::factor_width;
    data_T plane[HW];
InPlanes:
    for (int id = 0; id < (int)CONFIG_T::in_depth; id++) {
        for (int p = 0; p < HW; p++)
            plane[p] = data.read();
        for (int a = 0; a < (int)CONFIG_T::factor_depth; a++)
            for (int h = 0; h < OH; h++)
                for (int w = 0; w < OW; w++) {
                    #pragma HLS PIPELINE
                    const data_T &word = plane[(h / CONFIG_T::factor_height) * CONFIG_T::in_width + w / CONFIG_T::factor_width];
                    res_T out;
                    for (int c = 0; c < (int)CONFIG_T::n_chan; c++)
                        out[c] = (typename res_T::value_type)word[c];
                    res.write(out);
                }
    }
}

} // namespace nnet

#endif
