// Tessera rounding, the one decision table of tessera/compiler/exact/rounding.py (ROUND_UP).
//
// R(n / d), d > 0, is the floor quotient q plus one when the mode says so, from five facts:
// the remainder r is above / exactly at half of d, n is negative, the division is inexact,
// q is odd.  Every Tessera kernel that rounds (requantization inside the recurrent cells,
// the average pool's exact division) decides here; the C-simulation tests compare this
// header with the Python table for every mode.
#ifndef NNET_TESSERA_ROUNDING_H_
#define NNET_TESSERA_ROUNDING_H_

namespace nnet {

// The QONNX rounding modes (ROUND and HALF_EVEN are both TESSERA_ROUND: half to even).
enum tessera_rounding { TESSERA_ROUND = 0, TESSERA_FLOOR, TESSERA_CEIL, TESSERA_DOWN, TESSERA_UP, TESSERA_HALF_UP, TESSERA_HALF_DOWN };

// Whether floor(n / d) rounds up (ROUND_UP of rounding.py, row by row).
inline bool tessera_round_up(int mode, bool above_half, bool at_half, bool negative, bool inexact, bool odd) {
    switch (mode) {
    case TESSERA_ROUND: return above_half || (at_half && odd);
    case TESSERA_FLOOR: return false;
    case TESSERA_CEIL: return inexact;
    case TESSERA_DOWN: return negative && inexact;
    case TESSERA_UP: return !negative && inexact;
    case TESSERA_HALF_UP: return above_half || (at_half && !negative);
    default: return above_half || (at_half && negative); // TESSERA_HALF_DOWN
    }
}

// R(num / den) for den > 0, on 64-bit integers.
inline long long tessera_div_round(long long num, long long den, int mode) {
    long long q = num / den, r = num % den;
    if (r < 0) { // C++ truncates toward zero: make q the floor and 0 <= r < den
        q -= 1;
        r += den;
    }
    const long long twice = 2 * r;
    return q + (tessera_round_up(mode, twice > den, twice == den, num < 0, r > 0, (q & 1) != 0) ? 1 : 0);
}

} // namespace nnet

#endif
