// Tessera quantized ConvLSTM (encoder, and a forecaster cell without input) on integer
// codes: the LSTM gating of nnet_tessera_rnn.h with 'same' 2D convolutions as the gate
// products.  The step mirrors tessera/compiler/ops/convlstm.py.
#ifndef NNET_TESSERA_CONVLSTM_H_
#define NNET_TESSERA_CONVLSTM_H_

#include "nnet_tessera_rnn.h"

namespace nnet {

// A frame of C channels (channel-major: [c][y][x]), as an array declarator.
#define TESSERA_FRAME(C) [C][CONFIG_T::height][CONFIG_T::width]

// -- ConvLSTM -------------------------------------------------------------------------------
// Frames are held channel-major ([c][y][x]) inside the kernel; hls4ml's tensors are
// channels-last per frame ([t][y][x][c]).  Convolutions are 'same' (zero padding k / 2).

struct tessera_convlstm_config {
    static const unsigned n_steps = 1, n_in = 1, n_hidden = 1, height = 1, width = 1, kernel = 1, steps_out = 0;
    static const unsigned reuse_factor = 1;
};

// sum over channels and taps of v[ci][py+dy-P][px+dx-P] * w[row][ci][dy][dx]
template <class acc_T, int KIND, int NC, typename CONFIG_T, class v_T, class w_T>
inline acc_T tessera_conv_tap(const v_T v TESSERA_FRAME(NC), const w_T *w, int row, int py, int px) {
    #pragma HLS INLINE
    const int K = CONFIG_T::kernel, P = CONFIG_T::kernel / 2, HH = CONFIG_T::height, WW = CONFIG_T::width;
    acc_T acc = 0;
Channels:
    for (int ci = 0; ci < NC; ci++)
        for (int dy = 0; dy < K; dy++)
            for (int dx = 0; dx < K; dx++) {
                const int iy = py + dy - P, ix = px + dx - P;
                if (iy < 0 || iy >= HH || ix < 0 || ix >= WW)
                    continue;
                acc += tessera_wmul<KIND>::template mul<acc_T>(v[ci][iy][ix],
                                                                 w[((row * NC + ci) * K + dy) * K + dx]);
            }
    return acc;
}

// W_x * x of one gate row at one pixel (0 for a cell without input).
template <bool HAS_INPUT> struct tessera_convlstm_input_term {
    template <class G, class CELL, typename CONFIG_T>
    static typename G::ax_t products(const typename CONFIG_T::x_t x TESSERA_FRAME(CONFIG_T::n_in),
                                     const typename CELL::wx_t *wx, int row, int py, int px) {
        #pragma HLS INLINE
        return tessera_conv_tap<typename G::ax_t, CELL::weight_kind, CONFIG_T::n_in, CONFIG_T>(x, wx, row, py, px);
    }
};
template <> struct tessera_convlstm_input_term<false> {
    template <class G, class CELL, typename CONFIG_T>
    static typename G::ax_t products(const typename CONFIG_T::x_t x TESSERA_FRAME(CONFIG_T::n_in),
                                     const typename CELL::wx_t *, int, int, int) {
        return 0;
    }
};

// The weight products of gate g of unit j at pixel (py, px): row j * 4 + g of the unit-major
// weights (one unit's four gate kernels are one word of the reshaped arrays).
template <class G, class CELL, typename CONFIG_T>
inline void tessera_convlstm_products(int g, int j, int py, int px,
                                      const typename CONFIG_T::x_t x TESSERA_FRAME(CONFIG_T::n_in),
                                      const typename CELL::h_t h TESSERA_FRAME(CONFIG_T::n_hidden),
                                      const typename CELL::wx_t *wx,
                                      const typename CELL::wh_t *wh, typename G::ax_t &ax, typename G::ah_t &ah) {
    #pragma HLS INLINE
    const int row = j * 4 + g;
    ah = tessera_conv_tap<typename G::ah_t, CELL::weight_kind, CONFIG_T::n_hidden, CONFIG_T>(h, wh, row, py, px);
    ax = tessera_convlstm_input_term<CELL::has_input>::template products<G, CELL, CONFIG_T>(x, wx, row, py, px);
}

template <class G, typename CONFIG_T, class CELL>
inline typename G::act_t tessera_convlstm_gate(int g, int j, const typename G::ax_t &ax, const typename G::ah_t &ah,
                                               const typename CELL::b_t *b, const typename CELL::gate_table_t *table) {
    #pragma HLS INLINE
    const int row = j * 4 + g;
    typename G::acc_t axa = tessera_onto<typename G::acc_t, G::ax_factor, G::ax_shift>(ax);
    if (G::scaled) {
        // a float-scale requantization: the proven clamp((M * sum + C_row) >> s), the bias
        // (on another float grid) inside the per-row C_row held in b
        typename G::acc_t acc = tessera_onto<typename G::acc_t, G::ah_factor, G::ah_shift>(ah) + axa;
        typedef typename G::requant_t R;
        R ms = (R)((R)acc * (R)G::requant_mult + (R)b[row]);
        return tessera_gate_act<G>(tessera_gate_q<G>(ms), table);
    }
    typename G::acc_t acc =
        tessera_onto<typename G::acc_t, G::ah_factor, G::ah_shift>(ah) + ((typename G::acc_t)b[row] << G::bias_shift) + axa;
    return tessera_gate_act<G>(tessera_gate_q<G>(acc), table);
}

// One step of one cell over the whole frame; h is read (old) for every pixel, then replaced.
// One (unit, pixel) per pipelined iteration at II = reuse_factor; its weight products (four
// gates, every tap of every channel) are one region whose ALLOCATION caps the multipliers at
// CELL::multiplier_limit = ceil(products / reuse) (ops/convlstm.py: weight_products).
template <class CELL, typename CONFIG_T>
void tessera_convlstm_step(const typename CONFIG_T::x_t x TESSERA_FRAME(CONFIG_T::n_in),
                           typename CELL::h_t h TESSERA_FRAME(CONFIG_T::n_hidden), typename CELL::c_t *c,
                           const typename CELL::wx_t *wx, const typename CELL::wh_t *wh, const typename CELL::b_t *b,
                           const typename CELL::gate_table_t *gate_table, const typename CELL::cell_table_t *cell_table) {
    typedef typename CELL::gate_i GI;
    typedef typename CELL::gate_f GF;
    typedef typename CELL::gate_c GC;
    typedef typename CELL::gate_o GO;
    const int NPIX = CONFIG_T::height * CONFIG_T::width;
    typename CELL::h_t h_new[CONFIG_T::n_hidden * CONFIG_T::height * CONFIG_T::width];
Hidden:
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
    Pixels:
        for (int p = 0; p < NPIX; p++) {
            #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
            const int py = p / CONFIG_T::width, px = p % CONFIG_T::width, k = j * NPIX + p;
            typename GI::ax_t axi;
            typename GI::ah_t ahi;
            typename GF::ax_t axf;
            typename GF::ah_t ahf;
            typename GC::ax_t axc;
            typename GC::ah_t ahc;
            typename GO::ax_t axo;
            typename GO::ah_t aho;
        Products: {
            #pragma HLS ALLOCATION operation instances = mul limit = CELL::multiplier_limit
            tessera_convlstm_products<GI, CELL, CONFIG_T>(0, j, py, px, x, h, wx, wh, axi, ahi);
            tessera_convlstm_products<GF, CELL, CONFIG_T>(1, j, py, px, x, h, wx, wh, axf, ahf);
            tessera_convlstm_products<GC, CELL, CONFIG_T>(2, j, py, px, x, h, wx, wh, axc, ahc);
            tessera_convlstm_products<GO, CELL, CONFIG_T>(3, j, py, px, x, h, wx, wh, axo, aho);
        }
            typename GI::act_t ai = tessera_convlstm_gate<GI, CONFIG_T, CELL>(0, j, axi, ahi, b, gate_table);
            typename GF::act_t af = tessera_convlstm_gate<GF, CONFIG_T, CELL>(1, j, axf, ahf, b, gate_table);
            typename GC::act_t ac = tessera_convlstm_gate<GC, CONFIG_T, CELL>(2, j, axc, ahc, b, gate_table);
            typename GO::act_t ao = tessera_convlstm_gate<GO, CONFIG_T, CELL>(3, j, axo, aho, b, gate_table);
            tessera_lstm_gating<CELL>(ai, af, ac, ao, c[k], h_new[k], cell_table);
        }
Update:
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        for (int p = 0; p < NPIX; p++)
            h[j][p / CONFIG_T::width][p % CONFIG_T::width] = h_new[j * NPIX + p];
}

// The encoder's last states through the forecaster's state quantizers.
template <typename CONFIG_T>
void tessera_convlstm_handover(const typename CONFIG_T::enc::h_t h TESSERA_FRAME(CONFIG_T::n_hidden),
                               const typename CONFIG_T::enc::c_t *c,
                               typename CONFIG_T::fc::h_t fh TESSERA_FRAME(CONFIG_T::n_hidden),
                               typename CONFIG_T::fc::c_t *fcs) {
    typedef typename CONFIG_T::fc FC;
    const int NPIX = CONFIG_T::height * CONFIG_T::width;
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        for (int p = 0; p < NPIX; p++) {
            const int py = p / CONFIG_T::width, px = p % CONFIG_T::width;
            const int k = j * NPIX + p;
            fh[j][py][px] = tessera_requant<typename FC::h_t, CONFIG_T::handover_hidden_shift, FC::hidden_rounding,
                                            FC::hidden_min, FC::hidden_max>(h[j][py][px]);
            fcs[k] = tessera_requant<typename FC::c_t, CONFIG_T::handover_cell_shift, FC::cell_mode, FC::cell_min,
                                     FC::cell_max>(c[k]);
        }
}

// Zero states: h (frames of hidden channels) and c (flat, one unit at one pixel per entry).
template <class H, class C, typename CONFIG_T> void tessera_convlstm_zero(H h TESSERA_FRAME(CONFIG_T::n_hidden), C *c) {
    const int NPIX = CONFIG_T::height * CONFIG_T::width;
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        for (int p = 0; p < NPIX; p++) {
            h[j][p / CONFIG_T::width][p % CONFIG_T::width] = 0;
            c[j * NPIX + p] = 0;
        }
}

// channels-last frame t of an array -> channel-major codes
template <class data_T, typename CONFIG_T>
void tessera_convlstm_load(const data_T *data, int t, typename CONFIG_T::x_t x TESSERA_FRAME(CONFIG_T::n_in)) {
    const int NPIX = CONFIG_T::height * CONFIG_T::width;
    for (int p = 0; p < NPIX; p++)
        for (int ci = 0; ci < (int)CONFIG_T::n_in; ci++)
            x[ci][p / CONFIG_T::width][p % CONFIG_T::width] =
                tessera_code_of(data[(t * NPIX + p) * CONFIG_T::n_in + ci]);
}

template <class res_T, class h_T, typename CONFIG_T>
void tessera_convlstm_store(const h_T h TESSERA_FRAME(CONFIG_T::n_hidden), int t, res_T *res) {
    const int NPIX = CONFIG_T::height * CONFIG_T::width;
    for (int p = 0; p < NPIX; p++)
        for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
            res[(t * NPIX + p) * CONFIG_T::n_hidden + j] =
                tessera_of_code<res_T>(h[j][p / CONFIG_T::width][p % CONFIG_T::width]);
}

template <class data_T, typename CONFIG_T>
void tessera_convlstm_read(hls::stream<data_T> &data, typename CONFIG_T::x_t x TESSERA_FRAME(CONFIG_T::n_in)) {
    const int NPIX = CONFIG_T::height * CONFIG_T::width;
    for (int p = 0; p < NPIX; p++) {
        data_T in = data.read();
        for (int ci = 0; ci < (int)CONFIG_T::n_in; ci++)
            x[ci][p / CONFIG_T::width][p % CONFIG_T::width] = tessera_code_of(in[ci]);
    }
}

template <class res_T, class h_T, typename CONFIG_T>
void tessera_convlstm_write(const h_T h TESSERA_FRAME(CONFIG_T::n_hidden), hls::stream<res_T> &res) {
    const int NPIX = CONFIG_T::height * CONFIG_T::width;
    for (int p = 0; p < NPIX; p++) {
        res_T out;
        for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
            out[j] = tessera_of_code<typename res_T::value_type>(h[j][p / CONFIG_T::width][p % CONFIG_T::width]);
        res.write(out);
    }
}

// A frame (channels x height x width) read by the gate convolutions: every channel of a
// K x K window per iteration, so partitioned completely over the channels and cyclically by K
// over rows and columns (every value a window reads in its own bank).
#define TESSERA_CONVLSTM_WINDOWED(V)                                                                                   \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = V complete dim = 1)                                                 \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = V cyclic factor = TESSERA_CONVLSTM_K dim = 2)                       \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = V cyclic factor = TESSERA_CONVLSTM_K dim = 3)

// A cell's weights, biases and tables: one unit's four gate kernels (every channel and tap)
// are one word of the reshaped weights, its four biases one word, each gate's table its own
// memory (one lookup per gate per iteration; the compiler pads the tables to one length).
#define TESSERA_CONVLSTM_MEMORIES(CELL)                                                                                \
    const int CELL##_WH_ROW = 4 * CONFIG_T::n_hidden * CONFIG_T::kernel * CONFIG_T::kernel;                            \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = CELL##_wh cyclic factor = CELL##_WH_ROW)                              \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = CELL##_b cyclic factor = 4)                                           \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = CELL##_gate_table block factor = 4)

#define TESSERA_CONVLSTM_STATE(CELL)                                                                                   \
    typename CELL::h_t CELL##_h TESSERA_FRAME(CONFIG_T::n_hidden);                                          \
    TESSERA_CONVLSTM_WINDOWED(CELL##_h)                                                                                \
    typename CELL::c_t CELL##_c[CONFIG_T::n_hidden * CONFIG_T::height * CONFIG_T::width];                              \
    tessera_convlstm_zero<typename CELL::h_t, typename CELL::c_t, CONFIG_T>(CELL##_h, CELL##_c);

// A cell's arrays as kernel arguments (the order of the function templates), and the
// encoder's with its input weights.
#define TESSERA_CONVLSTM_CELL_ARGS(CELL)                                                                               \
    typename CONFIG_T::CELL::wh_t CELL##_wh[4 * CONFIG_T::n_hidden * CONFIG_T::n_hidden *                              \
            CONFIG_T::kernel * CONFIG_T::kernel],                                                                      \
        typename CONFIG_T::CELL::b_t CELL##_b[4 * CONFIG_T::n_hidden],                                                 \
        typename CONFIG_T::CELL::gate_table_t CELL##_gate_table[CONFIG_T::CELL::table_entries],                             \
        typename CONFIG_T::CELL::cell_table_t CELL##_cell_table[]
#define TESSERA_CONVLSTM_ENCODER_ARGS                                                                                  \
    typename CONFIG_T::enc::wx_t enc_wx[4 * CONFIG_T::n_hidden * CONFIG_T::n_in *                                      \
            CONFIG_T::kernel * CONFIG_T::kernel],                                                                      \
        TESSERA_CONVLSTM_CELL_ARGS(enc)

// The encoder's frames, states and memories (every driver), and the forecaster's.
#define TESSERA_CONVLSTM_ENCODER                                                                                       \
    typedef typename CONFIG_T::enc enc;                                                                                \
    const int TESSERA_CONVLSTM_K = CONFIG_T::kernel;                                                                   \
    typename CONFIG_T::x_t x TESSERA_FRAME(CONFIG_T::n_in);                                                            \
    TESSERA_CONVLSTM_WINDOWED(x)                                                                                       \
    TESSERA_CONVLSTM_STATE(enc)                                                                                        \
    TESSERA_CONVLSTM_MEMORIES(enc)                                                                                     \
    const int ENC_WX_ROW = 4 * CONFIG_T::n_in * CONFIG_T::kernel * CONFIG_T::kernel;                                   \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = enc_wx cyclic factor = ENC_WX_ROW)
#define TESSERA_CONVLSTM_FORECASTER                                                                                    \
    typedef typename CONFIG_T::fc fc;                                                                                  \
    TESSERA_CONVLSTM_STATE(fc)                                                                                         \
    TESSERA_CONVLSTM_MEMORIES(fc)                                                                                      \
    const typename fc::wx_t fc_no_input[1] = {0}; /* the forecaster has no input: never read */

// Encoder only: every step's hidden state out.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_convlstm_cl(data_T data[], res_T res[], TESSERA_CONVLSTM_ENCODER_ARGS) {
    TESSERA_CONVLSTM_ENCODER
Steps:
    for (int t = 0; t < (int)CONFIG_T::n_steps; t++) {
        tessera_convlstm_load<data_T, CONFIG_T>(data, t, x);
        tessera_convlstm_step<enc, CONFIG_T>(x, enc_h, enc_c, enc_wx, enc_wh, enc_b, enc_gate_table, enc_cell_table);
        tessera_convlstm_store<res_T, typename enc::h_t, CONFIG_T>(enc_h, t, res);
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_convlstm_stream(hls::stream<data_T> &data, hls::stream<res_T> &res, TESSERA_CONVLSTM_ENCODER_ARGS) {
    TESSERA_CONVLSTM_ENCODER
Steps:
    for (int t = 0; t < (int)CONFIG_T::n_steps; t++) {
        tessera_convlstm_read<data_T, CONFIG_T>(data, x);
        tessera_convlstm_step<enc, CONFIG_T>(x, enc_h, enc_c, enc_wx, enc_wh, enc_b, enc_gate_table, enc_cell_table);
        tessera_convlstm_write<res_T, typename enc::h_t, CONFIG_T>(enc_h, res);
    }
}

// Encoder over the input frames, then the forecaster (no input) for steps_out steps; the
// forecaster's hidden states out.
template <class data_T, class res_T, typename CONFIG_T>
void tessera_convlstm_forecast_cl(data_T data[], res_T res[], TESSERA_CONVLSTM_ENCODER_ARGS,
                                  TESSERA_CONVLSTM_CELL_ARGS(fc)) {
    TESSERA_CONVLSTM_ENCODER
    TESSERA_CONVLSTM_FORECASTER
Encode:
    for (int t = 0; t < (int)CONFIG_T::n_steps; t++) {
        tessera_convlstm_load<data_T, CONFIG_T>(data, t, x);
        tessera_convlstm_step<enc, CONFIG_T>(x, enc_h, enc_c, enc_wx, enc_wh, enc_b, enc_gate_table, enc_cell_table);
    }
    tessera_convlstm_handover<CONFIG_T>(enc_h, enc_c, fc_h, fc_c);
Forecast:
    for (int t = 0; t < (int)CONFIG_T::steps_out; t++) {
        tessera_convlstm_step<fc, CONFIG_T>(x, fc_h, fc_c, fc_no_input, fc_wh, fc_b, fc_gate_table, fc_cell_table);
        tessera_convlstm_store<res_T, typename fc::h_t, CONFIG_T>(fc_h, t, res);
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_convlstm_forecast_stream(hls::stream<data_T> &data, hls::stream<res_T> &res, TESSERA_CONVLSTM_ENCODER_ARGS,
                                      TESSERA_CONVLSTM_CELL_ARGS(fc)) {
    TESSERA_CONVLSTM_ENCODER
    TESSERA_CONVLSTM_FORECASTER
Encode:
    for (int t = 0; t < (int)CONFIG_T::n_steps; t++) {
        tessera_convlstm_read<data_T, CONFIG_T>(data, x);
        tessera_convlstm_step<enc, CONFIG_T>(x, enc_h, enc_c, enc_wx, enc_wh, enc_b, enc_gate_table, enc_cell_table);
    }
    tessera_convlstm_handover<CONFIG_T>(enc_h, enc_c, fc_h, fc_c);
Forecast:
    for (int t = 0; t < (int)CONFIG_T::steps_out; t++) {
        tessera_convlstm_step<fc, CONFIG_T>(x, fc_h, fc_c, fc_no_input, fc_wh, fc_b, fc_gate_table, fc_cell_table);
        tessera_convlstm_write<res_T, typename fc::h_t, CONFIG_T>(fc_h, res);
    }
}

#undef TESSERA_FRAME

} // namespace nnet

#endif
