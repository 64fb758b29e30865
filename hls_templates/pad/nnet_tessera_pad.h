// Tessera padding by copies (ONNX Pad of mode reflect or edge) of a channels-last map: every
// output code is a copy of an input code, so nothing rounds and the result is exact by
// construction.  A 2D map (H, W) runs as the volume (H, W, 1) and a 1D signal (W) as (W, 1, 1):
// trailing unit axes keep the raster order, and the io_stream ring below then holds rows (2D)
// or words (1D), never the whole map.
//
// Output index o of an axis of length n padded by `begin` reads input index
//   reflect: |o - begin| mirrored at both ends without repeating the edge (ONNX, numpy 'reflect');
//            the compiler checks every pad is below n, so one mirroring suffices;
//   edge:    o - begin clamped to [0, n - 1].
#ifndef NNET_TESSERA_PAD_H_
#define NNET_TESSERA_PAD_H_

#include "hls_stream.h"
#include "nnet_common.h"

namespace nnet {

enum tessera_pad_mode { TESSERA_PAD_REFLECT = 0, TESSERA_PAD_EDGE = 1 };

struct tessera_pad_config {
    static const unsigned in_depth = 1, in_height = 1, in_width = 1, n_chan = 1;
    static const unsigned out_depth = 1, out_height = 1, out_width = 1;
    static const unsigned pad_front = 0, pad_top = 0, pad_left = 0; // begin pads (the ends follow from the sizes)
    static const int mode = TESSERA_PAD_REFLECT;
    static const unsigned ring_planes = 1; // io_stream: input planes kept (reflect: max(front, back) + 1; edge: 1)
};

// The input index that output index o of an axis of length n, padded by `begin`, copies.
template <int MODE> inline int tessera_pad_source(int o, int begin, int n) {
    #pragma HLS INLINE
    const int i = o - begin;
    if (MODE == TESSERA_PAD_EDGE)
        return i < 0 ? 0 : (i >= n ? n - 1 : i);
    return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_pad_cl(data_T data[CONFIG_T::in_depth * CONFIG_T::in_height * CONFIG_T::in_width * CONFIG_T::n_chan],
                    res_T res[CONFIG_T::out_depth * CONFIG_T::out_height * CONFIG_T::out_width * CONFIG_T::n_chan]) {
    const int C = CONFIG_T::n_chan;
OutDepth:
    for (int d = 0; d < (int)CONFIG_T::out_depth; d++) {
    OutHeight:
        for (int h = 0; h < (int)CONFIG_T::out_height; h++) {
        OutWidth:
            for (int w = 0; w < (int)CONFIG_T::out_width; w++) {
                #pragma HLS PIPELINE
                const int sd = tessera_pad_source<CONFIG_T::mode>(d, CONFIG_T::pad_front, CONFIG_T::in_depth);
                const int sh = tessera_pad_source<CONFIG_T::mode>(h, CONFIG_T::pad_top, CONFIG_T::in_height);
                const int sw = tessera_pad_source<CONFIG_T::mode>(w, CONFIG_T::pad_left, CONFIG_T::in_width);
                const int src = ((sd * CONFIG_T::in_height + sh) * CONFIG_T::in_width + sw) * C;
                const int dst = ((d * CONFIG_T::out_height + h) * CONFIG_T::out_width + w) * C;
            Channels:
                for (int c = 0; c < C; c++)
                    res[dst + c] = (res_T)data[src + c];
            }
        }
    }
}

// io_stream: input planes (depth slices) arrive in order and are kept in a ring of
// ring_planes planes; output plane od is written once the input plane it copies has arrived.
// Reflect reads at most max(front, back) planes behind the newest (the ring holds them), edge
// only the newest; every input word is read exactly once, every output word written once.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_pad_stream(hls::stream<data_T> &data, hls::stream<res_T> &res) {
    typedef typename data_T::value_type elem_t;
    static elem_t ring[CONFIG_T::ring_planes][CONFIG_T::in_height][CONFIG_T::in_width][data_T::size];
    #pragma HLS ARRAY_PARTITION variable = ring complete dim = 4
    int planes_read = 0;
OutDepth:
    for (int od = 0; od < (int)CONFIG_T::out_depth; od++) {
        const int sd = tessera_pad_source<CONFIG_T::mode>(od, CONFIG_T::pad_front, CONFIG_T::in_depth);
    ReadPlanes:
        for (int r = 0; r < (int)CONFIG_T::ring_planes; r++) { // at most ring_planes planes before an output plane
            if (planes_read > sd)
                continue;
        ReadHeight:
            for (int h = 0; h < (int)CONFIG_T::in_height; h++) {
            ReadWidth:
                for (int w = 0; w < (int)CONFIG_T::in_width; w++) {
                    #pragma HLS PIPELINE
                    const data_T word = data.read();
                    for (unsigned c = 0; c < data_T::size; c++)
                        ring[planes_read % CONFIG_T::ring_planes][h][w][c] = word[c];
                }
            }
            planes_read++;
        }
    WriteHeight:
        for (int oh = 0; oh < (int)CONFIG_T::out_height; oh++) {
        WriteWidth:
            for (int ow = 0; ow < (int)CONFIG_T::out_width; ow++) {
                #pragma HLS PIPELINE
                const int sh = tessera_pad_source<CONFIG_T::mode>(oh, CONFIG_T::pad_top, CONFIG_T::in_height);
                const int sw = tessera_pad_source<CONFIG_T::mode>(ow, CONFIG_T::pad_left, CONFIG_T::in_width);
                res_T out;
                PRAGMA_DATA_PACK(out)
                for (unsigned c = 0; c < res_T::size; c++)
                    out[c] = (typename res_T::value_type)ring[sd % CONFIG_T::ring_planes][sh][sw][c];
                res.write(out);
            }
        }
    }
}

} // namespace nnet

#endif
