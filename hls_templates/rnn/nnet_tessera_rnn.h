// Tessera quantized recurrent cells (LSTM, GRU; ConvLSTM in nnet_tessera_convlstm.h) on integer codes.
//
// Every value inside a cell is an integer code held in an exact-width ap_int (widths from
// the compiler's interval analysis, so nothing can overflow); radix points are tracked by
// the compiler, which turns each alignment into a constant left shift (times a constant factor
// between two float scales) and each QONNX Quant
// into tessera_requant (exact rounding + saturation).  sigmoid/tanh are tables over the
// codes of their input quantizer, computed by the compiler and shared with the onnxruntime
// reference.  The step mirrors tessera/compiler/ops/{lstm,gru}.py line by line.
//
// Weights are stored as codes on their codebook: binary in 1 bit (b -> 2b - 1), ternary in
// 2 bits, quaternary {-2,-1,1,2} in 3 bits; their products are sign selections and one
// shift (tessera_wmul), no multiplier.  Codes, requantization and codebook products:
// common/nnet_tessera_codes.h.
#ifndef NNET_TESSERA_RNN_H_
#define NNET_TESSERA_RNN_H_

#include "ap_fixed.h"
#include "ap_int.h"
#include "hls_stream.h"
#include "nnet_common.h"
#include "nnet_tessera_codes.h"

namespace nnet {

// sum_k x[k] * w[k]; every partial sum lies in acc_T's range (the range contains 0 and
// every sub-sum of the extreme products).
template <class acc_T, int KIND, int N, class x_T, class w_T> inline acc_T tessera_dot(const x_T x[N], const w_T *w) {
    #pragma HLS INLINE
    acc_T acc = 0;
Taps:
    for (int k = 0; k < N; k++) {
        acc += tessera_wmul<KIND>::template mul<acc_T>(x[k], w[k]);
    }
    return acc;
}

// An operand of an exact sum in the sum's type: x * M << SH (M: the factor onto the sum's
// common float-scale odd part, 1 on power-of-two grids; SH: the radix alignment).
template <class sum_T, long long M, int SH, class x_T> inline sum_T tessera_onto(const x_T &x) {
    return (sum_T)(((sum_T)x * (ap_int<64>)M) << SH);
}

template <class G, class acc_T> inline typename G::q_t tessera_gate_q(const acc_T &acc) {
    return tessera_requant<typename G::q_t, G::requant_shift, G::requant_mode, G::qmin, G::qmax>(acc);
}

template <class G, class table_T> inline typename G::act_t tessera_gate_act(const typename G::q_t &q, const table_T *table) {
    return (typename G::act_t)table[G::table_offset + (int)(q - G::qmin)];
}

// -- sequence input / output shared by the LSTM and GRU drivers ------------------------------

// Codes of step t of an io_parallel sequence (T x n_in values).
template <class data_T, typename CONFIG_T>
inline void tessera_seq_load(const data_T *data, int t, typename CONFIG_T::x_t x[CONFIG_T::n_in]) {
    for (int k = 0; k < (int)CONFIG_T::n_in; k++)
        x[k] = tessera_code_of(data[t * CONFIG_T::n_in + k]);
}

// Codes of processing step s from a stream of step words; a reversed cell reads the whole
// sequence into buf at s == 0 first.
template <class data_T, typename CONFIG_T>
inline void tessera_seq_read(hls::stream<data_T> &data, int s, typename data_T::value_type *buf,
                             typename CONFIG_T::x_t x[CONFIG_T::n_in]) {
    if (CONFIG_T::reverse) {
        if (s == 0)
            for (int t = 0; t < (int)CONFIG_T::n_steps; t++) {
                data_T in = data.read();
                for (int k = 0; k < (int)CONFIG_T::n_in; k++)
                    buf[t * CONFIG_T::n_in + k] = in[k];
            }
        tessera_seq_load<typename data_T::value_type, CONFIG_T>(buf, (int)CONFIG_T::n_steps - 1 - s, x);
    } else {
        data_T in = data.read();
        for (int k = 0; k < (int)CONFIG_T::n_in; k++)
            x[k] = tessera_code_of(in[k]);
    }
}

// Hidden state after processing step s, stored at its time: every step (return_sequences)
// or the last one processed.  A reversed cell's step s reads time n_steps - 1 - s, and its
// state there is the output at that time (ONNX LSTM direction=reverse).
template <class res_T, class h_T, typename CONFIG_T>
inline void tessera_seq_store(const h_T h[CONFIG_T::n_hidden], int s, res_T *res) {
    if (!CONFIG_T::return_sequences && s != (int)CONFIG_T::n_steps - 1)
        return;
    const int t = CONFIG_T::reverse ? (int)CONFIG_T::n_steps - 1 - s : s;
    const int base = CONFIG_T::return_sequences ? t * CONFIG_T::n_hidden : 0;
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        res[base + j] = tessera_of_code<res_T>(h[j]);
}

// The stream form: one word per step in time order.  A reversed cell's sequence is complete
// only after its last step: its states wait in obuf and leave first time first.
template <class res_T, class h_T, typename CONFIG_T>
inline void tessera_seq_write(const h_T h[CONFIG_T::n_hidden], int s, typename res_T::value_type *obuf,
                              hls::stream<res_T> &res) {
    if (!CONFIG_T::return_sequences && s != (int)CONFIG_T::n_steps - 1)
        return;
    if (CONFIG_T::reverse && CONFIG_T::return_sequences) {
        const int t = (int)CONFIG_T::n_steps - 1 - s;
        for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
            obuf[t * CONFIG_T::n_hidden + j] = tessera_of_code<typename res_T::value_type>(h[j]);
        if (s != (int)CONFIG_T::n_steps - 1)
            return;
        for (int u = 0; u < (int)CONFIG_T::n_steps; u++) {
            res_T word;
            for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
                word[j] = obuf[u * CONFIG_T::n_hidden + j];
            res.write(word);
        }
        return;
    }
    res_T out;
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        out[j] = tessera_of_code<typename res_T::value_type>(h[j]);
    res.write(out);
}

// -- LSTM ---------------------------------------------------------------------------------

struct tessera_lstm_config {
    static const unsigned n_steps = 1, n_in = 1, n_hidden = 1, n_out = 1;
    static const bool reverse = false, return_sequences = true, cifg = false;
    static const int weight_kind = TESSERA_W_INT;
    static const unsigned reuse_factor = 1;
};

// The weight products of gate g of unit j of a dense cell with GATES gates (LSTM 4, GRU 3):
// W_x x and W_h h of row j * GATES + g of the unit-major weights (one unit's gate rows are
// one word of the reshaped arrays).
template <class G, typename CONFIG_T, int GATES>
inline void tessera_cell_products(int g, int j, const typename CONFIG_T::x_t x[CONFIG_T::n_in],
                                  const typename CONFIG_T::h_t h[CONFIG_T::n_hidden], const typename CONFIG_T::wx_t *wx,
                                  const typename CONFIG_T::wh_t *wh, typename G::ax_t &ax, typename G::ah_t &ah) {
    #pragma HLS INLINE
    const int row = j * GATES + g;
    ax = tessera_dot<typename G::ax_t, CONFIG_T::weight_kind, CONFIG_T::n_in>(x, &wx[row * CONFIG_T::n_in]);
    ah = tessera_dot<typename G::ah_t, CONFIG_T::weight_kind, CONFIG_T::n_hidden>(h, &wh[row * CONFIG_T::n_hidden]);
}

// Gate g of unit j from its weight products: the aligned sum with its bias, requantized,
// through the gate's table.
template <class G, typename CONFIG_T>
inline typename G::act_t tessera_lstm_gate(int g, int j, const typename G::ax_t &ax, const typename G::ah_t &ah,
                                           const typename CONFIG_T::b_t *b, const typename CONFIG_T::gate_table_t *table) {
    #pragma HLS INLINE
    const int row = j * 4 + g;
    typename G::acc_t axah = tessera_onto<typename G::acc_t, G::ax_factor, G::ax_shift>(ax) +
                             tessera_onto<typename G::acc_t, G::ah_factor, G::ah_shift>(ah);
    if (G::scaled) {
        // a float-scale requantization: the proven clamp((M * sum + C_row) >> s), the bias
        // (on another float grid) inside the per-row C_row held in b
        typename G::acc_t acc = axah;
        typedef typename G::requant_t R;
        R ms = (R)((R)acc * (R)G::requant_mult + (R)b[row]);
        return tessera_gate_act<G>(tessera_gate_q<G>(ms), table);
    }
    typename G::acc_t acc = axah + ((typename G::acc_t)b[row] << G::bias_shift);
    return tessera_gate_act<G>(tessera_gate_q<G>(acc), table);
}

// The forget gate: its own gate, or 1 - i with coupled input-forget gates (CIFG, no weight
// products); a class template so that the unused form is never instantiated.
template <bool CIFG> struct tessera_lstm_forget {
    template <typename CONFIG_T> struct sums {
        typename CONFIG_T::gate_f::ax_t ax;
        typename CONFIG_T::gate_f::ah_t ah;
    };
    template <typename CONFIG_T>
    static void products(int j, const typename CONFIG_T::x_t x[CONFIG_T::n_in],
                         const typename CONFIG_T::h_t h[CONFIG_T::n_hidden], const typename CONFIG_T::wx_t *wx,
                         const typename CONFIG_T::wh_t *wh, sums<CONFIG_T> &s) {
        #pragma HLS INLINE
        tessera_cell_products<typename CONFIG_T::gate_f, CONFIG_T, 4>(1, j, x, h, wx, wh, s.ax, s.ah);
    }
    template <typename CONFIG_T, class I>
    static typename CONFIG_T::gate_f::act_t get(const I &, int j, const sums<CONFIG_T> &s, const typename CONFIG_T::b_t *b,
                                                const typename CONFIG_T::gate_table_t *table) {
        #pragma HLS INLINE
        return tessera_lstm_gate<typename CONFIG_T::gate_f, CONFIG_T>(1, j, s.ax, s.ah, b, table);
    }
};
template <> struct tessera_lstm_forget<true> {
    template <typename CONFIG_T> struct sums {};
    template <typename CONFIG_T>
    static void products(int, const typename CONFIG_T::x_t *, const typename CONFIG_T::h_t *, const typename CONFIG_T::wx_t *,
                         const typename CONFIG_T::wh_t *, sums<CONFIG_T> &) {}
    template <typename CONFIG_T, class I>
    static typename CONFIG_T::gate_f::act_t get(const I &ai, int, const sums<CONFIG_T> &, const typename CONFIG_T::b_t *,
                                                const typename CONFIG_T::gate_table_t *) {
        #pragma HLS INLINE
        typedef typename CONFIG_T::gate_f::act_t F;
        return (F)((F)CONFIG_T::cifg_one - (F)ai);
    }
};

// c' = Qc(Qc(f * c) + Qc(i * g)), h' = Qout(o * tanh_table[c']) for one unit; CELL holds the
// types and constants of one LSTM-gated cell (LSTM config, or a ConvLSTM enc / fc struct).
template <class CELL>
inline void tessera_lstm_gating(const typename CELL::gate_i::act_t &ai, const typename CELL::gate_f::act_t &af,
                                const typename CELL::gate_c::act_t &ac, const typename CELL::gate_o::act_t &ao,
                                typename CELL::c_t &c, typename CELL::h_t &h_new,
                                const typename CELL::cell_table_t *cell_table) {
    #pragma HLS INLINE
    typename CELL::fc_t fc = (typename CELL::fc_t)af * (typename CELL::fc_t)c;
    typename CELL::ig_t ig = (typename CELL::ig_t)ai * (typename CELL::ig_t)ac;
    // each product onto its quantizer: a rounding shift (mult 1, add 0), or on float scales the
    // proven clamp((mult * p + add) >> shift) (mode FLOOR)
    typedef typename CELL::fc_requant_t FCR;
    typedef typename CELL::ig_requant_t IGR;
    typedef typename CELL::hidden_requant_t HR;
    typename CELL::fc_q_t fcq = tessera_requant<typename CELL::fc_q_t, CELL::fc_shift, CELL::fc_mode, CELL::cell_min,
                                                CELL::cell_max>((FCR)((FCR)fc * (FCR)CELL::fc_mult + (FCR)CELL::fc_add));
    typename CELL::ig_q_t igq = tessera_requant<typename CELL::ig_q_t, CELL::ig_shift, CELL::ig_mode, CELL::cell_min,
                                                CELL::cell_max>((IGR)((IGR)ig * (IGR)CELL::ig_mult + (IGR)CELL::ig_add));
    typename CELL::c_sum_t cs =
        ((typename CELL::c_sum_t)fcq << CELL::sum_fc_shift) + ((typename CELL::c_sum_t)igq << CELL::sum_ig_shift);
    c = tessera_requant<typename CELL::c_t, CELL::cell_shift, CELL::cell_mode, CELL::cell_min, CELL::cell_max>(cs);
    typename CELL::c_tanh_t ct = cell_table[(int)(c - CELL::cell_min)];
    typename CELL::h_prod_t hp = (typename CELL::h_prod_t)ao * (typename CELL::h_prod_t)ct;
    h_new = tessera_requant<typename CELL::h_t, CELL::hidden_shift, CELL::hidden_mode, CELL::hidden_min, CELL::hidden_max>(
        (HR)((HR)hp * (HR)CELL::hidden_mult + (HR)CELL::hidden_add));
}

// One step over every unit.  One unit per pipelined iteration at II = reuse_factor; its
// weight products (every gate) are one region whose ALLOCATION caps the multipliers at
// multiplier_limit = ceil(products / reuse) (the compiler's value, ops/lstm.py:
// weight_products; the estimator counts the same); the gating products follow it.
template <typename CONFIG_T>
void tessera_lstm_step(const typename CONFIG_T::x_t x[CONFIG_T::n_in], typename CONFIG_T::h_t h[CONFIG_T::n_hidden],
                       typename CONFIG_T::c_t c[CONFIG_T::n_hidden], const typename CONFIG_T::wx_t *wx,
                       const typename CONFIG_T::wh_t *wh, const typename CONFIG_T::b_t *b,
                       const typename CONFIG_T::gate_table_t *gate_table, const typename CONFIG_T::cell_table_t *cell_table) {
    #pragma HLS INLINE
    typedef typename CONFIG_T::gate_i GI;
    typedef typename CONFIG_T::gate_c GC;
    typedef typename CONFIG_T::gate_o GO;
    typedef tessera_lstm_forget<CONFIG_T::cifg> FORGET;
    typename CONFIG_T::h_t h_new[CONFIG_T::n_hidden];
    #pragma HLS ARRAY_PARTITION variable = h_new complete
Hidden:
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
        typename GI::ax_t axi;
        typename GI::ah_t ahi;
        typename FORGET::template sums<CONFIG_T> sf;
        typename GC::ax_t axc;
        typename GC::ah_t ahc;
        typename GO::ax_t axo;
        typename GO::ah_t aho;
    Products: {
        #pragma HLS ALLOCATION operation instances = mul limit = CONFIG_T::multiplier_limit
        tessera_cell_products<GI, CONFIG_T, 4>(0, j, x, h, wx, wh, axi, ahi);
        FORGET::template products<CONFIG_T>(j, x, h, wx, wh, sf);
        tessera_cell_products<GC, CONFIG_T, 4>(2, j, x, h, wx, wh, axc, ahc);
        tessera_cell_products<GO, CONFIG_T, 4>(3, j, x, h, wx, wh, axo, aho);
    }
        typename GI::act_t ai = tessera_lstm_gate<GI, CONFIG_T>(0, j, axi, ahi, b, gate_table);
        typename CONFIG_T::gate_f::act_t af = FORGET::template get<CONFIG_T>(ai, j, sf, b, gate_table);
        typename GC::act_t ac = tessera_lstm_gate<GC, CONFIG_T>(2, j, axc, ahc, b, gate_table);
        typename GO::act_t ao = tessera_lstm_gate<GO, CONFIG_T>(3, j, axo, aho, b, gate_table);
        tessera_lstm_gating<CONFIG_T>(ai, af, ac, ao, c[j], h_new[j], cell_table);
    }
Update:
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        #pragma HLS UNROLL
        h[j] = h_new[j];
    }
}

// The memories of a dense cell's driver (LSTM: 4 gates, GRU: 3): x and h are read whole by
// every iteration (registers); one unit's weights and biases are one word of the reshaped
// arrays (the unit-major row block); each gate's table is its own memory (one lookup per
// gate per iteration; the compiler pads the tables to one length).
#define TESSERA_DENSE_CELL_MEMORIES(GATES)                                                                             \
    typename CONFIG_T::x_t x[CONFIG_T::n_in];                                                                          \
    typename CONFIG_T::h_t h[CONFIG_T::n_hidden];                                                                      \
    const int WX_ROW = GATES * CONFIG_T::n_in, WH_ROW = GATES * CONFIG_T::n_hidden;                                    \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = x complete)                                                          \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = h complete)                                                          \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = wx cyclic factor = WX_ROW)                                             \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = wh cyclic factor = WH_ROW)                                             \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = gate_table block factor = GATES)

// An LSTM's arrays as kernel arguments (the order of its function template), and its state.
#define TESSERA_LSTM_ARGS                                                                                              \
    typename CONFIG_T::wx_t wx[4 * CONFIG_T::n_hidden * CONFIG_T::n_in],                                               \
        typename CONFIG_T::wh_t wh[4 * CONFIG_T::n_hidden * CONFIG_T::n_hidden],                                       \
        typename CONFIG_T::b_t b[4 * CONFIG_T::n_hidden], typename CONFIG_T::gate_table_t gate_table[CONFIG_T::table_entries], \
        typename CONFIG_T::cell_table_t cell_table[]
#define TESSERA_LSTM_MEMORIES                                                                                          \
    TESSERA_DENSE_CELL_MEMORIES(4)                                                                                     \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = b cyclic factor = 4)                                                   \
    typename CONFIG_T::c_t c[CONFIG_T::n_hidden];

// The steps of an io_parallel sequence from the states in h and c.
#define TESSERA_LSTM_STEPS_CL                                                                                          \
    Steps:                                                                                                             \
    for (int s = 0; s < (int)CONFIG_T::n_steps; s++) {                                                                 \
        tessera_seq_load<data_T, CONFIG_T>(data, CONFIG_T::reverse ? (int)CONFIG_T::n_steps - 1 - s : s, x);           \
        tessera_lstm_step<CONFIG_T>(x, h, c, wx, wh, b, gate_table, cell_table);                                       \
        tessera_seq_store<res_T, typename CONFIG_T::h_t, CONFIG_T>(h, s, res);                                         \
    }

template <class data_T, class res_T, typename CONFIG_T>
void tessera_lstm_cl(data_T data[CONFIG_T::n_steps * CONFIG_T::n_in], res_T res[CONFIG_T::n_out], TESSERA_LSTM_ARGS) {
    TESSERA_LSTM_MEMORIES
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        h[j] = 0;
        c[j] = 0;
    }
    TESSERA_LSTM_STEPS_CL
}

// The same from the initial hidden state h0 (codes of h_t, one per unit; the compiler proves
// them on the hidden state's grid and in its quantizer's range) and a zero cell state.
template <class data_T, class data2_T, class res_T, typename CONFIG_T>
void tessera_lstm_h0_cl(data_T data[CONFIG_T::n_steps * CONFIG_T::n_in], data2_T h0[CONFIG_T::n_hidden],
                        res_T res[CONFIG_T::n_out], TESSERA_LSTM_ARGS) {
    TESSERA_LSTM_MEMORIES
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        h[j] = tessera_code_of(h0[j]);
        c[j] = 0;
    }
    TESSERA_LSTM_STEPS_CL
}

// The same from the initial hidden and cell states h0, c0 (codes of h_t and c_t, proven as h0's).
template <class data_T, class data2_T, class data3_T, class res_T, typename CONFIG_T>
void tessera_lstm_states_cl(data_T data[CONFIG_T::n_steps * CONFIG_T::n_in], data2_T h0[CONFIG_T::n_hidden],
                            data3_T c0[CONFIG_T::n_hidden], res_T res[CONFIG_T::n_out], TESSERA_LSTM_ARGS) {
    TESSERA_LSTM_MEMORIES
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        h[j] = tessera_code_of(h0[j]);
        c[j] = tessera_code_of(c0[j]);
    }
    TESSERA_LSTM_STEPS_CL
}

// Streaming over time: one input word (a step's features) in, one hidden state out per step
// (or one at the end; a reversed cell's whole sequence after its last step); the state stays
// on chip.
#define TESSERA_LSTM_STEPS_STREAM                                                                                      \
    typename data_T::value_type buf[CONFIG_T::reverse ? CONFIG_T::n_steps * CONFIG_T::n_in : 1];                       \
    typename res_T::value_type obuf[CONFIG_T::reverse && CONFIG_T::return_sequences ? CONFIG_T::n_steps * CONFIG_T::n_hidden : 1]; \
    Steps:                                                                                                             \
    for (int s = 0; s < (int)CONFIG_T::n_steps; s++) {                                                                 \
        tessera_seq_read<data_T, CONFIG_T>(data, s, buf, x);                                                           \
        tessera_lstm_step<CONFIG_T>(x, h, c, wx, wh, b, gate_table, cell_table);                                       \
        tessera_seq_write<res_T, typename CONFIG_T::h_t, CONFIG_T>(h, s, obuf, res);                                   \
    }

template <class data_T, class res_T, typename CONFIG_T>
void tessera_lstm_stream(hls::stream<data_T> &data, hls::stream<res_T> &res, TESSERA_LSTM_ARGS) {
    TESSERA_LSTM_MEMORIES
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        h[j] = 0;
        c[j] = 0;
    }
    TESSERA_LSTM_STEPS_STREAM
}

// An initial state of n codes from a stream of words of word_T::size codes each.
template <class word_T, class code_T, int N> inline void tessera_state_read(hls::stream<word_T> &in, code_T state[N]) {
    for (int w = 0; w < N / (int)word_T::size; w++) {
        word_T word = in.read();
        for (int k = 0; k < (int)word_T::size; k++)
            state[w * word_T::size + k] = tessera_code_of(word[k]);
    }
}

// The same from the initial hidden state h0 and a zero cell state.
template <class data_T, class data2_T, class res_T, typename CONFIG_T>
void tessera_lstm_h0_stream(hls::stream<data_T> &data, hls::stream<data2_T> &h0, hls::stream<res_T> &res,
                            TESSERA_LSTM_ARGS) {
    TESSERA_LSTM_MEMORIES
    tessera_state_read<data2_T, typename CONFIG_T::h_t, CONFIG_T::n_hidden>(h0, h);
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        c[j] = 0;
    TESSERA_LSTM_STEPS_STREAM
}

// The same from the initial hidden and cell states h0, c0.
template <class data_T, class data2_T, class data3_T, class res_T, typename CONFIG_T>
void tessera_lstm_states_stream(hls::stream<data_T> &data, hls::stream<data2_T> &h0, hls::stream<data3_T> &c0,
                                hls::stream<res_T> &res, TESSERA_LSTM_ARGS) {
    TESSERA_LSTM_MEMORIES
    tessera_state_read<data2_T, typename CONFIG_T::h_t, CONFIG_T::n_hidden>(h0, h);
    tessera_state_read<data3_T, typename CONFIG_T::c_t, CONFIG_T::n_hidden>(c0, c);
    TESSERA_LSTM_STEPS_STREAM
}

// -- GRU ----------------------------------------------------------------------------------

struct tessera_gru_config {
    static const unsigned n_steps = 1, n_in = 1, n_hidden = 1, n_out = 1;
    static const bool reverse = false, return_sequences = true;
    static const int weight_kind = TESSERA_W_INT;
    static const unsigned reuse_factor = 1;
};

// A requantization onto a gate's accumulator quantizer: clamp(R((M * acc + C) >> s)); M 1
// and C 0 for a rounding shift, else the compiler's proven multiply-shift of a float-scale
// step (rounding in C, floor).
template <class G, class acc_T> inline typename G::q_t tessera_gate_rq(const acc_T &acc) {
    typedef typename G::requant_t R;
    R ms = (R)((R)acc * (ap_int<64>)G::requant_mult + (ap_int<64>)G::requant_add);
    return tessera_gate_q<G>(ms);
}

// qmin + #{k : x >= t[k]}, t non-decreasing: a float-scale requantization by its exact
// thresholds (where no multiply-shift of at most 64 bits is proven), one comparator each.
template <class q_T, int K, long long QMIN, class x_T, class t_T> inline q_T tessera_thr_q(const x_T &x, const t_T *t) {
    ap_int<16> n = 0;
Thresholds:
    for (int k = 0; k < K; k++) {
        #pragma HLS UNROLL
        if ((ap_int<64>)x >= (ap_int<64>)t[k])
            n++;
    }
    return (q_T)(QMIN + n);
}

// A GRU requantization onto a gate's accumulator quantizer: by thresholds, or
// tessera_gate_rq.
template <class G, class acc_T, class t_T> inline typename G::q_t tessera_gru_rq(const acc_T &acc, const t_T *thr) {
    if (G::requant_by_thresholds)
        return tessera_thr_q<typename G::q_t, G::qmax - G::qmin, G::qmin>(acc, &thr[G::requant_thresholds_at]);
    return tessera_gate_rq<G>(acc);
}

// gi = W_x x + b_x and gh = W_h h + b_h of one gate row, each on its own exact grid.
template <class G, typename CONFIG_T>
inline void tessera_gru_linear(int g, int j, const typename G::ax_t &ax, const typename G::ah_t &ah,
                               const typename CONFIG_T::bx_t *bx, const typename CONFIG_T::bh_t *bh, typename G::gi_t &gi,
                               typename G::gh_t &gh) {
    #pragma HLS INLINE
    const int row = j * 3 + g;
    gi = tessera_onto<typename G::gi_t, G::ax_factor, G::ax_shift>(ax) +
         tessera_onto<typename G::gi_t, G::bx_factor, G::bx_shift>(bx[row]);
    gh = tessera_onto<typename G::gh_t, G::ah_factor, G::ah_shift>(ah) +
         tessera_onto<typename G::gh_t, G::bh_factor, G::bh_shift>(bh[row]);
}

// One step over every unit, as tessera_lstm_step: one unit per pipelined iteration, its
// weight products one region under ALLOCATION (multiplier_limit = ceil(products / reuse),
// ops/gru.py: weight_products).
template <typename CONFIG_T>
void tessera_gru_step(const typename CONFIG_T::x_t x[CONFIG_T::n_in], typename CONFIG_T::h_t h[CONFIG_T::n_hidden],
                      const typename CONFIG_T::wx_t *wx, const typename CONFIG_T::wh_t *wh,
                      const typename CONFIG_T::bx_t *bx, const typename CONFIG_T::bh_t *bh,
                      const typename CONFIG_T::gate_table_t *gate_table, const typename CONFIG_T::thr_t *thr) {
    #pragma HLS INLINE
    typedef typename CONFIG_T::gate_r GR;
    typedef typename CONFIG_T::gate_z GZ;
    typedef typename CONFIG_T::gate_n GN;
    typename CONFIG_T::h_t h_new[CONFIG_T::n_hidden];
    #pragma HLS ARRAY_PARTITION variable = h_new complete
Hidden:
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        #pragma HLS PIPELINE II = CONFIG_T::reuse_factor
        typename GR::ax_t axr;
        typename GR::ah_t ahr;
        typename GZ::ax_t axz;
        typename GZ::ah_t ahz;
        typename GN::ax_t axn;
        typename GN::ah_t ahn;
    Products: {
        #pragma HLS ALLOCATION operation instances = mul limit = CONFIG_T::multiplier_limit
        tessera_cell_products<GR, CONFIG_T, 3>(0, j, x, h, wx, wh, axr, ahr);
        tessera_cell_products<GZ, CONFIG_T, 3>(1, j, x, h, wx, wh, axz, ahz);
        tessera_cell_products<GN, CONFIG_T, 3>(2, j, x, h, wx, wh, axn, ahn);
    }
        typename GR::gi_t gir;
        typename GR::gh_t ghr;
        tessera_gru_linear<GR, CONFIG_T>(0, j, axr, ahr, bx, bh, gir, ghr);
        typename GR::acc_t accr = tessera_onto<typename GR::acc_t, GR::gi_factor, GR::gi_shift>(gir) +
                                  tessera_onto<typename GR::acc_t, GR::gh_factor, GR::gh_shift>(ghr);
        typename GR::act_t r = tessera_gate_act<GR>(tessera_gru_rq<GR>(accr, thr), gate_table);
        typename GZ::gi_t giz;
        typename GZ::gh_t ghz;
        tessera_gru_linear<GZ, CONFIG_T>(1, j, axz, ahz, bx, bh, giz, ghz);
        typename GZ::acc_t accz = tessera_onto<typename GZ::acc_t, GZ::gi_factor, GZ::gi_shift>(giz) +
                                  tessera_onto<typename GZ::acc_t, GZ::gh_factor, GZ::gh_shift>(ghz);
        typename GZ::act_t z = tessera_gate_act<GZ>(tessera_gru_rq<GZ>(accz, thr), gate_table);
        typename GN::gi_t gin;
        typename GN::gh_t ghn;
        tessera_gru_linear<GN, CONFIG_T>(2, j, axn, ahn, bx, bh, gin, ghn);
        typename CONFIG_T::n_rgh_t rgh = (typename CONFIG_T::n_rgh_t)r * (typename CONFIG_T::n_rgh_t)ghn;
        typename GN::acc_t accn = tessera_onto<typename GN::acc_t, GN::gi_factor, GN::gi_shift>(gin) +
                                  tessera_onto<typename GN::acc_t, GN::gh_factor, GN::gh_shift>(rgh);
        typename GN::act_t n = tessera_gate_act<GN>(tessera_gru_rq<GN>(accn, thr), gate_table);
        typename CONFIG_T::z_h_t zh = (typename CONFIG_T::z_h_t)z * (typename CONFIG_T::z_h_t)h[j];
        // 1 - z exactly on z's power-of-two grid (z's code times its scale's odd part)
        typename CONFIG_T::one_minus_z_t omz =
            (typename CONFIG_T::one_minus_z_t)((ap_int<64>)CONFIG_T::z_one -
                                               (typename CONFIG_T::one_minus_z_t)z * (ap_int<64>)CONFIG_T::z_factor);
        typename CONFIG_T::zn_t zn = (typename CONFIG_T::zn_t)omz * (typename CONFIG_T::zn_t)n;
        typedef typename CONFIG_T::h_sum_t HS;
        typedef typename CONFIG_T::hidden_requant_t HR;
        HS hs = tessera_onto<HS, CONFIG_T::sum_zn_factor, CONFIG_T::sum_zn_shift>(zn) +
                tessera_onto<HS, CONFIG_T::sum_zh_factor, CONFIG_T::sum_zh_shift>(zh);
        HR hm = (HR)((HR)hs * (ap_int<64>)CONFIG_T::hidden_mult + (ap_int<64>)CONFIG_T::hidden_add);
        if (CONFIG_T::hidden_by_thresholds)
            h_new[j] = tessera_thr_q<typename CONFIG_T::h_t, CONFIG_T::hidden_max - CONFIG_T::hidden_min, CONFIG_T::hidden_min>(
                hs, &thr[CONFIG_T::hidden_thresholds_at]);
        else
            h_new[j] = tessera_requant<typename CONFIG_T::h_t, CONFIG_T::hidden_shift, CONFIG_T::hidden_mode,
                                       CONFIG_T::hidden_min, CONFIG_T::hidden_max>(hm);
    }
Update:
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++) {
        #pragma HLS UNROLL
        h[j] = h_new[j];
    }
}

// A GRU's arrays as kernel arguments (the order of its function template), and their memories.
#define TESSERA_GRU_ARGS                                                                                               \
    typename CONFIG_T::wx_t wx[3 * CONFIG_T::n_hidden * CONFIG_T::n_in],                                               \
        typename CONFIG_T::wh_t wh[3 * CONFIG_T::n_hidden * CONFIG_T::n_hidden],                                       \
        typename CONFIG_T::bx_t bx[3 * CONFIG_T::n_hidden], typename CONFIG_T::bh_t bh[3 * CONFIG_T::n_hidden],        \
        typename CONFIG_T::gate_table_t gate_table[CONFIG_T::table_entries],                                                \
        typename CONFIG_T::thr_t thr[CONFIG_T::thr_entries]
#define TESSERA_GRU_MEMORIES                                                                                           \
    TESSERA_DENSE_CELL_MEMORIES(3)                                                                                     \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = bx cyclic factor = 3)                                                  \
    TESSERA_PRAGMA(HLS ARRAY_RESHAPE variable = bh cyclic factor = 3)                                                  \
    TESSERA_PRAGMA(HLS ARRAY_PARTITION variable = thr complete)

template <class data_T, class res_T, typename CONFIG_T>
void tessera_gru_cl(data_T data[CONFIG_T::n_steps * CONFIG_T::n_in], res_T res[CONFIG_T::n_out], TESSERA_GRU_ARGS) {
    TESSERA_GRU_MEMORIES
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        h[j] = 0;
Steps:
    for (int s = 0; s < (int)CONFIG_T::n_steps; s++) {
        tessera_seq_load<data_T, CONFIG_T>(data, CONFIG_T::reverse ? (int)CONFIG_T::n_steps - 1 - s : s, x);
        tessera_gru_step<CONFIG_T>(x, h, wx, wh, bx, bh, gate_table, thr);
        tessera_seq_store<res_T, typename CONFIG_T::h_t, CONFIG_T>(h, s, res);
    }
}

template <class data_T, class res_T, typename CONFIG_T>
void tessera_gru_stream(hls::stream<data_T> &data, hls::stream<res_T> &res, TESSERA_GRU_ARGS) {
    TESSERA_GRU_MEMORIES
    for (int j = 0; j < (int)CONFIG_T::n_hidden; j++)
        h[j] = 0;
    typename data_T::value_type buf[CONFIG_T::reverse ? CONFIG_T::n_steps * CONFIG_T::n_in : 1];
    typename res_T::value_type obuf[CONFIG_T::reverse && CONFIG_T::return_sequences ? CONFIG_T::n_steps * CONFIG_T::n_hidden : 1];
Steps:
    for (int s = 0; s < (int)CONFIG_T::n_steps; s++) {
        tessera_seq_read<data_T, CONFIG_T>(data, s, buf, x);
        tessera_gru_step<CONFIG_T>(x, h, wx, wh, bx, bh, gate_table, thr);
        tessera_seq_write<res_T, typename CONFIG_T::h_t, CONFIG_T>(h, s, obuf, res);
    }
}

} // namespace nnet

#endif
