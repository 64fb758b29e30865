// Tessera 3D max pooling (hls4ml has none): channels-last, no padding, floor mode.
// A maximum of codes of one type is exact; res_T equals the input type.
#ifndef NNET_TESSERA_POOL3D_H_
#define NNET_TESSERA_POOL3D_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_stream.h"

namespace nnet {

struct tessera_maxpool3d_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1, n_filt = 1;
    static const unsigned out_depth = 1, out_height = 1, out_width = 1;
    static const unsigned pool_depth = 1, pool_height = 1, pool_width = 1;
    static const unsigned stride_depth = 1, stride_height = 1, stride_width = 1;
    static const unsigned reuse_factor = 1;
};

template <class in_T, class out_T, typename CONFIG_T> void tessera_maxpool3d_compute(const in_T *data, out_T *res) {
    const int H = CONFIG_T::in_height, W = CONFIG_T::in_width, C = CONFIG_T::n_filt;
OutDepth:
    for (int od = 0; od < (int)CONFIG_T::out_depth; od++) {
    OutHeight:
        for (int oh = 0; oh < (int)CONFIG_T::out_height; oh++) {
        OutWidth:
            for (int ow = 0; ow < (int)CONFIG_T::out_width; ow++) {
                #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
            Channels:
                for (int c = 0; c < C; c++) {
                    in_T best = data[(((od * CONFIG_T::stride_depth) * H + oh * CONFIG_T::stride_height) * W +
                                      ow * CONFIG_T::stride_width) * C + c];
                    for (int kd = 0; kd < (int)CONFIG_T::pool_depth; kd++)
                        for (int kh = 0; kh < (int)CONFIG_T::pool_height; kh++)
                            for (int kw = 0; kw < (int)CONFIG_T::pool_width; kw++) {
                                const int id = od * CONFIG_T::stride_depth + kd;
                                const int ih = oh * CONFIG_T::stride_height + kh;
                                const int iw = ow * CONFIG_T::stride_width + kw;
                                const in_T v = data[((id * H + ih) * W + iw) * C + c];
                                if (v > best)
                                    best = v;
                            }
                    res[((od * CONFIG_T::out_height + oh) * CONFIG_T::out_width + ow) * C + c] = (out_T)best;
                }
            }
        }
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_maxpool3d_cl(data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_filt],
                          res_T res[CONFIG_T::out_depth * CONFIG_T::out_height * CONFIG_T::out_width * CONFIG_T::n_filt]) {
    tessera_maxpool3d_compute<data_T, res_T, CONFIG_T>(data, res);
}

// io_stream: the 3D line buffer of nnet_tessera_stream.h (plane buffer of pool_depth planes).
template <class res_T, typename CONFIG_T> struct tessera_maxpool3d_window {
    template <class P> void operator()(const P &planes, int d0, int h0, int w0, res_T &out) const {
        for (int c = 0; c < (int)CONFIG_T::n_filt; c++) {
            typename res_T::value_type best = planes[d0 % CONFIG_T::pool_depth][h0][w0][c];
            for (int kd = 0; kd < (int)CONFIG_T::pool_depth; kd++)
                for (int kh = 0; kh < (int)CONFIG_T::pool_height; kh++)
                    for (int kw = 0; kw < (int)CONFIG_T::pool_width; kw++) {
                        typename res_T::value_type v = planes[(d0 + kd) % CONFIG_T::pool_depth][h0 + kh][w0 + kw][c];
                        if (v > best)
                            best = v;
                    }
            out[c] = best;
        }
    }
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_maxpool3d_stream(hls::stream<data_T> &data, hls::stream<res_T> &res) {
    tessera_maxpool3d_window<res_T, CONFIG_T> window;
    tessera_plane_walk<CONFIG_T::pool_depth, CONFIG_T::pool_height, CONFIG_T::pool_width, CONFIG_T::stride_depth,
                       CONFIG_T::stride_height, CONFIG_T::stride_width, 0, 0, 0, CONFIG_T::in_depth, CONFIG_T::in_height,
                       CONFIG_T::in_width, CONFIG_T::out_depth, CONFIG_T::out_height, CONFIG_T::out_width>(data, res,
                                                                                                            window);
}

} // namespace nnet

#endif
