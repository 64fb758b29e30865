// Tessera 3D convolution (hls4ml has none): channels-last, zero padding, stride, no dilation.
//
// Exactness: the accumulator type is chosen by the compiler so that every partial sum of
// every input the declared types allow fits (docs/bit-exact.md); products of ap_fixed
// operands are exact, so accumulation order does not matter.  The only rounding is the
// final cast to res_T, which the compiler sets equal to accum_t.
//
// Hardware (the conventions of hls4ml's nnet_dense_latency.h): one output position per
// pipelined iteration at II = reuse_factor, every product of it unrolled; the weights are
// reshaped into multiplier_limit blocks and ALLOCATION caps the multipliers at
// multiplier_limit = ceil(filt_depth * filt_height * filt_width * n_chan * n_filt / reuse)
// - n_zeros / reuse (the compiler's value, ops/base/cost.py: the estimator counts the same).
#ifndef NNET_TESSERA_CONV3D_H_
#define NNET_TESSERA_CONV3D_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_stream.h"

namespace nnet {

struct tessera_conv3d_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1, n_chan = 1;
    static const unsigned out_depth = 1, out_height = 1, out_width = 1, n_filt = 1;
    static const unsigned filt_depth = 1, filt_height = 1, filt_width = 1;
    static const unsigned stride_depth = 1, stride_height = 1, stride_width = 1;
    static const unsigned pad_front = 0, pad_top = 0, pad_left = 0;
    static const unsigned reuse_factor = 1;
    static const unsigned n_zeros = 0;
    static const unsigned multiplier_limit = 1;
    typedef float accum_t;
    typedef float weight_t;
    typedef float bias_t;
};

// Core loop nest on flat channels-last element arrays; weights are (kd, kh, kw, c, f).
template <class in_T, class out_T, typename CONFIG_T>
void tessera_conv3d_compute(const in_T *data, out_T *res, const typename CONFIG_T::weight_t *weights,
                            const typename CONFIG_T::bias_t *biases) {
    #pragma HLS INLINE
    const int D = CONFIG_T::in_depth, H = CONFIG_T::in_height, W = CONFIG_T::in_width, C = CONFIG_T::n_chan;
    const int F = CONFIG_T::n_filt;
OutDepth:
    for (int od = 0; od < (int)CONFIG_T::out_depth; od++) {
    OutHeight:
        for (int oh = 0; oh < (int)CONFIG_T::out_height; oh++) {
        OutWidth:
            for (int ow = 0; ow < (int)CONFIG_T::out_width; ow++) {
                #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
            Filters:
                for (int f = 0; f < F; f++) {
                    typename CONFIG_T::accum_t acc = biases[f];
                KernelDepth:
                    for (int kd = 0; kd < (int)CONFIG_T::filt_depth; kd++) {
                        const int id = od * CONFIG_T::stride_depth + kd - (int)CONFIG_T::pad_front;
                        if (id < 0 || id >= D)
                            continue;
                    KernelHeight:
                        for (int kh = 0; kh < (int)CONFIG_T::filt_height; kh++) {
                            const int ih = oh * CONFIG_T::stride_height + kh - (int)CONFIG_T::pad_top;
                            if (ih < 0 || ih >= H)
                                continue;
                        KernelWidth:
                            for (int kw = 0; kw < (int)CONFIG_T::filt_width; kw++) {
                                const int iw = ow * CONFIG_T::stride_width + kw - (int)CONFIG_T::pad_left;
                                if (iw < 0 || iw >= W)
                                    continue;
                            Channels:
                                for (int c = 0; c < C; c++) {
                                    const int xi = ((id * H + ih) * W + iw) * C + c;
                                    const int wi =
                                        (((kd * CONFIG_T::filt_height + kh) * CONFIG_T::filt_width + kw) * C + c) * F + f;
                                    acc += data[xi] * weights[wi];
                                }
                            }
                        }
                    }
                    res[((od * CONFIG_T::out_height + oh) * CONFIG_T::out_width + ow) * F + f] = (out_T)acc;
                }
            }
        }
    }
}

// io_parallel: whole tensors as arrays.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_conv3d_cl(data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan],
                       res_T res[CONFIG_T::out_depth * CONFIG_T::out_height * CONFIG_T::out_width * CONFIG_T::n_filt],
                       typename CONFIG_T::weight_t weights[CONFIG_T::filt_depth * CONFIG_T::filt_height *
                                                           CONFIG_T::filt_width * CONFIG_T::n_chan * CONFIG_T::n_filt],
                       typename CONFIG_T::bias_t biases[CONFIG_T::n_filt]) {
    #pragma HLS function_instantiate variable = weights, biases
    #pragma HLS ARRAY_RESHAPE variable = weights block factor = CONFIG_T::multiplier_limit
    #pragma HLS ARRAY_PARTITION variable = biases complete
    #pragma HLS ALLOCATION operation instances = mul limit = CONFIG_T::multiplier_limit
    tessera_conv3d_compute<data_T, res_T, CONFIG_T>(data, res, weights, biases);
}

// io_stream: the 3D line buffer of nnet_tessera_stream.h (plane buffer of filt_depth planes);
// the window's weights and biases are arguments (no struct of pointers).
template <class res_T, typename CONFIG_T> struct tessera_conv3d_window {
    template <class P>
    static void apply(const P &planes, int d0, int h0, int w0, res_T &out, const typename CONFIG_T::weight_t *weights,
                      const typename CONFIG_T::bias_t *biases) {
        #pragma HLS INLINE
        const int KD = CONFIG_T::filt_depth, KH = CONFIG_T::filt_height, KW = CONFIG_T::filt_width;
        const int C = CONFIG_T::n_chan, F = CONFIG_T::n_filt;
    Filters:
        for (int f = 0; f < F; f++) {
            typename CONFIG_T::accum_t acc = biases[f];
            for (int kd = 0; kd < KD; kd++)
                for (int kh = 0; kh < KH; kh++)
                    for (int kw = 0; kw < KW; kw++)
                        for (int c = 0; c < C; c++)
                            acc += planes[(d0 + kd) % KD][h0 + kh][w0 + kw][c] *
                                   weights[(((kd * KH + kh) * KW + kw) * C + c) * F + f];
            out[f] = (typename res_T::value_type)acc;
        }
    }
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_conv3d_stream(hls::stream<data_T> &data, hls::stream<res_T> &res,
                           typename CONFIG_T::weight_t weights[CONFIG_T::filt_depth * CONFIG_T::filt_height *
                                                               CONFIG_T::filt_width * CONFIG_T::n_chan *
                                                               CONFIG_T::n_filt],
                           typename CONFIG_T::bias_t biases[CONFIG_T::n_filt]) {
    #pragma HLS function_instantiate variable = weights, biases
    #pragma HLS ARRAY_RESHAPE variable = weights block factor = CONFIG_T::multiplier_limit
    #pragma HLS ARRAY_PARTITION variable = biases complete
    #pragma HLS ALLOCATION operation instances = mul limit = CONFIG_T::multiplier_limit
    tessera_plane_walk<CONFIG_T::filt_depth, CONFIG_T::filt_height, CONFIG_T::filt_width, CONFIG_T::stride_depth,
                       CONFIG_T::stride_height, CONFIG_T::stride_width, CONFIG_T::pad_front, CONFIG_T::pad_top,
                       CONFIG_T::pad_left, CONFIG_T::in_depth, CONFIG_T::in_height, CONFIG_T::in_width,
                       CONFIG_T::out_depth, CONFIG_T::out_height, CONFIG_T::out_width, CONFIG_T::reuse_factor, data_T,
                       res_T, tessera_conv3d_window<res_T, CONFIG_T> >(data, res, weights, biases);
}

} // namespace nnet

#endif
