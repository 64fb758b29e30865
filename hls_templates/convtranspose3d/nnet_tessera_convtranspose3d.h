// Tessera 3D transposed convolution (hls4ml has none): channels-last, stride, begin padding
// (cropping), no dilation.  Each output gathers the taps k with (o + pad - k) divisible by the
// stride; the accumulator type is the compiler's exact bound, so nothing rounds or wraps.
//
// Hardware (the conventions of hls4ml's nnet_dense_latency.h, as nnet_tessera_conv3d.h): one
// output position per pipelined iteration at II = reuse_factor, its ceil(k/s) taps per axis x
// n_chan x n_filt products unrolled (its stride phase picks the taps, so no product is spent on
// a tap off the phase); the weights are reshaped into multiplier_limit blocks and ALLOCATION
// caps the multipliers at multiplier_limit = ceil(taps x n_chan x n_filt / reuse) (the
// compiler's value, ops/convtranspose.py: the estimator counts the same).
#ifndef NNET_TESSERA_CONVTRANSPOSE3D_H_
#define NNET_TESSERA_CONVTRANSPOSE3D_H_

#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_stream.h"

namespace nnet {

struct tessera_convtranspose3d_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1, n_chan = 1;
    static const unsigned out_depth = 1, out_height = 1, out_width = 1, n_filt = 1;
    static const unsigned filt_depth = 1, filt_height = 1, filt_width = 1;
    static const unsigned stride_depth = 1, stride_height = 1, stride_width = 1;
    static const unsigned pad_front = 0, pad_top = 0, pad_left = 0;
    static const unsigned reuse_factor = 1;
    static const unsigned multiplier_limit = 1; // ceil(taps x n_chan x n_filt / reuse), the compiler's count
    typedef float accum_t;
    typedef float weight_t;
    typedef float bias_t;
};

// Taps an output gathers along each axis: ceil(k / s) (one stride phase of the kernel).
template <typename CONFIG_T> struct tessera_tconv3d_taps {
    static const unsigned depth = (CONFIG_T::filt_depth + CONFIG_T::stride_depth - 1) / CONFIG_T::stride_depth;
    static const unsigned height = (CONFIG_T::filt_height + CONFIG_T::stride_height - 1) / CONFIG_T::stride_height;
    static const unsigned width = (CONFIG_T::filt_width + CONFIG_T::stride_width - 1) / CONFIG_T::stride_width;
};

// Input value (plane id, row ih, column iw, channel c): of a whole channels-last volume
// (io_parallel), or of the io_stream ring of the last NB planes.
template <typename CONFIG_T, class in_T>
inline in_T tessera_tconv3d_at(const in_T *volume, int id, int ih, int iw, int c) {
    #pragma HLS INLINE
    return volume[((id * CONFIG_T::in_height + ih) * CONFIG_T::in_width + iw) * CONFIG_T::n_chan + c];
}
template <typename CONFIG_T, class in_T, int NB>
inline in_T tessera_tconv3d_at(const in_T (&ring)[NB][CONFIG_T::in_height][CONFIG_T::in_width][CONFIG_T::n_chan], int id,
                               int ih, int iw, int c) {
    #pragma HLS INLINE
    return ring[id % NB][ih][iw][c];
}

// One output (od, oh, ow, f): the bias plus every tap whose input lies on the stride grid,
// gathered by stride phase.  Along an axis, output o (t = o + pad >= 0) reads the taps
// k = t mod s + s * m, m = 0 .. ceil(k_size / s) - 1, from input t div s - m, where both are in
// range: a fixed trip count of ceil(k_size / s) taps (the cost facet's count), never the
// k_size - ceil(k_size / s) taps off the phase.  Weights are (kd, kh, kw, c, f).
template <typename CONFIG_T, class P>
inline typename CONFIG_T::accum_t tessera_tconv3d_point(const P &planes, int od, int oh, int ow, int f,
                                                        const typename CONFIG_T::weight_t *weights,
                                                        const typename CONFIG_T::bias_t *biases) {
    #pragma HLS INLINE
    const int H = CONFIG_T::in_height, W = CONFIG_T::in_width, C = CONFIG_T::n_chan, F = CONFIG_T::n_filt;
    const int SD = CONFIG_T::stride_depth, SH = CONFIG_T::stride_height, SW = CONFIG_T::stride_width;
    const int td = od + (int)CONFIG_T::pad_front, th = oh + (int)CONFIG_T::pad_top, tw = ow + (int)CONFIG_T::pad_left;
    typename CONFIG_T::accum_t acc = biases[f];
PhaseDepth:
    for (int md = 0; md < (int)tessera_tconv3d_taps<CONFIG_T>::depth; md++) {
        const int kd = td % SD + SD * md, id = td / SD - md;
        if (kd >= (int)CONFIG_T::filt_depth || id < 0 || id >= (int)CONFIG_T::in_depth)
            continue;
    PhaseHeight:
        for (int mh = 0; mh < (int)tessera_tconv3d_taps<CONFIG_T>::height; mh++) {
            const int kh = th % SH + SH * mh, ih = th / SH - mh;
            if (kh >= (int)CONFIG_T::filt_height || ih < 0 || ih >= H)
                continue;
        PhaseWidth:
            for (int mw = 0; mw < (int)tessera_tconv3d_taps<CONFIG_T>::width; mw++) {
                const int kw = tw % SW + SW * mw, iw = tw / SW - mw;
                if (kw >= (int)CONFIG_T::filt_width || iw < 0 || iw >= W)
                    continue;
            Channels:
                for (int c = 0; c < C; c++) {
                    const int wi = (((kd * CONFIG_T::filt_height + kh) * CONFIG_T::filt_width + kw) * C + c) * F + f;
                    acc += tessera_tconv3d_at<CONFIG_T>(planes, id, ih, iw, c) * weights[wi];
                }
            }
        }
    }
    return acc;
}

template <class in_T, class out_T, typename CONFIG_T>
void tessera_convtranspose3d_compute(const in_T *data, out_T *res, const typename CONFIG_T::weight_t *weights,
                                     const typename CONFIG_T::bias_t *biases) {
    #pragma HLS INLINE
    const int F = CONFIG_T::n_filt;
OutDepth:
    for (int od = 0; od < (int)CONFIG_T::out_depth; od++) {
    OutHeight:
        for (int oh = 0; oh < (int)CONFIG_T::out_height; oh++) {
        OutWidth:
            for (int ow = 0; ow < (int)CONFIG_T::out_width; ow++) {
                #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
            Filters:
                for (int f = 0; f < F; f++)
                    res[((od * CONFIG_T::out_height + oh) * CONFIG_T::out_width + ow) * F + f] =
                        (out_T)tessera_tconv3d_point<CONFIG_T>(data, od, oh, ow, f, weights, biases);
            }
        }
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_convtranspose3d_cl(
    data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan],
    res_T res[CONFIG_T::out_depth * CONFIG_T::out_height * CONFIG_T::out_width * CONFIG_T::n_filt],
    typename CONFIG_T::weight_t
        weights[CONFIG_T::filt_depth * CONFIG_T::filt_height * CONFIG_T::filt_width * CONFIG_T::n_chan * CONFIG_T::n_filt],
    typename CONFIG_T::bias_t biases[CONFIG_T::n_filt]) {
    #pragma HLS function_instantiate variable = weights, biases
    #pragma HLS ARRAY_RESHAPE variable = weights block factor = CONFIG_T::multiplier_limit
    #pragma HLS ARRAY_PARTITION variable = biases complete
    #pragma HLS ALLOCATION operation instances = mul limit = CONFIG_T::multiplier_limit
    tessera_convtranspose3d_compute<data_T, res_T, CONFIG_T>(data, res, weights, biases);
}

// io_stream, plane-buffered: output plane od reads the input planes id with
// (od + pad - kd) divisible by the stride, at most ceil(k / s) consecutive planes, so a ring
// of that many input planes (H x W x C values each) suffices; an output plane is written as
// soon as the last input plane it needs has arrived.  An output reads ceil(kd / sd) planes,
// ceil(kh / sh) consecutive rows and ceil(kw / sw) consecutive columns of every channel: the
// ring is partitioned completely over planes and channels and cyclically by those counts
// over rows and columns, so every value an iteration reads lies in its own bank.
template <typename CONFIG_T> struct tessera_tconv3d_ring {
    static const unsigned n_planes = tessera_tconv3d_taps<CONFIG_T>::depth;
};

// The last input plane that output plane od reads (clipped to the volume).
template <typename CONFIG_T> inline int tessera_tconv_last_plane(int od) {
    const int t = od + (int)CONFIG_T::pad_front;
    const int last = t / (int)CONFIG_T::stride_depth;
    return last < (int)CONFIG_T::in_depth ? last : (int)CONFIG_T::in_depth - 1;
}

template <class res_T, typename CONFIG_T, class P>
void tessera_convtranspose3d_plane(const P &ring, int od, hls::stream<res_T> &res, const typename CONFIG_T::weight_t *weights,
                                   const typename CONFIG_T::bias_t *biases) {
    #pragma HLS INLINE
OutHeight:
    for (int oh = 0; oh < (int)CONFIG_T::out_height; oh++) {
    OutWidth:
        for (int ow = 0; ow < (int)CONFIG_T::out_width; ow++) {
            #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
            res_T out;
        Filters:
            for (int f = 0; f < (int)CONFIG_T::n_filt; f++)
                out[f] = (typename res_T::value_type)tessera_tconv3d_point<CONFIG_T>(ring, od, oh, ow, f, weights, biases);
            res.write(out);
        }
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_convtranspose3d_stream(
    hls::stream<data_T> &data, hls::stream<res_T> &res,
    typename CONFIG_T::weight_t
        weights[CONFIG_T::filt_depth * CONFIG_T::filt_height * CONFIG_T::filt_width * CONFIG_T::n_chan * CONFIG_T::n_filt],
    typename CONFIG_T::bias_t biases[CONFIG_T::n_filt]) {
    #pragma HLS function_instantiate variable = weights, biases
    #pragma HLS ARRAY_RESHAPE variable = weights block factor = CONFIG_T::multiplier_limit
    #pragma HLS ARRAY_PARTITION variable = biases complete
    #pragma HLS ALLOCATION operation instances = mul limit = CONFIG_T::multiplier_limit
    const int NB = tessera_tconv3d_ring<CONFIG_T>::n_planes;
    const int TH = tessera_tconv3d_taps<CONFIG_T>::height, TW = tessera_tconv3d_taps<CONFIG_T>::width;
    typename data_T::value_type ring[NB][CONFIG_T::in_height][CONFIG_T::in_width][CONFIG_T::n_chan];
    #pragma HLS ARRAY_PARTITION variable = ring complete dim = 1
    #pragma HLS ARRAY_PARTITION variable = ring cyclic factor = TH dim = 2
    #pragma HLS ARRAY_PARTITION variable = ring cyclic factor = TW dim = 3
    #pragma HLS ARRAY_PARTITION variable = ring complete dim = 4
    int next_out = 0;
InPlanes:
    for (int id = 0; id < (int)CONFIG_T::in_depth; id++) {
    ReadPlane:
        for (int p = 0; p < (int)(CONFIG_T::in_height * CONFIG_T::in_width); p++) {
            #pragma HLS PIPELINE
            data_T in = data.read();
            for (int c = 0; c < (int)CONFIG_T::n_chan; c++)
                ring[id % NB][p / CONFIG_T::in_width][p % CONFIG_T::in_width][c] = in[c];
        }
    // The output planes whose last input plane is id: a bounded loop (at most every output
    // plane, in practice stride_depth of them) that stops at the first plane still waiting.
    OutPlanes:
        for (int k = 0; k < (int)CONFIG_T::out_depth; k++) {
            if (next_out >= (int)CONFIG_T::out_depth || tessera_tconv_last_plane<CONFIG_T>(next_out) > id)
                break;
            tessera_convtranspose3d_plane<res_T, CONFIG_T>(ring, next_out, res, weights, biases);
            next_out++;
        }
    }
}

} // namespace nnet

#endif
