    struct gate_${name} {
        typedef ${ax_t} ax_t;
        typedef ${ah_t} ah_t;
        typedef ${acc_t} acc_t;
        typedef ${ms_t} ms_t;
        typedef ${q_t} q_t;
        typedef ${act_t} act_t;
        static const int sh_ax = ${sh_ax};
        static const int sh_ah = ${sh_ah};
        static const int sh_b = ${sh_b};
        static const bool scaled = ${scaled};
        static const long long rq_m = ${rq_m};
        static const int rq_shift = ${rq_shift};
        static const int rq_mode = nnet::${rq_mode};
        static const long long qmin = ${qmin};
        static const long long qmax = ${qmax};
        static const int table_offset = ${table_offset};
    };
