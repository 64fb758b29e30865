// Tessera partitioned-model host (C++; the same schedule as tessera.compiler.partition).
//
// Runs a 3D CNN whose volume does not fit on chip as blocks.  Every value of the spatial
// segment is a channels-last volume buffer; a *run* line cuts one block's input tile (its
// box plus halo, clipped to the volume) out of its input value, calls the block's kernel and
// writes the kernel's output box into the output value.  Overlapped tiles: one run per
// block from the model input to the segment's output.  Halo exchange: one run per layer and
// block, each tile read from the boxes the neighbours wrote in the previous layer; merges
// (concat, add) combine the blocks' own boxes.  Then the gathered tail kernel runs and
// every output code is compared with the exact reference's (==).  Kernels are the block
// projects' C-simulation libraries (firmware/<name>-*.so, built by their build_lib.sh),
// loaded with dlopen.  Values travel as doubles (code x 2^-frac: exact for <= 52 bits).
//
// schedule.txt (written by the compiler; boxes are (d, h, w) begin + size):
//   value ID C D H W                      a volume buffer (ID 0: the model input, frac IN_FRAC)
//   input IN_FRAC                         the input codes' fractional bits
//   run DIR NAME IN OUT d h w sd sh sw  d h w sd sh sw    kernel, input tile, output box
//   concat IN1 IN2 OUT d h w sd sh sw     channel concatenation on one box
//   add IN1 IN2 OUT d h w sd sh sw        sum on one box
//   free ID                               the value is not read any more
//   segment ID                            the stitched segment output (the tail's input)
//   tail DIR NAME N_OUT OUT_FRAC          (or "notail N_OUT OUT_FRAC")
#include <dlfcn.h>
#include <glob.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

typedef void (*kernel_fn)(double *, double *);

struct Box {
    int d, h, w, sd, sh, sw;
    long voxels() const { return (long)sd * sh * sw; }
};

struct Vol {
    int C = 0, D = 0, H = 0, W = 0;
    std::vector<double> data;
};

struct Step {
    std::string kind;  // run, concat, add, free
    kernel_fn fn = nullptr;
    int in1 = 0, in2 = 0, out = 0;
    Box tile, box;
};

static std::istream &operator>>(std::istream &in, Box &b) { return in >> b.d >> b.h >> b.w >> b.sd >> b.sh >> b.sw; }

static kernel_fn load_kernel(const std::string &dir, const std::string &name) {
    glob_t g;
    const std::string pattern = dir + "/firmware/" + name + "-*.so";
    if (glob(pattern.c_str(), 0, nullptr, &g) != 0 || g.gl_pathc == 0) {
        std::printf("tessera-host: no kernel library %s (run the block's build_lib.sh)\n", pattern.c_str());
        return nullptr;
    }
    void *lib = dlopen(g.gl_pathv[g.gl_pathc - 1], RTLD_NOW | RTLD_LOCAL);
    globfree(&g);
    if (!lib) {
        std::printf("tessera-host: %s\n", dlerror());
        return nullptr;
    }
    kernel_fn fn = (kernel_fn)dlsym(lib, (name + "_double").c_str());
    if (!fn)
        std::printf("tessera-host: %s has no %s_double\n", dir.c_str(), name.c_str());
    return fn;
}

static bool read_row(std::ifstream &f, std::vector<long long> &row, long n) {
    std::string line;
    if (!std::getline(f, line))
        return false;
    std::istringstream ss(line);
    row.assign(n, 0);
    for (long i = 0; i < n; i++)
        if (!(ss >> row[i]))
            return false;
    return true;
}

// copy box `b` of a channels-last volume to (TO_BOX) or from a dense box buffer whose
// channels start at `c0` of `cb` channels
template <bool TO_BOX>
static void copy_box(Vol &v, std::vector<double> &buf, const Box &b, int c0 = 0, int cb = -1) {
    if (cb < 0)
        cb = v.C;
    for (int d = 0; d < b.sd; d++)
        for (int h = 0; h < b.sh; h++)
            for (int w = 0; w < b.sw; w++) {
                const long base = (((long)(b.d + d) * v.H + b.h + h) * v.W + b.w + w) * v.C;
                const long k = (((long)d * b.sh + h) * b.sw + w) * cb + c0;
                for (int c = 0; c < v.C; c++) {
                    if (TO_BOX)
                        buf[k + c] = v.data[base + c];
                    else
                        v.data[base + c] = buf[k + c];
                }
            }
}

int main(int argc, char **argv) {
    const char *sched_path = argc > 1 ? argv[1] : "schedule.txt";
    const char *in_path = argc > 2 ? argv[2] : "tb_data/input_codes.txt";
    const char *exp_path = argc > 3 ? argv[3] : "tb_data/expected_codes.txt";
    std::ifstream fs(sched_path), fin(in_path), fexp(exp_path);
    if (!fs.is_open() || !fin.is_open() || !fexp.is_open()) {
        std::printf("tessera-host: cannot open %s, %s or %s\n", sched_path, in_path, exp_path);
        return 2;
    }
    int in_frac = 0, out_frac = 0, segment = 0;
    long n_out = 0, runs = 0;
    std::vector<Vol> shapes;
    std::vector<Step> steps;
    kernel_fn tail = nullptr;
    std::string kind;
    while (fs >> kind) {
        Step st;
        st.kind = kind;
        if (kind == "value") {
            int id;
            Vol v;
            fs >> id >> v.C >> v.D >> v.H >> v.W;
            if (id != (int)shapes.size()) {
                std::printf("tessera-host: value ids must be 0, 1, 2, ...\n");
                return 2;
            }
            shapes.push_back(v);
        } else if (kind == "input") {
            fs >> in_frac;
        } else if (kind == "run") {
            std::string dir, name;
            fs >> dir >> name >> st.in1 >> st.out >> st.tile >> st.box;
            st.fn = load_kernel(dir, name);
            if (!st.fn)
                return 2;
            steps.push_back(st);
            runs++;
        } else if (kind == "concat" || kind == "add") {
            fs >> st.in1 >> st.in2 >> st.out >> st.box;
            steps.push_back(st);
        } else if (kind == "free") {
            fs >> st.in1;
            steps.push_back(st);
        } else if (kind == "segment") {
            fs >> segment;
        } else if (kind == "tail") {
            std::string dir, name;
            fs >> dir >> name >> n_out >> out_frac;
            tail = load_kernel(dir, name);
            if (!tail)
                return 2;
        } else if (kind == "notail") {
            fs >> n_out >> out_frac;
        } else {
            std::printf("tessera-host: unknown schedule line '%s'\n", kind.c_str());
            return 2;
        }
    }
    if (shapes.empty()) {
        std::printf("tessera-host: the schedule declares no values\n");
        return 2;
    }
    const long n_in = (long)shapes[0].C * shapes[0].D * shapes[0].H * shapes[0].W;
    std::vector<long long> row, exp;
    std::vector<double> y(n_out), a, b, c;
    long samples = 0, mismatches = 0;
    while (read_row(fin, row, n_in)) {
        if (!read_row(fexp, exp, n_out)) {
            std::printf("tessera-host: fewer expected rows than inputs\n");
            return 2;
        }
        std::vector<Vol> vals = shapes;
        vals[0].data.resize(n_in);
        for (long i = 0; i < n_in; i++)
            vals[0].data[i] = std::ldexp((double)row[i], -in_frac);
        for (const Step &st : steps) {
            Vol &out = vals[st.out];
            if (st.kind != "free" && out.data.empty())
                out.data.assign((long)out.C * out.D * out.H * out.W, 0.0);
            if (st.kind == "run") {
                a.assign(st.tile.voxels() * vals[st.in1].C, 0.0);
                c.assign(st.box.voxels() * out.C, 0.0);
                copy_box<true>(vals[st.in1], a, st.tile);
                st.fn(a.data(), c.data());
                copy_box<false>(out, c, st.box);
            } else if (st.kind == "concat") {
                c.assign(st.box.voxels() * out.C, 0.0);
                copy_box<true>(vals[st.in1], c, st.box, 0, out.C);
                copy_box<true>(vals[st.in2], c, st.box, vals[st.in1].C, out.C);
                copy_box<false>(out, c, st.box);
            } else if (st.kind == "add") {
                a.assign(st.box.voxels() * out.C, 0.0);
                b.assign(st.box.voxels() * out.C, 0.0);
                copy_box<true>(vals[st.in1], a, st.box);
                copy_box<true>(vals[st.in2], b, st.box);
                for (size_t i = 0; i < a.size(); i++)
                    a[i] += b[i];
                copy_box<false>(out, a, st.box);
            } else {
                std::vector<double>().swap(vals[st.in1].data);
            }
        }
        if (tail)
            tail(vals[segment].data.data(), y.data());
        else
            y = vals[segment].data;
        for (long i = 0; i < n_out; i++) {
            const double v = std::ldexp(y[i], out_frac);
            if (v != (double)exp[i]) {
                if (mismatches < 10)
                    std::printf("tessera-host: sample %ld output %ld: got %.17g, expected %lld\n", samples, i, v, exp[i]);
                mismatches++;
            }
        }
        samples++;
    }
    std::printf("tessera-host: %ld samples, %ld kernel runs, %ld mismatches\n", samples, runs, mismatches);
    return mismatches == 0 && samples > 0 ? 0 : 1;
}
