// Stream <-> array helpers shared by Tessera's io_stream kernels (one pixel, all channels,
// per stream word), the elementwise walk of integer codes, and the plane buffer of the io_stream 3D window kernels (convolution,
// max and average pooling): the last KD planes of the padded volume, never the whole volume.
#ifndef NNET_TESSERA_STREAM_H_
#define NNET_TESSERA_STREAM_H_

#include "ap_int.h"
#include "hls_stream.h"
#include "nnet_common.h"

namespace nnet {

template <class data_T, unsigned N_POS>
void tessera_stream_to_array(hls::stream<data_T> &in, typename data_T::value_type *buf) {
ReadWords:
    for (unsigned p = 0; p < N_POS; p++) {
        data_T word = in.read();
        for (unsigned c = 0; c < data_T::size; c++)
            buf[p * data_T::size + c] = word[c];
    }
}

template <class res_T, unsigned N_POS>
void tessera_array_to_stream(const typename res_T::value_type *buf, hls::stream<res_T> &out) {
WriteWords:
    for (unsigned p = 0; p < N_POS; p++) {
        res_T word;
        for (unsigned c = 0; c < res_T::size; c++)
            word[c] = buf[p * res_T::size + c];
        out.write(word);
    }
}

// The positions a pooling window spans along each axis: CONFIG_T::pool_* taps, CONFIG_T::dilation_*
// apart (the window the plane buffer below holds for a dilated pool).
template <typename CONFIG_T> struct tessera_window_span {
    static const int depth = (CONFIG_T::pool_depth - 1) * CONFIG_T::dilation_depth + 1;
    static const int height = (CONFIG_T::pool_height - 1) * CONFIG_T::dilation_height + 1;
    static const int width = (CONFIG_T::pool_width - 1) * CONFIG_T::dilation_width + 1;
};

// The 3D line buffer: walk the zero-padded volume in (depth, height, width) raster order,
// reading one stream word per real input position, keeping the last KD padded planes, and
// calling Window::apply(planes, d0, h0, w0, out, args...) for every output whose window
// ends at the current position (args: the window's weights, if any).  Outputs leave in
// raster order, one position per pipelined iteration at II.  On-chip storage: KD x H' x W'
// x channels; a window reads KD x KH x KW x channels values of it per iteration, so the
// planes are partitioned completely over KD and the channels and cyclically (KH, KW) over
// rows and columns: every value a window reads lies in its own bank.
template <int KD, int KH, int KW, int SD, int SH, int SW, int PF, int PT, int PL, int ID, int IH, int IW, int OD,
          int OH, int OW, int II, class data_T, class res_T, class Window, class... Args>
void tessera_plane_walk(hls::stream<data_T> &data, hls::stream<res_T> &res, Args... args) {
    typedef typename data_T::value_type elem_t;
    const int DP = (OD - 1) * SD + KD, HP = (OH - 1) * SH + KH, WP = (OW - 1) * SW + KW;
    const int D_ALL = DP > ID + PF ? DP : ID + PF;
    const int H_ALL = HP > IH + PT ? HP : IH + PT;
    const int W_ALL = WP > IW + PL ? WP : IW + PL;
    static elem_t planes[KD][H_ALL][W_ALL][data_T::size];
    #pragma HLS ARRAY_PARTITION variable = planes complete dim = 1
    #pragma HLS ARRAY_PARTITION variable = planes cyclic factor = KH dim = 2
    #pragma HLS ARRAY_PARTITION variable = planes cyclic factor = KW dim = 3
    #pragma HLS ARRAY_PARTITION variable = planes complete dim = 4
Depth:
    for (int dp = 0; dp < D_ALL; dp++) {
    Height:
        for (int hp = 0; hp < H_ALL; hp++) {
        Width:
            for (int wp = 0; wp < W_ALL; wp++) {
                #pragma HLS PIPELINE II = II
                const int d = dp - PF, h = hp - PT, w = wp - PL;
                const bool inside = d >= 0 && d < ID && h >= 0 && h < IH && w >= 0 && w < IW;
                data_T word;
                if (inside)
                    word = data.read();
                for (unsigned c = 0; c < data_T::size; c++)
                    planes[dp % KD][hp][wp][c] = inside ? (elem_t)word[c] : (elem_t)0;
                const int d0 = dp - KD + 1, h0 = hp - KH + 1, w0 = wp - KW + 1;
                if (d0 < 0 || h0 < 0 || w0 < 0 || d0 % SD || h0 % SH || w0 % SW)
                    continue;
                if (d0 / SD >= OD || h0 / SH >= OH || w0 / SW >= OW)
                    continue;
                res_T out;
                Window::apply(planes, d0, h0, w0, out, args...);
                res.write(out);
            }
        }
    }
}

// An elementwise map of integer codes (requantization, staircases): each output code is
// Element::apply<input type, CONFIG_T>(x, c, args...) of its input x and channel c (the
// fastest-varying index modulo CONFIG_T::n_chan, hls4ml's channels-last order), written
// into the output's raw bits (CONFIG_T::out_bits).  io_parallel: every element unrolled.
template <class data_T, class res_T, typename CONFIG_T, class Element, class... Args>
void tessera_codes_map_cl(data_T data[CONFIG_T::n_in], res_T res[CONFIG_T::n_in], Args... args) {
    #pragma HLS PIPELINE
Elements:
    for (unsigned i = 0; i < CONFIG_T::n_in; i++) {
        #pragma HLS UNROLL
        long long y = Element::template apply<data_T, CONFIG_T>(data[i], i % CONFIG_T::n_chan, args...);
        res[i].range(CONFIG_T::out_bits - 1, 0) = ap_int<CONFIG_T::out_bits>(y).range();
    }
}

// io_stream: one word per iteration; element j of word w is element w * size + j.
template <class data_T, class res_T, typename CONFIG_T, class Element, class... Args>
void tessera_codes_map_stream(hls::stream<data_T> &data, hls::stream<res_T> &res, Args... args) {
Words:
    for (unsigned w = 0; w < CONFIG_T::n_in / data_T::size; w++) {
        #pragma HLS PIPELINE
        data_T in = data.read();
        res_T out;
        PRAGMA_DATA_PACK(out)
    Elements:
        for (unsigned j = 0; j < data_T::size; j++) {
            #pragma HLS UNROLL
            long long y = Element::template apply<typename data_T::value_type, CONFIG_T>(
                in[j], (w * data_T::size + j) % CONFIG_T::n_chan, args...);
            out[j].range(CONFIG_T::out_bits - 1, 0) = ap_int<CONFIG_T::out_bits>(y).range();
        }
        res.write(out);
    }
}

} // namespace nnet

#endif
