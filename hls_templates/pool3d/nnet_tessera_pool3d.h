// Tessera max pooling (hls4ml has no 3D pooling, nor padded or dilated pooling): channels-last,
// 1D / 2D as depth (and height) 1.  Padded positions take no part (ONNX pads MaxPool with -inf):
// the window's maximum runs over its real positions only; the compiler checks that every window
// holds one.  A dilated window reads its pool_* taps dilation_* apart.  A maximum of codes of one
// type is exact; res_T equals the input type.
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
    static const unsigned dilation_depth = 1, dilation_height = 1, dilation_width = 1;
    static const unsigned pad_depth = 0, pad_height = 0, pad_width = 0; // begin pads
    static const unsigned reuse_factor = 1;
};

// Whether padded position (pd, ph, pw) of the window is a real input position.
template <typename CONFIG_T> bool tessera_maxpool3d_inside(int pd, int ph, int pw) {
    const int d = pd - (int)CONFIG_T::pad_depth, h = ph - (int)CONFIG_T::pad_height, w = pw - (int)CONFIG_T::pad_width;
    return d >= 0 && d < (int)CONFIG_T::in_depth && h >= 0 && h < (int)CONFIG_T::in_height && w >= 0 &&
           w < (int)CONFIG_T::in_width;
}

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
                    in_T best = 0;
                    bool any = false;
                    for (int kd = 0; kd < (int)CONFIG_T::pool_depth; kd++)
                        for (int kh = 0; kh < (int)CONFIG_T::pool_height; kh++)
                            for (int kw = 0; kw < (int)CONFIG_T::pool_width; kw++) {
                                const int pd = od * CONFIG_T::stride_depth + kd * CONFIG_T::dilation_depth;
                                const int ph = oh * CONFIG_T::stride_height + kh * CONFIG_T::dilation_height;
                                const int pw = ow * CONFIG_T::stride_width + kw * CONFIG_T::dilation_width;
                                if (!tessera_maxpool3d_inside<CONFIG_T>(pd, ph, pw))
                                    continue;
                                const int id = pd - CONFIG_T::pad_depth, ih = ph - CONFIG_T::pad_height;
                                const int iw = pw - CONFIG_T::pad_width;
                                const in_T v = data[((id * H + ih) * W + iw) * C + c];
                                if (!any || v > best)
                                    best = v;
                                any = true;
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

// io_stream: the 3D line buffer of nnet_tessera_stream.h (plane buffer of the window's span of
// planes, padded positions held as 0 and skipped here).
template <class res_T, typename CONFIG_T> struct tessera_maxpool3d_window {
    template <class P> static void apply(const P &planes, int d0, int h0, int w0, res_T &out) {
        #pragma HLS INLINE
        for (int c = 0; c < (int)CONFIG_T::n_filt; c++) {
            typename res_T::value_type best = 0;
            bool any = false;
            for (int kd = 0; kd < (int)CONFIG_T::pool_depth; kd++)
                for (int kh = 0; kh < (int)CONFIG_T::pool_height; kh++)
                    for (int kw = 0; kw < (int)CONFIG_T::pool_width; kw++) {
                        const int pd = d0 + kd * CONFIG_T::dilation_depth, ph = h0 + kh * CONFIG_T::dilation_height;
                        const int pw = w0 + kw * CONFIG_T::dilation_width;
                        if (!tessera_maxpool3d_inside<CONFIG_T>(pd, ph, pw))
                            continue;
                        typename res_T::value_type v = planes[pd % tessera_window_span<CONFIG_T>::depth][ph][pw][c];
                        if (!any || v > best)
                            best = v;
                        any = true;
                    }
            out[c] = best;
        }
    }
};

template <class data_T, class res_T, typename CONFIG_T>
void tessera_maxpool3d_stream(hls::stream<data_T> &data, hls::stream<res_T> &res) {
    typedef tessera_window_span<CONFIG_T> span;
    tessera_plane_walk<span::depth, span::height, span::width, CONFIG_T::stride_depth, CONFIG_T::stride_height,
                       CONFIG_T::stride_width, CONFIG_T::pad_depth, CONFIG_T::pad_height, CONFIG_T::pad_width,
                       CONFIG_T::in_depth, CONFIG_T::in_height, CONFIG_T::in_width, CONFIG_T::out_depth,
                       CONFIG_T::out_height, CONFIG_T::out_width, 1, data_T, res_T,
                       tessera_maxpool3d_window<res_T, CONFIG_T> >(data, res);
}

} // namespace nnet

#endif
