// Tessera 3D transposed convolution (hls4ml has none): channels-last, stride, begin padding
// (cropping), no dilation.  Each output gathers the taps k with (o + pad - k) divisible by the
// stride; the accumulator type is the compiler's exact bound, so nothing rounds or wraps.
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
    typedef float accum_t;
    typedef float weight_t;
    typedef float bias_t;
};

// Input index contributing through tap k to output o along one axis, or -1.
inline int tessera_tconv_src(int o, int k, int pad, int stride, int n_in) {
    const int t = o + pad - k;
    if (t < 0 || t % stride != 0)
        return -1;
    const int i = t / stride;
    return i < n_in ? i : -1;
}

// One output (od, oh, ow, f): the bias plus every tap whose input lies on the stride grid.
// Input plane id is read at planes + (id % NB) * H * W * C: NB = in_depth addresses a whole
// volume, a smaller NB a ring of the last NB planes.  Weights are (kd, kh, kw, c, f).
template <class in_T, typename CONFIG_T, int NB>
inline typename CONFIG_T::accum_t tessera_tconv3d_point(const in_T *planes, int od, int oh, int ow, int f,
                                                        const typename CONFIG_T::weight_t *weights,
                                                        const typename CONFIG_T::bias_t *biases) {
    const int H = CONFIG_T::in_height, W = CONFIG_T::in_width, C = CONFIG_T::n_chan, F = CONFIG_T::n_filt;
    typename CONFIG_T::accum_t acc = biases[f];
    for (int kd = 0; kd < (int)CONFIG_T::filt_depth; kd++) {
        const int id = tessera_tconv_src(od, kd, CONFIG_T::pad_front, CONFIG_T::stride_depth, CONFIG_T::in_depth);
        if (id < 0)
            continue;
        const in_T *plane = planes + (id % NB) * H * W * C;
        for (int kh = 0; kh < (int)CONFIG_T::filt_height; kh++) {
            const int ih = tessera_tconv_src(oh, kh, CONFIG_T::pad_top, CONFIG_T::stride_height, H);
            if (ih < 0)
                continue;
            for (int kw = 0; kw < (int)CONFIG_T::filt_width; kw++) {
                const int iw = tessera_tconv_src(ow, kw, CONFIG_T::pad_left, CONFIG_T::stride_width, W);
                if (iw < 0)
                    continue;
                for (int c = 0; c < C; c++) {
                    const int wi = (((kd * CONFIG_T::filt_height + kh) * CONFIG_T::filt_width + kw) * C + c) * F + f;
                    acc += plane[(ih * W + iw) * C + c] * weights[wi];
                }
            }
        }
    }
    return acc;
}

template <class in_T, class out_T, typename CONFIG_T>
void tessera_convtranspose3d_compute(const in_T *data, out_T *res, const typename CONFIG_T::weight_t *weights,
                                     const typename CONFIG_T::bias_t *biases) {
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
                        (out_T)tessera_tconv3d_point<in_T, CONFIG_T, CONFIG_T::in_depth>(data, od, oh, ow, f, weights, biases);
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
    tessera_convtranspose3d_compute<data_T, res_T, CONFIG_T>(data, res, weights, biases);
}

// io_stream, plane-buffered: output plane od reads the input planes id with
// (od + pad - kd) divisible by the stride, at most ceil(k / s) consecutive planes, so a ring
// of that many input planes (H x W x C values each) suffices; an output plane is written as
// soon as the last input plane it needs has arrived.
template <typename CONFIG_T> struct tessera_tconv3d_ring {
    static const unsigned n_planes = (CONFIG_T::filt_depth + CONFIG_T::stride_depth - 1) / CONFIG_T::stride_depth;
};

// The last input plane that output plane od reads (clipped to the volume).
template <typename CONFIG_T> inline int tessera_tconv_last_plane(int od) {
    const int t = od + (int)CONFIG_T::pad_front;
    const int last = t / (int)CONFIG_T::stride_depth;
    return last < (int)CONFIG_T::in_depth ? last : (int)CONFIG_T::in_depth - 1;
}

template <class in_T, class res_T, typename CONFIG_T>
void tessera_convtranspose3d_plane(const in_T *ring, int od, hls::stream<res_T> &res,
                                   const typename CONFIG_T::weight_t *weights, const typename CONFIG_T::bias_t *biases) {
OutHeight:
    for (int oh = 0; oh < (int)CONFIG_T::out_height; oh++) {
    OutWidth:
        for (int ow = 0; ow < (int)CONFIG_T::out_width; ow++) {
            #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
            res_T out;
        Filters:
            for (int f = 0; f < (int)CONFIG_T::n_filt; f++)
                out[f] = (typename res_T::value_type)tessera_tconv3d_point<in_T, CONFIG_T, tessera_tconv3d_ring<CONFIG_T>::n_planes>(
                    ring, od, oh, ow, f, weights, biases);
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
    const int HW = CONFIG_T::in_height * CONFIG_T::in_width, C = CONFIG_T::n_chan;
    const int NB = tessera_tconv3d_ring<CONFIG_T>::n_planes;
    typename data_T::value_type ring[NB * HW * C];
    int next_out = 0;
InPlanes:
    for (int id = 0; id < (int)CONFIG_T::in_depth; id++) {
        typename data_T::value_type *plane = ring + (id % NB) * HW * C;
        for (int p = 0; p < HW; p++) {
            data_T in = data.read();
            for (int c = 0; c < C; c++)
                plane[p * C + c] = in[c];
        }
    // The output planes whose last input plane is id: a bounded loop (at most every output
    // plane, in practice stride_depth of them) that stops at the first plane still waiting.
    OutPlanes:
        for (int k = 0; k < (int)CONFIG_T::out_depth; k++) {
            if (next_out >= (int)CONFIG_T::out_depth || tessera_tconv_last_plane<CONFIG_T>(next_out) > id)
                break;
            tessera_convtranspose3d_plane<typename data_T::value_type, res_T, CONFIG_T>(ring, next_out, res, weights, biases);
            next_out++;
        }
    }
}

} // namespace nnet

#endif
