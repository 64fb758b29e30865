    struct gate_${name} { // coupled input-forget gate: 1 - i, no table
        typedef ${act_t} act_t;
    };
